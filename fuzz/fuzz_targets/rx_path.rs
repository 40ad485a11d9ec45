//! The whole receive path: a sequence of frames into one stack, with time
//! passing between them.  The stack must not panic, must count every frame
//! exactly once, and must keep its memory bounded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stack::{Duration, IfaceId, Instant, InterfaceConfig, Ipv6Config, RxMeta, Stack, StackConfig, VecSink};
use std::net::Ipv4Addr;

fuzz_target!(|data: &[u8]| {
    // IPv6 addresses usable at once (no duplicate detection wait), so that
    // IPv6 frames reach every protocol as IPv4 ones do.
    let mut s = Stack::new(StackConfig { seed: 1, reass_max_bytes: 1 << 20, ip6_dad_count: 0, ..StackConfig::default() });
    s.add_interface(&InterfaceConfig {
        name: "p0".into(),
        mac: [2, 0, 0, 0, 0, 2],
        mtu: 1500,
        addr: Ipv4Addr::new(10, 99, 1, 2),
        prefix_len: 24,
        broadcast: None,
        gateway: Some(Ipv4Addr::new(10, 99, 1, 1)),
        extra_addrs: vec![Ipv4Addr::new(10, 99, 1, 3)],
    })
    .unwrap();
    s.enable_ipv6(
        Instant::ZERO,
        IfaceId(0),
        &Ipv6Config { addrs: vec![("fd99:1::2".parse().unwrap(), 64)], gateway: Some("fe80::1".parse().unwrap()) },
    )
    .unwrap();
    // Dual-stack sockets: IPv4 and IPv6 reach them both.
    let udp = s.udp_bind("[::]:7".parse().unwrap()).unwrap();
    // A listener that accepts and echoes, so segments reach every TCP state.
    let listener = s.tcp_listen("[::]:80".parse().unwrap(), 8).unwrap();
    let mut conns = Vec::new();
    let mut sink = VecSink::default();
    let mut now = Instant::from_secs(1);
    let mut buf = [0u8; 2048];
    // Frames are separated by a 2-byte header: flags and length.
    let mut rest = data;
    while rest.len() >= 2 {
        let flags = rest[0];
        let len = usize::from(rest[1]) * 8 + usize::from(flags & 7);
        rest = &rest[2..];
        let frame = &rest[..len.min(rest.len())];
        rest = &rest[frame.len()..];
        let before = s.counters().rx_outcomes();
        s.receive(now, IfaceId(0), frame, RxMeta { csum_partial: flags & 8 != 0 }, &mut sink);
        assert_eq!(s.counters().rx_outcomes(), before + 1, "every frame ends in one outcome");
        if flags & 0x10 != 0 {
            now += Duration::from_millis(u64::from(flags >> 5) * 700);
            s.poll(now, &mut sink);
        }
        while let Ok(got) = s.udp_recv_from(udp, &mut buf) {
            let _ = s.udp_send_to(now, udp, got.meta.src, Some(got.meta.dst.ip()), &buf[..got.len], &mut sink);
        }
        while let Ok((c, _)) = s.tcp_accept(listener) {
            conns.push(c);
        }
        for &c in &conns {
            match s.tcp_recv(now, c, &mut buf, &mut sink) {
                Ok(0) => {
                    let _ = s.tcp_close(now, c, &mut sink);
                }
                Ok(n) => {
                    let _ = s.tcp_send(now, c, &buf[..n], &mut sink);
                }
                Err(_) => {}
            }
        }
        sink.frames.clear();
    }
});
