//! The applications on two engines joined by an in-memory link (clean or
//! with faults): the HTTP server and `ustack-get`'s client, the TCP echo.

use std::cell::RefCell;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::rc::Rc;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use apps::http::body::check_pattern;
use apps::http::client::{Fetched, HttpGet, OpenOutput};
use apps::http::server::{HttpServer, ServerConfig};
use apps::http::url::parse_url;
use apps::tcp_echo::TcpEchoApp;
use link::{FaultConfig, FaultLink, Link, MemoryLink};
use runtime::{AppContext, Application, Engine, EngineConfig};
use stack::{
    Duration, InterfaceConfig, Ipv6Config, Shutdown, SocketError, SocketHandle, Stack, StackConfig,
};

fn stack(last: u8) -> Stack {
    let mut s = Stack::new(StackConfig {
        seed: u64::from(last) * 7919,
        // fd99:3::N usable at once.
        ip6_dad_count: 0,
        ip6_accept_rtadv: false,
        ..StackConfig::default()
    });
    let id = s
        .add_interface(&InterfaceConfig::new(
            format!("mem{last}"),
            [2, 0, 0, 0, 3, last],
            Ipv4Addr::new(10, 99, 3, last),
            24,
        ))
        .unwrap();
    let v6 = Ipv6Config {
        addrs: vec![(Ipv6Addr::new(0xfd99, 3, 0, 0, 0, 0, 0, u16::from(last)), 64)],
        gateway: None,
    };
    s.enable_ipv6(stack::Instant::ZERO, id, &v6).unwrap();
    s
}

fn links() -> (MemoryLink, MemoryLink) {
    let (mut a, mut b) = MemoryLink::pair(1500, 4096);
    a.set_mac([2, 0, 0, 0, 3, 1]);
    b.set_mac([2, 0, 0, 0, 3, 2]);
    (a, b)
}

fn engine<L: Link>(last: u8, link: L) -> Engine<L> {
    let cfg = EngineConfig {
        pkt_tx_delay: std::time::Duration::ZERO,
        ..EngineConfig::default()
    };
    Engine::new(stack(last), vec![link], cfg)
}

const FAULTS: FaultConfig = FaultConfig {
    loss: 0.02,
    duplicate: 0.02,
    reorder: 0.02,
    corrupt: 0.0,
    delay_us: 0,
    jitter_us: 0,
    seed: 99,
};

/// Turns both engines until `done` or `limit` of wall time.
fn run_until<L1: Link, L2: Link>(
    client: &mut Engine<L1>,
    capp: &mut dyn Application,
    server: &mut Engine<L2>,
    sapp: &mut dyn Application,
    limit: StdDuration,
    mut done: impl FnMut(&dyn Application) -> bool,
) {
    client.announce();
    server.announce();
    let t0 = StdInstant::now();
    while !done(capp) && t0.elapsed() < limit {
        client.turn(capp);
        server.turn(sapp);
    }
}

#[derive(Clone, Default)]
struct Shared(Rc<RefCell<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn get<L1: Link, L2: Link>(
    mut client: Engine<L1>,
    mut server: Engine<L2>,
    url: &str,
    timeout: Duration,
) -> (Result<Fetched, String>, Vec<u8>) {
    let mut http = HttpServer::new(&mut server.stack, ServerConfig::default()).unwrap();
    let body = Shared::default();
    let out = body.clone();
    let open: OpenOutput = Box::new(move || Ok(Box::new(out.clone()) as Box<dyn Write>));
    let mut app = HttpGet::new(parse_url(url).unwrap(), timeout, open);
    run_until(
        &mut client,
        &mut app,
        &mut server,
        &mut http,
        StdDuration::from_secs(60),
        |a| a.finished(),
    );
    let outcome = app.outcome().cloned().expect("the client finished");
    let bytes = body.0.borrow().clone();
    (outcome, bytes)
}

fn get_done<L1: Link, L2: Link>(
    client: Engine<L1>,
    server: Engine<L2>,
    url: &str,
) -> (Result<Fetched, String>, Vec<u8>) {
    get(client, server, url, Duration::from_secs(10))
}

#[test]
fn http_get_of_three_megabytes() {
    let (a, b) = links();
    let (r, body) = get_done(engine(1, a), engine(2, b), "http://10.99.3.2/bytes/3000000");
    let f = r.unwrap();
    assert_eq!((f.status, f.bytes), (200, 3_000_000));
    assert_eq!(body.len(), 3_000_000);
    assert_eq!(check_pattern(0, &body), None);
}

#[test]
fn http_get_over_ipv6() {
    let (a, b) = links();
    let url = "http://[fd99:3::2]:80/bytes/1000000";
    let (r, body) = get_done(engine(1, a), engine(2, b), url);
    let f = r.expect("the fetch succeeds");
    assert_eq!((f.status, f.bytes), (200, 1_000_000));
    assert_eq!(body.len(), 1_000_000);
    assert_eq!(check_pattern(0, &body), None);
}

#[test]
fn http_get_through_loss_duplicates_and_reordering() {
    let (a, b) = links();
    let a = FaultLink::new(a, FAULTS);
    let (r, body) = get_done(engine(1, a), engine(2, b), "http://10.99.3.2/bytes/2000000");
    assert_eq!(r.map(|f| f.bytes), Ok(2_000_000));
    assert_eq!(check_pattern(0, &body), None);
}

#[test]
fn http_get_index_404_and_refused() {
    let (a, b) = links();
    let (r, body) = get_done(engine(1, a), engine(2, b), "http://10.99.3.2/");
    assert_eq!(r.map(|f| f.bytes), Ok(600));
    assert!(body.starts_with(b"<!DOCTYPE html>"));

    let (a, b) = links();
    let (r, body) = get_done(engine(1, a), engine(2, b), "http://10.99.3.2/nothing");
    assert!(r.as_ref().is_err_and(|e| e.contains("404")), "{r:?}");
    assert!(body.is_empty(), "no body written for a 404");

    let (a, b) = links();
    let (r, _) = get_done(engine(1, a), engine(2, b), "http://10.99.3.2:81/");
    assert!(r.as_ref().is_err_and(|e| e.contains("refused")), "{r:?}");
}

#[test]
fn http_get_times_out_when_nobody_answers() {
    let (a, b) = links();
    // 10.99.3.9 does not exist: ARP goes unanswered.
    let t0 = StdInstant::now();
    let (r, _) = get(
        engine(1, a),
        engine(2, b),
        "http://10.99.3.9/",
        Duration::from_millis(500),
    );
    assert!(r.as_ref().is_err_and(|e| e.contains("timed out")), "{r:?}");
    assert!(t0.elapsed() < StdDuration::from_secs(5));
}

/// Opens `conns` connections to port 7, sends `size` bytes on each, shuts
/// the write side, and reads everything back until EOF.
struct EchoClient {
    /// Connection `i` goes to `servers[i % len]`.
    servers: Vec<SocketAddr>,
    conns: usize,
    size: usize,
    socks: Vec<(SocketHandle, usize, Vec<u8>, bool)>,
    data: Vec<u8>,
    errors: Vec<SocketError>,
}

impl EchoClient {
    fn new(conns: usize, size: usize) -> Self {
        EchoClient::to(
            vec![SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 99, 3, 2)), 7)],
            conns,
            size,
        )
    }

    fn to(servers: Vec<SocketAddr>, conns: usize, size: usize) -> Self {
        EchoClient {
            servers,
            conns,
            size,
            socks: Vec::new(),
            data: (0..size + conns)
                .map(|i| (i * 31 + i / 977) as u8)
                .collect(),
            errors: Vec::new(),
        }
    }

    fn expect(&self, i: usize) -> &[u8] {
        &self.data[i..i + self.size]
    }

    fn done(&self) -> bool {
        self.socks.len() == self.conns && self.socks.iter().all(|s| s.3) || !self.errors.is_empty()
    }
}

impl Application for EchoClient {
    fn poll(&mut self, ctx: &mut AppContext<'_>) -> bool {
        while self.socks.len() < self.conns {
            let server = self.servers[self.socks.len() % self.servers.len()];
            let h = ctx
                .stack
                .tcp_connect(ctx.now, server, None, ctx.sink)
                .unwrap();
            self.socks.push((h, 0, Vec::new(), false));
        }
        let mut buf = vec![0u8; 65536];
        for i in 0..self.socks.len() {
            let (h, sent, got, eof) = &mut self.socks[i];
            if *eof {
                continue;
            }
            let data = &self.data[i..i + self.size];
            if *sent < data.len() {
                match ctx.stack.tcp_send(ctx.now, *h, &data[*sent..], ctx.sink) {
                    Ok(n) => {
                        *sent += n;
                        if *sent == data.len() {
                            ctx.stack
                                .tcp_shutdown(ctx.now, *h, Shutdown::Write, ctx.sink)
                                .unwrap();
                        }
                    }
                    Err(SocketError::WouldBlock) => {}
                    Err(e) => self.errors.push(e),
                }
            }
            loop {
                match ctx.stack.tcp_recv(ctx.now, *h, &mut buf, ctx.sink) {
                    Ok(0) => {
                        *eof = true;
                        let _ = ctx.stack.tcp_close(ctx.now, *h, ctx.sink);
                        break;
                    }
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(SocketError::WouldBlock) => break,
                    Err(e) => {
                        self.errors.push(e);
                        break;
                    }
                }
            }
        }
        true
    }

    fn finished(&self) -> bool {
        self.done()
    }
}

fn echo<L1: Link, L2: Link>(client: Engine<L1>, server: Engine<L2>, conns: usize, size: usize) {
    echo_to(client, server, EchoClient::new(conns, size));
}

fn echo_to<L1: Link, L2: Link>(
    mut client: Engine<L1>,
    mut server: Engine<L2>,
    mut app: EchoClient,
) {
    let (conns, size) = (app.conns, app.size);
    let mut echo = TcpEchoApp::new(&mut server.stack, 7).unwrap();
    run_until(
        &mut client,
        &mut app,
        &mut server,
        &mut echo,
        StdDuration::from_secs(60),
        |a| a.finished(),
    );
    assert!(
        app.errors.is_empty(),
        "{:?}; echo {:?}\nclient {:?}\nserver {:?}",
        app.errors,
        echo.stats,
        client.stack.counters(),
        server.stack.counters()
    );
    assert!(
        app.done(),
        "not finished: {} of {conns} at EOF",
        app.socks.iter().filter(|s| s.3).count()
    );
    for (i, s) in app.socks.iter().enumerate() {
        assert_eq!(s.2.len(), size, "connection {i}: length");
        assert!(s.2 == app.expect(i), "connection {i}: bytes differ");
    }
    // Data segments carry SACK blocks when data flows both ways under
    // loss: they must still fit the MTU.
    for (who, e) in [
        ("client", client.stack.counters()),
        ("server", server.stack.counters()),
    ] {
        assert_eq!(e.tx_drop_too_big, 0, "{who}: segments over the MTU");
    }
    // The server closed every connection after echoing it.
    for _ in 0..1000 {
        server.turn(&mut echo);
        client.turn(&mut app);
    }
    assert_eq!(echo.connections(), 0);
    assert_eq!(echo.stats.accepted, conns as u64);
    assert_eq!(echo.stats.errors, 0);
}

#[test]
fn tcp_echo_eight_connections_with_half_close() {
    let (a, b) = links();
    echo(engine(1, a), engine(2, b), 8, 1_000_000);
}

/// One dual-stack listener (`[::]:7`) echoes IPv6 and IPv4 connections.
#[test]
fn tcp_echo_over_ipv6_and_ipv4_to_one_listener() {
    let (a, b) = links();
    let servers = vec![
        "[fd99:3::2]:7".parse().unwrap(),
        "10.99.3.2:7".parse().unwrap(),
    ];
    echo_to(
        engine(1, a),
        engine(2, b),
        EchoClient::to(servers, 6, 200_000),
    );
}

#[test]
fn tcp_echo_through_faults() {
    let (a, b) = links();
    let a = FaultLink::new(a, FAULTS);
    echo(engine(1, a), engine(2, b), 4, 300_000);
}

/// A server that answers the first request on port 8080 with canned bytes,
/// then closes.
struct Canned {
    listener: SocketHandle,
    reply: Vec<u8>,
    conn: Option<(SocketHandle, Vec<u8>, usize)>,
}

impl Application for Canned {
    fn poll(&mut self, ctx: &mut AppContext<'_>) -> bool {
        if self.conn.is_none() {
            if let Ok((h, _)) = ctx.stack.tcp_accept(self.listener) {
                self.conn = Some((h, Vec::new(), 0));
            }
        }
        let Some((h, req, sent)) = self.conn.as_mut() else {
            return false;
        };
        let mut buf = [0u8; 4096];
        while let Ok(n) = ctx.stack.tcp_recv(ctx.now, *h, &mut buf, ctx.sink) {
            if n == 0 {
                break;
            }
            req.extend_from_slice(&buf[..n]);
        }
        if req.windows(4).any(|w| w == b"\r\n\r\n") && *sent < self.reply.len() {
            if let Ok(n) = ctx
                .stack
                .tcp_send(ctx.now, *h, &self.reply[*sent..], ctx.sink)
            {
                *sent += n;
                if *sent == self.reply.len() {
                    let _ = ctx.stack.tcp_close(ctx.now, *h, ctx.sink);
                }
            }
        }
        true
    }
}

fn canned(reply: &[u8]) -> (Result<Fetched, String>, Vec<u8>) {
    let (a, b) = links();
    let (mut client, mut server) = (engine(1, a), engine(2, b));
    let listener = server
        .stack
        .tcp_listen("0.0.0.0:8080".parse().unwrap(), 4)
        .unwrap();
    let mut sapp = Canned {
        listener,
        reply: reply.to_vec(),
        conn: None,
    };
    let body = Shared::default();
    let out = body.clone();
    let open: OpenOutput = Box::new(move || Ok(Box::new(out.clone()) as Box<dyn Write>));
    let url = parse_url("http://10.99.3.2:8080/x").unwrap();
    let mut app = HttpGet::new(url, Duration::from_secs(5), open);
    run_until(
        &mut client,
        &mut app,
        &mut server,
        &mut sapp,
        StdDuration::from_secs(20),
        |a| a.finished(),
    );
    let outcome = app.outcome().cloned().expect("the client finished");
    let bytes = body.0.borrow().clone();
    (outcome, bytes)
}

#[test]
fn http_get_body_framings() {
    let (r, body) = canned(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
          5\r\nhello\r\n7;x=y\r\n, world\r\n0\r\nTrailer: 1\r\n\r\n",
    );
    assert_eq!(r.map(|f| (f.status, f.bytes)), Ok((200, 12)));
    assert_eq!(body, b"hello, world");

    let (r, body) = canned(b"HTTP/1.0 200 OK\r\nServer: old\r\n\r\nuntil the server closes");
    assert_eq!(r.map(|f| f.bytes), Ok(23));
    assert_eq!(body, b"until the server closes");

    let (r, _) = canned(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this");
    assert!(
        r.as_ref()
            .is_err_and(|e| e.contains("short body: 9 of 100")),
        "{r:?}"
    );

    let (r, _) = canned(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel");
    assert!(r.as_ref().is_err_and(|e| e.contains("chunked")), "{r:?}");

    let (r, _) = canned(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
    assert!(
        r.as_ref().is_err_and(|e| e.contains("bad chunked body")),
        "{r:?}"
    );

    let (r, _) = canned(b"SSH-2.0-OpenSSH_9.2\r\n");
    assert!(
        r.as_ref().is_err_and(|e| e.contains("bad response")),
        "{r:?}"
    );

    let (r, _) = canned(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
    assert!(r.as_ref().is_err_and(|e| e.contains("503")), "{r:?}");

    let (r, _) = canned(b"HTTP/1.1 204 No Content\r\n\r\n");
    assert_eq!(r.map(|f| (f.status, f.bytes)), Ok((204, 0)));
}
