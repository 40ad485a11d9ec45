//! Over DPDK (an af_packet virtual device on a veth, no hugepages), TCP
//! payload from a kernel peer stays in the mbuf the driver received it into
//! until the application reads it: the socket's bytes are the mbuf's bytes
//! (buffer identity). As root; the EAL starts once in this process.
#![cfg(feature = "dpdk")]

mod kernel_peer;

use kernel_peer::{engine_over, is_root, pattern, read_in_place, receive_stream, turn_until, Veth};
use link::dpdk::{eal, DpdkLink, DpdkPortConfig, EalConfig};
use link::{Link, PacketBuffer};

/// Twelve full segments.
const LEN: usize = 12 * 1448;

#[test]
fn tcp_payload_stays_in_the_mbufs() {
    if !is_root() {
        eprintln!("skipped: DPDK over a veth needs root");
        return;
    }
    let veth = Veth::new("d");
    eal::init(&EalConfig {
        no_huge: true,
        no_pci: true,
        memory_mb: Some(128),
        file_prefix: Some(format!("ustk-zc{}", std::process::id())),
        log_level: Some(4),
        ..EalConfig::default()
    })
    .expect("EAL");
    let port = eal::probe_vdev(&format!("net_af_packet0,iface={}", veth.outer)).unwrap();
    let link = DpdkLink::open(&DpdkPortConfig {
        pool_size: 1024,
        rx_desc: 128,
        tx_desc: 128,
        reserve: 16,
        ..DpdkPortConfig::new(port)
    })
    .unwrap();
    // The vdev names no framesz: ustack gives it 64 KB frames, received
    // into a pool of their own of 17 MB (272 mbufs), which the driver
    // takes from only as frames come.
    assert_eq!(
        link.offloads().large_rx_frame,
        Some(65408 - 32),
        "mbufs hold the driver's whole frame"
    );
    assert_eq!(
        link.lend_budget(),
        (272 - 64) / 2,
        "half of the receive pool beyond two bursts"
    );
    let mut engine = engine_over(link, &veth);
    let (h, mut client) = receive_stream(&mut engine, &veth, LEN);

    let c = engine.stack.counters().clone();
    assert!(
        c.tcp_rx_zero_copy_segments >= (LEN / 1448) as u64 / 2,
        "most segments held in place: {} held, {} copied",
        c.tcp_rx_zero_copy_segments,
        c.tcp_rx_copied_segments
    );
    // The buffers the socket holds are mbufs of the port's pool.
    let link = engine.ports().next().unwrap();
    let mut held = Vec::new();
    let mut in_pool = 0;
    engine.visit_lent(|_, m| {
        in_pool += usize::from(link.owns_memory_of(m));
        held.push((m.data().as_ptr() as usize, m.data().len()));
    });
    assert_eq!(held.len() as u64, c.tcp_rx_zero_copy_segments);
    assert_eq!(
        in_pool,
        held.len(),
        "every held buffer is an mbuf of the pool"
    );
    // Reading in place: each held segment is read inside its mbuf.
    let (data, runs) = read_in_place(&mut engine, h);
    assert_eq!(data, pattern(LEN), "the stream, whole and in order");
    let in_mbufs = runs
        .iter()
        .filter(|&&(p, n)| held.iter().any(|&(s, l)| p >= s && p + n <= s + l))
        .count();
    assert_eq!(in_mbufs, held.len(), "one run in each held mbuf");
    turn_until(&mut engine, 5, "the mbufs back", |e| e.frames_lent() == 0);
    assert_eq!(engine.stack.counters().tcp_rx_frames_held, 0);
    let stats = &engine.link_stats()[0];
    eprintln!(
        "dpdk: {} segments held in mbufs and read in place, {} copied; link rx_frames {} (the af_packet PMD's own copies from the kernel ring: rx_copied {})",
        c.tcp_rx_zero_copy_segments, c.tcp_rx_copied_segments, stats.rx_frames, stats.rx_copied
    );
    engine.with_context(|ctx| ctx.stack.tcp_close(ctx.now, h, ctx.sink).unwrap());
    turn_until(&mut engine, 10, "the client to finish", |_| {
        client.try_wait().unwrap().is_some()
    });
    assert!(client.wait().unwrap().success(), "the kernel client failed");
}
