//! Over DPDK (an af_packet virtual device on a veth, no hugepages), TCP
//! payload from a kernel peer stays in the mbuf the driver received it into
//! until the application reads it: the socket's bytes are the mbuf's bytes
//! (buffer identity). As root; the EAL starts once in this process.
#![cfg(feature = "dpdk")]

mod kernel_peer;

use kernel_peer::{
    close_for_client, engine_over, held_buffers, is_root, read_held_in_place, receive_stream, Veth,
};
use link::dpdk::{eal, DpdkLink, DpdkPortConfig, EalConfig};
use link::Link;

/// Twelve full segments.
const LEN: usize = 12 * 1448;

#[test]
fn tcp_payload_stays_in_the_mbufs() {
    assert!(is_root(), "DPDK over a veth needs root");
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
    let (h, client) = receive_stream(&mut engine, &veth, LEN);
    let c = engine.stack.counters().clone();
    // The buffers the socket holds are mbufs of the port's pool.
    let link = engine.ports().next().unwrap();
    let mut in_pool = 0;
    let held = held_buffers(&engine, LEN, |_, m| {
        in_pool += usize::from(link.owns_memory_of(m))
    });
    assert_eq!(
        in_pool,
        held.len(),
        "every held buffer is an mbuf of the pool"
    );
    // Reading in place: each held segment is read inside its mbuf.
    read_held_in_place(&mut engine, h, LEN, &held);
    let stats = &engine.link_stats()[0];
    eprintln!(
        "dpdk: {} segments held in mbufs and read in place, {} copied; link rx_frames {} (the af_packet PMD's own copies from the kernel ring: rx_copied {})",
        c.tcp_rx_zero_copy_segments, c.tcp_rx_copied_segments, stats.rx_frames, stats.rx_copied
    );
    close_for_client(&mut engine, h, client);
}
