//! Large send over IPv6: on an interface whose link cuts TCP super-frames
//! itself (`Stack::set_tso`), an IPv6 connection sends a burst of new data
//! as one segment of several MSS (its payload length the whole TCP
//! length), marked with its segment size and a partial checksum; cut as
//! the link would, the peer gets every byte. Without TSO nothing leaves
//! larger than the MTU.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use stack::{
    FrameSink, IfaceId, Instant, InterfaceConfig, Ipv6Config, RxMeta, SocketHandle, Stack,
    StackConfig, TxMeta,
};
use wire::checksum;
use wire::ip::IpProtocol;

const IF0: IfaceId = IfaceId(0);
const MTU: usize = 1500;
/// Ethernet and IPv6 headers.
const TCP_AT: usize = 14 + 40;

fn v6(last: u8) -> Ipv6Addr {
    Ipv6Addr::new(0xfd99, 0, 0, 33, 0, 0, 0, u16::from(last))
}

fn stack(last: u8) -> Stack {
    let mut s = Stack::new(StackConfig {
        seed: u64::from(last),
        ..StackConfig::default()
    });
    s.add_interface(&InterfaceConfig {
        name: format!("p{last}"),
        mac: [2, 0, 0, 0, 33, last],
        mtu: MTU,
        addr: Ipv4Addr::new(10, 99, 33, last),
        prefix_len: 24,
        broadcast: None,
        gateway: None,
        extra_addrs: vec![],
    })
    .unwrap();
    s.enable_ipv6(
        Instant::ZERO,
        IF0,
        &Ipv6Config {
            addrs: vec![(v6(last), 64)],
            gateway: None,
        },
    )
    .unwrap();
    s
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

/// The TCP payload's offset and length of an IPv6 TCP frame (no
/// extension header), if it is one.
fn tcp_payload(f: &[u8]) -> Option<(usize, usize)> {
    if f.len() < TCP_AT + 20 || f[12..14] != [0x86, 0xdd] || f[20] != 6 {
        return None;
    }
    let payload_len = usize::from(u16::from_be_bytes([f[18], f[19]]));
    let tcp_header = usize::from(f[TCP_AT + 12] >> 4) * 4;
    Some((TCP_AT + tcp_header, payload_len - tcp_header))
}

/// Cuts a super-frame into segments of `gso` payload bytes as a link's
/// segmentation offload does (FIN and PSH on the last only), each with a
/// whole checksum; any other frame is completed if partial.
fn cut(f: &[u8], meta: TxMeta) -> Vec<Vec<u8>> {
    let (head, len) = tcp_payload(f).unwrap_or((f.len(), 0));
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
                let payload_len = (s.len() - TCP_AT) as u16;
                s[18..20].copy_from_slice(&payload_len.to_be_bytes());
                let at = TCP_AT + 4;
                let seq = u32::from_be_bytes([s[at], s[at + 1], s[at + 2], s[at + 3]])
                    .wrapping_add(off as u32);
                s[at..at + 4].copy_from_slice(&seq.to_be_bytes());
                if i + 1 < n {
                    s[TCP_AT + 13] &= !0x09;
                }
            }
            if meta.csum_partial && s.len() >= TCP_AT + 20 && s[20] == 6 {
                let tcp_len = s.len() - TCP_AT;
                s[TCP_AT + 16..TCP_AT + 18].fill(0);
                let src: [u8; 16] = s[22..38].try_into().unwrap();
                let dst: [u8; 16] = s[38..54].try_into().unwrap();
                let pseudo = checksum::pseudo_header_v6(
                    &src.into(),
                    &dst.into(),
                    IpProtocol::Tcp,
                    tcp_len as u32,
                );
                let sum = !checksum::combine(&[pseudo, checksum::data(&s[TCP_AT..])]);
                s[TCP_AT + 16..TCP_AT + 18].copy_from_slice(&sum.to_be_bytes());
            }
            s
        })
        .collect()
}

/// Two stacks on a wire that cuts what `a` sends as its link would.
struct Wire {
    a: Stack,
    b: Stack,
    sa: MetaSink,
    sb: MetaSink,
    now: Instant,
    /// Every frame `a` sent: its length and mark.
    sent: Vec<(usize, TxMeta)>,
}

impl Wire {
    fn new(tso: bool) -> Wire {
        let (mut a, b) = (stack(1), stack(2));
        if tso {
            assert!(a.set_tx_checksum_offload(IF0, true));
            assert!(a.set_tso(IF0, 65535));
        }
        let mut w = Wire {
            a,
            b,
            sa: MetaSink::default(),
            sb: MetaSink::default(),
            now: Instant::ZERO,
            sent: Vec::new(),
        };
        // Duplicate address detection runs to its end.
        for _ in 0..150 {
            w.step(10_000);
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
        let server = SocketAddr::new(IpAddr::V6(v6(2)), 80);
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
        let drops_before = self.b.counters().rx_drops();
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
        // (Router solicitations to all-routers before it are not b's.)
        assert_eq!(self.b.counters().rx_drops(), drops_before);
        assert_eq!(self.b.counters().rx_drop_tcp_bad_checksum, 0);
    }
}

#[test]
fn an_ipv6_stream_leaves_in_super_frames_that_cut_into_segments() {
    let data: Vec<u8> = (0..4_000_000u32).map(|i| (i * 17 % 253) as u8).collect();
    let mut w = Wire::new(true);
    let conn = w.connect();
    let mss = w.a.tcp_info(conn.0).unwrap().snd_mss as usize;
    assert_eq!(mss, MTU - 40 - 20 - 12, "the MSS of IPv6 with timestamps");
    w.transfer(conn, &data);
    let supers: Vec<&(usize, TxMeta)> = w.sent.iter().filter(|f| f.1.gso_size > 0).collect();
    assert!(supers.len() > 20, "{} super-frames", supers.len());
    for (len, meta) in &supers {
        assert!(*len - 14 > MTU && *len - 14 <= 65535, "{len}");
        assert!(meta.csum_partial, "the link finishes their checksums");
        assert_eq!(usize::from(meta.gso_size), mss);
    }
    let large = supers.iter().filter(|f| f.0 > 40_000).count();
    assert!(large > 10, "most are large ({large})");
    assert!(
        w.sent.len() < data.len() / mss / 4,
        "{} frames",
        w.sent.len()
    );
    assert_eq!(w.a.counters().tx_drop_too_big, 0);
    assert_eq!(w.a.counters().ipv6_fragments_sent, 0);

    // Without TSO, nothing leaves larger than the MTU.
    let mut w = Wire::new(false);
    let conn = w.connect();
    w.transfer(conn, &data[..500_000]);
    assert!(w.sent.iter().all(|f| f.0 - 14 <= MTU && f.1.gso_size == 0));
}
