//! Over AF_XDP, TCP payload from a kernel peer stays in the UMEM frame the
//! kernel wrote it into until the application reads it: the socket's bytes
//! are the frame's bytes (buffer identity), and the link copies nothing
//! (`rx_copied` 0). In native and in generic XDP, over a veth, as root.

mod kernel_peer;

use kernel_peer::{
    close_for_client, engine_over, held_buffers, is_root, read_held_in_place, receive_stream, Veth,
};
use link::{AfXdpLink, Link, XdpConfig, XdpModeChoice};

/// Twelve full segments.
const LEN: usize = 12 * 1448;

fn payload_stays_in_the_umem(mode: XdpModeChoice, tag: &str) {
    let veth = Veth::new(tag);
    let cfg = XdpConfig {
        mode,
        frames: 1024,
        ring_size: 256,
        reserve: 64,
        ..XdpConfig::default()
    };
    let link = AfXdpLink::open(&veth.outer, &cfg).expect("AF_XDP link");
    let umem = link.umem_range();
    assert_eq!(
        link.lend_budget(),
        1024 - 256 - 128 - 64,
        "full fill ring, half a TX ring and the reserve stay"
    );
    let mut engine = engine_over(link, &veth);
    let (h, client) = receive_stream(&mut engine, &veth, LEN);
    let c = engine.stack.counters().clone();
    assert_eq!(c.tcp_rx_hold_limited, 0);
    // The buffers the socket holds are UMEM frames, one per segment held.
    let held = held_buffers(&engine, LEN, |port, _| assert_eq!(port, 0));
    assert_eq!(engine.frames_lent(), held.len());
    for &(at, len) in &held {
        assert!(
            umem.contains(&at) && at + len <= umem.end,
            "a held frame at {at:#x} is outside the UMEM {umem:x?}"
        );
    }
    // Reading in place: each held segment is read where the kernel wrote
    // it, inside a held UMEM frame.
    read_held_in_place(&mut engine, h, LEN, &held);
    let stats = &engine.link_stats()[0];
    assert!(stats.rx_frames as usize >= LEN / 1448);
    assert_eq!(stats.rx_copied, 0, "the link copied no frame");
    eprintln!(
        "af_xdp {mode:?}: {} segments held in UMEM frames and read in place, {} copied; link rx_frames {} rx_copied {}",
        c.tcp_rx_zero_copy_segments, c.tcp_rx_copied_segments, stats.rx_frames, stats.rx_copied
    );
    close_for_client(&mut engine, h, client);
}

#[test]
fn tcp_payload_stays_in_the_umem_native_and_generic() {
    assert!(is_root(), "AF_XDP over a veth needs root");
    payload_stays_in_the_umem(XdpModeChoice::Native, "n");
    payload_stays_in_the_umem(XdpModeChoice::Generic, "g");
}
