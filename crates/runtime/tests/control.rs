//! An engine answering its control socket while it runs: two engines over
//! an in-memory link with a TCP connection between them, the server's
//! control socket asked from another thread as the `ustack` command does.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use link::MemoryLink;
use runtime::control::client::{self, AskError};
use runtime::control::proto::{ErrorKind, InterfaceChange, Reply, Request, RouteSpec};
use runtime::control::{self as control, ControlSpec};
use runtime::{AppContext, Application, Engine, EngineConfig};
use stack::{InterfaceConfig, SocketHandle, Stack, StackConfig};

fn stack(last: u8) -> Stack {
    let mut s = Stack::new(StackConfig {
        seed: u64::from(last),
        ..StackConfig::default()
    });
    s.add_interface(&InterfaceConfig {
        extra_addrs: vec![Ipv4Addr::new(10, 99, 3, 100 + last)],
        ..InterfaceConfig::new(
            format!("mem{last}"),
            [2, 0, 0, 0, 3, last],
            Ipv4Addr::new(10, 99, 3, last),
            24,
        )
    })
    .unwrap();
    s
}

/// Accepts connections and holds them.
struct Server {
    listener: SocketHandle,
    accepted: Vec<SocketHandle>,
}

impl Application for Server {
    fn poll(&mut self, ctx: &mut AppContext<'_>) -> bool {
        let mut work = false;
        while let Ok((c, _)) = ctx.stack.tcp_accept(self.listener) {
            self.accepted.push(c);
            work = true;
        }
        work
    }
}

/// Connects once (when `start` is set) and sends a few bytes.
struct Client {
    conn: Option<SocketHandle>,
    sent: bool,
    start: Arc<AtomicBool>,
    dst: SocketAddr,
}

impl Application for Client {
    fn poll(&mut self, ctx: &mut AppContext<'_>) -> bool {
        let dst = self.dst;
        let h = match self.conn {
            Some(h) => h,
            None if !self.start.load(Ordering::Acquire) => return false,
            None => {
                let h = ctx.stack.tcp_connect(ctx.now, dst, None, ctx.sink).unwrap();
                self.conn = Some(h);
                return true;
            }
        };
        if !self.sent && ctx.stack.tcp_send(ctx.now, h, b"hello", ctx.sink).is_ok() {
            self.sent = true;
            return true;
        }
        false
    }
}

fn run_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ustack-ctl-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Drives both engines until `done` is set (by the thread asking).
fn drive(
    client: &mut Engine<MemoryLink>,
    server: &mut Engine<MemoryLink>,
    capp: &mut Client,
    sapp: &mut Server,
    done: &AtomicBool,
) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !done.load(Ordering::Acquire) {
        assert!(
            std::time::Instant::now() < deadline,
            "the asking thread hung"
        );
        client.turn(capp);
        server.turn(sapp);
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Runs `asks` on a thread of its own, given the control socket's path,
/// while both engines turn; returns when it has, failing with its panic
/// if it panicked.
fn ask_while_running(
    (client, server): (&mut Engine<MemoryLink>, &mut Engine<MemoryLink>),
    (capp, sapp): (&mut Client, &mut Server),
    path: &Path,
    asks: impl FnOnce(PathBuf) + Send + 'static,
) {
    let done = Arc::new(AtomicBool::new(false));
    let asker = {
        let (done, path) = (Arc::clone(&done), path.to_path_buf());
        std::thread::spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| asks(path)));
            done.store(true, Ordering::Release);
            r
        })
    };
    drive(client, server, capp, sapp, &done);
    if let Err(p) = asker.join().unwrap() {
        std::panic::resume_unwind(p);
    }
}

fn setup(
    tag: &str,
) -> (
    Engine<MemoryLink>,
    Engine<MemoryLink>,
    Client,
    Server,
    PathBuf,
) {
    let (mut la, mut lb) = MemoryLink::pair(1500, 1024);
    la.set_mac([2, 0, 0, 0, 3, 1]);
    lb.set_mac([2, 0, 0, 0, 3, 2]);
    let cfg = EngineConfig {
        pkt_tx_delay: Duration::ZERO,
        ..EngineConfig::default()
    };
    let client = Engine::new(stack(1), vec![la], cfg);
    let mut server = Engine::new(stack(2), vec![lb], cfg);
    let listener = server
        .stack
        .tcp_listen("0.0.0.0:80".parse().unwrap(), 16)
        .unwrap();
    server
        .stack
        .udp_bind("0.0.0.0:53".parse().unwrap())
        .unwrap();
    let dir = run_dir(tag);
    let spec = ControlSpec {
        dir: dir.clone(),
        engine: 0,
        sysctls: Default::default(),
        metrics: None,
    };
    control::attach(&mut server, &spec, runtime::stats::snapshot_of);
    let path = server
        .control()
        .expect("the control socket opened")
        .path()
        .to_path_buf();
    assert_eq!(path, dir.join("0.0.sock"));
    (
        client,
        server,
        Client {
            conn: None,
            sent: false,
            start: Arc::new(AtomicBool::new(true)),
            dst: SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 99, 3, 2)), 80),
        },
        Server {
            listener,
            accepted: Vec::new(),
        },
        path,
    )
}

fn ask(path: &Path, req: Request) -> Result<Reply, AskError> {
    client::ask(path, &req, Duration::from_secs(5))
}

fn counter(path: &Path, name: &str) -> u64 {
    match ask(path, Request::Stats) {
        Ok(Reply::Stats { counters }) => counters
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
            .unwrap_or_else(|| panic!("no counter {name}")),
        other => panic!("stats: {other:?}"),
    }
}

#[test]
fn a_running_engine_answers_its_control_socket() {
    let (mut client, mut server, mut capp, mut sapp, path) = setup("answers");
    let engines = (&mut client, &mut server);
    ask_while_running(engines, (&mut capp, &mut sapp), &path, move |path| {
        // The connection is up once the server shows it.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let sockets = loop {
            let Ok(Reply::Sockets { sockets }) = ask(&path, Request::Sockets) else {
                panic!("sockets");
            };
            if sockets
                .iter()
                .any(|s| s.state == "ESTABLISHED" && s.recv_q == 5)
            {
                break sockets;
            }
            assert!(std::time::Instant::now() < deadline, "{sockets:?}");
            std::thread::sleep(Duration::from_millis(5));
        };
        assert!(sockets
            .iter()
            .any(|s| s.proto == "tcp" && s.state == "LISTEN" && s.local == "0.0.0.0:80"));
        assert!(sockets
            .iter()
            .any(|s| s.proto == "udp" && s.local == "0.0.0.0:53"));
        let est = sockets.iter().find(|s| s.state == "ESTABLISHED").unwrap();
        assert_eq!(est.local, "10.99.3.2:80");
        assert!(est.remote.as_deref().unwrap().starts_with("10.99.3.1:"));
        assert!(est.info.as_ref().unwrap().snd_mss > 0);

        let Ok(Reply::Identity(id)) = ask(&path, Request::Identify) else {
            panic!("identify");
        };
        assert_eq!((id.pid, id.engine, id.ports), (std::process::id(), 0, 1));

        let Ok(Reply::Interfaces { interfaces }) = ask(&path, Request::Interfaces) else {
            panic!("interfaces");
        };
        assert_eq!(interfaces.len(), 1);
        let i = &interfaces[0];
        assert_eq!(
            (i.name.as_str(), i.mac.as_str(), i.mtu),
            ("mem2", "02:00:00:00:03:02", 1500)
        );
        assert_eq!(i.inet[0].addr.to_string(), "10.99.3.2");
        assert_eq!(i.vips, vec!["10.99.3.102".to_string()]);
        let rx = i.counters.iter().find(|(n, _)| n == "rx_frames").unwrap().1;
        assert!(rx >= 3, "the handshake and data arrived: {rx}");

        // The neighbour the connection resolved.
        let Ok(Reply::Neighbors { neighbors }) = ask(&path, Request::Neighbors) else {
            panic!("neighbors");
        };
        assert!(neighbors
            .iter()
            .any(|n| n.ip.to_string() == "10.99.3.1"
                && n.mac.as_deref() == Some("02:00:00:00:03:01")));

        // Routes: add, see, change, refuse a duplicate, delete.
        let add = |gw: &str| Request::RouteAdd {
            fib: 0,
            route: RouteSpec {
                dest: "192.0.2.0/24".into(),
                gateway: Some(gw.parse().unwrap()),
                iface: None,
            },
        };
        assert!(matches!(
            ask(&path, add("10.99.3.1")),
            Ok(Reply::Done { .. })
        ));
        match ask(&path, add("10.99.3.1")) {
            Err(AskError::Engine(e)) => assert_eq!(e.kind, ErrorKind::Exists),
            other => panic!("duplicate route: {other:?}"),
        }
        let change = Request::RouteChange {
            fib: 0,
            route: RouteSpec {
                dest: "192.0.2.0/24".into(),
                gateway: Some("10.99.3.254".parse().unwrap()),
                iface: None,
            },
        };
        assert!(matches!(ask(&path, change), Ok(Reply::Done { .. })));
        let Ok(Reply::Routes { routes, .. }) = ask(&path, Request::Routes { fib: 0 }) else {
            panic!("routes");
        };
        let r = routes.iter().find(|r| r.dest == "192.0.2.0/24").unwrap();
        assert_eq!(r.gateway.unwrap().to_string(), "10.99.3.254");
        assert_eq!((r.iface.as_str(), r.flags.as_str()), ("mem2", "UGS"));
        match ask(&path, Request::Routes { fib: 3 }) {
            Err(AskError::Engine(e)) => assert_eq!(e.kind, ErrorKind::NotFound),
            other => panic!("fib 3: {other:?}"),
        }
        let del = Request::RouteDelete {
            fib: 0,
            dest: "192.0.2.0/24".into(),
        };
        assert!(matches!(ask(&path, del.clone()), Ok(Reply::Done { .. })));
        match ask(&path, del) {
            Err(AskError::Engine(e)) => assert_eq!(e.kind, ErrorKind::NotFound),
            other => panic!("second delete: {other:?}"),
        }
        let failed = counter(&path, "control_requests_failed");
        assert_eq!(failed, 3);
    });
    drop(server);
    assert!(!path.exists(), "the socket goes with its engine");
}

/// Sends raw bytes and reads one reply line.
fn raw(path: &Path, bytes: &[u8]) -> String {
    let mut s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let mut b = [0u8; 1];
    while s.read(&mut b).unwrap() == 1 && b[0] != b'\n' {
        out.push(b[0]);
    }
    String::from_utf8(out).unwrap()
}

#[test]
fn hostile_clients_are_answered_or_dropped_and_counted_without_stalling_the_engine() {
    let (mut client, mut server, mut capp, mut sapp, path) = setup("hostile");
    let engines = (&mut client, &mut server);
    ask_while_running(engines, (&mut capp, &mut sapp), &path, move |path| {
        // Garbage and a request of another version: error replies.
        let reply = raw(&path, b"\x00\xffnot json\n");
        assert!(reply.contains("\"bad_request\""), "{reply}");
        let reply = raw(&path, b"{\"v\":9,\"req\":{\"op\":\"stats\"}}\n");
        assert!(reply.contains("\"version\""), "{reply}");
        // A client that sends half a request and waits, and one
        // that asks and never reads: others are still answered.
        let mut half = UnixStream::connect(&path).unwrap();
        half.write_all(b"{\"v\":1,\"req\":").unwrap();
        let mut deaf = UnixStream::connect(&path).unwrap();
        for _ in 0..50 {
            if deaf
                .write_all(b"{\"v\":1,\"req\":{\"op\":\"stats\"}}\n")
                .is_err()
            {
                break;
            }
        }
        for _ in 0..20 {
            assert!(matches!(
                ask(&path, Request::Identify),
                Ok(Reply::Identity(_))
            ));
        }
        // An over-long line: the client is dropped.
        let mut long = UnixStream::connect(&path).unwrap();
        long.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = long.write_all(&vec![b'x'; 40_000]);
        let mut b = [0u8; 16];
        assert_eq!(long.read(&mut b).unwrap_or(0), 0, "dropped without a reply");
        // More clients at once than the engine serves: those
        // beyond wait their turn, and every one is answered.
        let crowd: Vec<_> = (0..40)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || ask(&path, Request::Identify).is_ok())
            })
            .collect();
        for c in crowd {
            assert!(c.join().unwrap());
        }
        drop(half);
        drop(deaf);
        let c = |n| counter(&path, n);
        assert_eq!(c("control_requests_malformed"), 2);
        assert_eq!(c("control_clients_dropped_oversize"), 1);
        assert!(c("control_clients_accepted") >= 65);
    });
    // The engine ran its connection meanwhile.
    assert_eq!(sapp.accepted.len(), 1);
}

#[test]
fn a_second_engine_on_a_taken_name_uses_its_pid() {
    let dir = run_dir("taken");
    let spec = ControlSpec {
        dir: dir.clone(),
        engine: 0,
        sysctls: Default::default(),
        metrics: None,
    };
    let first = spec.bind().unwrap();
    let second = spec.bind().unwrap();
    assert_eq!(first.path(), dir.join("0.0.sock"));
    assert_eq!(
        second.path(),
        dir.join(format!("0-{}.0.sock", std::process::id()))
    );
    let found = client::find_sockets(
        dir.parent().unwrap(),
        dir.file_name().and_then(|n| n.to_str()),
    )
    .unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].process, "0");
    // A file left by an engine that is gone is replaced.
    let stale = dir.join("0.1.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(stale.exists());
    let spec1 = ControlSpec { engine: 1, ..spec };
    assert_eq!(spec1.bind().unwrap().path(), stale);
}

fn engine_error(r: Result<Reply, AskError>) -> ErrorKind {
    match r {
        Err(AskError::Engine(e)) => e.kind,
        other => panic!("expected an engine's error, got {other:?}"),
    }
}

fn done(r: Result<Reply, AskError>) -> String {
    match r {
        Ok(Reply::Done { message }) => message,
        other => panic!("expected done, got {other:?}"),
    }
}

#[test]
fn changes_reach_the_running_stack() {
    use runtime::control::proto::{Family, InterfaceChange};
    let (mut client, mut server, mut capp, mut sapp, path) = setup("changes");
    let engines = (&mut client, &mut server);
    ask_while_running(engines, (&mut capp, &mut sapp), &path, move |path| {
        // Sysctls: every key, which are live; a live one set, a
        // config-only one refused, bad values refused.
        let Ok(Reply::Sysctls { sysctls }) = ask(&path, Request::SysctlGet { name: None }) else {
            panic!("sysctls");
        };
        let find = |n: &str| sysctls.iter().find(|s| s.name == n).unwrap().clone();
        assert_eq!(find("net.inet.ip.ttl").value, "64");
        assert!(find("net.inet.ip.ttl").live);
        assert!(!find("net.inet.ip.portrange.first").live);
        let set = |n: &str, v: &str| {
            ask(
                &path,
                Request::SysctlSet {
                    name: n.into(),
                    value: v.into(),
                },
            )
        };
        assert_eq!(done(set("net.inet.ip.ttl", "32")), "net.inet.ip.ttl: 32");
        assert_eq!(
            done(set("net.inet.tcp.cc.algorithm", "newreno")),
            "net.inet.tcp.cc.algorithm: newreno"
        );
        // The ARP timers are live too.
        assert!(find("net.link.ether.inet.max_age").live);
        assert!(find("net.link.ether.inet.maxhold").live);
        done(set("net.link.ether.inet.max_age", "5"));
        done(set("net.link.ether.inet.maxhold", "3"));
        assert_eq!(
            engine_error(set("net.inet.ip.portrange.first", "2000")),
            ErrorKind::ConfigOnly
        );
        assert_eq!(
            engine_error(set("net.inet.ip.ttl", "999")),
            ErrorKind::Invalid
        );
        assert_eq!(
            engine_error(set("net.inet.tcp.sendspace", "999999999")),
            ErrorKind::Invalid
        );
        assert_eq!(engine_error(set("net.inet.nope", "1")), ErrorKind::NotFound);
        let Ok(Reply::Sysctls { sysctls }) = ask(
            &path,
            Request::SysctlGet {
                name: Some("net.inet.ip.ttl".into()),
            },
        ) else {
            panic!("one sysctl");
        };
        assert_eq!(sysctls[0].value, "32");

        // Neighbours: a permanent entry, shown, deleted; a flush.
        let add = Request::NeighborAdd {
            ip: "10.99.3.50".parse().unwrap(),
            mac: "02:00:00:00:03:50".into(),
            iface: None,
        };
        done(ask(&path, add.clone()));
        let Ok(Reply::Neighbors { neighbors }) = ask(&path, Request::Neighbors) else {
            panic!("neighbors");
        };
        let n = neighbors
            .iter()
            .find(|n| n.ip.to_string() == "10.99.3.50")
            .unwrap();
        assert_eq!(
            (n.state.as_str(), n.mac.as_deref()),
            ("permanent", Some("02:00:00:00:03:50"))
        );
        let del = Request::NeighborDelete {
            ip: "10.99.3.50".parse().unwrap(),
            iface: None,
        };
        done(ask(&path, del.clone()));
        assert_eq!(engine_error(ask(&path, del)), ErrorKind::NotFound);
        assert_eq!(
            engine_error(ask(
                &path,
                Request::NeighborAdd {
                    ip: "10.99.3.50".parse().unwrap(),
                    mac: "02:00".into(),
                    iface: None,
                }
            )),
            ErrorKind::Invalid
        );
        done(ask(&path, add));
        let flushed = done(ask(
            &path,
            Request::NeighborFlush {
                family: Family::Inet,
            },
        ));
        assert!(flushed.starts_with("flushed 2"), "{flushed}");

        // Interface: an alias added and removed, the primary kept,
        // the MTU within the link's.
        let set_if = |change| {
            ask(
                &path,
                Request::InterfaceSet {
                    iface: "mem2".into(),
                    change,
                },
            )
        };
        done(set_if(InterfaceChange::AddAddr {
            addr: "10.99.3.77".parse().unwrap(),
            prefix_len: None,
        }));
        assert_eq!(
            engine_error(set_if(InterfaceChange::AddAddr {
                addr: "10.99.3.77".parse().unwrap(),
                prefix_len: None,
            })),
            ErrorKind::Exists
        );
        let Ok(Reply::Interfaces { interfaces }) = ask(&path, Request::Interfaces) else {
            panic!("interfaces");
        };
        assert_eq!(interfaces[0].vips, vec!["10.99.3.102", "10.99.3.77"]);
        done(set_if(InterfaceChange::RemoveAddr {
            addr: "10.99.3.77".parse().unwrap(),
        }));
        assert_eq!(
            engine_error(set_if(InterfaceChange::RemoveAddr {
                addr: "10.99.3.2".parse().unwrap(),
            })),
            ErrorKind::Invalid
        );
        done(set_if(InterfaceChange::Mtu { mtu: 1400 }));
        assert_eq!(
            engine_error(set_if(InterfaceChange::Mtu { mtu: 9000 })),
            ErrorKind::Invalid
        );
        assert_eq!(
            engine_error(ask(
                &path,
                Request::InterfaceSet {
                    iface: "eth9".into(),
                    change: InterfaceChange::Mtu { mtu: 1400 },
                }
            )),
            ErrorKind::NotFound
        );
    });
    // What the engine's stack now has.
    assert_eq!(server.stack.config().ip_ttl, 32);
    assert_eq!(server.stack.config().tcp.cc, stack::CcAlgorithm::NewReno);
    assert_eq!(
        server.stack.config().arp_max_age,
        stack::Duration::from_secs(5)
    );
    assert_eq!(server.stack.config().arp_maxhold, 3);
    let i = &server.stack.interfaces()[0];
    assert_eq!(i.mtu, 1400);
    assert_eq!(i.addrs().len(), 2);
    // Flushed (the connection's neighbour may be learnt again since).
    assert!(!server
        .stack
        .neighbors()
        .entries()
        .any(|(_, ip, _, _)| ip.to_string() == "10.99.3.50"));
}

#[test]
fn rules_and_routes_of_other_fibs_reach_the_running_stack() {
    use runtime::control::proto::RuleSpec;
    let (mut client, mut server, mut capp, mut sapp, path) = setup("rules");
    let engines = (&mut client, &mut server);
    ask_while_running(engines, (&mut capp, &mut sapp), &path, move |path| {
        let rule = |from: Option<&str>, iface: Option<&str>, fib| RuleSpec {
            priority: 100,
            from: from.map(String::from),
            iface: iface.map(String::from),
            mark: None,
            fib,
        };
        let by_source = rule(Some("10.99.3.0/24"), None, 2);
        assert_eq!(
            done(ask(
                &path,
                Request::RuleAdd {
                    rule: by_source.clone()
                }
            )),
            "added rule 100 setfib 2 from 10.99.3.0/24"
        );
        assert_eq!(
            engine_error(ask(
                &path,
                Request::RuleAdd {
                    rule: by_source.clone()
                }
            )),
            ErrorKind::Exists
        );
        done(ask(
            &path,
            Request::RuleAdd {
                rule: RuleSpec {
                    priority: 50,
                    ..rule(None, Some("mem2"), 1)
                },
            },
        ));
        for bad in [
            rule(Some("10.99.3.0/24"), Some("mem2"), 1),
            rule(None, None, 1),
            rule(Some("10.99.3.0/33"), None, 1),
            rule(Some("10.99.3.0/24"), None, 64),
        ] {
            assert_eq!(
                engine_error(ask(&path, Request::RuleAdd { rule: bad })),
                ErrorKind::Invalid
            );
        }
        assert_eq!(
            engine_error(ask(
                &path,
                Request::RuleAdd {
                    rule: rule(None, Some("eth9"), 1)
                }
            )),
            ErrorKind::NotFound
        );
        // Listed in the order tried, with the FIBs they made.
        let Ok(Reply::Rules { rules, fibs }) = ask(&path, Request::Rules) else {
            panic!("rules");
        };
        assert_eq!(fibs, 3);
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0].iface.as_deref(), Some("mem2"));
        assert_eq!(rules[1], by_source);

        // By socket mark: listed as asked; mark 0 refused.
        let by_mark = RuleSpec {
            priority: 10,
            mark: Some(9),
            ..rule(None, None, 3)
        };
        assert_eq!(
            done(ask(
                &path,
                Request::RuleAdd {
                    rule: by_mark.clone()
                }
            )),
            "added rule 10 setfib 3 mark 9"
        );
        assert_eq!(
            engine_error(ask(
                &path,
                Request::RuleAdd {
                    rule: RuleSpec {
                        mark: Some(0),
                        ..by_mark.clone()
                    }
                }
            )),
            ErrorKind::Invalid
        );
        assert_eq!(
            engine_error(ask(
                &path,
                Request::RuleAdd {
                    rule: RuleSpec {
                        from: Some("10.99.3.0/24".into()),
                        ..by_mark.clone()
                    }
                }
            )),
            ErrorKind::Invalid
        );
        let Ok(Reply::Rules { rules, .. }) = ask(&path, Request::Rules) else {
            panic!("rules");
        };
        assert_eq!(rules[0], by_mark);

        // A route in FIB 2, listed there and not in the main table.
        let route = RouteSpec {
            dest: "192.0.2.0/24".into(),
            gateway: Some("10.99.3.1".parse().unwrap()),
            iface: None,
        };
        done(ask(
            &path,
            Request::RouteAdd {
                fib: 2,
                route: route.clone(),
            },
        ));
        let routes_of = |fib| match ask(&path, Request::Routes { fib }) {
            Ok(Reply::Routes { routes, .. }) => routes,
            other => panic!("routes of fib {fib}: {other:?}"),
        };
        assert!(routes_of(2).iter().any(|r| r.dest == "192.0.2.0/24"));
        assert!(!routes_of(0).iter().any(|r| r.dest == "192.0.2.0/24"));
        done(ask(
            &path,
            Request::RouteChange {
                fib: 2,
                route: RouteSpec {
                    gateway: Some("10.99.3.254".parse().unwrap()),
                    ..route
                },
            },
        ));
        assert_eq!(
            engine_error(ask(&path, Request::Routes { fib: 9 })),
            ErrorKind::NotFound
        );
        assert_eq!(
            engine_error(ask(&path, Request::Routes { fib: 70_000 })),
            ErrorKind::NotFound
        );
        // One rule deleted, twice.
        let del = Request::RuleDelete {
            rule: RuleSpec {
                priority: 50,
                ..rule(None, Some("mem2"), 1)
            },
        };
        done(ask(&path, del.clone()));
        assert_eq!(engine_error(ask(&path, del)), ErrorKind::NotFound);
    });
    // What the engine's stack now has: the source rule picks FIB 2, whose
    // route goes through the changed gateway.
    let s = &server.stack;
    assert_eq!(s.rules().len(), 2);
    assert_eq!(s.fib_of_source("10.99.3.2".parse().unwrap(), 0), 2);
    assert_eq!(s.fib_of_source("10.99.3.2".parse().unwrap(), 9), 3);
    assert_eq!(s.fib_of_source("192.0.2.9".parse().unwrap(), 0), 0);
    let r = s
        .fib(2)
        .unwrap()
        .iter()
        .find(|r| r.dest.to_string() == "192.0.2.0/24")
        .unwrap();
    assert_eq!(r.gateway, Some("10.99.3.254".parse().unwrap()));
}

/// A frame's TCP flags and ports, when it is IPv4 TCP.
fn tcp_of(frame: &[u8]) -> Option<(u16, u16, u8, usize)> {
    if frame.len() < 54 || frame[12..14] != [0x08, 0x00] || frame[23] != 6 {
        return None;
    }
    let ihl = usize::from(frame[14] & 15) * 4;
    let tcp = &frame[14 + ihl..];
    let payload = tcp.len() - usize::from(tcp[12] >> 4) * 4;
    Some((
        u16::from_be_bytes([tcp[0], tcp[1]]),
        u16::from_be_bytes([tcp[2], tcp[3]]),
        tcp[13],
        payload,
    ))
}

#[test]
fn a_live_capture_sees_both_ways_through_its_filter_and_ends_with_its_reader() {
    use runtime::control::capture::READER_TIMEOUT;
    use runtime::control::proto::hex_decode;
    let (mut client, mut server, mut capp, mut sapp, path) = setup("capture");
    capp.start.store(false, Ordering::Release);
    let start = Arc::clone(&capp.start);
    let engines = (&mut client, &mut server);
    ask_while_running(engines, (&mut capp, &mut sapp), &path, move |path| {
        let capture = |iface: &str, filter: &str| {
            ask(
                &path,
                Request::CaptureStart {
                    iface: iface.into(),
                    filter: filter.into(),
                    snaplen: 0,
                },
            )
        };
        assert_eq!(
            engine_error(capture("0", "tcp portt 80")),
            ErrorKind::Invalid
        );
        assert_eq!(engine_error(capture("3", "")), ErrorKind::NotFound);
        assert_eq!(engine_error(capture("eth9", "")), ErrorKind::NotFound);
        let Ok(Reply::CaptureStarted { port, id, .. }) = capture("mem2", "tcp port 80") else {
            panic!("the capture did not start");
        };
        assert_eq!(port, 0);
        // One capture per port.
        assert_eq!(engine_error(capture("0", "")), ErrorKind::Exists);
        start.store(true, Ordering::Release);
        // Read until the data came in and its ACK went out.
        let mut frames = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut conn = client::Connection::open(&path, Duration::from_secs(5)).unwrap();
        loop {
            let Ok(Reply::Captured {
                frames: got,
                dropped,
                ..
            }) = conn.ask(&Request::CaptureRead { port, id })
            else {
                panic!("read");
            };
            assert_eq!(dropped, 0);
            frames.extend(got);
            let data_in = frames.iter().any(|f| {
                !f.outgoing
                    && tcp_of(&hex_decode(&f.data).unwrap())
                        .is_some_and(|(_, d, _, n)| d == 80 && n == 5)
            });
            if data_in && frames.iter().filter(|f| f.outgoing).count() >= 2 {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{frames:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
        let decoded: Vec<_> = frames
            .iter()
            .map(|f| {
                let d = hex_decode(&f.data).unwrap();
                assert_eq!(d.len(), f.len as usize, "whole frames");
                (f.outgoing, tcp_of(&d).expect("only TCP passed the filter"))
            })
            .collect();
        // The SYN in, the SYN-ACK out (port 80 either way).
        assert!(decoded
            .iter()
            .any(|&(out, (_, d, fl, _))| !out && d == 80 && fl & 0x12 == 0x02));
        assert!(decoded
            .iter()
            .any(|&(out, (s, _, fl, _))| out && s == 80 && fl & 0x12 == 0x12));
        // Stopped: its number is gone.
        assert!(matches!(
            ask(&path, Request::CaptureStop { port, id }),
            Ok(Reply::Captured { .. })
        ));
        assert_eq!(
            engine_error(ask(&path, Request::CaptureRead { port, id })),
            ErrorKind::NotFound
        );
        // A capture nobody reads ends by itself, and the port can
        // be captured again.
        let Ok(Reply::CaptureStarted { id, .. }) = capture("0", "") else {
            panic!("a second capture");
        };
        std::thread::sleep(READER_TIMEOUT + Duration::from_millis(300));
        assert_eq!(
            engine_error(ask(&path, Request::CaptureRead { port, id })),
            ErrorKind::NotFound
        );
        assert!(matches!(
            capture("0", "arp"),
            Ok(Reply::CaptureStarted { .. })
        ));
    });
    // The connection ran through the captured port.
    assert_eq!(sapp.accepted.len(), 1);
}

#[test]
fn a_port_taken_down_drops_and_counts_until_it_is_up() {
    use runtime::control::proto::InterfaceChange;
    let (mut client, mut server, mut capp, mut sapp, path) = setup("down");
    capp.start.store(false, Ordering::Release);
    let start = Arc::clone(&capp.start);
    let engines = (&mut client, &mut server);
    ask_while_running(engines, (&mut capp, &mut sapp), &path, move |path| {
        let set = |iface: &str, up| {
            ask(
                &path,
                Request::InterfaceSet {
                    iface: iface.into(),
                    change: InterfaceChange::Up { up },
                },
            )
        };
        assert!(done(set("mem2", false)).contains("down"));
        let Ok(Reply::Interfaces { interfaces }) = ask(&path, Request::Interfaces) else {
            panic!("interfaces");
        };
        assert!(!interfaces[0].up && !interfaces[0].flags.contains(&"UP".to_string()));
        assert_eq!(engine_error(set("eth9", false)), ErrorKind::NotFound);
        // The client's SYNs reach the port and go no further.
        start.store(true, Ordering::Release);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while counter(&path, "engine_rx_drop_port_down") == 0 {
            assert!(std::time::Instant::now() < deadline, "nothing dropped");
            std::thread::sleep(Duration::from_millis(10));
        }
        let Ok(Reply::Sockets { sockets }) = ask(&path, Request::Sockets) else {
            panic!("sockets");
        };
        assert!(!sockets
            .iter()
            .any(|s| s.state == "ESTABLISHED" || s.state == "SYN_RCVD"));
        // Up: the SYN sent again is answered, the data arrives.
        assert_eq!(done(set("mem2", true)), "mem2: up");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let Ok(Reply::Sockets { sockets }) = ask(&path, Request::Sockets) else {
                panic!("sockets");
            };
            if sockets
                .iter()
                .any(|s| s.state == "ESTABLISHED" && s.recv_q == 5)
            {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{sockets:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    assert_eq!(sapp.accepted.len(), 1);
    assert!(server.counters().rx_drop_port_down > 0);
}

#[test]
fn a_vlan_interface_made_live_carries_a_connection() {
    let (mut client, mut server, mut capp, mut sapp, path) = setup("vlan");
    // The client's side of VLAN 40, from the start.
    client
        .stack
        .add_vlan(
            stack::IfaceId(0),
            40,
            &InterfaceConfig::new(
                "mem1.40",
                [2, 0, 0, 0, 3, 1],
                Ipv4Addr::new(10, 99, 40, 1),
                24,
            ),
        )
        .unwrap();
    capp.start.store(false, Ordering::Release);
    capp.dst = "10.99.40.2:80".parse().unwrap();
    let start = Arc::clone(&capp.start);
    let engines = (&mut client, &mut server);
    ask_while_running(engines, (&mut capp, &mut sapp), &path, move |path| {
        let create = |name: &str, port: &str, vid, addr: &str| {
            ask(
                &path,
                Request::VlanCreate {
                    name: name.into(),
                    port: port.into(),
                    vid,
                    addr: addr.parse().unwrap(),
                    prefix_len: 24,
                    gateway: None,
                    mtu: None,
                    addr6: None,
                    prefix_len6: None,
                    gateway6: None,
                },
            )
        };
        assert_eq!(
            done(create("mem2.40", "mem2", 40, "10.99.40.2")),
            "mem2.40: vlan 40 on mem2, inet 10.99.40.2/24"
        );
        assert_eq!(
            engine_error(create("mem2.40", "mem2", 41, "10.99.41.2")),
            ErrorKind::Exists
        );
        assert_eq!(
            engine_error(create("other", "mem2", 40, "10.99.41.2")),
            ErrorKind::Exists
        );
        assert_eq!(
            engine_error(create("x", "mem2", 4095, "10.99.42.2")),
            ErrorKind::Invalid
        );
        assert_eq!(
            engine_error(create("y", "mem2.40", 43, "10.99.43.2")),
            ErrorKind::Invalid
        );
        assert_eq!(
            engine_error(create("z", "eth9", 44, "10.99.44.2")),
            ErrorKind::NotFound
        );
        let Ok(Reply::Interfaces { interfaces }) = ask(&path, Request::Interfaces) else {
            panic!("interfaces");
        };
        let v = interfaces.iter().find(|i| i.name == "mem2.40").unwrap();
        assert_eq!(v.inet[0].addr.to_string(), "10.99.40.2");
        let of = v.vlan.as_ref().unwrap();
        assert_eq!((of.vid, of.port.as_str()), (40, "mem2"));
        // A connection to its address, over tagged frames.
        start.store(true, Ordering::Release);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let Ok(Reply::Sockets { sockets }) = ask(&path, Request::Sockets) else {
                panic!("sockets");
            };
            if sockets
                .iter()
                .any(|s| s.state == "ESTABLISHED" && s.recv_q == 5 && s.local == "10.99.40.2:80")
            {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{sockets:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(counter(&path, "port0_vlan40_rx_frames") >= 3);

        let set = |iface: &str, change| {
            ask(
                &path,
                Request::InterfaceSet {
                    iface: iface.into(),
                    change,
                },
            )
        };
        let listed = |name: &str| {
            let Ok(Reply::Interfaces { interfaces }) = ask(&path, Request::Interfaces) else {
                panic!("interfaces");
            };
            interfaces.into_iter().find(|i| i.name == name)
        };
        // Down alone, then up: the listing says so; the port stays up.
        assert!(done(set("mem2.40", InterfaceChange::Up { up: false })).contains("down"));
        assert!(!listed("mem2.40").unwrap().up);
        assert!(listed("mem2").unwrap().up);
        done(set("mem2.40", InterfaceChange::Up { up: true }));
        assert!(listed("mem2.40").unwrap().up);
        // The first IPv6 address turns IPv6 on (a link-local one
        // beside it).
        done(set(
            "mem2.40",
            InterfaceChange::AddAddr {
                addr: "fd99:40::2".parse().unwrap(),
                prefix_len: Some(64),
            },
        ));
        let v6: Vec<String> = listed("mem2.40")
            .unwrap()
            .inet6
            .iter()
            .map(|a| a.addr.to_string())
            .collect();
        assert!(
            v6.len() == 2 && v6[0].starts_with("fe80::") && v6[1] == "fd99:40::2",
            "{v6:?}"
        );
        // Destroyed: gone from the listing and from the name; a
        // port is not destroyed.
        assert!(done(set("mem2.40", InterfaceChange::Destroy)).contains("destroyed"));
        assert!(listed("mem2.40").is_none());
        assert_eq!(
            engine_error(set("mem2.40", InterfaceChange::Destroy)),
            ErrorKind::NotFound
        );
        assert_eq!(
            engine_error(set("mem2", InterfaceChange::Destroy)),
            ErrorKind::Unsupported
        );
        // Made again, with IPv6 from the start.
        let said = done(ask(
            &path,
            Request::VlanCreate {
                name: "mem2.40".into(),
                port: "mem2".into(),
                vid: 40,
                addr: "10.99.40.2".parse().unwrap(),
                prefix_len: 24,
                gateway: None,
                mtu: None,
                addr6: Some("fd99:40::2".parse().unwrap()),
                prefix_len6: None,
                gateway6: None,
            },
        ));
        assert!(said.contains("inet6 fd99:40::2/64"), "{said}");
        assert_eq!(listed("mem2.40").unwrap().inet6.len(), 2);
    });
    assert_eq!(sapp.accepted.len(), 1);
}

#[test]
fn an_engine_without_an_exception_path_says_so() {
    let (mut client, mut server, mut capp, mut sapp, path) = setup("kni");
    let engines = (&mut client, &mut server);
    ask_while_running(engines, (&mut capp, &mut sapp), &path, move |path| {
        let Ok(Reply::Kni(k)) = ask(&path, Request::Kni) else {
            panic!("kni");
        };
        assert!(!k.enabled && k.counters.is_empty());
        let set = |a: &str| ask(&path, Request::KniSetAction { action: a.into() });
        assert_eq!(engine_error(set("alltokni")), ErrorKind::Unsupported);
        assert_eq!(engine_error(set("everything")), ErrorKind::Invalid);
    });
}
