//! VLAN interfaces, several FIBs and source policy between two stacks on
//! one wire: the server has a port without addresses carrying VLANs 10 and
//! 20, each with an address, a gateway, a VIP and a FIB of its own that a
//! rule gives the VIP's packets (F-Stack's `ipfw_pr`); the peer plays
//! both gateways (its own VLAN interfaces 10 and 20) and the clients
//! behind them (more addresses on those interfaces, in other subnets).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use stack::neighbor::Lookup;
use stack::route::{IpCidr, Route};
use stack::{
    Duration, IfaceId, Instant, InterfaceConfig, PolicyRule, RuleMatch, RxMeta, Stack, StackConfig,
    StackError, TcpState, VecSink,
};

const PORT: IfaceId = IfaceId(0);
const SERVER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

fn ip(a: u8, b: u8, c: u8, d: u8) -> Ipv4Addr {
    Ipv4Addr::new(a, b, c, d)
}

/// VLAN `vid`'s interface config: 10.99.`vid`.`host`/24, gateway .1 for
/// the server, more addresses as given.
fn vlan_cfg(
    mac: [u8; 6],
    vid: u8,
    host: u8,
    gateway: bool,
    extra: Vec<Ipv4Addr>,
) -> InterfaceConfig {
    InterfaceConfig {
        gateway: gateway.then(|| ip(10, 99, vid, 1)),
        extra_addrs: extra,
        ..InterfaceConfig::new(format!("vlan{vid}"), mac, ip(10, 99, vid, host), 24)
    }
}

/// The VIP of VLAN `vid` (10.99.1`vid`.10 style: 10.99.110.10, 10.99.120.10).
fn vip(vid: u8) -> Ipv4Addr {
    ip(10, 99, 100 + vid, 10)
}

/// The client behind the gateway of VLAN `vid` (10.99.2`vid`.5 style).
fn client(vid: u8) -> Ipv4Addr {
    ip(10, 99, 200 + vid, 5)
}

fn vip_rule(vid: u8, fib: u16) -> PolicyRule {
    PolicyRule {
        priority: 100,
        matches: RuleMatch::Source(IpCidr::new(IpAddr::V4(vip(vid)), 32).unwrap()),
        fib,
    }
}

struct Net {
    server: Stack,
    peer: Stack,
    ss: VecSink,
    sp: VecSink,
    now: Instant,
    /// The VLAN ids of the frames the server sent, in order.
    server_tags: Vec<Option<u16>>,
    /// Server VLAN interfaces 10 and 20.
    s10: IfaceId,
    s20: IfaceId,
}

fn tag_of(frame: &[u8]) -> Option<u16> {
    (frame.len() >= 18 && frame[12..14] == [0x81, 0x00])
        .then(|| u16::from_be_bytes([frame[14], frame[15]]) & 0x0fff)
}

impl Net {
    fn new() -> Self {
        let mut server = Stack::new(StackConfig {
            seed: 2,
            ..StackConfig::default()
        });
        let port = server.add_port("port0", SERVER_MAC, 1500).unwrap();
        assert_eq!(port, PORT);
        let s10 = server
            .add_vlan(PORT, 10, &vlan_cfg(SERVER_MAC, 10, 2, true, vec![vip(10)]))
            .unwrap();
        let s20 = server
            .add_vlan(PORT, 20, &vlan_cfg(SERVER_MAC, 20, 2, true, vec![vip(20)]))
            .unwrap();
        server.set_interface_fib(s10, 1).unwrap();
        server.set_interface_fib(s20, 2).unwrap();
        server.add_rule(vip_rule(10, 1)).unwrap();
        server.add_rule(vip_rule(20, 2)).unwrap();

        let mut peer = Stack::new(StackConfig {
            seed: 1,
            ..StackConfig::default()
        });
        peer.add_port("port0", PEER_MAC, 1500).unwrap();
        let p10 = peer
            .add_vlan(
                PORT,
                10,
                &vlan_cfg(PEER_MAC, 10, 1, false, vec![client(10)]),
            )
            .unwrap();
        let p20 = peer
            .add_vlan(
                PORT,
                20,
                &vlan_cfg(PEER_MAC, 20, 1, false, vec![client(20)]),
            )
            .unwrap();
        // Each gateway reaches its VIP through the server's address on
        // its VLAN.
        for (iface, vid) in [(p10, 10), (p20, 20)] {
            peer.add_route(
                0,
                Route {
                    dest: IpCidr::new(IpAddr::V4(vip(vid)), 32).unwrap(),
                    gateway: Some(IpAddr::V4(ip(10, 99, vid, 2))),
                    iface,
                },
            )
            .unwrap();
        }
        Net {
            server,
            peer,
            ss: VecSink::default(),
            sp: VecSink::default(),
            now: Instant::from_secs(1),
            server_tags: Vec::new(),
            s10,
            s20,
        }
    }

    fn run(&mut self, steps: usize) {
        for _ in 0..steps {
            for _ in 0..100 {
                if self.ss.frames.is_empty() && self.sp.frames.is_empty() {
                    break;
                }
                for (iface, f) in std::mem::take(&mut self.ss.frames) {
                    assert_eq!(iface, PORT, "frames leave through the port");
                    self.server_tags.push(tag_of(&f));
                    self.peer
                        .receive(self.now, PORT, &f, RxMeta::default(), &mut self.sp);
                }
                for (iface, f) in std::mem::take(&mut self.sp.frames) {
                    assert_eq!(iface, PORT);
                    self.server
                        .receive(self.now, PORT, &f, RxMeta::default(), &mut self.ss);
                }
            }
            self.now += Duration::from_millis(1);
            self.server.poll(self.now, &mut self.ss);
            self.peer.poll(self.now, &mut self.sp);
        }
    }

    /// A TCP connection from the client behind VLAN `vid`'s gateway to
    /// that VLAN's VIP: (peer's socket, server's socket).
    fn connect(&mut self, vid: u8, port: u16) -> (stack::SocketHandle, stack::SocketHandle) {
        let l = self
            .server
            .tcp_listen(SocketAddr::new(IpAddr::V4(vip(vid)), port), 4)
            .unwrap();
        let c = self
            .peer
            .tcp_connect(
                self.now,
                SocketAddr::new(IpAddr::V4(vip(vid)), port),
                Some(SocketAddr::new(IpAddr::V4(client(vid)), 0)),
                &mut self.sp,
            )
            .unwrap();
        self.run(5);
        let (s, _) = self.server.tcp_accept(l).unwrap();
        // Each send leaves at once, not after the peer's delayed ACK.
        self.server
            .tcp_set_nodelay(self.now, s, true, &mut self.ss)
            .unwrap();
        assert_eq!(self.peer.tcp_state(c), Ok(TcpState::Established));
        (c, s)
    }

    /// Sends `data` from the server's socket and reads it at the peer's;
    /// returns the VLAN tags of the server's frames meanwhile.
    fn server_sends(
        &mut self,
        s: stack::SocketHandle,
        c: stack::SocketHandle,
        data: &[u8],
    ) -> Vec<Option<u16>> {
        self.server_tags.clear();
        assert_eq!(
            self.server.tcp_send(self.now, s, data, &mut self.ss),
            Ok(data.len())
        );
        self.run(5);
        let mut buf = vec![0u8; data.len() + 16];
        let n = self
            .peer
            .tcp_recv(self.now, c, &mut buf, &mut self.sp)
            .unwrap();
        assert_eq!(&buf[..n], data);
        std::mem::take(&mut self.server_tags)
    }
}

#[test]
fn replies_leave_tagged_on_their_vips_vlan() {
    let mut n = Net::new();
    for vid in [10u8, 20] {
        let (c, s) = n.connect(vid, 80);
        let tags = n.server_sends(s, c, b"hello over a vlan");
        assert!(!tags.is_empty());
        assert!(
            tags.iter().all(|t| *t == Some(u16::from(vid))),
            "vlan {vid}: server frames tagged {tags:?}"
        );
        // And the other way: the server read what the client wrote.
        n.peer.tcp_send(n.now, c, b"ping", &mut n.sp).unwrap();
        n.run(5);
        let mut buf = [0u8; 16];
        let got = n.server.tcp_recv(n.now, s, &mut buf, &mut n.ss).unwrap();
        assert_eq!(&buf[..got], b"ping");
    }
    // Each VLAN interface counted its own frames, tags included.
    for id in [n.s10, n.s20] {
        let t = n.server.interface_traffic(id).unwrap();
        assert!(t.rx_frames >= 4 && t.tx_frames >= 3, "{id}: {t:?}");
        assert!(t.tx_bytes >= t.tx_frames * 64, "{id}: {t:?}");
    }
    assert_eq!(n.server.interface_traffic(PORT), None);
    assert_eq!(n.server.counters().rx_drops(), 0);
}

#[test]
fn udp_reply_follows_the_source_rule_and_falls_back_to_the_main_fib() {
    let mut n = Net::new();
    let server = n
        .server
        .udp_bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 53))
        .unwrap();
    let client_sock = n
        .peer
        .udp_bind(SocketAddr::new(IpAddr::V4(client(20)), 5353))
        .unwrap();
    let echo = |n: &mut Net| -> Vec<Option<u16>> {
        n.peer
            .udp_send_to(
                n.now,
                client_sock,
                SocketAddr::new(IpAddr::V4(vip(20)), 53),
                None,
                b"q",
                &mut n.sp,
            )
            .unwrap();
        n.run(3);
        let mut buf = [0u8; 8];
        let got = n.server.udp_recv_from(server, &mut buf).unwrap();
        n.server_tags.clear();
        n.server
            .udp_send_to(
                n.now,
                server,
                got.meta.src,
                Some(got.meta.dst.ip()),
                b"a",
                &mut n.ss,
            )
            .unwrap();
        n.run(3);
        let back = n.peer.udp_recv_from(client_sock, &mut buf).unwrap();
        assert_eq!(&buf[..back.len], b"a");
        std::mem::take(&mut n.server_tags)
    };
    assert_eq!(echo(&mut n), vec![Some(20)], "FIB 2's gateway on VLAN 20");
    assert_eq!(n.server.fib_of_source(IpAddr::V4(vip(20)), 0), 2);
    // Without the rule the main FIB's default (VLAN 10's gateway, the
    // first one configured) carries the reply.
    n.server.remove_rule(&vip_rule(20, 2)).unwrap();
    assert_eq!(n.server.fib_of_source(IpAddr::V4(vip(20)), 0), 0);
    let tags = echo(&mut n);
    assert_eq!(tags.last(), Some(&Some(10)), "{tags:?}");
}

#[test]
fn live_rule_and_route_changes_move_an_established_connection() {
    let mut n = Net::new();
    let (c, s) = n.connect(20, 8080);
    assert_eq!(n.server_sends(s, c, b"before"), vec![Some(20)]);

    // A rule ahead of the VIP's sends it to FIB 1 (VLAN 10's gateway).
    let moved = PolicyRule {
        priority: 50,
        ..vip_rule(20, 1)
    };
    n.server.add_rule(moved).unwrap();
    assert_eq!(n.server.rules()[0], moved);
    let tags = n.server_sends(s, c, b"after the rule");
    assert!(
        tags.contains(&Some(10)) && !tags.contains(&Some(20)),
        "{tags:?}"
    );
    n.server.remove_rule(&moved).unwrap();
    assert_eq!(n.server_sends(s, c, b"rule gone"), vec![Some(20)]);

    // A host route in FIB 2 toward the client through VLAN 10's gateway.
    let host = IpCidr::new(IpAddr::V4(client(20)), 32).unwrap();
    n.server
        .add_route(
            2,
            Route {
                dest: host,
                gateway: Some(IpAddr::V4(ip(10, 99, 10, 1))),
                iface: n.s10,
            },
        )
        .unwrap();
    assert!(n.server.fib(2).unwrap().iter().any(|r| r.dest == host));
    let tags = n.server_sends(s, c, b"after the route");
    assert!(!tags.contains(&Some(20)), "{tags:?}");
    // Changed in place back to VLAN 20's gateway.
    let old = n
        .server
        .change_route(
            2,
            Route {
                dest: host,
                gateway: Some(IpAddr::V4(ip(10, 99, 20, 1))),
                iface: n.s20,
            },
        )
        .unwrap();
    assert_eq!(old.iface, n.s10);
    assert_eq!(n.server_sends(s, c, b"changed back"), vec![Some(20)]);
    n.server.remove_route(2, host).unwrap();
    assert_eq!(n.server.tcp_state(s), Ok(TcpState::Established));
    assert_eq!(n.peer.tcp_state(c), Ok(TcpState::Established));
    assert_eq!(n.server.counters().tcp_resets_sent, 0);
    assert_eq!(n.peer.counters().tcp_resets_received, 0);
}

#[test]
fn neighbours_are_per_vlan() {
    let mut n = Net::new();
    let _ = n.connect(10, 80);
    let _ = n.connect(20, 80);
    let gw10 = IpAddr::V4(ip(10, 99, 10, 1));
    let gw20 = IpAddr::V4(ip(10, 99, 20, 1));
    let found = |s: &Stack, iface, addr| {
        matches!(s.neighbors().lookup(iface, addr, n.now), Lookup::Found(_))
    };
    assert!(found(&n.server, n.s10, gw10));
    assert!(found(&n.server, n.s20, gw20));
    // Neither gateway is known on the other's VLAN.
    assert!(!found(&n.server, n.s10, gw20));
    assert!(!found(&n.server, n.s20, gw10));
    // An ARP request on VLAN 10 for VLAN 20's address gets no answer.
    let before = n.server.counters().rx_drop_arp_not_for_us;
    let mut req = vec![0xff; 6];
    req.extend_from_slice(&PEER_MAC);
    req.extend_from_slice(&[0x81, 0x00, 0x00, 10, 0x08, 0x06]);
    req.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    req.extend_from_slice(&PEER_MAC);
    req.extend_from_slice(&[10, 99, 10, 1]);
    req.extend_from_slice(&[0; 6]);
    req.extend_from_slice(&[10, 99, 20, 2]);
    n.server
        .receive(n.now, PORT, &req, RxMeta::default(), &mut n.ss);
    assert!(n.ss.frames.is_empty());
    assert_eq!(n.server.counters().rx_drop_arp_not_for_us, before + 1);
    // The same request on VLAN 20 is answered, tagged 20.
    req[15] = 20;
    req[32..36].copy_from_slice(&[10, 99, 20, 1]);
    n.server
        .receive(n.now, PORT, &req, RxMeta::default(), &mut n.ss);
    assert_eq!(n.ss.frames.len(), 1);
    let reply = &n.ss.frames[0].1;
    assert_eq!(tag_of(reply), Some(20));
    assert_eq!(&reply[..6], &PEER_MAC);
    assert_eq!(&reply[16..18], &[0x08, 0x06]);
}

/// A UDP datagram to `dst` from the peer, tagged `vid` (`None`: untagged).
fn udp_frame(vid: Option<u16>, dst: Ipv4Addr) -> Vec<u8> {
    let mut sink = VecSink::default();
    let mut s = Stack::new(StackConfig::default());
    s.add_interface(&InterfaceConfig::new("raw", PEER_MAC, ip(10, 99, 10, 1), 8))
        .unwrap();
    let h = s
        .udp_bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 9))
        .unwrap();
    s.udp_send_to(
        Instant::from_secs(1),
        h,
        SocketAddr::new(IpAddr::V4(dst), 53),
        None,
        b"x",
        &mut sink,
    )
    .unwrap();
    // The first frame is the ARP request for dst: answer it by hand is
    // not needed; build the datagram from the held packet instead.
    let arp = sink.frames.remove(0).1;
    assert_eq!(&arp[12..14], &[0x08, 0x06]);
    let mut reply = arp.clone();
    reply[..6].copy_from_slice(&PEER_MAC);
    reply[6..12].copy_from_slice(&SERVER_MAC);
    reply[21] = 2;
    reply[22..28].copy_from_slice(&SERVER_MAC);
    reply[28..32].copy_from_slice(&dst.octets());
    reply[32..38].copy_from_slice(&PEER_MAC);
    reply[38..42].copy_from_slice(&[10, 99, 10, 1]);
    s.receive(
        Instant::from_secs(1),
        IfaceId(0),
        &reply,
        RxMeta::default(),
        &mut sink,
    );
    let mut f = sink.frames.pop().unwrap().1;
    assert_eq!(&f[12..14], &[0x08, 0x00]);
    if let Some(vid) = vid {
        let mut tagged = f[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00]);
        tagged.extend_from_slice(&vid.to_be_bytes());
        tagged.extend_from_slice(&f[12..]);
        f = tagged;
    }
    f
}

#[test]
fn unknown_vlans_and_untagged_frames_on_a_bare_port_are_dropped_and_counted() {
    let mut n = Net::new();
    let sock = n
        .server
        .udp_bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 53))
        .unwrap();
    let c = n.server.counters().clone();
    let mut buf = [0u8; 8];
    // VLAN 30 is not configured.
    n.server.receive(
        n.now,
        PORT,
        &udp_frame(Some(30), vip(10)),
        RxMeta::default(),
        &mut n.ss,
    );
    assert_eq!(
        n.server.counters().rx_drop_vlan_unknown_id,
        c.rx_drop_vlan_unknown_id + 1
    );
    // Untagged, and priority-tagged (VLAN 0), on a port without addresses.
    n.server.receive(
        n.now,
        PORT,
        &udp_frame(None, vip(10)),
        RxMeta::default(),
        &mut n.ss,
    );
    n.server.receive(
        n.now,
        PORT,
        &udp_frame(Some(0), vip(10)),
        RxMeta::default(),
        &mut n.ss,
    );
    assert_eq!(
        n.server.counters().rx_drop_untagged_no_address,
        c.rx_drop_untagged_no_address + 2
    );
    // A truncated tag.
    let mut short = udp_frame(Some(10), vip(10));
    short.truncate(16);
    n.server
        .receive(n.now, PORT, &short, RxMeta::default(), &mut n.ss);
    assert_eq!(
        n.server.counters().rx_drop_vlan_truncated,
        c.rx_drop_vlan_truncated + 1
    );
    // An 802.1ad service tag outermost, with VLAN 10's id.
    let mut service = udp_frame(Some(10), vip(10));
    service[12..14].copy_from_slice(&[0x88, 0xa8]);
    n.server
        .receive(n.now, PORT, &service, RxMeta::default(), &mut n.ss);
    assert_eq!(
        n.server.counters().rx_drop_vlan_service_tag,
        c.rx_drop_vlan_service_tag + 1
    );
    assert!(n.server.udp_recv_from(sock, &mut buf).is_err());
    assert!(n.ss.frames.is_empty());
    // The same datagram on VLAN 10 arrives.
    n.server.receive(
        n.now,
        PORT,
        &udp_frame(Some(10), vip(10)),
        RxMeta::default(),
        &mut n.ss,
    );
    let got = n.server.udp_recv_from(sock, &mut buf).unwrap();
    assert_eq!(&buf[..got.len], b"x");
    assert_eq!(n.server.interface_traffic(n.s10).unwrap().rx_frames, 1);
    // Every frame ended in exactly one outcome.
    assert_eq!(
        n.server.counters().rx_outcomes(),
        n.server.counters().rx_frames
    );
}

#[test]
fn vlan_setup_errors_are_refused() {
    let mut s = Stack::new(StackConfig::default());
    let port = s.add_port("port0", SERVER_MAC, 1500).unwrap();
    let cfg = vlan_cfg(SERVER_MAC, 10, 2, true, vec![]);
    assert_eq!(s.add_vlan(port, 0, &cfg), Err(StackError::BadVlanId(0)));
    assert_eq!(
        s.add_vlan(port, 4095, &cfg),
        Err(StackError::BadVlanId(4095))
    );
    assert_eq!(
        s.add_vlan(IfaceId(9), 10, &cfg),
        Err(StackError::NoSuchInterface)
    );
    let other_mac = vlan_cfg(PEER_MAC, 10, 2, true, vec![]);
    assert_eq!(
        s.add_vlan(port, 10, &other_mac),
        Err(StackError::VlanLinkDiffers)
    );
    let v10 = s.add_vlan(port, 10, &cfg).unwrap();
    assert_eq!(
        s.add_vlan(port, 10, &vlan_cfg(SERVER_MAC, 11, 2, true, vec![])),
        Err(StackError::VlanExists(10))
    );
    assert_eq!(s.add_vlan(v10, 11, &cfg), Err(StackError::NotAPort));
    assert_eq!(
        s.set_interface_fib(v10, stack::policy::MAX_FIBS),
        Err(StackError::Policy(stack::PolicyError::NoSuchFib(
            stack::policy::MAX_FIBS
        )))
    );
    assert!(s.fib(3).is_none());
    assert_eq!(
        s.interface(v10).unwrap().vlan,
        Some(stack::Vlan { port, vid: 10 })
    );
    assert_eq!(s.interface(port).unwrap().addr_text(), "none");
    assert_eq!(
        s.interface(v10).unwrap().addr_text(),
        "10.99.10.2/24 vlan 10 on if0"
    );
}

#[test]
fn ipv6_on_a_vlan_resolves_its_neighbours_there_and_replies_tagged() {
    let mut n = Net::new();
    let v6 = |s: &str| s.parse::<std::net::Ipv6Addr>().unwrap();
    let (server6, peer6) = (v6("fd99:20::2"), v6("fd99:20::1"));
    let peer20 = n.peer.interfaces()[2].id;
    n.server
        .enable_ipv6(
            n.now,
            n.s20,
            &stack::Ipv6Config {
                addrs: vec![(server6, 64)],
                gateway: None,
            },
        )
        .unwrap();
    n.peer
        .enable_ipv6(
            n.now,
            peer20,
            &stack::Ipv6Config {
                addrs: vec![(peer6, 64)],
                gateway: None,
            },
        )
        .unwrap();
    // Duplicate address detection (one probe, a second) on both.
    n.run(1500);
    let server = n
        .server
        .udp_bind(SocketAddr::new(
            IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
            53,
        ))
        .unwrap();
    let client = n
        .peer
        .udp_bind(SocketAddr::new(IpAddr::V6(peer6), 5353))
        .unwrap();
    n.peer
        .udp_send_to(
            n.now,
            client,
            SocketAddr::new(IpAddr::V6(server6), 53),
            None,
            b"q6",
            &mut n.sp,
        )
        .unwrap();
    n.run(5);
    let mut buf = [0u8; 8];
    let got = n.server.udp_recv_from(server, &mut buf).unwrap();
    assert_eq!(&buf[..got.len], b"q6");
    n.server_tags.clear();
    n.server
        .udp_send_to(
            n.now,
            server,
            got.meta.src,
            Some(got.meta.dst.ip()),
            b"a6",
            &mut n.ss,
        )
        .unwrap();
    n.run(5);
    let back = n.peer.udp_recv_from(client, &mut buf).unwrap();
    assert_eq!(&buf[..back.len], b"a6");
    assert!(!n.server_tags.is_empty());
    assert!(
        n.server_tags.iter().all(|t| *t == Some(20)),
        "{:?}",
        n.server_tags
    );
    // The peer's address is known on VLAN 20 only.
    let found = |iface| {
        matches!(
            n.server.neighbors().lookup(iface, IpAddr::V6(peer6), n.now),
            Lookup::Found(_)
        )
    };
    assert!(found(n.s20));
    assert!(!found(n.s10));
}

/// A rule by SO_MARK (priority 50) sending mark 7 to FIB 2.
fn mark_rule() -> PolicyRule {
    PolicyRule {
        priority: 50,
        matches: RuleMatch::Mark(7),
        fib: 2,
    }
}

#[test]
fn a_marked_connection_takes_its_marks_fib_and_an_unmarked_one_the_main() {
    let mut n = Net::new();
    n.server.add_rule(mark_rule()).unwrap();
    let _l = n
        .peer
        .tcp_listen(SocketAddr::new(IpAddr::V4(client(20)), 9000), 4)
        .unwrap();
    let dst = SocketAddr::new(IpAddr::V4(client(20)), 9000);
    // Marked: FIB 2's default (VLAN 20's gateway) from the SYN on, and its
    // source is VLAN 20's address, the one that route leaves from.
    n.server_tags.clear();
    let marked = n
        .server
        .tcp_connect_marked(n.now, dst, None, 7, &mut n.ss)
        .unwrap();
    n.run(5);
    assert_eq!(n.server.tcp_state(marked), Ok(TcpState::Established));
    assert_eq!(
        n.server.tcp_local_addr(marked).unwrap().ip(),
        IpAddr::V4(ip(10, 99, 20, 2))
    );
    let tags = std::mem::take(&mut n.server_tags);
    assert!(
        !tags.is_empty() && tags.iter().all(|t| *t == Some(20)),
        "{tags:?}"
    );
    // Unmarked: the main FIB's default (VLAN 10's gateway).
    let plain = n.server.tcp_connect(n.now, dst, None, &mut n.ss).unwrap();
    n.run(5);
    assert_eq!(
        n.server.tcp_local_addr(plain).unwrap().ip(),
        IpAddr::V4(ip(10, 99, 10, 2))
    );
    let tags = std::mem::take(&mut n.server_tags);
    assert_eq!(tags.first(), Some(&Some(10)), "{tags:?}");
    // The mark changed on a live connection moves its next segments.
    n.server.tcp_set_mark(marked, 0).unwrap();
    n.server
        .tcp_send(n.now, marked, b"moved", &mut n.ss)
        .unwrap();
    n.run(1);
    let tags = std::mem::take(&mut n.server_tags);
    assert_eq!(tags.first(), Some(&Some(10)), "{tags:?}");
    // UDP: the mark alone picks the FIB when the socket names no source.
    let u = n
        .server
        .udp_bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0))
        .unwrap();
    n.server.udp_set_mark(u, 7).unwrap();
    n.server
        .udp_send_to(
            n.now,
            u,
            SocketAddr::new(IpAddr::V4(client(20)), 53),
            None,
            b"q",
            &mut n.ss,
        )
        .unwrap();
    n.run(1);
    assert_eq!(std::mem::take(&mut n.server_tags).first(), Some(&Some(20)));
    // Mark 0 names every unmarked socket: refused as a rule.
    assert!(n
        .server
        .add_rule(PolicyRule {
            matches: RuleMatch::Mark(0),
            ..mark_rule()
        })
        .is_err());
}

#[test]
fn a_listeners_mark_routes_its_connections() {
    let mut n = Net::new();
    // Neighbours on both VLANs resolved first: what the server sends
    // next is TCP alone.
    let _ = n.connect(10, 80);
    let _ = n.connect(20, 80);
    n.server.add_rule(mark_rule()).unwrap();
    let l = n
        .server
        .tcp_listen(SocketAddr::new(IpAddr::V4(vip(10)), 81), 4)
        .unwrap();
    n.server.tcp_set_mark(l, 7).unwrap();
    n.server_tags.clear();
    let c = n
        .peer
        .tcp_connect(
            n.now,
            SocketAddr::new(IpAddr::V4(vip(10)), 81),
            Some(SocketAddr::new(IpAddr::V4(client(10)), 0)),
            &mut n.sp,
        )
        .unwrap();
    n.run(5);
    // VIP 10's source rule says FIB 1, the mark's (ahead of it) FIB 2:
    // the SYN-ACK left on VLAN 20.
    let tags = std::mem::take(&mut n.server_tags);
    assert_eq!(tags.first(), Some(&Some(20)), "{tags:?}");
    assert_eq!(n.peer.tcp_state(c), Ok(TcpState::Established));
    let (s, _) = n.server.tcp_accept(l).unwrap();
    n.server.tcp_set_nodelay(n.now, s, true, &mut n.ss).unwrap();
    let tags = n.server_sends(s, c, b"inherited");
    assert!(tags.iter().all(|t| *t == Some(20)), "{tags:?}");
}

#[test]
fn a_vlan_taken_down_alone_drops_both_ways_and_comes_back() {
    let mut n = Net::new();
    let (c10, s10) = n.connect(10, 80);
    let (c20, s20) = n.connect(20, 80);
    n.server.set_vlan_up(n.s20, false).unwrap();
    assert_eq!(n.server.vlan_up(n.s20), Some(false));
    assert_eq!(n.server.vlan_up(PORT), None, "a port is the engine's");
    assert_eq!(n.server.set_vlan_up(PORT, false), Err(StackError::NotAVlan));
    // The server's segment on VLAN 20 never reaches the wire.
    n.server_tags.clear();
    n.server.tcp_send(n.now, s20, b"held", &mut n.ss).unwrap();
    n.run(1);
    assert!(!n.server_tags.contains(&Some(20)), "{:?}", n.server_tags);
    let t = n.server.interface_traffic(n.s20).unwrap();
    assert!(t.tx_drop_down >= 1, "{t:?}");
    // What the peer sends on VLAN 20 is dropped and counted.
    n.peer.tcp_send(n.now, c20, b"in", &mut n.sp).unwrap();
    n.run(1);
    assert!(n.server.counters().rx_drop_vlan_down >= 1);
    assert!(n.server.interface_traffic(n.s20).unwrap().rx_drop_down >= 1);
    // VLAN 10 carries on meanwhile.
    assert_eq!(n.server_sends(s10, c10, b"vlan 10 is up"), vec![Some(10)]);
    // Up again: the held data goes by retransmission, the connection lives.
    n.server.set_vlan_up(n.s20, true).unwrap();
    for _ in 0..40 {
        n.run(50);
    }
    let mut buf = [0u8; 16];
    let got = n.peer.tcp_recv(n.now, c20, &mut buf, &mut n.sp).unwrap();
    assert_eq!(&buf[..got], b"held");
    assert_eq!(n.server.tcp_state(s20), Ok(TcpState::Established));
}

#[test]
fn a_destroyed_vlan_takes_its_routes_rules_and_neighbours_and_its_place_is_reused() {
    let mut n = Net::new();
    let (_c20, s20) = n.connect(20, 80);
    let gw20 = IpAddr::V4(ip(10, 99, 20, 1));
    assert!(matches!(
        n.server.neighbors().lookup(n.s20, gw20, n.now),
        Lookup::Found(_)
    ));
    let by_iface = PolicyRule {
        priority: 7,
        matches: RuleMatch::Interface(n.s20),
        fib: 2,
    };
    n.server.add_rule(by_iface).unwrap();
    n.server.destroy_vlan(n.s20).unwrap();
    assert_eq!(
        n.server.destroy_vlan(n.s20),
        Err(StackError::NoSuchInterface)
    );
    assert_eq!(n.server.destroy_vlan(PORT), Err(StackError::NotAVlan));
    assert!(n.server.interface(n.s20).unwrap().gone());
    assert_eq!(n.server.interface_traffic(n.s20), None);
    // Its routes (main FIB and FIB 2), its rule, its neighbours: gone.
    assert!(n.server.fib(0).unwrap().iter().all(|r| r.iface != n.s20));
    assert!(n.server.fib(2).unwrap().iter().all(|r| r.iface != n.s20));
    assert!(!n.server.rules().contains(&by_iface));
    assert!(!matches!(
        n.server.neighbors().lookup(n.s20, gw20, n.now),
        Lookup::Found(_)
    ));
    // The connection from VIP 20 sends nothing: its source is not ours.
    let no_route = n.server.counters().tx_drop_no_route;
    n.server_tags.clear();
    let _ = n.server.tcp_send(n.now, s20, b"orphan", &mut n.ss);
    n.run(1);
    assert!(n.server_tags.is_empty(), "{:?}", n.server_tags);
    assert!(n.server.counters().tx_drop_no_route > no_route);
    // A frame tagged 20 is for no interface now.
    let unknown = n.server.counters().rx_drop_vlan_unknown_id;
    n.server.receive(
        n.now,
        PORT,
        &udp_frame(Some(20), ip(10, 99, 20, 2)),
        RxMeta::default(),
        &mut n.ss,
    );
    assert_eq!(n.server.counters().rx_drop_vlan_unknown_id, unknown + 1);
    // VLAN 20 made again takes the destroyed one's place and works.
    let again = n
        .server
        .add_vlan(PORT, 20, &vlan_cfg(SERVER_MAC, 20, 2, false, vec![vip(20)]))
        .unwrap();
    assert_eq!(again, n.s20);
    assert_eq!(n.server.interfaces().len(), 3);
    // Its FIB 2 is empty now: the VIP's rule is left out, and a host
    // route in the main FIB takes the replies back through VLAN 20.
    n.server.remove_rule(&vip_rule(20, 2)).unwrap();
    let (c, s) = n.connect(20, 81);
    n.server
        .add_route(
            0,
            Route {
                dest: IpCidr::new(IpAddr::V4(client(20)), 32).unwrap(),
                gateway: Some(gw20),
                iface: again,
            },
        )
        .unwrap();
    // (The orphan connection's source is ours again: its data goes too.)
    let tags = n.server_sends(s, c, b"again");
    assert!(tags.iter().all(|t| *t == Some(20)), "{tags:?}");
}
