//! A veth pair whose inner end is in a network namespace of its own, and a
//! kernel TCP client there that sends a known stream to an engine on the
//! outer end: for the tests that show where received data lives.
//! Root only; everything made is removed on drop.

#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant as WallClock};

use link::{Link, PacketBuffer};
use runtime::{AppContext, Application, Engine, EngineConfig};
use stack::{InterfaceConfig, SocketError, SocketHandle, Stack, StackConfig};

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

pub fn run(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `outer` in this namespace (no address: the engine takes it), `inner` in
/// namespace `ns` with 10.99.y.1/24, one queue each way, the inner end's
/// transmit offloads off (full checksums, frames no larger than the MTU).
pub struct Veth {
    pub outer: String,
    pub inner: String,
    pub ns: String,
    pub y: u8,
}

impl Veth {
    pub fn new(tag: &str) -> Veth {
        let pid = std::process::id();
        let v = Veth {
            outer: format!("uz{tag}A{pid}"),
            inner: format!("uz{tag}B{pid}"),
            ns: format!("ustk-zc{tag}{pid}"),
            y: 150 + (pid % 50) as u8,
        };
        run(&["ip", "netns", "add", &v.ns]);
        run(&[
            "ip",
            "link",
            "add",
            &v.outer,
            "numtxqueues",
            "1",
            "numrxqueues",
            "1",
            "type",
            "veth",
            "peer",
            "name",
            &v.inner,
            "numtxqueues",
            "1",
            "numrxqueues",
            "1",
        ]);
        let _ = std::fs::write(
            format!("/proc/sys/net/ipv6/conf/{}/disable_ipv6", v.outer),
            "1",
        );
        run(&["ip", "link", "set", &v.inner, "netns", &v.ns]);
        let addr = format!("10.99.{}.1/24", v.y);
        run(&["ip", "-n", &v.ns, "addr", "add", &addr, "dev", &v.inner]);
        run(&[
            "ip", "netns", "exec", &v.ns, "ethtool", "-K", &v.inner, "tx", "off",
        ]);
        run(&["ip", "-n", &v.ns, "link", "set", &v.inner, "up"]);
        run(&["ip", "link", "set", &v.outer, "up"]);
        v
    }

    /// The engine's address on the outer end.
    pub fn our_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 99, self.y, 2)
    }

    /// Starts a kernel client in the namespace that connects to `port`,
    /// sends `len` bytes of [`pattern`], then reads until the engine closes.
    pub fn send_stream(&self, port: u16, len: usize) -> Child {
        let script = "import socket,sys\n\
            s=socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=30)\n\
            n=int(sys.argv[3])\n\
            s.sendall(bytes((i*7+i//251)%256 for i in range(n)))\n\
            while s.recv(4096):\n    pass\n";
        Command::new("ip")
            .args(["netns", "exec", &self.ns, "python3", "-c", script])
            .arg(self.our_ip().to_string())
            .arg(port.to_string())
            .arg(len.to_string())
            .stdin(Stdio::null())
            .spawn()
            .expect("python3 in the namespace")
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        for args in [
            vec!["ip", "netns", "del", &self.ns],
            vec!["ip", "link", "del", &self.outer],
        ] {
            let _ = Command::new(args[0])
                .args(&args[1..])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// What the kernel client sends.
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i * 7 + i / 251) % 256) as u8).collect()
}

/// A stack on the link's interface with the engine's address.
pub fn stack_for<L: Link>(link: &L, veth: &Veth) -> Stack {
    let info = link.info();
    let mut s = Stack::new(StackConfig::default());
    s.add_interface(&InterfaceConfig {
        mtu: info.mtu,
        ..InterfaceConfig::new(info.name.clone(), info.mac, veth.our_ip(), 24)
    })
    .unwrap();
    s
}

pub fn engine_over<L: Link>(link: L, veth: &Veth) -> Engine<L> {
    let stack = stack_for(&link, veth);
    Engine::new(stack, vec![link], EngineConfig::default())
}

struct Idle;

impl Application for Idle {
    fn poll(&mut self, _: &mut AppContext<'_>) -> bool {
        false
    }
}

/// Turns the engine until `done` says so, failing after `secs` seconds.
pub fn turn_until<L: Link>(
    engine: &mut Engine<L>,
    secs: u64,
    what: &str,
    mut done: impl FnMut(&mut Engine<L>) -> bool,
) {
    let end = WallClock::now() + Duration::from_secs(secs);
    while !done(engine) {
        assert!(WallClock::now() < end, "timed out waiting for {what}");
        if !engine.turn(&mut Idle) {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// The kernel client connects to a listener of the engine and sends
/// `len` bytes; returns the accepted socket once all of them wait in it,
/// and the client.
pub fn receive_stream<L: Link>(
    engine: &mut Engine<L>,
    veth: &Veth,
    len: usize,
) -> (SocketHandle, Child) {
    let port = 5001;
    let l = engine.with_context(|ctx| {
        ctx.stack
            .tcp_listen(SocketAddr::new(IpAddr::V4(veth.our_ip()), port), 4)
            .unwrap()
    });
    engine.announce();
    let client = veth.send_stream(port, len);
    let mut conn = None;
    turn_until(engine, 20, "the stream", |e| {
        if conn.is_none() {
            conn = e.with_context(|ctx| ctx.stack.tcp_accept(l).ok().map(|(h, _)| h));
        }
        conn.is_some_and(|h| e.stack.tcp_recv_queued(h) == Ok(len))
    });
    (conn.unwrap(), client)
}

/// Reads the socket's data in place: returns it and the address range of
/// each run read.
pub fn read_in_place<L: Link>(
    engine: &mut Engine<L>,
    h: SocketHandle,
) -> (Vec<u8>, Vec<(usize, usize)>) {
    let mut data = Vec::new();
    let mut runs = Vec::new();
    loop {
        let r = engine.with_context(|ctx| {
            ctx.stack.tcp_recv_zero_copy(
                ctx.now,
                h,
                |bytes| {
                    runs.push((bytes.as_ptr() as usize, bytes.len()));
                    data.extend_from_slice(bytes);
                    bytes.len()
                },
                ctx.sink,
            )
        });
        match r {
            Ok(0) => panic!("the stream ended early"),
            Ok(_) => {}
            Err(SocketError::WouldBlock) => return (data, runs),
            Err(e) => panic!("read: {e:?}"),
        }
    }
}

/// After [`receive_stream`] of `len` bytes: checks that most segments
/// were held in the link's buffers, not copied, and returns the address
/// range of each buffer the socket holds (`check` sees each first, with
/// its port), one per segment held.
pub fn held_buffers<L: Link>(
    engine: &Engine<L>,
    len: usize,
    mut check: impl FnMut(usize, &L::Buf),
) -> Vec<(usize, usize)> {
    let c = engine.stack.counters();
    assert!(
        c.tcp_rx_zero_copy_segments >= (len / 1448) as u64 / 2,
        "most segments held in place: {} held, {} copied",
        c.tcp_rx_zero_copy_segments,
        c.tcp_rx_copied_segments
    );
    let mut held = Vec::new();
    engine.visit_lent(|port, b| {
        check(port, b);
        held.push((b.data().as_ptr() as usize, b.data().len()));
    });
    assert_eq!(held.len() as u64, c.tcp_rx_zero_copy_segments);
    held
}

/// Reads the `len`-byte stream of `h` in place and checks it whole and in
/// order, each held buffer read where it lies (one run inside each of
/// `held`); then every buffer goes back to the link on the next turns.
pub fn read_held_in_place<L: Link>(
    engine: &mut Engine<L>,
    h: SocketHandle,
    len: usize,
    held: &[(usize, usize)],
) {
    let (data, runs) = read_in_place(engine, h);
    assert_eq!(data, pattern(len), "the stream, whole and in order");
    let in_held = runs
        .iter()
        .filter(|&&(p, n)| held.iter().any(|&(s, l)| p >= s && p + n <= s + l))
        .count();
    assert_eq!(in_held, held.len(), "one run in each held buffer");
    turn_until(engine, 5, "the buffers back", |e| e.frames_lent() == 0);
    assert_eq!(engine.stack.counters().tcp_rx_frames_held, 0);
}

/// Closes `h` and waits for the kernel client to finish, successfully.
pub fn close_for_client<L: Link>(engine: &mut Engine<L>, h: SocketHandle, mut client: Child) {
    engine.with_context(|ctx| ctx.stack.tcp_close(ctx.now, h, ctx.sink).unwrap());
    turn_until(engine, 10, "the client to finish", |_| {
        client.try_wait().unwrap().is_some()
    });
    assert!(client.wait().unwrap().success(), "the kernel client failed");
}
