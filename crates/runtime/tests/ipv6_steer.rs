//! IPv6 split between two engines behind a model NIC
//! (`MemoryLink::multi_queue`), for connections the peer opens and
//! connections the engines open:
//!
//! - a NIC with RSS the engines know (Toeplitz over the 16-byte addresses
//!   and the ports): every frame lands on its owner's queue, nothing is
//!   handed between engines, and neighbour discovery reaches both engines
//!   as copies;
//! - a NIC with one queue: engine 0 reads everything and hands engine 1
//!   exactly the frames of engine 1's flows by ustack's flow hash, and
//!   engine 1's own connections work because their neighbour
//!   advertisements are copied to it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use runtime::steer::{classify, FrameClass};
use stack::steer::{RssSteering, SYMMETRIC_KEY};
use stack::{Instant, InterfaceConfig, Ipv6Config, Stack, StackConfig};

mod nic_model;
use nic_model::Setup;

const PEER: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x99, 0, 6, 0, 0, 0, 1);
const SERVER: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x99, 0, 6, 0, 0, 0, 2);
const SERVER_MAC: [u8; 6] = [2, 0, 0, 0, 6, 2];
const ENGINES: usize = 2;

fn stack(v4: Ipv4Addr, v6: Ipv6Addr, mac: [u8; 6], seed: u64) -> Stack {
    let mut s = Stack::new(StackConfig {
        seed,
        // Addresses usable at once: no duplicate address detection.
        ip6_dad_count: 0,
        ..StackConfig::default()
    });
    let id = s
        .add_interface(&InterfaceConfig::new("mem", mac, v4, 24))
        .unwrap();
    s.enable_ipv6(
        Instant::ZERO,
        id,
        &Ipv6Config {
            addrs: vec![(v6, 64)],
            gateway: None,
        },
    )
    .unwrap();
    s
}

/// The NIC's receive side, parsed as hardware does (not with ustack's
/// classifier): IPv6 TCP/UDP right after the fixed header by addresses
/// and ports, other IPv6 by addresses, anything else to queue 0.
fn nic_queue(rss: &RssSteering, frame: &[u8]) -> usize {
    if frame.len() < 14 + 40 || frame[12..14] != [0x86, 0xdd] {
        return 0;
    }
    let ip = &frame[14..];
    let addr = |at: usize| {
        let mut a = [0u8; 16];
        a.copy_from_slice(&ip[at..at + 16]);
        IpAddr::V6(Ipv6Addr::from(a))
    };
    let (src, dst) = (addr(8), addr(24));
    let port = |at: usize| u16::from_be_bytes([ip[at], ip[at + 1]]);
    let queue = if matches!(ip[6], 6 | 17) && ip.len() >= 44 {
        rss.queue_of_flow(src, port(40), dst, port(42))
    } else {
        rss.queue_of_addresses(src, dst)
    };
    usize::from(queue)
}

/// How the NIC spreads what the peer sends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Nic {
    /// RSS whose key and table the engines know.
    Rss,
    /// One queue gets everything; the engines steer by ustack's hash.
    OneQueue,
}

/// The peer and the engines behind `nic` (`nic_model`), and the number
/// of frames the NIC put on queue 0 that belong to engine 1 by the flow
/// hash (neighbour discovery, which is for both, left out): what software
/// steering hands over when the NIC has one queue.
fn setup(nic: Nic) -> (Setup, Arc<AtomicU64>) {
    let rss = Arc::new(RssSteering::round_robin(&SYMMETRIC_KEY, 128, ENGINES as u16).unwrap());
    let misplaced = Arc::new(AtomicU64::new(0));
    let choose = {
        let rss = rss.clone();
        let misplaced = misplaced.clone();
        Arc::new(move |f: &[u8]| {
            let q = match nic {
                Nic::Rss => nic_queue(&rss, f),
                Nic::OneQueue => 0,
            };
            let class = classify(f);
            if q == 0 && class != FrameClass::Ndp && class.engine(ENGINES as u16) == 1 {
                misplaced.fetch_add(1, Ordering::Relaxed);
            }
            q
        })
    };
    let model = nic_model::Nic {
        queues: ENGINES,
        choose,
        known: (nic == Nic::Rss).then_some(rss),
    };
    let setup = Setup::new(
        model,
        stack(Ipv4Addr::new(10, 99, 6, 1), PEER, [2, 0, 0, 0, 6, 1], 1),
        |e| {
            stack(
                Ipv4Addr::new(10, 99, 6, 2),
                SERVER,
                SERVER_MAC,
                10 + e as u64,
            )
        },
        SERVER_MAC,
        IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        b"hello over ipv6",
    );
    (setup, misplaced)
}

/// The peer opens `passive` connections to the engines' port 80, and each
/// engine `active` to the peer's port 7; every one echoes, the engines
/// accept some each.
fn connect_both_ways(setup: &mut Setup, passive: usize, active: usize) {
    setup.connect_both_ways(
        (passive, SocketAddr::new(IpAddr::V6(SERVER), 80)),
        (active, SocketAddr::new(IpAddr::V6(PEER), 7)),
    );
    assert_eq!(setup.peer.1.accepted, active * ENGINES);
    for (e, (_, app)) in setup.servers.iter().enumerate() {
        assert!(
            app.accepted > 0,
            "engine {e} accepted none of the peer's IPv6 connections"
        );
    }
    let accepted: usize = setup.servers.iter().map(|(_, a)| a.accepted).sum();
    assert_eq!(accepted, passive);
    // Everything the wire carried arrived: the exact counts below hold
    // only then.
    for stats in setup.peer.0.link_stats() {
        assert_eq!(stats.tx_dropped, 0, "{stats:?}");
    }
}

#[test]
fn ipv6_behind_a_nic_with_rss_is_split_with_nothing_handed_over() {
    let (mut setup, _) = setup(Nic::Rss);
    connect_both_ways(&mut setup, 48, 12);
    let mut ndp_copies = 0;
    for (e, (engine, _)) in setup.servers.iter().enumerate() {
        let d = engine.dispatch_counters().unwrap();
        assert_eq!(d.steer_forwarded, 0, "engine {e}: {d:?}");
        assert_eq!(d.steer_ndp_copy_drops, 0, "engine {e}: {d:?}");
        ndp_copies += d.steer_ndp_copies;
        // Both directions' ports were chosen for this NIC: each engine's
        // port choice hashed with the NIC's Toeplitz function.
        assert_eq!(engine.stack.port_choice_rss_effort().0, 12);
    }
    // The peer resolved the engines' address and they the peer's: each
    // exchange was seen by both engines.
    assert!(ndp_copies > 0);
}

#[test]
fn ipv6_on_one_queue_is_handed_to_its_engine_in_software() {
    let (mut setup, for_engine_1_on_queue_0) = setup(Nic::OneQueue);
    connect_both_ways(&mut setup, 48, 12);
    let d0 = setup.servers[0].0.dispatch_counters().unwrap().clone();
    let d1 = setup.servers[1].0.dispatch_counters().unwrap().clone();
    // Engine 0 reads every frame and hands on exactly engine 1's: the
    // SYNs of the connections the hash gives engine 1, and the replies to
    // engine 1's own connections.
    let expected = for_engine_1_on_queue_0.load(Ordering::Relaxed);
    assert!(expected > 0);
    assert_eq!(d0.steer_forwarded, expected, "{d0:?}");
    // What engine 1 received: those, and the neighbour discovery copies.
    assert_eq!(d1.steer_received, expected + d0.steer_ndp_copies, "{d1:?}");
    assert_eq!(d1.steer_forwarded, 0, "{d1:?}");
    // Neighbour discovery reached engine 1 only as copies from engine 0
    // (the peer's solicitation of the engines' address, its
    // advertisements answering the engines' solicitations).
    assert!(d0.steer_ndp_copies > 0, "{d0:?}");
    assert_eq!(d0.steer_ndp_copy_drops, 0, "{d0:?}");
    assert_eq!(d1.steer_ndp_copies, 0, "{d1:?}");
    assert_eq!(d0.steer_arp_copies + d1.steer_arp_copies, 0);
}
