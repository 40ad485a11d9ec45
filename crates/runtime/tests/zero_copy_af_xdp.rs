//! Over AF_XDP, TCP payload from a kernel peer stays in the UMEM frame the
//! kernel wrote it into until the application reads it: the socket's bytes
//! are the frame's bytes (buffer identity), and the link copies nothing
//! (`rx_copied` 0). In native and in generic XDP, over a veth, as root.

mod kernel_peer;

use kernel_peer::{engine_over, is_root, pattern, read_in_place, receive_stream, turn_until, Veth};
use link::{AfXdpLink, Link, PacketBuffer, XdpConfig, XdpModeChoice};

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
    let (h, mut client) = receive_stream(&mut engine, &veth, LEN);

    let c = engine.stack.counters().clone();
    assert!(
        c.tcp_rx_zero_copy_segments >= (LEN / 1448) as u64 / 2,
        "most segments held in place: {} held, {} copied",
        c.tcp_rx_zero_copy_segments,
        c.tcp_rx_copied_segments
    );
    assert_eq!(c.tcp_rx_hold_limited, 0);
    // The buffers the socket holds are UMEM frames, one per segment held.
    let mut held = Vec::new();
    engine.visit_lent(|port, f| {
        assert_eq!(port, 0);
        held.push((f.data().as_ptr() as usize, f.data().len()));
    });
    assert_eq!(held.len() as u64, c.tcp_rx_zero_copy_segments);
    assert_eq!(engine.frames_lent(), held.len());
    for &(at, len) in &held {
        assert!(
            umem.contains(&at) && at + len <= umem.end,
            "a held frame at {at:#x} is outside the UMEM {umem:x?}"
        );
    }
    // Reading in place: each held segment is read where the kernel wrote
    // it, inside a held UMEM frame.
    let (data, runs) = read_in_place(&mut engine, h);
    assert_eq!(data, pattern(LEN), "the stream, whole and in order");
    let in_frames = runs
        .iter()
        .filter(|&&(p, n)| held.iter().any(|&(s, l)| p >= s && p + n <= s + l))
        .count();
    assert_eq!(in_frames, held.len(), "one run in each held frame");
    // Read frames go back to the link on the next turn.
    turn_until(&mut engine, 5, "the frames back", |e| e.frames_lent() == 0);
    assert_eq!(engine.stack.counters().tcp_rx_frames_held, 0);
    let stats = &engine.link_stats()[0];
    assert!(stats.rx_frames as usize >= LEN / 1448);
    assert_eq!(stats.rx_copied, 0, "the link copied no frame");
    eprintln!(
        "af_xdp {mode:?}: {} segments held in UMEM frames and read in place, {} copied; link rx_frames {} rx_copied {}",
        c.tcp_rx_zero_copy_segments, c.tcp_rx_copied_segments, stats.rx_frames, stats.rx_copied
    );
    engine.with_context(|ctx| ctx.stack.tcp_close(ctx.now, h, ctx.sink).unwrap());
    turn_until(&mut engine, 10, "the client to finish", |_| {
        client.try_wait().unwrap().is_some()
    });
    assert!(client.wait().unwrap().success(), "the kernel client failed");
}

#[test]
fn tcp_payload_stays_in_the_umem_native_and_generic() {
    if !is_root() {
        eprintln!("skipped: AF_XDP over a veth needs root");
        return;
    }
    payload_stays_in_the_umem(XdpModeChoice::Native, "n");
    payload_stays_in_the_umem(XdpModeChoice::Generic, "g");
}
