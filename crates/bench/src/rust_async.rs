//! The `rust_async` way in: the benchmark's server and client written as a
//! user writes a Rust program on ustack's async API (`crates/rt` over the
//! socket layer `crates/api`): the engine handed to the thread
//! (`api::attach`), a runtime on it, a task per connection or socket with
//! straight-line `read`/`write_all`/`recv_from`, no `Stack` call.
//!
//! The engine is the core rows' (`us.rs`: the shared-memory link, busy
//! polling, `pkt_tx_delay` 0), so a row's gap to the `core` row is what
//! the socket layer, its epoll and the executor cost. The kernel's side of
//! these rows is the core rows' kernel program (`ustack-bench --stack
//! linux`, epoll), in the same interleaved runs.
//!
//! The server speaks the ports of `logic.rs` the rows use: TCP `P` echo,
//! TCP `P+2` one-shot (one 64-byte request answered, then the server
//! closes), UDP `P` echo. The client prints the same `result` line.

use std::cell::Cell;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rt::{TcpListener, TcpStream, UdpSocket};

use crate::logic::{Budget, Measure, Workload, CHUNK, ECHO, MSG, ONESHOT};
use crate::net::Family;
use crate::proc::{self, ProcArgs};
use crate::us;

/// The request (and the reply the one-shot port sends).
const REQUEST: [u8; MSG] = *b"ustack-bench rust_async request, sixty-four bytes, padded.......";
/// A UDP request without reply for this long is sent again (as in
/// `logic.rs`), and counted as an error.
const UDP_RESEND: Duration = Duration::from_millis(200);
/// How often the server looks whether it was asked to stop.
const STOP_POLL: Duration = Duration::from_millis(10);
/// How long a client task waits before trying again after an error.
const RETRY: Duration = Duration::from_millis(1);

/// Runs `main` on a runtime on this thread, over `engine`, then lets the
/// engine go.
fn on_engine<T>(
    engine: runtime::Engine<link::ShmLink>,
    main: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    api::attach(engine);
    let out = match rt::Runtime::new() {
        Ok(runtime) => {
            let out = runtime.block_on(main);
            drop(runtime);
            out
        }
        Err(e) => Err(format!("runtime: {e}")),
    };
    api::detach();
    out
}

/// `ustack-bench server --stack rust_async`: serves until its standard
/// input closes.
/// `stop` is set when it closes (the process is pinned already).
pub fn server(a: &ProcArgs, stop: Arc<AtomicBool>) -> Result<(), String> {
    let seed = link::os::random_seed().map_err(|e| e.to_string())?;
    let mut engine = us::server_engine(&a.link, seed, us::TIMER_TICK, a.family)
        .map_err(|e| format!("{}: {e}", a.link.display()))?;
    engine.announce();
    let served = Rc::new(Cell::new(0u64));
    let out = on_engine(engine, serve(a.family, a.port, stop, served.clone()));
    eprintln!(
        "ustack-bench: rust_async server: {} requests served",
        served.get()
    );
    out
}

async fn serve(
    family: Family,
    port: u16,
    stop: Arc<AtomicBool>,
    served: Rc<Cell<u64>>,
) -> Result<(), String> {
    let at = |offset: u16| SocketAddr::new(family.unspecified(), port + offset);
    let echo = TcpListener::bind(at(ECHO)).map_err(|e| format!("cannot listen: {e}"))?;
    let oneshot = TcpListener::bind(at(ONESHOT)).map_err(|e| format!("cannot listen: {e}"))?;
    let udp = UdpSocket::bind(at(ECHO)).map_err(|e| format!("cannot bind UDP: {e}"))?;
    let tasks = [
        rt::spawn(accept_loop(echo, served.clone(), false)),
        rt::spawn(accept_loop(oneshot, served.clone(), true)),
        rt::spawn(udp_echo(udp, served)),
    ];
    proc::say("ready");
    while !stop.load(Ordering::Relaxed) {
        rt::sleep(STOP_POLL).await;
    }
    for t in tasks {
        t.abort();
    }
    Ok(())
}

async fn accept_loop(listener: TcpListener, served: Rc<Cell<u64>>, oneshot: bool) {
    loop {
        match listener.accept().await {
            Ok((conn, _)) => {
                if conn.set_nodelay(true).is_err() {
                    continue;
                }
                if oneshot {
                    rt::spawn(answer_once(conn, served.clone()));
                } else {
                    rt::spawn(echo(conn, served.clone()));
                }
            }
            // Out of sockets: let connections finish.
            Err(_) => rt::sleep(RETRY).await,
        }
    }
}

/// Writes back every byte read, until the peer's EOF or an error.
async fn echo(conn: TcpStream, served: Rc<Cell<u64>>) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match conn.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if conn.write_all(&buf[..n]).await.is_err() {
            return;
        }
        served.set(served.get() + (n / MSG) as u64);
    }
}

/// Reads one request, answers it and closes (the server closes first).
async fn answer_once(conn: TcpStream, served: Rc<Cell<u64>>) {
    let mut buf = [0u8; MSG];
    let mut got = 0;
    while got < MSG {
        match conn.read(&mut buf[got..]).await {
            Ok(0) | Err(_) => return,
            Ok(n) => got += n,
        }
    }
    if conn.write_all(&REQUEST).await.is_ok() {
        served.set(served.get() + 1);
    }
}

async fn udp_echo(udp: UdpSocket, served: Rc<Cell<u64>>) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let Ok((n, from)) = udp.recv_from(&mut buf).await else {
            rt::sleep(RETRY).await;
            continue;
        };
        if udp.send_to(&buf[..n], from).await.is_ok() {
            served.set(served.get() + 1);
        }
    }
}

/// What the client's tasks count.
#[derive(Default)]
struct Counts {
    units: Cell<u64>,
    errors: Cell<u64>,
}

impl Counts {
    fn unit(&self) {
        self.units.set(self.units.get() + 1);
    }
    fn error(&self) {
        self.errors.set(self.errors.get() + 1);
    }
}

/// `ustack-bench client --stack rust_async`: runs the workload for the
/// warm-up and the window, prints its result (the process is pinned
/// already; `stop` is set when standard input closes).
pub fn client(a: &ProcArgs, stop: Arc<AtomicBool>) -> Result<(), String> {
    let Budget::Time { warmup, window } = a.budget else {
        return Err(
            "the rust_async client measures over a window (--warmup-ms, --window-ms)".into(),
        );
    };
    match a.workload {
        Workload::PingPong { .. } | Workload::ShortConn { .. } | Workload::UdpReqResp { .. } => {}
        other => return Err(format!("no rust_async client for the workload {other}")),
    }
    let seed = link::os::random_seed().map_err(|e| e.to_string())?;
    let mut engine = us::client_engine(&a.link, seed, us::TIMER_TICK, a.family)
        .map_err(|e| format!("{}: {e}", a.link.display()))?;
    engine.announce();
    let server = us::server_ip(a.family);
    let m = on_engine(
        engine,
        measure(a.workload, server, a.port, warmup, window, stop),
    )?;
    proc::say(&proc::result_line(&m));
    Ok(())
}

async fn measure(
    workload: Workload,
    server: IpAddr,
    port: u16,
    warmup: Duration,
    window: Duration,
    stop: Arc<AtomicBool>,
) -> Result<Measure, String> {
    let counts = Rc::new(Counts::default());
    let start = Instant::now();
    let (n, offset) = match workload {
        Workload::PingPong { conns } => (conns, ECHO),
        Workload::ShortConn { concurrency } => (concurrency, ONESHOT),
        Workload::UdpReqResp { socks } => (socks, ECHO),
        other => return Err(format!("no rust_async client for the workload {other}")),
    };
    let to = SocketAddr::new(server, port + offset);
    let task = |counts: Rc<Counts>| match workload {
        Workload::ShortConn { .. } => rt::spawn(short_conns(to, counts)),
        Workload::UdpReqResp { .. } => rt::spawn(udp_requests(to, counts)),
        _ => rt::spawn(pingpong(to, counts)),
    };
    // One task first, until its first round trip: the neighbour is
    // resolved and the server answers before the others' requests wait
    // on ARP or ND (as the other clients do).
    let first = task(counts.clone());
    while counts.units.get() == 0 {
        if stop.load(Ordering::Relaxed) || start.elapsed() > warmup + window {
            return Err("stopped before the first reply".into());
        }
        rt::sleep(RETRY).await;
    }
    let mut tasks = vec![first];
    tasks.extend((1..n).map(|_| task(counts.clone())));
    rt::sleep_until(start + warmup).await;
    let (mark, mark_at) = (counts.units.get(), Instant::now());
    rt::sleep(window).await;
    let m = Measure {
        units: counts.units.get() - mark,
        elapsed: mark_at.elapsed(),
        errors: counts.errors.get(),
    };
    for t in tasks {
        t.abort();
    }
    Ok(m)
}

/// One connection with one request in flight, for as long as it lives;
/// a failed connection is counted and opened again.
async fn pingpong(to: SocketAddr, counts: Rc<Counts>) {
    let mut buf = [0u8; MSG];
    loop {
        match round_trips(to, &counts, &mut buf).await {
            Ok(()) => return,
            Err(_) => {
                counts.error();
                rt::sleep(RETRY).await;
            }
        }
    }
}

async fn round_trips(to: SocketAddr, counts: &Counts, buf: &mut [u8; MSG]) -> io::Result<()> {
    let conn = TcpStream::connect(to).await?;
    conn.set_nodelay(true)?;
    loop {
        conn.write_all(&REQUEST).await?;
        read_reply(&conn, buf).await?;
        counts.unit();
    }
}

/// Reads exactly one 64-byte reply.
async fn read_reply(conn: &TcpStream, buf: &mut [u8; MSG]) -> io::Result<()> {
    let mut got = 0;
    while got < MSG {
        match conn.read(&mut buf[got..]).await? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => got += n,
        }
    }
    Ok(())
}

/// Connections one after another: connect, one request and reply, the
/// server's close, close; each counted once the server's FIN came.
async fn short_conns(to: SocketAddr, counts: Rc<Counts>) {
    let mut buf = [0u8; MSG];
    loop {
        match short_conn(to, &mut buf).await {
            Ok(()) => counts.unit(),
            Err(_) => {
                counts.error();
                rt::sleep(RETRY).await;
            }
        }
    }
}

async fn short_conn(to: SocketAddr, buf: &mut [u8; MSG]) -> io::Result<()> {
    let conn = TcpStream::connect(to).await?;
    conn.set_nodelay(true)?;
    conn.write_all(&REQUEST).await?;
    read_reply(&conn, buf).await?;
    match conn.read(&mut buf[..]).await? {
        0 => Ok(()),
        _ => Err(io::ErrorKind::InvalidData.into()),
    }
}

/// One socket with one datagram in flight; a request unanswered for
/// [`UDP_RESEND`] is sent again and counted as an error.
async fn udp_requests(to: SocketAddr, counts: Rc<Counts>) {
    let any = SocketAddr::new(Family::of(to.ip()).unspecified(), 0);
    let udp = loop {
        match UdpSocket::bind(any) {
            Ok(u) => break u,
            Err(_) => {
                counts.error();
                rt::sleep(RETRY).await;
            }
        }
    };
    let mut buf = vec![0u8; CHUNK];
    loop {
        if udp.send_to(&REQUEST, to).await.is_err() {
            counts.error();
            rt::sleep(RETRY).await;
            continue;
        }
        match rt::timeout(UDP_RESEND, udp.recv_from(&mut buf)).await {
            Ok(Ok((MSG, _))) => counts.unit(),
            Ok(_) | Err(_) => counts.error(),
        }
    }
}
