//! IPv6 between two stacks on an in-memory wire: duplicate address
//! detection, neighbor discovery, echo, UDP with fragments, TCP, dual-stack
//! sockets, packet too big, and hostile neighbor discovery.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use stack::{
    IfaceId, Instant, InterfaceConfig, Ipv6Config, RxMeta, Stack, StackConfig, TcpState, VecSink,
};
use wire::ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
use wire::icmpv6::{Icmpv6Packet, Icmpv6Repr};
use wire::ip::IpProtocol;
use wire::ipv6::{Ipv6Packet, Ipv6Repr};

const IF0: IfaceId = IfaceId(0);

fn v6(last: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfd99, 0, 0, 1, 0, 0, 0, last)
}

fn mac(last: u8) -> [u8; 6] {
    [2, 0, 0, 0, 0, last]
}

fn stack_with(last: u8, mtu: usize, addr6: Ipv6Addr) -> Stack {
    let mut s = Stack::new(StackConfig {
        seed: u64::from(last),
        ..StackConfig::default()
    });
    s.add_interface(&InterfaceConfig {
        mtu,
        ..InterfaceConfig::new(
            format!("p{last}"),
            mac(last),
            Ipv4Addr::new(10, 99, 1, last),
            24,
        )
    })
    .unwrap();
    s.enable_ipv6(
        Instant::ZERO,
        IF0,
        &Ipv6Config {
            addrs: vec![(addr6, 64)],
            gateway: None,
        },
    )
    .unwrap();
    s
}

fn stack(last: u8, mtu: usize) -> Stack {
    stack_with(last, mtu, v6(u16::from(last)))
}

struct Wire {
    a: Stack,
    b: Stack,
    sa: VecSink,
    sb: VecSink,
    now: Instant,
}

impl Wire {
    fn new(a: Stack, b: Stack) -> Self {
        Wire {
            a,
            b,
            sa: VecSink::default(),
            sb: VecSink::default(),
            now: Instant::ZERO,
        }
    }

    /// Moves frames until both stacks are quiet; returns how many moved.
    fn run(&mut self) -> usize {
        let mut moved = 0;
        for _ in 0..10_000 {
            if self.sa.frames.is_empty() && self.sb.frames.is_empty() {
                return moved;
            }
            let from_a = std::mem::take(&mut self.sa.frames);
            let from_b = std::mem::take(&mut self.sb.frames);
            moved += from_a.len() + from_b.len();
            for (_, f) in from_a {
                self.b
                    .receive(self.now, IF0, &f, RxMeta::default(), &mut self.sb);
            }
            for (_, f) in from_b {
                self.a
                    .receive(self.now, IF0, &f, RxMeta::default(), &mut self.sa);
            }
        }
        panic!("the stacks never went quiet");
    }

    /// Advances time by `ms` in steps, running timers and the wire.
    fn advance(&mut self, ms: u64) {
        for _ in 0..ms / 10 {
            self.now = self.now.add_micros(10_000);
            self.a.poll(self.now, &mut self.sa);
            self.b.poll(self.now, &mut self.sb);
            self.run();
        }
    }

    /// Runs duplicate address detection to its end.
    fn settle(&mut self) {
        self.a.poll(self.now, &mut self.sa);
        self.b.poll(self.now, &mut self.sb);
        self.run();
        self.advance(1200);
    }
}

#[test]
fn addresses_are_unusable_until_duplicate_detection_ends() {
    let mut w = Wire::new(stack(1, 1500), stack(2, 1500));
    assert!(!w.a.is_local_ip(IpAddr::V6(v6(1))), "tentative at first");
    w.a.poll(w.now, &mut w.sa);
    // One probe per address (link-local and fd99::1), from ::.
    assert_eq!(w.a.counters().ndp_dad_probes_sent, 2);
    w.run();
    w.advance(1200);
    assert!(w.a.is_local_ip(IpAddr::V6(v6(1))));
    assert_eq!(w.a.counters().ndp_dad_completed, 2);
    assert_eq!(w.a.counters().ndp_dad_duplicates, 0);
}

#[test]
fn a_duplicate_address_is_detected_and_never_used() {
    let mut w = Wire::new(stack_with(1, 1500, v6(7)), stack_with(2, 1500, v6(7)));
    w.settle();
    // Both probed fd99::7 at once: each saw the other's probe.
    assert_eq!(w.a.counters().ndp_dad_duplicates, 1);
    assert_eq!(w.b.counters().ndp_dad_duplicates, 1);
    assert!(!w.a.is_local_ip(IpAddr::V6(v6(7))));
    // The link-local addresses differ and are in use.
    assert_eq!(w.a.counters().ndp_dad_completed, 1);
}

#[test]
fn a_probe_for_an_address_in_use_is_answered_and_the_prober_gives_it_up() {
    let mut w = Wire::new(
        stack_with(1, 1500, v6(7)),
        Stack::new(StackConfig::default()),
    );
    w.settle();
    assert!(w.a.is_local_ip(IpAddr::V6(v6(7))));
    // Now b comes up with the same address.
    w.b = stack_with(2, 1500, v6(7));
    w.settle();
    assert_eq!(w.b.counters().ndp_dad_duplicates, 1);
    assert!(!w.b.is_local_ip(IpAddr::V6(v6(7))));
    assert!(w.a.is_local_ip(IpAddr::V6(v6(7))), "the holder keeps it");
    assert!(w.a.counters().ndp_neighbor_adverts_sent >= 1);
}

/// An Ethernet frame carrying an IPv6 packet from `src` to `dst`.
fn frame(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hop_limit: u8,
    next: IpProtocol,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 40 + payload.len()];
    let mut eth = EthernetFrame::new_unchecked(&mut f[..]);
    EthernetRepr {
        src_addr: EthernetAddress(src_mac),
        dst_addr: EthernetAddress(dst_mac),
        ethertype: EtherType::Ipv6,
    }
    .emit(&mut eth);
    let mut ip = Ipv6Packet::new_unchecked(&mut f[14..]);
    Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: next,
        payload_len: payload.len(),
        hop_limit,
        traffic_class: 0,
        flow_label: 0,
    }
    .emit(&mut ip);
    ip.payload_mut().copy_from_slice(payload);
    f
}

fn icmp(repr: &Icmpv6Repr<'_>, src: Ipv6Addr, dst: Ipv6Addr) -> Vec<u8> {
    let mut b = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Icmpv6Packet::new_unchecked(&mut b[..]), &src, &dst);
    b
}

#[test]
fn echo_is_answered_after_neighbor_discovery() {
    let mut w = Wire::new(stack(1, 1500), stack(2, 1500));
    w.settle();
    let peer = v6(9);
    let req = icmp(
        &Icmpv6Repr::EchoRequest {
            ident: 7,
            seq_no: 1,
            data: b"ping over six",
        },
        peer,
        v6(1),
    );
    let f = frame(mac(9), mac(1), peer, v6(1), 64, IpProtocol::Icmpv6, &req);
    w.a.receive(w.now, IF0, &f, RxMeta::default(), &mut w.sa);
    assert_eq!(w.a.counters().rx_accept_icmpv6_echo_request, 1);
    // The reply waits for the peer's link address: a solicitation to its
    // solicited-node group goes out.
    let (_, ns) = w.sa.frames.pop().expect("a neighbor solicitation");
    assert_eq!(&ns[..6], &[0x33, 0x33, 0xff, 0, 0, 9]);
    assert_eq!(w.a.counters().ndp_held, 1);
    // The peer advertises itself; the held reply leaves.
    let na = icmp(
        &Icmpv6Repr::NeighborAdvert {
            router: false,
            solicited: true,
            override_: true,
            target_addr: peer,
            options: &wire::ndp::target_lladdr_option(EthernetAddress(mac(9))),
        },
        peer,
        v6(1),
    );
    let f = frame(mac(9), mac(1), peer, v6(1), 255, IpProtocol::Icmpv6, &na);
    w.a.receive(w.now, IF0, &f, RxMeta::default(), &mut w.sa);
    let (_, reply) = w.sa.frames.pop().expect("the echo reply");
    assert_eq!(&reply[..6], &mac(9));
    let ip = Ipv6Packet::new_checked(&reply[14..]).unwrap();
    assert_eq!(ip.dst_addr(), peer);
    let p = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    match Icmpv6Repr::parse(&p, &v6(1), &peer, wire::ChecksumMode::Full).unwrap() {
        Icmpv6Repr::EchoReply {
            ident,
            seq_no,
            data,
        } => {
            assert_eq!((ident, seq_no, data), (7, 1, &b"ping over six"[..]))
        }
        other => panic!("not an echo reply: {other:?}"),
    }
    assert_ne!(ip.flow_label(), 0, "a flow label from the flow hash");
}

#[test]
fn neighbor_discovery_from_off_the_link_is_dropped_and_counted() {
    let mut w = Wire::new(stack(1, 1500), stack(2, 1500));
    w.settle();
    let peer = v6(9);
    let ns = icmp(
        &Icmpv6Repr::NeighborSolicit {
            target_addr: v6(1),
            options: &wire::ndp::source_lladdr_option(EthernetAddress(mac(9))),
        },
        peer,
        v6(1),
    );
    let before = w.a.counters().clone();
    let f = frame(mac(9), mac(1), peer, v6(1), 254, IpProtocol::Icmpv6, &ns);
    w.a.receive(w.now, IF0, &f, RxMeta::default(), &mut w.sa);
    assert_eq!(w.a.counters().rx_drop_ndp_bad_hop_limit, 1);
    assert_eq!(w.a.counters().rx_outcomes(), before.rx_outcomes() + 1);
    assert!(w.sa.frames.is_empty(), "no answer to it");
    // With hop limit 255 it is answered.
    let f = frame(mac(9), mac(1), peer, v6(1), 255, IpProtocol::Icmpv6, &ns);
    w.a.receive(w.now, IF0, &f, RxMeta::default(), &mut w.sa);
    assert_eq!(w.a.counters().rx_accept_ndp_neighbor_solicit, 1);
    assert_eq!(w.sa.frames.len(), 1);
}

#[test]
fn udp_echo_of_every_size_with_fragments() {
    let mut w = Wire::new(stack(1, 1500), stack(2, 1500));
    w.settle();
    // Each saw the other's probes, for groups and addresses not its own.
    let drops = w.a.counters().rx_drops() + w.b.counters().rx_drops();
    let ha =
        w.a.udp_bind(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0))
            .unwrap();
    let dst = SocketAddr::new(IpAddr::V6(v6(2)), 7);
    let hb = w.b.udp_bind(dst).unwrap();
    let mut buf = vec![0u8; 70000];
    for size in (1..=8000)
        .step_by(13)
        .chain([1452, 1453, 2904, 2905, 8000, 65527])
    {
        let payload: Vec<u8> = (0..size).map(|i| (i * 7 + size) as u8).collect();
        w.a.udp_send_to(w.now, ha, dst, None, &payload, &mut w.sa)
            .unwrap();
        w.run();
        let got = w.b.udp_recv_from(hb, &mut buf).unwrap();
        assert_eq!(&buf[..got.len], &payload[..], "size {size}");
        assert_eq!(got.meta.dst, dst);
        assert_eq!(got.meta.src.ip(), IpAddr::V6(v6(1)));
        w.b.udp_send_to(w.now, hb, got.meta.src, None, &buf[..got.len], &mut w.sb)
            .unwrap();
        w.run();
        let back = w.a.udp_recv_from(ha, &mut buf).unwrap();
        assert_eq!(&buf[..back.len], &payload[..], "echo of size {size}");
    }
    assert!(w.a.counters().ipv6_fragments_sent > 0);
    assert!(w.b.counters().ipv6_reassembled > 0);
    assert_eq!(w.a.counters().rx_drops() + w.b.counters().rx_drops(), drops);
    // One resolution each way, no more.
    assert_eq!(w.a.counters().ndp_neighbor_solicits_sent, 1);
}

#[test]
fn udp_to_a_closed_port_gets_port_unreachable() {
    let mut w = Wire::new(stack(1, 1500), stack(2, 1500));
    w.settle();
    let ha =
        w.a.udp_bind(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0))
            .unwrap();
    let dst = SocketAddr::new(IpAddr::V6(v6(2)), 9);
    w.a.udp_send_to(w.now, ha, dst, None, b"anyone?", &mut w.sa)
        .unwrap();
    w.run();
    assert_eq!(w.b.counters().rx_drop_udp_no_socket, 1);
    assert_eq!(w.b.counters().icmpv6_errors_sent, 1);
    assert_eq!(w.a.counters().rx_accept_icmpv6_error, 1);
    // Unconnected: the error is dropped, as Linux's without IP_RECVERR.
    assert_eq!(w.a.udp_take_error(ha).unwrap(), None);
    assert_eq!(w.a.counters().udp_icmp_errors_ignored, 1);
}

/// A connected UDP socket hears port unreachable about its peer as
/// ECONNREFUSED, once; an error about another destination is not its.
#[test]
fn a_connected_udp_socket_hears_port_unreachable() {
    let mut w = Wire::new(stack(1, 1500), stack(2, 1500));
    w.settle();
    let ha =
        w.a.udp_bind(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0))
            .unwrap();
    let peer = SocketAddr::new(IpAddr::V6(v6(2)), 9);
    w.a.udp_set_peer(ha, Some(peer)).unwrap();
    let other = SocketAddr::new(IpAddr::V6(v6(2)), 10);
    w.a.udp_send_to(w.now, ha, other, None, b"elsewhere", &mut w.sa)
        .unwrap();
    w.run();
    assert!(!w.a.udp_error_pending(ha), "about another destination");
    w.a.udp_send_to(w.now, ha, peer, None, b"anyone?", &mut w.sa)
        .unwrap();
    w.run();
    assert!(w.a.udp_error_pending(ha));
    assert_eq!(
        w.a.udp_take_error(ha).unwrap(),
        Some(stack::SocketError::ConnectionRefused)
    );
    assert_eq!(w.a.udp_take_error(ha).unwrap(), None, "reported once");
    assert_eq!(w.a.counters().udp_icmp_errors_reported, 1);
    assert_eq!(w.a.counters().udp_icmp_errors_ignored, 1);
}

fn transfer(w: &mut Wire, client: SocketAddr, server: SocketAddr, size: usize) {
    let l = w.b.tcp_listen(server, 8).unwrap();
    let c =
        w.a.tcp_connect(w.now, server, Some(client), &mut w.sa)
            .unwrap();
    w.run();
    assert_eq!(w.a.tcp_state(c).unwrap(), TcpState::Established);
    let (s, peer) = w.b.tcp_accept(l).unwrap();
    assert_eq!(peer.ip(), client.ip());
    let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    let mut sent = 0;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    for _ in 0..100_000 {
        if sent < data.len() {
            sent += w.a.tcp_send(w.now, c, &data[sent..], &mut w.sa).unwrap();
        }
        w.run();
        match w.b.tcp_recv(w.now, s, &mut buf, &mut w.sb) {
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(stack::SocketError::WouldBlock) => {}
            Err(e) => panic!("{e:?}"),
        }
        w.run();
        if got.len() == data.len() {
            break;
        }
        w.advance(10);
    }
    assert!(got == data, "the bytes arrived whole and in order");
    w.a.tcp_close(w.now, c, &mut w.sa).unwrap();
    w.b.tcp_close(w.now, s, &mut w.sb).unwrap();
    w.run();
    w.b.tcp_close(w.now, l, &mut w.sb).ok();
}

#[test]
fn tcp_over_ipv6_carries_a_megabyte() {
    let mut w = Wire::new(stack(1, 1500), stack(2, 1500));
    w.settle();
    let drops = w.a.counters().rx_drops() + w.b.counters().rx_drops();
    transfer(
        &mut w,
        SocketAddr::new(IpAddr::V6(v6(1)), 40000),
        SocketAddr::new(IpAddr::V6(v6(2)), 80),
        1 << 20,
    );
    assert_eq!(w.a.counters().rx_drops() + w.b.counters().rx_drops(), drops);
    assert_eq!(
        w.a.counters().ipv6_fragments_sent,
        0,
        "segments fit the MTU"
    );
    // About 730 full segments: nearly all written from the connection's
    // header template (the first ones wait for neighbor discovery).
    let direct = w.a.counters().tcp_direct_segments;
    assert!(direct > 650, "{direct} segments from the template");
}

#[test]
fn a_dual_stack_listener_takes_both_families_and_v6only_refuses_ipv4() {
    let mut w = Wire::new(stack(1, 1500), stack(2, 1500));
    w.settle();
    let any6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 80);
    // Dual stack: clashes with an IPv4 listener on the port.
    let v4l =
        w.b.tcp_listen(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 80), 8)
            .unwrap();
    assert_eq!(
        w.b.tcp_listen(any6, 8).unwrap_err(),
        stack::SocketError::AddrInUse
    );
    // IPV6_V6ONLY does not.
    let only = w.b.tcp_listen_v6only(any6, 8, true).unwrap();
    w.b.tcp_close(w.now, only, &mut w.sb).unwrap();
    w.b.tcp_close(w.now, v4l, &mut w.sb).unwrap();
    // A dual listener serves IPv4 with IPv4 addresses.
    let l = w.b.tcp_listen(any6, 8).unwrap();
    let c4 =
        w.a.tcp_connect(
            w.now,
            SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 99, 1, 2)), 80),
            None,
            &mut w.sa,
        )
        .unwrap();
    let c6 =
        w.a.tcp_connect(
            w.now,
            SocketAddr::new(IpAddr::V6(v6(2)), 80),
            None,
            &mut w.sa,
        )
        .unwrap();
    w.run();
    assert_eq!(w.a.tcp_state(c4).unwrap(), TcpState::Established);
    assert_eq!(w.a.tcp_state(c6).unwrap(), TcpState::Established);
    let (_, p1) = w.b.tcp_accept(l).unwrap();
    let (_, p2) = w.b.tcp_accept(l).unwrap();
    let mut families = [p1.is_ipv4(), p2.is_ipv4()];
    families.sort();
    assert_eq!(families, [false, true]);
    // A v6-only listener resets IPv4.
    w.b.tcp_close(w.now, l, &mut w.sb).unwrap();
    let _only =
        w.b.tcp_listen_v6only(
            SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 81),
            8,
            true,
        )
        .unwrap();
    let c =
        w.a.tcp_connect(
            w.now,
            SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 99, 1, 2)), 81),
            None,
            &mut w.sa,
        )
        .unwrap();
    w.run();
    assert_eq!(w.a.tcp_state(c).unwrap(), TcpState::Closed);
}

#[test]
fn packet_too_big_shrinks_the_segments_of_a_connection() {
    let mut w = Wire::new(stack(1, 9000), stack(2, 9000));
    w.settle();
    let server = SocketAddr::new(IpAddr::V6(v6(2)), 80);
    let l = w.b.tcp_listen(server, 8).unwrap();
    let c = w.a.tcp_connect(w.now, server, None, &mut w.sa).unwrap();
    w.run();
    let (s, _) = w.b.tcp_accept(l).unwrap();
    let before = w.a.tcp_info(c).unwrap().snd_mss;
    assert!(before > 8000, "jumbo MSS first: {before}");
    // A router on the way says 1400.
    let big = {
        let data = vec![1u8; 5000];
        w.a.tcp_send(w.now, c, &data, &mut w.sa).unwrap();
        let (_, f) = w.sa.frames.pop().unwrap();
        w.sa.frames.clear();
        f
    };
    let quote = &big[14..14 + 1232];
    let ptb = icmp(
        &Icmpv6Repr::PktTooBig {
            mtu: 1400,
            header: Ipv6Repr::parse_quoted(quote).unwrap().0,
            data: &quote[40..],
        },
        v6(77),
        v6(1),
    );
    let f = frame(mac(2), mac(1), v6(77), v6(1), 64, IpProtocol::Icmpv6, &ptb);
    w.a.receive(w.now, IF0, &f, RxMeta::default(), &mut w.sa);
    assert_eq!(w.a.counters().ipv6_path_mtu_lowered, 1);
    assert_eq!(w.a.counters().tcp_path_mtu_lowered, 1);
    let after = w.a.tcp_info(c).unwrap().snd_mss;
    assert!(after <= 1400 - 60, "{after}");
    // What is resent now fits.
    assert!(!w.sa.frames.is_empty());
    for (_, f) in &w.sa.frames {
        assert!(f.len() - 14 <= 1400, "a frame of {}", f.len());
    }
    let mut buf = vec![0u8; 8000];
    let mut got = 0;
    for _ in 0..100 {
        w.run();
        got += w.b.tcp_recv(w.now, s, &mut buf, &mut w.sb).unwrap_or(0);
        if got == 5000 {
            break;
        }
        w.advance(10);
    }
    assert_eq!(got, 5000);
}

fn router_advert(router: Ipv6Addr, router_mac: [u8; 6], lifetime: u16) -> Vec<u8> {
    let opt = wire::ndp::source_lladdr_option(EthernetAddress(router_mac));
    let ra = icmp(
        &Icmpv6Repr::RouterAdvert {
            hop_limit: 64,
            managed: false,
            other: false,
            router_lifetime: lifetime,
            reachable_time: 0,
            retrans_time: 0,
            options: &opt,
        },
        router,
        "ff02::1".parse().unwrap(),
    );
    frame(
        router_mac,
        [0x33, 0x33, 0, 0, 0, 1],
        router,
        "ff02::1".parse().unwrap(),
        255,
        IpProtocol::Icmpv6,
        &ra,
    )
}

#[test]
fn routers_are_solicited_and_their_adverts_give_the_default_route() {
    let mut w = Wire::new(stack(1, 1500), Stack::new(StackConfig::default()));
    w.settle();
    // Solicitations once the link-local address is in use: three, 4 s apart.
    assert_eq!(w.a.counters().ndp_router_solicits_sent, 1);
    w.advance(8100);
    assert_eq!(w.a.counters().ndp_router_solicits_sent, 3);
    w.advance(8000);
    assert_eq!(w.a.counters().ndp_router_solicits_sent, 3);
    let far = Ipv6Addr::new(0xfd98, 0, 0, 0, 0, 0, 0, 9);
    let h =
        w.a.udp_bind(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0))
            .unwrap();
    let dst = SocketAddr::new(IpAddr::V6(far), 53);
    assert_eq!(
        w.a.udp_send_to(w.now, h, dst, None, b"q", &mut w.sa),
        Err(stack::SocketError::NetworkUnreachable),
        "no default route yet"
    );
    let router: Ipv6Addr = "fe80::1".parse().unwrap();
    let f = router_advert(router, mac(9), 1800);
    w.a.receive(w.now, IF0, &f, RxMeta::default(), &mut w.sa);
    assert_eq!(w.a.counters().ndp_default_routers_learned, 1);
    // Off-link traffic goes to the router's MAC, known from its advert.
    w.sa.frames.clear();
    w.a.udp_send_to(w.now, h, dst, None, b"q", &mut w.sa)
        .unwrap();
    let (_, sent) = w.sa.frames.pop().expect("the datagram");
    assert_eq!(&sent[..6], &mac(9));
    // A lifetime of zero withdraws it.
    let f = router_advert(router, mac(9), 0);
    w.a.receive(w.now, IF0, &f, RxMeta::default(), &mut w.sa);
    assert_eq!(
        w.a.udp_send_to(w.now, h, dst, None, b"q", &mut w.sa),
        Err(stack::SocketError::NetworkUnreachable)
    );
}

#[test]
fn router_adverts_are_ignored_when_told_or_when_a_gateway_is_set() {
    let mut off = Stack::new(StackConfig {
        ip6_accept_rtadv: false,
        ..StackConfig::default()
    });
    off.add_interface(&InterfaceConfig::new(
        "p1",
        mac(1),
        Ipv4Addr::new(10, 99, 1, 1),
        24,
    ))
    .unwrap();
    off.enable_ipv6(
        Instant::ZERO,
        IF0,
        &Ipv6Config {
            addrs: vec![(v6(1), 64)],
            gateway: None,
        },
    )
    .unwrap();
    let mut w = Wire::new(off, Stack::new(StackConfig::default()));
    w.settle();
    w.advance(10_000);
    assert_eq!(w.a.counters().ndp_router_solicits_sent, 0);
    let f = router_advert("fe80::1".parse().unwrap(), mac(9), 1800);
    w.a.receive(w.now, IF0, &f, RxMeta::default(), &mut w.sa);
    assert_eq!(w.a.counters().rx_accept_ndp_router_advert, 1);
    assert_eq!(w.a.counters().ndp_default_routers_learned, 0);
}

fn redirect_frame(
    router: Ipv6Addr,
    router_mac: [u8; 6],
    target: Ipv6Addr,
    dst: Ipv6Addr,
) -> Vec<u8> {
    let opt = wire::ndp::target_lladdr_option(EthernetAddress(mac(8)));
    let msg = icmp(
        &Icmpv6Repr::Redirect {
            target_addr: target,
            dst_addr: dst,
            options: &opt,
        },
        router,
        v6(1),
    );
    frame(
        router_mac,
        mac(1),
        router,
        v6(1),
        255,
        IpProtocol::Icmpv6,
        &msg,
    )
}

#[test]
fn a_redirect_from_the_destinations_router_sets_its_first_hop() {
    let mut w = Wire::new(stack(1, 1500), Stack::new(StackConfig::default()));
    w.settle();
    let router: Ipv6Addr = "fe80::1".parse().unwrap();
    let f = router_advert(router, mac(9), 1800);
    w.a.receive(w.now, IF0, &f, RxMeta::default(), &mut w.sa);
    let far = Ipv6Addr::new(0xfd98, 0, 0, 0, 0, 0, 0, 9);
    let better: Ipv6Addr = "fe80::8".parse().unwrap();
    // From another node than the router: ignored.
    let f = redirect_frame(better, mac(8), better, far);
    w.a.receive(w.now, IF0, &f, RxMeta::default(), &mut w.sa);
    assert_eq!(w.a.counters().rx_accept_ndp_redirect, 1);
    assert_eq!(w.a.counters().ndp_redirects_applied, 0);
    // From the router: the destination's packets go to the better hop,
    // whose link address the redirect carried.
    let f = redirect_frame(router, mac(9), better, far);
    w.a.receive(w.now, IF0, &f, RxMeta::default(), &mut w.sa);
    assert_eq!(w.a.counters().ndp_redirects_applied, 1);
    let h =
        w.a.udp_bind(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0))
            .unwrap();
    w.sa.frames.clear();
    w.a.udp_send_to(
        w.now,
        h,
        SocketAddr::new(IpAddr::V6(far), 53),
        None,
        b"q",
        &mut w.sa,
    )
    .unwrap();
    let (_, sent) = w.sa.frames.pop().expect("the datagram");
    assert_eq!(&sent[..6], &mac(8));
}

#[test]
fn redirects_are_ignored_when_rediraccept_is_off() {
    let mut a = Stack::new(StackConfig {
        ip6_redirect_accept: false,
        ..StackConfig::default()
    });
    a.add_interface(&InterfaceConfig::new(
        "p1",
        mac(1),
        Ipv4Addr::new(10, 99, 1, 1),
        24,
    ))
    .unwrap();
    let router: Ipv6Addr = "fe80::1".parse().unwrap();
    a.enable_ipv6(
        Instant::ZERO,
        IF0,
        &Ipv6Config {
            addrs: vec![(v6(1), 64)],
            gateway: Some(router),
        },
    )
    .unwrap();
    let mut w = Wire::new(a, Stack::new(StackConfig::default()));
    w.settle();
    let far = Ipv6Addr::new(0xfd98, 0, 0, 0, 0, 0, 0, 9);
    let better: Ipv6Addr = "fe80::8".parse().unwrap();
    let f = redirect_frame(router, mac(9), better, far);
    w.a.receive(w.now, IF0, &f, RxMeta::default(), &mut w.sa);
    assert_eq!(w.a.counters().rx_accept_ndp_redirect, 1);
    assert_eq!(w.a.counters().ndp_redirects_applied, 0);
}

/// `w.a` after it has talked to `w.b`, so that it knows b's link address
/// and its ICMPv6 errors to b leave at once.
fn acquainted() -> Wire {
    let mut w = Wire::new(stack(1, 1500), stack(2, 1500));
    w.settle();
    let h =
        w.a.udp_bind(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0))
            .unwrap();
    let to = SocketAddr::new(IpAddr::V6(v6(2)), 9);
    w.a.udp_send_to(w.now, h, to, None, b"hello", &mut w.sa)
        .unwrap();
    w.run();
    w
}

/// What `w.a` sends back to b about `packet` (from b to `dst`, the
/// payload after the fixed header starting with `next`): the ICMPv6
/// errors' type, code and pointer (0 for a time exceeded).
fn icmp_errors(
    w: &mut Wire,
    dst: Ipv6Addr,
    next: IpProtocol,
    payload: &[u8],
) -> Vec<(u8, u8, u32)> {
    let f = frame(mac(2), mac(1), v6(2), dst, 64, next, payload);
    w.a.receive(w.now, IF0, &f, RxMeta::default(), &mut w.sa);
    collect_errors(w)
}

fn collect_errors(w: &mut Wire) -> Vec<(u8, u8, u32)> {
    let mut out = Vec::new();
    for (_, f) in std::mem::take(&mut w.sa.frames) {
        let ip = Ipv6Packet::new_checked(&f[14..]).unwrap();
        // Neighbor discovery goes on beside (after a timeout, probes).
        let is_error = ip.next_header() == IpProtocol::Icmpv6 && ip.payload()[0] < 128;
        if !is_error {
            continue;
        }
        assert_eq!(ip.dst_addr(), v6(2));
        // From our unicast address, also about a packet to a group.
        assert_eq!(ip.src_addr(), v6(1));
        let p = Icmpv6Packet::new_checked(ip.payload()).unwrap();
        match Icmpv6Repr::parse(&p, &v6(1), &v6(2), wire::ChecksumMode::Full).unwrap() {
            Icmpv6Repr::ParamProblem {
                reason, pointer, ..
            } => out.push((4, u8::from(reason), pointer)),
            Icmpv6Repr::TimeExceeded { reason, .. } => out.push((3, u8::from(reason), 0)),
            other => panic!("not an error: {other:?}"),
        }
    }
    out
}

#[test]
fn refused_extension_headers_get_a_parameter_problem_pointing_at_the_fault() {
    let mut w = acquainted();
    let before = w.a.counters().rx_drop_ipv6_ext_unsupported;
    // Destination options -> UDP: an unknown option at packet offset 42
    // whose action bits are 10 (discard, report even to a group).
    let opts = [17, 0, 0x85, 4, 0, 0, 0, 0];
    assert_eq!(
        icmp_errors(&mut w, v6(1), IpProtocol::Ipv6Opts, &opts),
        [(4, 2, 42)]
    );
    let all_nodes = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
    assert_eq!(
        icmp_errors(&mut w, all_nodes, IpProtocol::Ipv6Opts, &opts),
        [(4, 2, 42)]
    );
    // Action 11: reported, but not about a packet to a group.
    let opts = [17, 0, 0xc5, 4, 0, 0, 0, 0];
    assert_eq!(
        icmp_errors(&mut w, v6(1), IpProtocol::Ipv6Opts, &opts),
        [(4, 2, 42)]
    );
    assert_eq!(
        icmp_errors(&mut w, all_nodes, IpProtocol::Ipv6Opts, &opts),
        []
    );
    // Action 01: dropped without a word.
    let opts = [17, 0, 0x45, 4, 0, 0, 0, 0];
    assert_eq!(icmp_errors(&mut w, v6(1), IpProtocol::Ipv6Opts, &opts), []);
    // A type 0 routing header with segments left (RFC 5095): the pointer
    // names its routing type.
    let mut rh0 = vec![17, 2, 0, 1, 0, 0, 0, 0];
    rh0.extend_from_slice(&v6(7).octets());
    assert_eq!(
        icmp_errors(&mut w, v6(1), IpProtocol::Ipv6Route, &rh0),
        [(4, 0, 42)]
    );
    assert_eq!(w.a.counters().rx_drop_ipv6_ext_unsupported, before + 6);
    // Hop-by-hop after destination options: the field that named it.
    let late_hbh = [0, 0, 1, 4, 0, 0, 0, 0, 17, 0, 1, 4, 0, 0, 0, 0];
    assert_eq!(
        icmp_errors(&mut w, v6(1), IpProtocol::Ipv6Opts, &late_hbh),
        [(4, 1, 40)]
    );
    // An unknown upper layer after an extension header: its next header
    // field, not the fixed header's.
    let unknown = [253, 0, 1, 4, 0, 0, 0, 0, 1, 2, 3, 4];
    assert_eq!(
        icmp_errors(&mut w, v6(1), IpProtocol::Ipv6Opts, &unknown),
        [(4, 1, 40)]
    );
    assert_eq!(
        icmp_errors(&mut w, v6(1), IpProtocol::Unknown(253), &unknown),
        [(4, 1, 6)]
    );
}

#[test]
fn a_datagram_whose_fragments_never_all_come_is_reported_to_its_sender() {
    let mut w = acquainted();
    // Fragment header -> UDP, offset 0, more to come; ident 5.
    let mut first = vec![17, 0, 0, 1, 0, 0, 0, 5];
    first.extend_from_slice(&[0u8; 64]);
    assert_eq!(icmp_errors(&mut w, v6(1), IpProtocol::Ipv6Frag, &first), []);
    // Another datagram (ident 6) of which only a later piece came.
    let mut later = vec![17, 0, 0, 65, 0, 0, 0, 6];
    later.extend_from_slice(&[0u8; 64]);
    assert_eq!(icmp_errors(&mut w, v6(1), IpProtocol::Ipv6Frag, &later), []);
    let timeouts = w.a.counters().ipv6_reassembly_timeout;
    w.now = w.now.add_micros(31_000_000);
    w.a.poll(w.now, &mut w.sa);
    assert_eq!(w.a.counters().ipv6_reassembly_timeout, timeouts + 2);
    // One time exceeded, code 1, about the datagram whose first fragment
    // came (RFC 8200 4.5).
    assert_eq!(collect_errors(&mut w), [(3, 1, 0)]);
}

#[test]
fn a_solicited_advert_without_link_address_confirms_a_probed_neighbor() {
    // RFC 4861 7.2.4: the answer to a unicast probe may omit the target's
    // link address (Linux's does); 7.2.5: a solicited advertisement for an
    // entry that has one makes it reachable all the same.
    let mut w = acquainted();
    let b = IpAddr::V6(v6(2));
    assert!(w.a.neighbors().resolved(IF0, b, w.now).is_some());
    // Reachable time passes: the next datagram puts b in DELAY, and 5 s
    // later a probes it with a unicast solicitation.
    w.now = w.now.add_micros(31_000_000);
    let h =
        w.a.udp_bind(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0))
            .unwrap();
    w.a.udp_send_to(w.now, h, SocketAddr::new(b, 9), None, b"again", &mut w.sa)
        .unwrap();
    w.sa.frames.clear();
    w.now = w.now.add_micros(6_000_000);
    w.a.poll(w.now, &mut w.sa);
    let probes = w.a.counters().ndp_neighbor_probes_sent;
    assert!(probes > 0, "a probed b");
    assert!(w.a.neighbors().resolved(IF0, b, w.now).is_none());
    w.sa.frames.clear();
    // b's answer, as Linux sends it: solicited, no option.
    let na = icmp(
        &Icmpv6Repr::NeighborAdvert {
            router: false,
            solicited: true,
            override_: false,
            target_addr: v6(2),
            options: &[],
        },
        v6(2),
        v6(1),
    );
    let f = frame(mac(2), mac(1), v6(2), v6(1), 255, IpProtocol::Icmpv6, &na);
    w.a.receive(w.now, IF0, &f, RxMeta::default(), &mut w.sa);
    assert!(
        w.a.neighbors().resolved(IF0, b, w.now).is_some(),
        "the probe's answer confirmed b"
    );
}

#[test]
fn acknowledged_data_keeps_the_neighbor_reachable_under_a_live_connection() {
    // RFC 4861 7.3.1: new data acknowledged is forward progress, which
    // confirms the first hop as a solicited advertisement would; a
    // neighbor under a live connection neither goes stale nor is probed.
    let mut w = acquainted();
    let b = IpAddr::V6(v6(2));
    let server = SocketAddr::new(b, 80);
    let l = w.b.tcp_listen(server, 8).unwrap();
    let c = w.a.tcp_connect(w.now, server, None, &mut w.sa).unwrap();
    w.run();
    let (s, _) = w.b.tcp_accept(l).unwrap();
    let mut buf = [0u8; 64];
    // 70 s, past two ReachableTimes: a sends every half second, b reads
    // and only acknowledges.
    let a = IpAddr::V6(v6(1));
    let mut b_lost_a = false;
    for step in 0..140 {
        assert_eq!(w.a.tcp_send(w.now, c, b"tick", &mut w.sa).unwrap(), 4);
        w.run();
        assert_eq!(w.b.tcp_recv(w.now, s, &mut buf, &mut w.sb).unwrap(), 4);
        w.run();
        w.advance(500);
        assert!(
            w.a.neighbors().resolved(IF0, b, w.now).is_some(),
            "b went unconfirmed at step {step} ({} s)",
            w.now.total_millis() / 1000
        );
        b_lost_a |= w.b.neighbors().resolved(IF0, a, w.now).is_none();
    }
    // One confirmation per half ReachableTime.
    assert!(w.a.counters().ndp_reachable_by_upper_layer >= 4);
    // Of b's, only the SYN was acknowledged (it sent no data), while its
    // entry for a was fresh: no hint, so that entry went stale under the
    // ACKs b sent, and was probed.
    assert_eq!(w.b.counters().ndp_reachable_by_upper_layer, 0);
    assert!(b_lost_a, "b's entry for a stayed reachable with no hint");
    assert!(w.b.counters().ndp_neighbor_probes_sent > 0);
}
