//! Two engines joined by an in-memory link pair, driven turn by turn: the
//! loop, the transmit queues and the fault layer, without devices.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use link::{FaultConfig, FaultLink, Link};
use runtime::{AppContext, Application, Engine, EngineConfig};
use stack::{SocketHandle, Stack};

mod bulk;
mod common;
use bulk::{pattern, BulkReceiver, BulkSender};
use common::{engines, pair, stack, CLIENT_MAC, SERVER_MAC};

struct Echo(SocketHandle);

impl Application for Echo {
    fn poll(&mut self, ctx: &mut AppContext<'_>) -> bool {
        let mut buf = [0u8; 9000];
        let mut work = false;
        while let Ok(got) = ctx.stack.udp_recv_from(self.0, &mut buf) {
            work = true;
            ctx.stack
                .udp_send_to(
                    ctx.now,
                    self.0,
                    got.meta.src,
                    None,
                    &buf[..got.len],
                    ctx.sink,
                )
                .unwrap();
        }
        work
    }
}

/// Sends `count` numbered datagrams, one per turn, and records the echoes.
struct Client {
    sock: SocketHandle,
    sent: u32,
    count: u32,
    size: usize,
    received: Vec<u32>,
}

impl Application for Client {
    fn poll(&mut self, ctx: &mut AppContext<'_>) -> bool {
        let mut work = false;
        if self.sent < self.count {
            let mut msg = vec![0xabu8; self.size];
            msg[..4].copy_from_slice(&self.sent.to_be_bytes());
            let dst = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 99, 2, 2)), 7);
            if ctx
                .stack
                .udp_send_to(ctx.now, self.sock, dst, None, &msg, ctx.sink)
                .is_ok()
            {
                self.sent += 1;
            }
            work = true;
        }
        let mut buf = [0u8; 9000];
        while let Ok(got) = ctx.stack.udp_recv_from(self.sock, &mut buf) {
            assert_eq!(got.len, self.size);
            assert!(buf[4..got.len].iter().all(|&b| b == 0xab), "payload intact");
            self.received
                .push(u32::from_be_bytes(buf[..4].try_into().unwrap()));
            work = true;
        }
        work
    }
}

fn run_echo<L1: Link, L2: Link>(
    client: &mut Engine<L1>,
    server: &mut Engine<L2>,
    app: &mut Client,
    turns: usize,
) {
    let mut echo = Echo(server.stack.udp_bind("0.0.0.0:7".parse().unwrap()).unwrap());
    client.announce();
    server.announce();
    for _ in 0..turns {
        client.turn(app);
        server.turn(&mut echo);
        if app.received.len() as u32 >= app.count {
            break;
        }
    }
}

#[test]
fn udp_echo_through_two_engines() {
    let (la, lb) = pair();
    let cfg = EngineConfig {
        pkt_tx_delay: std::time::Duration::ZERO,
        ..EngineConfig::default()
    };
    let (mut client, mut server) = engines(la, lb, cfg);
    let sock = client.stack.udp_bind("0.0.0.0:0".parse().unwrap()).unwrap();
    let mut app = Client {
        sock,
        sent: 0,
        count: 200,
        size: 3000,
        received: Vec::new(),
    };
    run_echo(&mut client, &mut server, &mut app, 100_000);
    assert_eq!(
        app.received.len(),
        200,
        "every datagram echoed: {:?}",
        client.stack.counters()
    );
    assert_eq!(
        app.received,
        (0..200).collect::<Vec<_>>(),
        "in order on a clean link"
    );
    assert_eq!(client.counters().tx_drop_ring_full, 0);
    assert!(client.counters().tx_bursts > 0);
    let stats = client.link_stats();
    assert!(
        stats[0].tx_frames >= 400,
        "3000-byte datagrams leave in fragments"
    );
}

#[test]
fn udp_echo_over_a_lossy_link_loses_about_what_the_link_drops() {
    let (la, lb) = pair();
    let faults = FaultConfig {
        loss: 0.05,
        duplicate: 0.05,
        reorder: 0.05,
        corrupt: 0.02,
        seed: 7,
        ..FaultConfig::default()
    };
    let la = FaultLink::new(la, faults);
    let cfg = EngineConfig {
        pkt_tx_delay: std::time::Duration::ZERO,
        ..EngineConfig::default()
    };
    let (mut client, mut server) = engines(la, lb, cfg);
    let sock = client.stack.udp_bind("0.0.0.0:0".parse().unwrap()).unwrap();
    let mut app = Client {
        sock,
        sent: 0,
        count: 1000,
        size: 100,
        received: Vec::new(),
    };
    run_echo(&mut client, &mut server, &mut app, 20_000);
    for _ in 0..2000 {
        client.turn(&mut app);
    }
    let mut unique = app.received.clone();
    unique.sort_unstable();
    unique.dedup();
    // Each datagram crosses the faulty link twice: about 90% survive loss
    // and corruption, duplicates come back more than once.
    assert!(
        (800..=990).contains(&unique.len()),
        "{} of 1000 answered",
        unique.len()
    );
    let f = client.ports().next().unwrap().fault_stats();
    assert!(f.tx.lost > 0 && f.rx.lost > 0 && f.tx.duplicated > 0 && f.rx.corrupted > 0);
    let c = client.stack.counters();
    let s = server.stack.counters();
    assert!(
        c.rx_drops() + s.rx_drops() > 0,
        "corrupted frames are caught by checksums and counted"
    );
}

/// A shm link pair (a link that queues frames itself, see
/// `Link::tx_push`), with the engines' MACs.
fn shm_pair(tag: &str) -> (link::ShmLink, link::ShmLink) {
    let path = std::path::PathBuf::from(format!(
        "/dev/shm/ustack-runtime-test-{}-{tag}",
        std::process::id()
    ));
    let mut a = link::ShmLink::create(&path, &link::ShmConfig::new(1500, 256)).unwrap();
    let mut b = link::ShmLink::open(&path).unwrap();
    a.unlink().unwrap();
    a.set_mac(CLIENT_MAC);
    b.set_mac(SERVER_MAC);
    (a, b)
}

/// [`Client`]'s datagrams echoed between two engines on a virtual clock
/// (1 µs a turn, so a run does not depend on the machine's speed); returns
/// what came back and the client link's counters.
fn echo_on_virtual_clock<L: Link>(la: L, lb: L, delay_us: u64) -> (Vec<u32>, link::LinkStats) {
    echo_with_hook(la, lb, delay_us, None)
}

/// [`echo_on_virtual_clock`] with `hook` (when given) in front of the
/// server engine's stack.
fn echo_with_hook<L: Link>(
    la: L,
    lb: L,
    delay_us: u64,
    hook: Option<Box<dyn runtime::engine::FrameHook>>,
) -> (Vec<u32>, link::LinkStats) {
    let cfg = EngineConfig {
        pkt_tx_delay: std::time::Duration::from_micros(delay_us),
        ..EngineConfig::default()
    };
    let (mut client, mut server) = engines(la, lb, cfg);
    server.set_frame_hook(hook);
    let sock = client.stack.udp_bind("0.0.0.0:0".parse().unwrap()).unwrap();
    let mut app = Client {
        sock,
        sent: 0,
        count: 100,
        size: 3000,
        received: Vec::new(),
    };
    let mut echo = Echo(server.stack.udp_bind("0.0.0.0:7".parse().unwrap()).unwrap());
    client.announce();
    server.announce();
    for t in 0..20_000u64 {
        client.turn_at(stack::Instant::from_micros(1_000_000 + 2 * t), &mut app);
        server.turn_at(stack::Instant::from_micros(1_000_001 + 2 * t), &mut echo);
    }
    assert_eq!(client.counters().tx_drop_ring_full, 0);
    let stats = client.link_stats().remove(0);
    assert_eq!(stats.ring_errors, 0);
    (app.received, stats)
}

#[test]
fn a_link_that_queues_frames_itself_is_driven_like_one_that_does_not() {
    for (tag, delay) in [("now", 0), ("delayed", 200)] {
        let (la, lb) = shm_pair(tag);
        let (got, shm) = echo_on_virtual_clock(la, lb, delay);
        let (ma, mb) = pair();
        let (want, mem) = echo_on_virtual_clock(ma, mb, delay);
        assert_eq!(got, want, "the same datagrams echoed ({tag})");
        assert_eq!(
            (shm.tx_frames, shm.tx_bytes, shm.rx_frames),
            (mem.tx_frames, mem.tx_bytes, mem.rx_frames),
            "the same frames ({tag})"
        );
        if delay == 0 {
            assert_eq!(got, (0..100).collect::<Vec<_>>(), "all, in order");
        } else {
            // Those sent while ARP waits for the delayed flush are lost.
            assert!(got.len() >= 10 && got.windows(2).all(|w| w[0] < w[1]));
        }
    }
}

#[test]
fn frames_one_at_a_time_pass_the_frame_hook_like_a_burst() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let seen = Arc::new(AtomicU64::new(0));
    let hook = |seen: &Arc<AtomicU64>| -> Box<dyn runtime::engine::FrameHook> {
        let seen = seen.clone();
        Box::new(move |_port: u16, _buf: &mut [u8], _len: usize| {
            seen.fetch_add(1, Ordering::Relaxed);
            runtime::engine::HookVerdict::Pass
        })
    };
    let (la, lb) = shm_pair("hook");
    let (got, _) = echo_with_hook(la, lb, 0, Some(hook(&seen)));
    let shm_seen = seen.swap(0, Ordering::Relaxed);
    let (ma, mb) = pair();
    let (want, mem) = echo_with_hook(ma, mb, 0, Some(hook(&seen)));
    assert_eq!(got, want, "the same datagrams echoed through the hook");
    assert_eq!(got, (0..100).collect::<Vec<_>>());
    assert_eq!(shm_seen, seen.load(Ordering::Relaxed));
    // Every frame the server received (the client's sent) passed the hook.
    assert_eq!(shm_seen, mem.tx_frames);
    // Without the hook the shm engines take the one-port turn, which skips
    // the general turn's loops and tests: the same run, frame for frame.
    let (la, lb) = shm_pair("nohook");
    let (plain, plain_shm) = echo_with_hook(la, lb, 0, None);
    assert_eq!(plain, got);
    assert_eq!(
        (plain_shm.tx_frames, plain_shm.tx_bytes, plain_shm.rx_frames),
        (mem.tx_frames, mem.tx_bytes, mem.rx_frames)
    );
}

/// An engine tells its stack which checksums each link takes care of: the
/// shm pair (frames cross only memory) finishes L4 sums and vouches for
/// IPv4 header sums; the same link under the fault injector, which flips
/// bits, vouches for nothing; an in-memory pair does neither.
#[test]
fn an_engine_tells_its_stack_which_checksums_a_link_takes_care_of() {
    let (sa, sb) = shm_pair("vouch");
    let shm = Engine::new(stack(1, CLIENT_MAC), vec![sa], EngineConfig::default());
    let faulty = Engine::new(
        stack(2, SERVER_MAC),
        vec![FaultLink::new(sb, FaultConfig::default())],
        EngineConfig::default(),
    );
    let (ma, _mb) = pair();
    let mem = Engine::new(
        stack(3, [2, 0, 0, 0, 2, 3]),
        vec![ma],
        EngineConfig::default(),
    );
    let flags = |s: &Stack| {
        let i = s.interface(stack::IfaceId(0)).unwrap();
        (i.tx_checksum_offload, i.rx_ip_checksum_offload)
    };
    assert_eq!(flags(&shm.stack), (true, true));
    assert_eq!(flags(&faulty.stack), (false, false));
    assert_eq!(flags(&mem.stack), (false, false));
}

/// A window wider than a burst sends more frames in one turn than a
/// burst holds: each full burst leaves before the next frame is lent, and
/// every byte arrives, in order.
#[test]
fn a_turn_that_sends_more_than_a_burst_flushes_each_full_one_first() {
    let (la, lb) = shm_pair("bulk");
    let (mut client, mut server) = engines(la, lb, EngineConfig::default());
    let listener = server
        .stack
        .tcp_listen("10.99.2.2:9000".parse().unwrap(), 8)
        .unwrap();
    let to: SocketAddr = "10.99.2.2:9000".parse().unwrap();
    let conn =
        client.with_context(|ctx| ctx.stack.tcp_connect(ctx.now, to, None, ctx.sink).unwrap());
    let total = 4 << 20;
    let mut sender = BulkSender::new(conn, total, 16_384);
    let mut receiver = BulkReceiver::new(listener);
    client.announce();
    server.announce();
    let mut most_in_a_turn = 0;
    for t in 0..200_000u64 {
        let before = client.link_stats()[0].tx_frames;
        client.turn_at(stack::Instant::from_micros(1_000_000 + 20 * t), &mut sender);
        most_in_a_turn = most_in_a_turn.max(client.link_stats()[0].tx_frames - before);
        server.turn_at(
            stack::Instant::from_micros(1_000_010 + 20 * t),
            &mut receiver,
        );
        if receiver.got.len() == total {
            break;
        }
    }
    assert_eq!(receiver.got.len(), total, "every byte arrived");
    assert!(
        receiver
            .got
            .iter()
            .enumerate()
            .all(|(i, &b)| b == pattern(i)),
        "in order, intact"
    );
    assert!(
        most_in_a_turn > link::MAX_BURST as u64,
        "some turn sent more than a burst: {most_in_a_turn}"
    );
    let c = client.counters();
    assert_eq!((c.tx_drop_ring_full, c.tx_drop_oversize), (0, 0));
    assert_eq!(client.link_stats()[0].ring_errors, 0);
}

/// An application with nothing to do.
struct Quiet;

impl Application for Quiet {
    fn poll(&mut self, _ctx: &mut AppContext<'_>) -> bool {
        false
    }
}

/// A turn at a reading of the monotonic clock (a busy wait loop's, handed
/// on instead of a second read) runs at that time, as the idle time
/// between turns shows; a reading older than the last turn does not take
/// the engine back.
#[test]
fn a_turn_at_a_monotonic_reading_runs_then_and_never_goes_back() {
    let (la, lb) = shm_pair("monotonic");
    let (mut e, _peer) = engines(la, lb, EngineConfig::default());
    // Ahead of every read of the clock while the test runs.
    let base = runtime::clock::monotonic_micros() + 60_000_000;
    for _ in 0..3 {
        e.turn_at_monotonic(base, &mut Quiet);
    }
    let idle = |e: &Engine<link::ShmLink>| e.counters().idle_us;
    let start = idle(&e);
    e.turn_at_monotonic(base + 3_000, &mut Quiet);
    assert_eq!(idle(&e) - start, 3_000, "the turn ran at the reading");
    // Older than the last turn: held at the last turn's time.
    e.turn_at_monotonic(base - 1_000_000, &mut Quiet);
    assert_eq!(idle(&e) - start, 3_000);
    e.turn_at_monotonic(base + 5_000, &mut Quiet);
    assert_eq!(idle(&e) - start, 5_000, "2 ms after the last turn, not 1 s");
}
