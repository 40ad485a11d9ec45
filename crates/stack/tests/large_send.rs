//! Large send: on an interface whose link cuts TCP super-frames itself
//! (`Stack::set_tso`), an IPv4 or IPv6 connection sends a burst of new
//! data as one segment of several MSS (its IP length the whole TCP
//! length), marked with its segment size and a partial checksum; cut as
//! the link would, the peer gets every byte.  Without TSO nothing leaves
//! larger than the MTU.  Nagle and corking hold a short tail back as they
//! would hold a short segment.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use stack::{
    FrameSink, IfaceId, Instant, InterfaceConfig, Ipv6Config, RxMeta, SocketHandle, Stack,
    StackConfig, TxMeta,
};
use wire::checksum;
use wire::ip::IpProtocol;

const IF0: IfaceId = IfaceId(0);
const MTU: usize = 1500;
/// Where an IPv4 frame's TCP header starts (Ethernet, IPv4 without
/// options).
const TCP_AT_V4: usize = 14 + 20;
/// Where an IPv6 frame's TCP header starts (Ethernet, IPv6 without
/// extension headers).
const TCP_AT_V6: usize = 14 + 40;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Family {
    V4,
    V6,
}

impl Family {
    /// The third octet of the IPv4 subnet, the fourth group of the IPv6
    /// one, and of the MACs.
    fn net(self) -> u8 {
        match self {
            Family::V4 => 32,
            Family::V6 => 33,
        }
    }

    /// `b`'s address, port 80.
    fn server(self) -> SocketAddr {
        match self {
            Family::V4 => SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 99, 32, 2)), 80),
            Family::V6 => SocketAddr::new(IpAddr::V6(v6(2)), 80),
        }
    }

    /// A stack at host `last`, seeded by `seed`, with an IPv6 address too
    /// over IPv6.
    fn stack(self, last: u8, seed: u64) -> Stack {
        let net = self.net();
        let mut s = Stack::new(StackConfig {
            seed,
            ..StackConfig::default()
        });
        s.add_interface(&InterfaceConfig {
            mtu: MTU,
            ..InterfaceConfig::new(
                format!("p{last}"),
                [2, 0, 0, 0, net, last],
                Ipv4Addr::new(10, 99, net, last),
                24,
            )
        })
        .unwrap();
        if self == Family::V6 {
            s.enable_ipv6(
                Instant::ZERO,
                IF0,
                &Ipv6Config {
                    addrs: vec![(v6(last), 64)],
                    gateway: None,
                },
            )
            .unwrap();
        }
        s
    }
}

fn v6(last: u8) -> Ipv6Addr {
    Ipv6Addr::new(0xfd99, 0, 0, 33, 0, 0, 0, u16::from(last))
}

/// A sink keeping each frame with its mark.
#[derive(Default)]
struct MetaSink {
    frames: Vec<(Vec<u8>, TxMeta)>,
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

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The family, the TCP header's offset and the TCP length of an IPv4 or
/// IPv6 TCP frame (no IP options or extension headers), if it is one.
fn tcp_frame(f: &[u8]) -> Option<(Family, usize, usize)> {
    if f.len() >= TCP_AT_V4 + 20 && f[12..14] == [0x08, 0x00] && f[23] == 6 {
        let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
        return Some((Family::V4, TCP_AT_V4, 14 + total - TCP_AT_V4));
    }
    if f.len() >= TCP_AT_V6 + 20 && f[12..14] == [0x86, 0xdd] && f[20] == 6 {
        let payload_len = usize::from(u16::from_be_bytes([f[18], f[19]]));
        return Some((Family::V6, TCP_AT_V6, payload_len));
    }
    None
}

/// The TCP payload's offset and length of a TCP frame, if it is one.
fn tcp_payload(f: &[u8]) -> Option<(usize, usize)> {
    let (_, at, tcp_len) = tcp_frame(f)?;
    let header = usize::from(f[at + 12] >> 4) * 4;
    Some((at + header, tcp_len - header))
}

/// Sets a TCP frame's IP length to what it now holds (and, over IPv4,
/// its header checksum).
fn set_ip_length(s: &mut [u8], family: Family) {
    match family {
        Family::V4 => {
            let total = (s.len() - 14) as u16;
            s[16..18].copy_from_slice(&total.to_be_bytes());
            s[24..26].fill(0);
            let sum = !checksum::data(&s[14..TCP_AT_V4]);
            s[24..26].copy_from_slice(&sum.to_be_bytes());
        }
        Family::V6 => {
            let payload_len = (s.len() - TCP_AT_V6) as u16;
            s[18..20].copy_from_slice(&payload_len.to_be_bytes());
        }
    }
}

/// The TCP checksum's pseudo-header sum of a TCP frame of `tcp_len`.
fn pseudo_header(s: &[u8], family: Family, tcp_len: usize) -> u16 {
    match family {
        Family::V4 => checksum::pseudo_header_v4(
            &[s[26], s[27], s[28], s[29]].into(),
            &[s[30], s[31], s[32], s[33]].into(),
            IpProtocol::Tcp,
            tcp_len as u32,
        ),
        Family::V6 => {
            let src: [u8; 16] = s[22..38].try_into().unwrap();
            let dst: [u8; 16] = s[38..54].try_into().unwrap();
            checksum::pseudo_header_v6(&src.into(), &dst.into(), IpProtocol::Tcp, tcp_len as u32)
        }
    }
}

/// Cuts a super-frame into segments of `gso` payload bytes as a link's
/// segmentation offload does (FIN and PSH on the last only), each with
/// whole sums; any other frame is completed if partial.
fn cut(f: &[u8], meta: TxMeta) -> Vec<Vec<u8>> {
    let Some((family, tcp_at, _)) = tcp_frame(f) else {
        return vec![f.to_vec()];
    };
    let (head, len) = tcp_payload(f).unwrap();
    let gso = usize::from(meta.gso_size);
    let chunks: Vec<(usize, usize)> = if gso == 0 {
        vec![(0, len)]
    } else {
        (0..len)
            .step_by(gso)
            .map(|o| (o, gso.min(len - o)))
            .collect()
    };
    let n = chunks.len();
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, (off, l))| {
            let mut s = f[..head].to_vec();
            s.extend_from_slice(&f[head + off..head + off + l]);
            if gso > 0 {
                set_ip_length(&mut s, family);
                let seq = be32(&s, tcp_at + 4).wrapping_add(off as u32);
                s[tcp_at + 4..tcp_at + 8].copy_from_slice(&seq.to_be_bytes());
                if i + 1 < n {
                    s[tcp_at + 13] &= !0x09;
                }
            }
            if meta.csum_partial {
                let tcp_len = s.len() - tcp_at;
                s[tcp_at + 16..tcp_at + 18].fill(0);
                let pseudo = pseudo_header(&s, family, tcp_len);
                let sum = !checksum::combine(&[pseudo, checksum::data(&s[tcp_at..])]);
                s[tcp_at + 16..tcp_at + 18].copy_from_slice(&sum.to_be_bytes());
            }
            s
        })
        .collect()
}

/// Two stacks on a wire that cuts what `a` sends as its link would.
struct Wire {
    family: Family,
    a: Stack,
    b: Stack,
    sa: MetaSink,
    sb: MetaSink,
    now: Instant,
    /// Every frame `a` sent: its length and mark.
    sent: Vec<(usize, TxMeta)>,
}

impl Wire {
    /// `a` with TSO (and checksum offload) as asked; over IPv6, duplicate
    /// address detection run to its end.
    fn new(family: Family, tso: bool) -> Wire {
        Wire::offloading(family, tso, tso)
    }

    /// `a`'s link cuts super-frames (`tso`) and finishes checksums
    /// (`offload`) as asked.
    fn offloading(family: Family, tso: bool, offload: bool) -> Wire {
        let (mut a, b) = match family {
            Family::V4 => (family.stack(1, 11), family.stack(2, 12)),
            Family::V6 => (family.stack(1, 1), family.stack(2, 2)),
        };
        if offload {
            assert!(a.set_tx_checksum_offload(IF0, true));
        }
        if tso {
            assert!(a.set_tso(IF0, 65535));
        }
        let mut w = Wire {
            family,
            a,
            b,
            sa: MetaSink::default(),
            sb: MetaSink::default(),
            now: Instant::ZERO,
            sent: Vec::new(),
        };
        if family == Family::V6 {
            for _ in 0..150 {
                w.step(10_000);
            }
        }
        w
    }

    fn step(&mut self, micros: u64) {
        self.now = self.now.add_micros(micros);
        self.a.poll(self.now, &mut self.sa);
        self.b.poll(self.now, &mut self.sb);
        self.run();
    }

    fn run(&mut self) {
        for _ in 0..1000 {
            if self.sa.frames.is_empty() && self.sb.frames.is_empty() {
                return;
            }
            for (f, m) in std::mem::take(&mut self.sa.frames) {
                // A super-frame, and any frame marked partial (IPv4 and
                // IPv6): its field is the pseudo-header's sum, from which
                // a device finishes it.
                assert!(
                    !m.csum_partial || wire::partial_checksum::holds_partial_form(&f),
                    "a frame marked partial holds the partial form"
                );
                assert!(
                    m.gso_size == 0 || m.csum_partial,
                    "a super-frame is partial"
                );
                self.sent.push((f.len(), m));
                for s in cut(&f, m) {
                    assert!(s.len() - 14 <= MTU, "the cut segments fit the MTU");
                    self.b
                        .receive(self.now, IF0, &s, RxMeta::default(), &mut self.sb);
                }
            }
            for (f, m) in std::mem::take(&mut self.sb.frames) {
                assert_eq!(m.gso_size, 0);
                for s in cut(&f, m) {
                    self.a
                        .receive(self.now, IF0, &s, RxMeta::default(), &mut self.sa);
                }
            }
        }
        panic!("the stacks never went quiet");
    }

    /// `a` connected to `b`'s port 80.
    fn connect(&mut self) -> (SocketHandle, SocketHandle) {
        let server = self.family.server();
        let l = self.b.tcp_listen(server, 8).unwrap();
        let c = self
            .a
            .tcp_connect(self.now, server, None, &mut self.sa)
            .unwrap();
        self.run();
        let (s, _) = self.b.tcp_accept(l).unwrap();
        (c, s)
    }

    /// Sends `data` from `a` to `b` and checks every byte arrived in order.
    fn transfer(&mut self, (ca, cb): (SocketHandle, SocketHandle), data: &[u8]) {
        self.sent.clear();
        // (Over IPv6, router solicitations to all-routers before it are
        // not b's.)
        let drops_before = match self.family {
            Family::V4 => 0,
            Family::V6 => self.b.counters().rx_drops(),
        };
        let mut sent = 0;
        let mut got = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        for _ in 0..100_000 {
            if got.len() == data.len() {
                break;
            }
            if sent < data.len() {
                sent += self
                    .a
                    .tcp_send(self.now, ca, &data[sent..], &mut self.sa)
                    .unwrap_or(0);
            }
            self.step(500);
            while let Ok(n) = self.b.tcp_recv(self.now, cb, &mut buf, &mut self.sb) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
        }
        assert_eq!(got.len(), data.len());
        assert!(got == data, "every byte, in order");
        assert_eq!(self.b.counters().rx_drops(), drops_before);
        assert_eq!(self.b.counters().rx_drop_tcp_bad_checksum, 0);
    }
}

#[test]
fn a_stream_leaves_in_super_frames_that_cut_into_segments() {
    let data: Vec<u8> = (0..4_000_000u32).map(|i| (i * 17 % 253) as u8).collect();
    for family in [Family::V4, Family::V6] {
        let mut w = Wire::new(family, true);
        let conn = w.connect();
        let mss = w.a.tcp_info(conn.0).unwrap().snd_mss as usize;
        if family == Family::V6 {
            assert_eq!(mss, MTU - 40 - 20 - 12, "the MSS of IPv6 with timestamps");
        }
        w.transfer(conn, &data);
        let supers: Vec<&(usize, TxMeta)> = w.sent.iter().filter(|f| f.1.gso_size > 0).collect();
        assert!(
            supers.len() > 20,
            "{family:?}: {} super-frames",
            supers.len()
        );
        for (len, meta) in &supers {
            assert!(*len - 14 > MTU && *len - 14 <= 65535, "{family:?}: {len}");
            assert!(meta.csum_partial, "the link finishes their checksums");
            assert_eq!(usize::from(meta.gso_size), mss);
        }
        let large = supers.iter().filter(|f| f.0 > 40_000).count();
        assert!(large > 10, "{family:?}: most are large ({large})");
        assert!(
            w.sent.len() < data.len() / mss / 4,
            "{family:?}: {} frames",
            w.sent.len()
        );
        assert_eq!(w.a.counters().tx_drop_too_big, 0);
        assert_eq!(w.a.counters().ipv6_fragments_sent, 0);

        // Without TSO, nothing leaves larger than the MTU.
        let mut w = Wire::new(family, false);
        let conn = w.connect();
        w.transfer(conn, &data[..500_000]);
        assert!(w.sent.iter().all(|f| f.0 - 14 <= MTU && f.1.gso_size == 0));
    }
}

#[test]
fn nagle_and_cork_hold_a_short_tail_of_a_super_frame() {
    for (nodelay, cork) in [(false, false), (true, false), (true, true)] {
        let mut w = Wire::new(Family::V4, true);
        let (ca, _cb) = w.connect();
        let mss = w.a.tcp_info(ca).unwrap().snd_mss as usize;
        // A second after the handshake, as an application writing later.
        let now = w.now.add_micros(1_000_000);
        let a = &mut w.a;
        let mut sa = MetaSink::default();
        a.tcp_set_nodelay(now, ca, nodelay, &mut sa).unwrap();
        a.tcp_set_cork(now, ca, cork, &mut sa).unwrap();
        let data = vec![7u8; mss * 5 / 2];
        assert_eq!(a.tcp_send(now, ca, &data, &mut sa).unwrap(), data.len());
        a.poll(now, &mut sa);
        let payloads: Vec<usize> = sa
            .frames
            .iter()
            .filter_map(|(f, _)| tcp_payload(f))
            .map(|p| p.1)
            .filter(|&l| l > 0)
            .collect();
        let want = if nodelay && !cork {
            vec![data.len()]
        } else {
            vec![2 * mss]
        };
        assert_eq!(payloads, want, "nodelay {nodelay} cork {cork}");
    }
}

/// On a link that cuts super-frames but does not finish checksums (the
/// engine's software GSO, which makes each segment's sum), super-frames
/// still leave in the partial form, for the cut to finish; every other
/// frame carries its whole checksum, which the peer verifies.
#[test]
fn super_frames_leave_partial_on_a_link_without_checksum_offload() {
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i * 13 % 251) as u8).collect();
    let mut w = Wire::offloading(Family::V4, true, false);
    let conn = w.connect();
    w.transfer(conn, &data);
    let supers = w.sent.iter().filter(|f| f.1.gso_size > 0).count();
    assert!(supers > 5, "{supers} super-frames");
    for (len, meta) in &w.sent {
        assert_eq!(
            meta.csum_partial,
            meta.gso_size > 0,
            "only super-frames are partial ({len} bytes)"
        );
    }
}
