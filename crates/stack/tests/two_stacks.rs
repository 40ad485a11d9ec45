//! Two stacks joined by an in-memory wire: ARP, ping, UDP, fragments.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use stack::{FrameSink, IfaceId, Instant, InterfaceConfig, RxMeta, Stack, StackConfig, VecSink};
use wire::icmpv4::{Icmpv4Packet, Icmpv4Repr};
use wire::ip::IpProtocol;
use wire::ipv4::Ipv4Packet;
use wire::ChecksumMode;

const IF0: IfaceId = IfaceId(0);

fn stack(last: u8, mtu: usize, seed: u64) -> Stack {
    let mut s = Stack::new(StackConfig {
        seed,
        ..StackConfig::default()
    });
    s.add_interface(&InterfaceConfig {
        mtu,
        ..InterfaceConfig::new(
            format!("p{last}"),
            [2, 0, 0, 0, 0, last],
            Ipv4Addr::new(10, 99, 1, last),
            24,
        )
    })
    .unwrap();
    s
}

/// Moves frames between the stacks until both are quiet.
fn run(
    now: Instant,
    a: &mut Stack,
    b: &mut Stack,
    pending_a: &mut VecSink,
    pending_b: &mut VecSink,
) -> usize {
    let mut moved = 0;
    for _ in 0..1000 {
        if pending_a.frames.is_empty() && pending_b.frames.is_empty() {
            return moved;
        }
        let from_a = std::mem::take(&mut pending_a.frames);
        let from_b = std::mem::take(&mut pending_b.frames);
        moved += from_a.len() + from_b.len();
        for (_, f) in from_a {
            b.receive(now, IF0, &f, RxMeta::default(), pending_b);
        }
        for (_, f) in from_b {
            a.receive(now, IF0, &f, RxMeta::default(), pending_a);
        }
    }
    panic!("the stacks never went quiet");
}

/// Lets `a` learn `b`'s link address (and `b` learn `a`'s from the request).
fn resolve(now: Instant, a: &mut Stack, b: &mut Stack, sa: &mut VecSink, sb: &mut VecSink) {
    let h = a
        .udp_bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0))
        .unwrap();
    let bh = b
        .udp_bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 4))
        .unwrap();
    a.udp_send_to(
        now,
        h,
        SocketAddr::new(IpAddr::V4(ip(2)), 4),
        None,
        b"hello",
        sa,
    )
    .unwrap();
    run(now, a, b, sa, sb);
    let mut buf = [0u8; 8];
    assert_eq!(b.udp_recv_from(bh, &mut buf).unwrap().len, 5);
    a.udp_close(h).unwrap();
    b.udp_close(bh).unwrap();
}

fn ip(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 99, 1, last)
}

#[test]
fn udp_echo_every_size_with_fragments() {
    let (mut a, mut b) = (stack(1, 1500, 1), stack(2, 1500, 2));
    let (mut sa, mut sb) = (VecSink::default(), VecSink::default());
    let now = Instant::from_secs(1);
    let ha = a
        .udp_bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0))
        .unwrap();
    let hb = b.udp_bind(SocketAddr::new(IpAddr::V4(ip(2)), 7)).unwrap();
    let dst = SocketAddr::new(IpAddr::V4(ip(2)), 7);
    let mut buf = vec![0u8; 70000];
    for size in (1..=8000)
        .step_by(7)
        .chain([1472, 1473, 2952, 2953, 8000, 65507])
    {
        let payload: Vec<u8> = (0..size).map(|i| (i * 31 + size) as u8).collect();
        a.udp_send_to(now, ha, dst, None, &payload, &mut sa)
            .unwrap();
        run(now, &mut a, &mut b, &mut sa, &mut sb);
        let got = b.udp_recv_from(hb, &mut buf).unwrap();
        assert_eq!(&buf[..got.len], &payload[..], "size {size}");
        assert_eq!(got.meta.dst, dst);
        // Echo it back from the server.
        b.udp_send_to(now, hb, got.meta.src, None, &buf[..got.len], &mut sb)
            .unwrap();
        run(now, &mut a, &mut b, &mut sa, &mut sb);
        let back = a.udp_recv_from(ha, &mut buf).unwrap();
        assert_eq!(&buf[..back.len], &payload[..], "echo of size {size}");
    }
    assert!(a.counters().ipv4_fragments_sent > 0);
    assert!(b.counters().ipv4_reassembled > 0);
    assert_eq!(a.counters().rx_drops() + b.counters().rx_drops(), 0);
    assert_eq!(
        a.counters().arp_requests_sent,
        1,
        "one resolution, then cached"
    );
}

fn echo_request(ident: u16, seq_no: u16, data: &[u8]) -> Vec<u8> {
    let repr = Icmpv4Repr::EchoRequest {
        ident,
        seq_no,
        data,
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Icmpv4Packet::new_unchecked(&mut out[..]));
    out
}

#[test]
fn ping_answers_at_every_size() {
    let (mut a, mut b) = (stack(1, 1500, 3), stack(2, 1500, 4));
    let (mut sa, mut sb) = (VecSink::default(), VecSink::default());
    let now = Instant::from_secs(1);
    for size in [0usize, 56, 1400, 1472, 1473, 4000, 8000] {
        let data: Vec<u8> = (0..size).map(|i| i as u8).collect();
        let msg = echo_request(0x1234, size as u16, &data);
        let len = msg.len();
        a.send_ipv4(
            now,
            stack::ipv4::Ipv4Send::new(ip(2), IpProtocol::Icmp),
            len,
            &mut |buf, _| buf[..len].copy_from_slice(&msg),
            &mut sa,
        )
        .unwrap();
        let before = a.counters().rx_accept_icmp_echo_reply;
        // Deliver a's frames to b, and keep b's reply frames to look at.
        let mut replies = Vec::new();
        for _ in 0..4 {
            for (_, f) in std::mem::take(&mut sa.frames) {
                b.receive(now, IF0, &f, RxMeta::default(), &mut sb);
            }
            for (_, f) in std::mem::take(&mut sb.frames) {
                replies.push(f.clone());
                a.receive(now, IF0, &f, RxMeta::default(), &mut sa);
            }
        }
        assert_eq!(
            a.counters().rx_accept_icmp_echo_reply,
            before + 1,
            "size {size}"
        );
        let fragments = replies.iter().filter(|f| f[12..14] == [8, 0]).count();
        assert_eq!(
            fragments,
            (8 + size).div_ceil(1480).max(1),
            "reply to size {size} in fragments"
        );
        for f in replies.iter().filter(|f| f[12..14] == [8, 0]) {
            let p = Ipv4Packet::new_checked(&f[14..]).unwrap();
            assert!(p.verify_checksum());
            assert!(f.len() - 14 <= 1500);
        }
    }
    assert_eq!(b.counters().icmp_echo_replies_sent, 7);
}

/// A connected UDP socket hears port unreachable about its peer as
/// ECONNREFUSED, once (Linux's sk_err); an unconnected one does not.
#[test]
fn a_connected_udp_socket_hears_port_unreachable() {
    let (mut a, mut b) = (stack(1, 1500, 5), stack(2, 1500, 6));
    let (mut sa, mut sb) = (VecSink::default(), VecSink::default());
    let any = |port| SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port);
    let connected = a.udp_bind(any(5001)).unwrap();
    let unconnected = a.udp_bind(any(5002)).unwrap();
    let peer = SocketAddr::new(IpAddr::V4(ip(2)), 9);
    a.udp_set_peer(connected, Some(peer)).unwrap();
    let now = Instant::from_secs(1);
    resolve(now, &mut a, &mut b, &mut sa, &mut sb);
    for h in [connected, unconnected] {
        a.udp_send_to(now, h, peer, None, b"x", &mut sa).unwrap();
    }
    run(now, &mut a, &mut b, &mut sa, &mut sb);
    assert_eq!(a.counters().rx_accept_icmp_error, 2);
    assert!(a.udp_error_pending(connected));
    assert!(!a.udp_error_pending(unconnected));
    assert_eq!(
        a.udp_take_error(connected).unwrap(),
        Some(stack::SocketError::ConnectionRefused)
    );
    assert_eq!(a.udp_take_error(connected).unwrap(), None);
    assert_eq!(a.counters().udp_icmp_errors_reported, 1);
    assert_eq!(a.counters().udp_icmp_errors_ignored, 1);
    // Disconnected: no longer its errors.
    a.udp_set_peer(connected, None).unwrap();
    a.udp_send_to(now, connected, peer, None, b"x", &mut sa)
        .unwrap();
    run(now, &mut a, &mut b, &mut sa, &mut sb);
    assert!(!a.udp_error_pending(connected));
}

#[test]
fn closed_udp_port_gets_port_unreachable_rate_limited() {
    let (mut a, mut b) = (stack(1, 1500, 5), stack(2, 1500, 6));
    let (mut sa, mut sb) = (VecSink::default(), VecSink::default());
    let h = a
        .udp_bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 5000))
        .unwrap();
    let now = Instant::from_secs(1);
    resolve(now, &mut a, &mut b, &mut sa, &mut sb);
    for _ in 0..300 {
        a.udp_send_to(
            now,
            h,
            SocketAddr::new(IpAddr::V4(ip(2)), 9),
            None,
            b"x",
            &mut sa,
        )
        .unwrap();
    }
    run(now, &mut a, &mut b, &mut sa, &mut sb);
    assert_eq!(b.counters().rx_drop_udp_no_socket, 300);
    assert_eq!(
        b.counters().icmp_errors_sent,
        200,
        "net.inet.icmp.icmplim default"
    );
    assert_eq!(b.counters().icmp_errors_rate_limited, 100);
    assert_eq!(a.counters().rx_accept_icmp_error, 200);
}

#[test]
fn unanswered_arp_gives_up_and_drops_held_packets() {
    let mut a = stack(1, 1500, 7);
    let mut sink = VecSink::default();
    let h = a
        .udp_bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0))
        .unwrap();
    let mut now = Instant::from_secs(1);
    for _ in 0..20 {
        a.udp_send_to(
            now,
            h,
            SocketAddr::new(IpAddr::V4(ip(9)), 9),
            None,
            b"x",
            &mut sink,
        )
        .unwrap();
    }
    assert_eq!(a.counters().arp_held, 20);
    assert_eq!(a.counters().arp_hold_overflow, 4, "maxhold 16");
    for _ in 0..10 {
        now += stack::Duration::from_secs(1);
        a.poll(now, &mut sink);
    }
    assert_eq!(a.counters().arp_requests_sent, 5);
    assert_eq!(a.counters().arp_resolution_failed, 1);
    assert_eq!(a.counters().tx_drop_no_neighbor, 16);
    assert!(a.neighbors().is_empty());
    assert!(
        sink.frames.iter().all(|(_, f)| f[12..14] == [8, 6]),
        "only ARP left the stack"
    );
}

#[test]
fn udp_receive_queue_overflow_is_counted() {
    let (mut a, mut b) = (stack(1, 1500, 8), stack(2, 1500, 9));
    let (mut sa, mut sb) = (VecSink::default(), VecSink::default());
    let now = Instant::from_secs(1);
    let ha = a
        .udp_bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0))
        .unwrap();
    let hb = b
        .udp_bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 7))
        .unwrap();
    let data = vec![7u8; 1000];
    resolve(now, &mut a, &mut b, &mut sa, &mut sb);
    for _ in 0..400 {
        a.udp_send_to(
            now,
            ha,
            SocketAddr::new(IpAddr::V4(ip(2)), 7),
            None,
            &data,
            &mut sa,
        )
        .unwrap();
    }
    run(now, &mut a, &mut b, &mut sa, &mut sb);
    let c = b.counters().clone();
    assert_eq!(c.rx_accept_udp + c.rx_drop_udp_socket_full, 401);
    assert!(c.rx_drop_udp_socket_full > 0);
    let mut n = 0;
    let mut buf = [0u8; 2000];
    while b.udp_recv_from(hb, &mut buf).is_ok() {
        n += 1;
    }
    assert_eq!(n + 1, c.rx_accept_udp);
}

#[test]
fn partial_checksums_are_accepted_only_when_the_link_says_so() {
    let (mut a, mut b) = (stack(1, 1500, 10), stack(2, 1500, 11));
    let (mut sa, mut sb) = (VecSink::default(), VecSink::default());
    let now = Instant::from_secs(1);
    let ha = a
        .udp_bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0))
        .unwrap();
    let hb = b
        .udp_bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 7))
        .unwrap();
    a.udp_send_to(
        now,
        ha,
        SocketAddr::new(IpAddr::V4(ip(2)), 7),
        None,
        b"warm",
        &mut sa,
    )
    .unwrap();
    run(now, &mut a, &mut b, &mut sa, &mut sb);
    let mut buf = [0u8; 64];
    b.udp_recv_from(hb, &mut buf).unwrap();
    // A frame as a kernel with checksum offload leaves it: the UDP checksum
    // field holds only the pseudo-header sum.
    a.udp_send_to(
        now,
        ha,
        SocketAddr::new(IpAddr::V4(ip(2)), 7),
        None,
        b"partial",
        &mut sa,
    )
    .unwrap();
    let (_, mut frame) = sa.frames.pop().unwrap();
    let src = IpAddr::V4(ip(1));
    let dst = IpAddr::V4(ip(2));
    {
        let mut udp = wire::udp::UdpPacket::new_unchecked(&mut frame[34..]);
        udp.fill_partial_checksum(&src, &dst);
    }
    b.receive(
        now,
        IF0,
        &frame,
        RxMeta {
            csum_partial: false,
        },
        &mut sb,
    );
    assert_eq!(b.counters().rx_drop_udp_bad_checksum, 1);
    b.receive(now, IF0, &frame, RxMeta { csum_partial: true }, &mut sb);
    let got = b.udp_recv_from(hb, &mut buf).unwrap();
    assert_eq!(&buf[..got.len], b"partial");
    let _ = ChecksumMode::Full;
}

/// A sink that has no buffers: sends fail cleanly and are counted.
struct NoBuffers;
impl FrameSink for NoBuffers {
    fn transmit(&mut self, _: IfaceId, _: usize, _: &mut dyn FnMut(&mut [u8])) -> bool {
        false
    }
}

#[test]
fn transmit_without_buffers_is_counted() {
    let mut a = stack(1, 1500, 12);
    let h = a
        .udp_bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0))
        .unwrap();
    let err = a.udp_send_to(
        Instant::ZERO,
        h,
        SocketAddr::new(IpAddr::V4(Ipv4Addr::BROADCAST), 9),
        None,
        b"x",
        &mut NoBuffers,
    );
    assert_eq!(err, Err(stack::SocketError::NoBufferSpace));
    assert_eq!(a.counters().tx_drop_no_buffer, 1);
}
