//! Per-socket options a POSIX layer sets on the stack's sockets: IP_TTL
//! and IP_TOS reach the headers of UDP datagrams and TCP segments;
//! TCP_KEEPIDLE/INTVL/CNT time one connection's keep-alive probes.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use stack::{
    Duration, IfaceId, Instant, InterfaceConfig, RxMeta, SocketError, Stack, StackConfig, TcpState,
    VecSink,
};
use wire::ethernet::{EtherType, EthernetFrame};
use wire::ip::IpProtocol;
use wire::ipv4::Ipv4Packet;

const IF0: IfaceId = IfaceId(0);

fn addr(last: u8, port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 99, 8, last)), port)
}

fn stack(last: u8) -> Stack {
    let mut s = Stack::new(StackConfig {
        seed: u64::from(last),
        ..StackConfig::default()
    });
    s.add_interface(&InterfaceConfig::new(
        format!("p{last}"),
        [2, 0, 0, 0, 8, last],
        Ipv4Addr::new(10, 99, 8, last),
        24,
    ))
    .unwrap();
    s
}

/// A sent IPv4 packet: protocol, TTL, TOS, payload length, and (DF,
/// identification).
type SentPacket = (IpProtocol, u8, u8, usize, (bool, u16));

struct Net {
    a: Stack,
    b: Stack,
    sa: VecSink,
    sb: VecSink,
    now: Instant,
    /// Every IPv4 packet `a` sent.
    a_sent: Vec<SentPacket>,
    /// Frames from `b` are lost (the peer vanished).
    b_mute: bool,
}

impl Net {
    fn new() -> Net {
        Net {
            a: stack(1),
            b: stack(2),
            sa: VecSink::default(),
            sb: VecSink::default(),
            now: Instant::from_secs(1),
            a_sent: Vec::new(),
            b_mute: false,
        }
    }

    fn run(&mut self, ms: u64) {
        for _ in 0..ms {
            for _ in 0..50 {
                if self.sa.frames.is_empty() && self.sb.frames.is_empty() {
                    break;
                }
                for (_, f) in std::mem::take(&mut self.sa.frames) {
                    let eth = EthernetFrame::new_checked(&f[..]).unwrap();
                    if eth.ethertype() == EtherType::Ipv4 {
                        let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
                        self.a_sent.push((
                            ip.next_header(),
                            ip.ttl(),
                            ip.dscp_ecn(),
                            ip.payload().len(),
                            (ip.dont_frag(), ip.ident()),
                        ));
                    }
                    self.b
                        .receive(self.now, IF0, &f, RxMeta::default(), &mut self.sb);
                }
                for (_, f) in std::mem::take(&mut self.sb.frames) {
                    if !self.b_mute {
                        self.a
                            .receive(self.now, IF0, &f, RxMeta::default(), &mut self.sa);
                    }
                }
            }
            self.now += Duration::from_millis(1);
            self.a.poll(self.now, &mut self.sa);
            self.b.poll(self.now, &mut self.sb);
        }
    }
}

#[test]
fn ttl_and_tos_reach_the_headers() {
    let mut n = Net::new();
    let rx = n.b.udp_bind(addr(2, 53)).unwrap();
    let tx = n.a.udp_bind(addr(1, 5000)).unwrap();
    n.a.udp_set_ip_options(tx, Some(7), 0xb8).unwrap();
    n.a.udp_send_to(n.now, tx, addr(2, 53), None, b"hello", &mut n.sa)
        .unwrap();
    n.run(5);
    assert!(n.b.udp_readable(rx));
    let udp: Vec<_> = n.a_sent.iter().filter(|p| p.0 == IpProtocol::Udp).collect();
    assert_eq!(udp.len(), 1);
    assert_eq!((udp[0].1, udp[0].2), (7, 0xb8));

    let l = n.b.tcp_listen(addr(2, 80), 4).unwrap();
    let c =
        n.a.tcp_connect(n.now, addr(2, 80), None, &mut n.sa)
            .unwrap();
    n.run(5);
    n.b.tcp_accept(l).unwrap();
    // A segment first, so that the options change under a connection
    // whose headers are cached (the fast path's template).  Each send
    // runs until the peer's delayed ACK has come, so that Nagle holds
    // none of the next one back.
    let sent_with = |n: &mut Net| {
        n.a_sent.clear();
        n.a.tcp_send(n.now, c, &[1; 100], &mut n.sa).unwrap();
        n.run(300);
        let data: Vec<_> = n
            .a_sent
            .iter()
            .filter(|p| p.0 == IpProtocol::Tcp && p.3 > 40)
            .map(|p| (p.1, p.2))
            .collect();
        assert!(!data.is_empty(), "the data left");
        // RFC 6864: atomic datagrams, with a fixed identification.
        assert!(n.a_sent.iter().all(|p| p.4 == (true, 0)), "{:?}", n.a_sent);
        data
    };
    assert!(sent_with(&mut n).iter().all(|&p| p == (64, 0)));
    n.a.tcp_set_ip_options(c, Some(9), 0x10).unwrap();
    let data = sent_with(&mut n);
    assert!(data.iter().all(|&p| p == (9, 0x10)), "{data:?}");
    // Back to the stack's default TTL.
    n.a.tcp_set_ip_options(c, None, 0).unwrap();
    let data = sent_with(&mut n);
    assert!(data.iter().all(|&p| p == (64, 0)), "{data:?}");
}

#[test]
fn keepalive_timing_per_connection() {
    let mut n = Net::new();
    let l = n.b.tcp_listen(addr(2, 81), 4).unwrap();
    let c =
        n.a.tcp_connect(n.now, addr(2, 81), None, &mut n.sa)
            .unwrap();
    n.run(5);
    n.b.tcp_accept(l).unwrap();
    n.a.tcp_set_keepalive_timing(
        c,
        Some(Duration::from_secs(2)),
        Some(Duration::from_secs(1)),
        Some(3),
    )
    .unwrap();
    n.a.tcp_set_keepalive(n.now, c, true).unwrap();
    n.b_mute = true;
    n.a_sent.clear();
    // Idle 2 s, then 3 probes 1 s apart, then the reset (the stack's
    // defaults would wait 7200 s).
    n.run(1_900);
    assert!(n.a_sent.is_empty(), "no probe before the idle time");
    n.run(200);
    assert_eq!(n.a_sent.len(), 1, "the first probe after 2 s");
    n.run(2_000);
    assert_eq!(n.a_sent.len(), 3, "one probe per second");
    assert_eq!(n.a.tcp_state(c).unwrap(), TcpState::Established);
    n.run(1_000);
    assert_eq!(n.a.tcp_state(c).unwrap(), TcpState::Closed);
    assert_eq!(n.a.tcp_take_error(c).unwrap(), Some(SocketError::TimedOut));
}

/// TCP_MAXSEG: a connection opened with a maximum segment advertises it
/// and sends no larger segments; a listener's maximum does the same for
/// its connections (both directions then carry at most that, less the
/// timestamp option's 12 bytes).
#[test]
fn max_segment_bounds_both_sides_from_the_handshake() {
    for on_listener in [false, true] {
        let mut n = Net::new();
        let l = n.b.tcp_listen(addr(2, 82), 4).unwrap();
        let max = 300u16;
        if on_listener {
            n.b.tcp_set_max_segment(l, Some(max)).unwrap();
        }
        let own = (!on_listener).then_some(max);
        let c =
            n.a.tcp_connect_with(n.now, addr(2, 82), None, 0, own, &mut n.sa)
                .unwrap();
        n.run(5);
        let (s, _) = n.b.tcp_accept(l).unwrap();
        let expected = usize::from(max) - 12;
        assert_eq!(n.a.tcp_info(c).unwrap().snd_mss as usize, expected);
        assert_eq!(n.b.tcp_info(s).unwrap().snd_mss as usize, expected);
        n.a_sent.clear();
        let data = vec![7u8; 4000];
        let sent = n.a.tcp_send(n.now, c, &data, &mut n.sa).unwrap();
        assert_eq!(sent, data.len());
        n.run(50);
        let largest = n
            .a_sent
            .iter()
            .filter(|p| p.0 == IpProtocol::Tcp)
            .map(|p| p.3)
            .max()
            .unwrap();
        // TCP header (20) + timestamps (12) + at most `expected` bytes.
        assert_eq!(largest, 32 + expected, "listener's: {on_listener}");
        let mut got = vec![0u8; 8000];
        let got_len = n.b.tcp_recv(n.now, s, &mut got, &mut n.sb).unwrap();
        assert_eq!(got_len, data.len());
        // Once connected, the value no longer changes the connection (as
        // on Linux: it is read at the handshake).
        n.a.tcp_set_max_segment(c, Some(100)).unwrap();
        assert_eq!(n.a.tcp_info(c).unwrap().snd_mss as usize, expected);
    }
}
