//! Software GSO (`EngineConfig::soft_gso_ports`): an engine whose link has
//! no segmentation offload lets TCP send super-frames and cuts them into
//! frames of the MTU itself. Two engines joined by an in-memory pair of
//! MTU 1500, the sender's frames through the fault injector: every byte
//! arrives in order, nothing larger than the MTU crosses, and a lost
//! segment is recovered by TCP from the peer's SACK blocks.

use std::net::{Ipv4Addr, SocketAddr};

use link::{FaultConfig, FaultLink, MemoryLink};
use runtime::{Engine, EngineConfig};
use stack::{InterfaceConfig, Stack, StackConfig};

mod bulk;
use bulk::{pattern, BulkReceiver, BulkSender};

const MTU: usize = 1500;

fn stack(last: u8) -> Stack {
    let mut s = Stack::new(StackConfig {
        seed: u64::from(last),
        ..StackConfig::default()
    });
    s.add_interface(&InterfaceConfig {
        mtu: MTU,
        ..InterfaceConfig::new(
            format!("mem{last}"),
            [2, 0, 0, 0, 61, last],
            Ipv4Addr::new(10, 99, 61, last),
            24,
        )
    })
    .unwrap();
    s
}

/// What a transfer showed.
struct Run {
    sender: Engine<FaultLink<MemoryLink>>,
    receiver_stats: link::LinkStats,
}

/// Sends `total` bytes from an engine with software GSO as `gso` says,
/// its transmitted frames lost with probability `loss`; checks that
/// every byte arrived in order.
fn transfer(gso: bool, loss: f64, total: usize) -> Run {
    let (mut la, mut lb) = MemoryLink::pair(MTU, 4096);
    la.set_mac([2, 0, 0, 0, 61, 1]);
    lb.set_mac([2, 0, 0, 0, 61, 2]);
    let tx = FaultConfig {
        loss,
        seed: 61,
        ..FaultConfig::default()
    };
    let la = FaultLink::with_directions(la, FaultConfig::default(), tx);
    let cfg = EngineConfig {
        pkt_tx_delay: std::time::Duration::ZERO,
        soft_gso_ports: u64::from(gso),
        ..EngineConfig::default()
    };
    let mut client = Engine::new(stack(1), vec![la], cfg);
    let mut server = Engine::new(stack(2), vec![lb], cfg);
    let listener = server
        .stack
        .tcp_listen("10.99.61.2:9000".parse().unwrap(), 8)
        .unwrap();
    let to: SocketAddr = "10.99.61.2:9000".parse().unwrap();
    let conn =
        client.with_context(|ctx| ctx.stack.tcp_connect(ctx.now, to, None, ctx.sink).unwrap());
    let mut sender = BulkSender::new(conn, total, 65_536);
    let mut receiver = BulkReceiver::new(listener);
    client.announce();
    server.announce();
    for t in 0..2_000_000u64 {
        client.turn_at(stack::Instant::from_micros(1_000_000 + 20 * t), &mut sender);
        server.turn_at(
            stack::Instant::from_micros(1_000_010 + 20 * t),
            &mut receiver,
        );
        if receiver.got.len() == total {
            break;
        }
    }
    assert_eq!(receiver.got.len(), total, "every byte arrived");
    let bad = receiver
        .got
        .iter()
        .enumerate()
        .position(|(i, &b)| b != pattern(i));
    assert_eq!(bad, None, "in order, intact");
    assert_eq!(server.stack.counters().rx_drops(), 0, "no frame refused");
    let receiver_stats = server.link_stats()[0].clone();
    Run {
        sender: client,
        receiver_stats,
    }
}

#[test]
fn a_stream_leaves_as_super_frames_cut_into_mtu_sized_frames() {
    let total = 8 << 20;
    let run = transfer(true, 0.0, total);
    let c = run.sender.counters();
    assert!(
        c.gso_super_frames > 50,
        "{} super-frames",
        c.gso_super_frames
    );
    assert!(
        c.gso_segments_sent > 8 * c.gso_super_frames,
        "{} segments of {} super-frames: they are large",
        c.gso_segments_sent,
        c.gso_super_frames
    );
    assert_eq!(c.gso_refused, 0);
    assert_eq!((c.tx_drop_oversize, c.tx_drop_ring_full), (0, 0));
    // The link saw only frames of the MTU: the memory pair refuses longer
    // ones, and the receiver took as many as were sent.
    let sent = &run.sender.link_stats()[0];
    assert!(sent.tx_frames > (total / 1448) as u64);
    assert_eq!(run.receiver_stats.rx_oversize, 0);
    let tcp = run.sender.stack.counters();
    assert_eq!(
        tcp.tcp_retransmitted_segments, 0,
        "nothing lost, nothing resent"
    );
    // TCP sent far fewer segments than frames left.
    assert!(
        tcp.tx_frames * 10 < sent.tx_frames,
        "the stack sent {} frames for {} on the link",
        tcp.tx_frames,
        sent.tx_frames
    );

    // Off, the stack sends segments of the MSS itself.
    let run = transfer(false, 0.0, 1 << 20);
    assert_eq!(run.sender.counters().gso_super_frames, 0);
    assert!(run.sender.stack.counters().tx_frames >= (1 << 20) / 1448);
}

/// Frames cut from super-frames lost on the wire: the peer's SACK blocks
/// name the holes, and TCP resends those ranges (fast retransmit), cut
/// again when larger than the MTU; every byte arrives.
#[test]
fn segments_of_a_super_frame_lost_on_the_wire_are_recovered() {
    let total = 4 << 20;
    let run = transfer(true, 0.01, total);
    let fault = run.sender.ports().next().unwrap().fault_stats();
    assert!(fault.tx.lost > 10, "{} frames lost", fault.tx.lost);
    let c = run.sender.counters();
    assert!(
        c.gso_super_frames > 20,
        "{} super-frames",
        c.gso_super_frames
    );
    let tcp = run.sender.stack.counters();
    assert!(
        tcp.tcp_fast_retransmits > 0,
        "recovered from SACK blocks, not only by the timer"
    );
    assert!(tcp.tcp_retransmitted_segments >= fault.tx.lost / 2);
}
