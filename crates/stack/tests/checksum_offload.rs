//! Transmit checksum offload: on an interface whose link finishes L4
//! checksums, TCP and UDP frames sent whole carry only the pseudo-header sum
//! and the `csum_partial` mark; everything else (ARP, ICMP, fragments, a
//! packet that waited for ARP) keeps a whole checksum and no mark.  A peer told the mark accepts them; a peer
//! not told it drops them as corrupt.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use stack::{
    FrameSink, IfaceId, Instant, InterfaceConfig, RxMeta, SocketHandle, Stack, StackConfig,
    TcpState, TxMeta,
};
use wire::checksum;
use wire::ethernet::{EtherType, EthernetFrame};
use wire::ip::IpProtocol;
use wire::ipv4::Ipv4Packet;
use wire::tcp::TcpPacket;
use wire::udp::UdpPacket;

const IF0: IfaceId = IfaceId(0);

fn ip(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 99, 7, last)
}

fn stack(last: u8, seed: u64) -> Stack {
    let mut s = Stack::new(StackConfig {
        seed,
        ..StackConfig::default()
    });
    s.add_interface(&InterfaceConfig::new(
        format!("p{last}"),
        [2, 0, 0, 0, 7, last],
        ip(last),
        24,
    ))
    .unwrap();
    s
}

/// A sink that keeps each frame with the mark the stack gave it.
#[derive(Default)]
struct MetaSink {
    frames: Vec<(Vec<u8>, TxMeta)>,
    /// TCP and UDP frames delivered from this sink with a partial checksum.
    partial_sent: usize,
}

impl FrameSink for MetaSink {
    fn transmit(&mut self, iface: IfaceId, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        self.transmit_with(iface, len, TxMeta::default(), fill)
    }

    fn transmit_with(
        &mut self,
        _iface: IfaceId,
        len: usize,
        meta: TxMeta,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> bool {
        let mut buf = vec![0u8; len];
        fill(&mut buf);
        self.frames.push((buf, meta));
        true
    }
}

/// What a frame is, whether its L4 (or ICMP) checksum is whole, and
/// whether its L4 checksum field holds exactly the pseudo-header sum the
/// link finishes from (what a partial one must hold).
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Kind {
    Arp,
    Tcp { whole: bool, pseudo: bool },
    Udp { whole: bool, pseudo: bool },
    Icmp,
    Fragment,
}

fn classify(frame: &[u8]) -> Kind {
    let eth = EthernetFrame::new_checked(frame).unwrap();
    if eth.ethertype() == EtherType::Arp {
        return Kind::Arp;
    }
    let ipv4 = Ipv4Packet::new_checked(eth.payload()).unwrap();
    assert!(
        ipv4.verify_checksum(),
        "the IP header checksum is always whole"
    );
    if ipv4.more_frags() || ipv4.frag_offset() != 0 {
        return Kind::Fragment;
    }
    let (src, dst) = (IpAddr::V4(ipv4.src_addr()), IpAddr::V4(ipv4.dst_addr()));
    let l4 = ipv4.payload();
    let pseudo = |proto, at: usize| {
        let sum = checksum::pseudo_header(&src, &dst, proto, l4.len() as u32);
        u16::from_be_bytes([l4[at], l4[at + 1]]) == sum
    };
    match ipv4.next_header() {
        IpProtocol::Tcp => {
            let tcp = TcpPacket::new_checked(l4).unwrap();
            Kind::Tcp {
                whole: tcp.verify_checksum(&src, &dst),
                pseudo: pseudo(IpProtocol::Tcp, 16),
            }
        }
        IpProtocol::Udp => {
            let udp = UdpPacket::new_checked(l4).unwrap();
            Kind::Udp {
                whole: udp.verify_checksum(&src, &dst),
                pseudo: pseudo(IpProtocol::Udp, 6),
            }
        }
        IpProtocol::Icmp => Kind::Icmp,
        other => panic!("unexpected protocol {other:?}"),
    }
}

/// Checks every frame `from` sent against the offload rule, then delivers
/// them to `to` with the mark as the link would carry it (or dropped, when
/// `carry_mark` is false: a link that loses the mark).
fn deliver(
    now: Instant,
    from: &mut MetaSink,
    offload: bool,
    to: &mut Stack,
    to_sink: &mut MetaSink,
    carry_mark: bool,
) -> usize {
    let frames = std::mem::take(&mut from.frames);
    let n = frames.len();
    for (f, meta) in frames {
        match classify(&f) {
            Kind::Tcp { whole, pseudo } | Kind::Udp { whole, pseudo } => {
                assert_eq!(whole, !meta.csum_partial, "partial exactly when marked");
                assert!(
                    whole || pseudo,
                    "a partial checksum is the pseudo-header sum: {f:02x?}"
                );
                assert!(offload || whole, "only an offloading interface leaves it");
                from.partial_sent += usize::from(meta.csum_partial);
            }
            Kind::Arp | Kind::Icmp | Kind::Fragment => {
                assert!(
                    !meta.csum_partial,
                    "{:?} is never left partial",
                    classify(&f)
                );
            }
        }
        let rx = RxMeta {
            csum_partial: carry_mark && meta.csum_partial,
        };
        to.receive(now, IF0, &f, rx, to_sink);
    }
    n
}

fn pump(now: Instant, a: &mut Stack, sa: &mut MetaSink, b: &mut Stack, sb: &mut MetaSink) {
    for _ in 0..200 {
        let moved = deliver(now, sa, true, b, sb, true) + deliver(now, sb, false, a, sa, true);
        if moved == 0 {
            return;
        }
    }
    panic!("the stacks never went quiet");
}

/// A UDP socket on `a` port 5000 and one on `b` port 5001, and the
/// address of `b`'s.
fn udp_pair(a: &mut Stack, b: &mut Stack) -> (SocketHandle, SocketHandle, SocketAddr) {
    let to_b = SocketAddr::new(IpAddr::V4(ip(2)), 5001);
    let ua = a
        .udp_bind(SocketAddr::new(IpAddr::V4(ip(1)), 5000))
        .unwrap();
    let ub = b.udp_bind(to_b).unwrap();
    (ua, ub, to_b)
}

/// The one frame `s` holds, taken from it.
fn only_frame(s: &mut MetaSink) -> Vec<u8> {
    let frames = std::mem::take(&mut s.frames);
    assert_eq!(frames.len(), 1, "one frame");
    frames.into_iter().next().unwrap().0
}

/// A connection from `a` to `b` port 80, established: (a's end, b's end).
fn connect(
    now: Instant,
    a: &mut Stack,
    sa: &mut MetaSink,
    b: &mut Stack,
    sb: &mut MetaSink,
) -> (SocketHandle, SocketHandle) {
    let lb = b
        .tcp_listen(SocketAddr::new(IpAddr::V4(ip(2)), 80), 8)
        .unwrap();
    let ca = a
        .tcp_connect(now, SocketAddr::new(IpAddr::V4(ip(2)), 80), None, sa)
        .unwrap();
    pump(now, a, sa, b, sb);
    assert_eq!(a.tcp_state(ca).unwrap(), TcpState::Established);
    let (cb, _) = b.tcp_accept(lb).unwrap();
    (ca, cb)
}

#[test]
fn tcp_and_udp_leave_checksums_to_an_offloading_link() {
    let now = Instant::ZERO;
    let (mut a, mut b) = (stack(1, 11), stack(2, 12));
    assert!(a.set_tx_checksum_offload(IF0, true));
    assert!(
        !a.set_tx_checksum_offload(IfaceId(3), true),
        "no such interface"
    );
    let (mut sa, mut sb) = (MetaSink::default(), MetaSink::default());

    // UDP, small (partial) and larger than the MTU (fragments: whole).
    let (ua, ub, to_b) = udp_pair(&mut a, &mut b);
    a.udp_send_to(now, ua, to_b, None, b"first", &mut sa)
        .unwrap();
    pump(now, &mut a, &mut sa, &mut b, &mut sb);
    a.udp_send_to(now, ua, to_b, None, &[7u8; 3000], &mut sa)
        .unwrap();
    a.udp_send_to(now, ua, to_b, None, b"third", &mut sa)
        .unwrap();
    pump(now, &mut a, &mut sa, &mut b, &mut sb);
    let mut buf = [0u8; 4000];
    for want in [5usize, 3000, 5] {
        assert_eq!(b.udp_recv_from(ub, &mut buf).unwrap().len, want);
    }

    // TCP both ways: b's segments are whole, a's partial; both accepted.
    let (ca, cb) = connect(now, &mut a, &mut sa, &mut b, &mut sb);
    let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7) as u8).collect();
    let mut sent = 0;
    let mut got = Vec::new();
    let mut echoed = Vec::new();
    let mut chunk = [0u8; 4096];
    for _ in 0..10_000 {
        if echoed.len() == data.len() {
            break;
        }
        if sent < data.len() {
            sent += a.tcp_send(now, ca, &data[sent..], &mut sa).unwrap_or(0);
        }
        pump(now, &mut a, &mut sa, &mut b, &mut sb);
        while let Ok(n) = b.tcp_recv(now, cb, &mut chunk, &mut sb) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&chunk[..n]);
            assert_eq!(b.tcp_send(now, cb, &chunk[..n], &mut sb).unwrap(), n);
        }
        pump(now, &mut a, &mut sa, &mut b, &mut sb);
        while let Ok(n) = a.tcp_recv(now, ca, &mut chunk, &mut sa) {
            if n == 0 {
                break;
            }
            echoed.extend_from_slice(&chunk[..n]);
        }
    }
    assert!(
        got == data,
        "b got {} of {} bytes, or other bytes",
        got.len(),
        data.len()
    );
    assert!(
        echoed == data,
        "a got {} of {} bytes back, or other bytes",
        echoed.len(),
        data.len()
    );
    // Every TCP segment from `a` after the handshake was partial; the first
    // UDP datagram waited for ARP (whole), the 3000-byte one left in
    // fragments (whole).
    assert!(sa.partial_sent > 20, "{} partial frames", sa.partial_sent);
    assert_eq!(sb.partial_sent, 0);
    assert_eq!(b.counters().rx_drop_tcp_bad_checksum, 0);
    assert_eq!(b.counters().rx_drop_udp_bad_checksum, 0);
}

#[test]
fn a_partial_checksum_without_the_mark_is_dropped_as_corrupt() {
    let now = Instant::ZERO;
    let (mut a, mut b) = (stack(1, 21), stack(2, 22));
    a.set_tx_checksum_offload(IF0, true);
    let (mut sa, mut sb) = (MetaSink::default(), MetaSink::default());
    let (ua, ub, to_b) = udp_pair(&mut a, &mut b);
    // Resolve first (ARP is never partial), then lose the mark on the way.
    a.udp_send_to(now, ua, to_b, None, b"x", &mut sa).unwrap();
    pump(now, &mut a, &mut sa, &mut b, &mut sb);
    let mut buf = [0u8; 8];
    assert_eq!(b.udp_recv_from(ub, &mut buf).unwrap().len, 1);
    a.udp_send_to(now, ua, to_b, None, b"lost mark", &mut sa)
        .unwrap();
    deliver(now, &mut sa, true, &mut b, &mut sb, false);
    assert_eq!(sa.partial_sent, 1);
    assert_eq!(b.counters().rx_drop_udp_bad_checksum, 1);
    assert!(b.udp_recv_from(ub, &mut buf).is_err());
}

/// Without offload: a corrupt segment on an established connection (the
/// shape header prediction takes) is dropped and counted; a good one that
/// prediction declines (out of order), whose sum was found good before
/// prediction, is taken by the general path and not counted.
#[test]
fn established_segments_corrupt_ones_dropped_good_ones_kept() {
    let now = Instant::ZERO;
    let (mut a, mut b) = (stack(1, 31), stack(2, 32));
    let (mut sa, mut sb) = (MetaSink::default(), MetaSink::default());
    let (ca, cb) = connect(now, &mut a, &mut sa, &mut b, &mut sb);
    a.tcp_set_nodelay(now, ca, true, &mut sa).unwrap();
    a.tcp_send(now, ca, b"first", &mut sa).unwrap();
    let first = only_frame(&mut sa);
    a.tcp_send(now, ca, b"second", &mut sa).unwrap();
    let second = only_frame(&mut sa);

    // The first with a byte of its payload flipped: dropped, counted.
    let mut corrupt = first.clone();
    *corrupt.last_mut().unwrap() ^= 0x20;
    b.receive(now, IF0, &corrupt, RxMeta::default(), &mut sb);
    assert_eq!(b.counters().rx_drop_tcp_bad_checksum, 1);
    let mut buf = [0u8; 64];
    assert!(
        b.tcp_recv(now, cb, &mut buf, &mut sb).is_err(),
        "nothing taken"
    );

    // The second, good but out of order: kept, not counted as corrupt.
    b.receive(now, IF0, &second, RxMeta::default(), &mut sb);
    assert_eq!(b.counters().rx_drop_tcp_bad_checksum, 1);
    assert!(
        b.tcp_recv(now, cb, &mut buf, &mut sb).is_err(),
        "a hole first"
    );
    // The first, intact: both, in order.
    b.receive(now, IF0, &first, RxMeta::default(), &mut sb);
    let n = b.tcp_recv(now, cb, &mut buf, &mut sb).unwrap();
    assert_eq!(&buf[..n], b"firstsecond");
    assert_eq!(b.counters().rx_drop_tcp_bad_checksum, 1);
}

/// The IPv4 header sum is verified on receive unless the interface's link
/// vouches for it (`set_rx_ip_checksum_offload`): a frame whose header sum
/// is wrong is dropped and counted on a plain interface, on the predicted
/// TCP path and the general (UDP) path alike, and taken on a vouched one.
#[test]
fn an_ip_header_sum_is_verified_unless_the_link_vouches_for_it() {
    let now = Instant::ZERO;
    let (mut a, mut b) = (stack(1, 41), stack(2, 42));
    let (mut sa, mut sb) = (MetaSink::default(), MetaSink::default());
    let (ca, cb) = connect(now, &mut a, &mut sa, &mut b, &mut sb);
    a.tcp_set_nodelay(now, ca, true, &mut sa).unwrap();
    let (ua, ub, to_b) = udp_pair(&mut a, &mut b);
    // A frame of `a` with its IPv4 header sum off by one bit.
    let damaged = |s: &mut MetaSink| {
        let mut f = only_frame(s);
        f[14 + 10] ^= 0x01;
        assert!(!Ipv4Packet::new_checked(&f[14..]).unwrap().verify_checksum());
        f
    };
    let mut buf = [0u8; 64];
    let rounds: [(bool, &[u8]); 3] = [(false, b"one"), (true, b"two"), (false, b"six")];
    for (round, (vouched, text)) in rounds.into_iter().enumerate() {
        assert!(b.set_rx_ip_checksum_offload(IF0, vouched));
        let dropped_before = b.counters().rx_drop_ipv4_bad_checksum;
        a.tcp_send(now, ca, text, &mut sa).unwrap();
        let segment = damaged(&mut sa);
        a.udp_send_to(now, ua, to_b, None, text, &mut sa).unwrap();
        let datagram = damaged(&mut sa);
        b.receive(now, IF0, &segment, RxMeta::default(), &mut sb);
        b.receive(now, IF0, &datagram, RxMeta::default(), &mut sb);
        let dropped = b.counters().rx_drop_ipv4_bad_checksum - dropped_before;
        if vouched {
            assert_eq!(dropped, 0, "round {round}: taken");
            let n = b.tcp_recv(now, cb, &mut buf, &mut sb).unwrap();
            assert_eq!(&buf[..n], text);
            assert_eq!(b.udp_recv_from(ub, &mut buf).unwrap().len, text.len());
        } else {
            assert_eq!(dropped, 2, "round {round}: both dropped and counted");
            assert!(b.tcp_recv(now, cb, &mut buf, &mut sb).is_err());
            assert!(b.udp_recv_from(ub, &mut buf).is_err());
            // The lost segment comes again intact, as a retransmission
            // would bring it, so the next round starts in order.
            let mut intact = segment.clone();
            intact[14 + 10] ^= 0x01;
            b.receive(now, IF0, &intact, RxMeta::default(), &mut sb);
            let n = b.tcp_recv(now, cb, &mut buf, &mut sb).unwrap();
            assert_eq!(&buf[..n], text);
        }
        // b's ACKs go back; a's send buffer empties.
        pump(now, &mut a, &mut sa, &mut b, &mut sb);
    }
}

/// Segments written from a connection's header template keep its length
/// fields while the length repeats and rewrite them when it changes: each
/// frame's IP length, IP sum and TCP sum (whole, or the pseudo-header sum
/// for an offloading link) are its own, through runs of equal lengths and
/// changes both ways.
#[test]
fn template_segments_of_repeated_and_changed_lengths_carry_their_own_sums() {
    for offload in [false, true] {
        let now = Instant::ZERO;
        let (mut a, mut b) = (stack(1, 51), stack(2, 52));
        a.set_tx_checksum_offload(IF0, offload);
        let (mut sa, mut sb) = (MetaSink::default(), MetaSink::default());
        let (ca, cb) = connect(now, &mut a, &mut sa, &mut b, &mut sb);
        a.tcp_set_nodelay(now, ca, true, &mut sa).unwrap();
        let mut buf = [0u8; 256];
        for len in [5usize, 6, 6, 6, 5, 5, 200, 6] {
            let msg: Vec<u8> = (0..len).map(|i| (i * 13 + len) as u8).collect();
            a.tcp_send(now, ca, &msg, &mut sa).unwrap();
            let frame = only_frame(&mut sa);
            let ipv4 = Ipv4Packet::new_checked(&frame[14..]).unwrap();
            assert_eq!(usize::from(ipv4.total_len()), frame.len() - 14, "{len}");
            assert_eq!(
                classify(&frame),
                Kind::Tcp {
                    whole: !offload,
                    pseudo: offload
                },
                "a {len}-byte segment, offload {offload}"
            );
            b.receive(
                now,
                IF0,
                &frame,
                RxMeta {
                    csum_partial: offload,
                },
                &mut sb,
            );
            assert_eq!(b.tcp_recv(now, cb, &mut buf, &mut sb).unwrap(), len);
            assert_eq!(&buf[..len], &msg[..]);
            // b's ACK, so that the next segment leaves at once.
            b.tcp_send(now, cb, b"k", &mut sb).unwrap();
            pump(now, &mut a, &mut sa, &mut b, &mut sb);
            assert_eq!(a.tcp_recv(now, ca, &mut buf, &mut sa).unwrap(), 1);
        }
        assert!(a.counters().tcp_direct_segments >= 8, "offload {offload}");
        assert_eq!(b.counters().rx_drop_tcp_bad_checksum, 0);
    }
}

/// The frames that are not data: a reset from a port nobody listens on is
/// TCP (partial on an offloading interface, its field the pseudo-header
/// sum), the port unreachable answering a datagram to a closed port is
/// ICMP (always whole), and both arrive and act on the other side.
#[test]
fn resets_are_left_partial_and_icmp_errors_stay_whole() {
    let now = Instant::ZERO;
    let (mut a, mut b) = (stack(1, 51), stack(2, 52));
    assert!(a.set_tx_checksum_offload(IF0, true) && b.set_tx_checksum_offload(IF0, true));
    let (mut sa, mut sb) = (MetaSink::default(), MetaSink::default());
    let both = |a: &mut Stack, sa: &mut MetaSink, b: &mut Stack, sb: &mut MetaSink| {
        for _ in 0..50 {
            let moved = deliver(now, sa, true, b, sb, true) + deliver(now, sb, true, a, sa, true);
            if moved == 0 {
                return;
            }
        }
        panic!("the stacks never went quiet");
    };
    // A SYN to port 81, where nothing listens: b answers with a reset.
    let ca = a
        .tcp_connect(now, SocketAddr::new(IpAddr::V4(ip(2)), 81), None, &mut sa)
        .unwrap();
    both(&mut a, &mut sa, &mut b, &mut sb);
    assert_eq!(b.counters().tcp_resets_sent, 1);
    assert_eq!(sb.partial_sent, 1, "the reset left partial");
    assert!(
        a.tcp_state(ca).map_or(true, |s| s == TcpState::Closed),
        "the reset closed the connection: {:?}",
        a.tcp_state(ca)
    );
    // A datagram to port 9, closed on b: an ICMP error comes back whole
    // (`deliver` checks it is not marked) and is not dropped as corrupt.
    let ua = a
        .udp_bind(SocketAddr::new(IpAddr::V4(ip(1)), 5000))
        .unwrap();
    let to_closed = SocketAddr::new(IpAddr::V4(ip(2)), 9);
    a.udp_send_to(now, ua, to_closed, None, b"anyone?", &mut sa)
        .unwrap();
    let partial_before = sa.partial_sent;
    both(&mut a, &mut sa, &mut b, &mut sb);
    assert_eq!(
        sa.partial_sent,
        partial_before + 1,
        "the datagram left partial"
    );
    assert_eq!(sb.partial_sent, 1, "nothing more from b was partial");
    assert_eq!(b.counters().icmp_errors_sent, 1);
    assert_eq!(b.counters().rx_drop_udp_bad_checksum, 0);
    assert_eq!(a.counters().rx_drop_icmp_bad_checksum, 0);
    assert_eq!(a.counters().rx_accept_icmp_error, 1, "the error was taken");
}
