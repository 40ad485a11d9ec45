//! Large send: on an interface whose link cuts TCP super-frames itself
//! (`Stack::set_tso`), an IPv4 connection sends a burst of new data as one
//! segment of several MSS, marked with its segment size and a partial
//! checksum; cut as the link would, the peer gets every byte.  Nagle and
//! corking hold a short tail back as they would hold a short segment, and
//! loss recovery sends segments of the MSS.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use stack::{
    FrameSink, IfaceId, Instant, InterfaceConfig, RxMeta, SocketHandle, Stack, StackConfig, TxMeta,
    VecSink,
};
use wire::checksum;
use wire::ip::IpProtocol;

const IF0: IfaceId = IfaceId(0);
const MTU: usize = 1500;

fn ip(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 99, 32, last)
}

fn stack(last: u8, seed: u64) -> Stack {
    let mut s = Stack::new(StackConfig {
        seed,
        ..StackConfig::default()
    });
    s.add_interface(&InterfaceConfig {
        name: format!("p{last}"),
        mac: [2, 0, 0, 0, 32, last],
        mtu: MTU,
        addr: ip(last),
        prefix_len: 24,
        broadcast: None,
        gateway: None,
        extra_addrs: vec![],
    })
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

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The TCP payload's offset and length of an IPv4 TCP frame, if it is one.
fn tcp_payload(f: &[u8]) -> Option<(usize, usize)> {
    if f.len() < 54 || f[12..14] != [0x08, 0x00] || f[23] != 6 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
    let head = 34 + usize::from(f[34 + 12] >> 4) * 4;
    Some((head, 14 + total - head))
}

/// Cuts a super-frame into segments of `gso` payload bytes as a link's
/// segmentation offload does (FIN and PSH on the last only), each with
/// whole sums; any other frame is completed if partial.
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
                let total = (s.len() - 14) as u16;
                s[16..18].copy_from_slice(&total.to_be_bytes());
                s[24..26].fill(0);
                let sum = !checksum::data(&s[14..34]);
                s[24..26].copy_from_slice(&sum.to_be_bytes());
                let seq = be32(&s, 38).wrapping_add(off as u32);
                s[38..42].copy_from_slice(&seq.to_be_bytes());
                if i + 1 < n {
                    s[47] &= !0x09;
                }
            }
            if meta.csum_partial {
                let tcp_len = s.len() - 34;
                s[50..52].fill(0);
                let pseudo = checksum::pseudo_header_v4(
                    &[s[26], s[27], s[28], s[29]].into(),
                    &[s[30], s[31], s[32], s[33]].into(),
                    IpProtocol::Tcp,
                    tcp_len as u32,
                );
                let sum = !checksum::combine(&[pseudo, checksum::data(&s[34..])]);
                s[50..52].copy_from_slice(&sum.to_be_bytes());
            }
            s
        })
        .collect()
}

/// `a` (with TSO as asked) connected to `b`, port 80.
fn pair(tso: bool) -> (Stack, Stack, SocketHandle, SocketHandle) {
    pair_offloading(tso, tso)
}

/// `a` connected to `b`, port 80; `a`'s link cuts super-frames (`tso`)
/// and finishes checksums (`offload`) as asked.
fn pair_offloading(tso: bool, offload: bool) -> (Stack, Stack, SocketHandle, SocketHandle) {
    let (mut a, mut b) = (stack(1, 11), stack(2, 12));
    if offload {
        assert!(a.set_tx_checksum_offload(IF0, true));
    }
    if tso {
        assert!(a.set_tso(IF0, 65535));
    }
    let now = Instant::from_secs(1);
    let (mut sa, mut sb) = (MetaSink::default(), VecSink::default());
    let l = b
        .tcp_listen(SocketAddr::new(IpAddr::V4(ip(2)), 80), 8)
        .unwrap();
    let ca = a
        .tcp_connect(now, SocketAddr::new(IpAddr::V4(ip(2)), 80), None, &mut sa)
        .unwrap();
    for _ in 0..20 {
        for (f, m) in std::mem::take(&mut sa.frames) {
            for s in cut(&f, m) {
                b.receive(now, IF0, &s, RxMeta::default(), &mut sb);
            }
        }
        for (_, f) in std::mem::take(&mut sb.frames) {
            a.receive(now, IF0, &f, RxMeta::default(), &mut sa);
        }
    }
    let (cb, _) = b.tcp_accept(l).unwrap();
    (a, b, ca, cb)
}

/// Runs a transfer of `data` from `a` to `b`; every frame `a` sent, with
/// its mark.
fn transfer(
    a: &mut Stack,
    b: &mut Stack,
    (ca, cb): (SocketHandle, SocketHandle),
    data: &[u8],
) -> Vec<(usize, TxMeta)> {
    let (mut sa, mut sb) = (MetaSink::default(), VecSink::default());
    let mut now = Instant::from_secs(2);
    let mut sent = 0;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut frames = Vec::new();
    for _ in 0..100_000 {
        if got.len() == data.len() {
            break;
        }
        if b.counters().rx_drops() > 0 {
            break;
        }
        now = now.add_micros(500);
        if sent < data.len() {
            sent += a.tcp_send(now, ca, &data[sent..], &mut sa).unwrap_or(0);
        }
        a.poll(now, &mut sa);
        b.poll(now, &mut sb);
        for (f, m) in std::mem::take(&mut sa.frames) {
            if m.gso_size > 0 {
                assert!(
                    wire::partial_checksum::holds_partial_form(&f),
                    "a super-frame holds the partial form"
                );
            }
            frames.push((f.len(), m));
            for s in cut(&f, m) {
                assert!(s.len() - 14 <= MTU, "the cut segments fit the MTU");
                b.receive(now, IF0, &s, RxMeta::default(), &mut sb);
            }
        }
        for (_, f) in std::mem::take(&mut sb.frames) {
            a.receive(now, IF0, &f, RxMeta::default(), &mut sa);
        }
        while let Ok(n) = b.tcp_recv(now, cb, &mut buf, &mut sb) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
    }
    assert_eq!(got.len(), data.len());
    assert!(got == data, "every byte, in order");
    assert_eq!(b.counters().rx_drops(), 0);
    frames
}

#[test]
fn a_stream_leaves_in_super_frames_that_cut_into_segments() {
    let data: Vec<u8> = (0..4_000_000u32).map(|i| (i * 17 % 253) as u8).collect();
    let (mut a, mut b, ca, cb) = pair(true);
    let mss = a.tcp_info(ca).unwrap().snd_mss as usize;
    let frames = transfer(&mut a, &mut b, (ca, cb), &data);
    let supers: Vec<&(usize, TxMeta)> = frames.iter().filter(|f| f.1.gso_size > 0).collect();
    assert!(supers.len() > 20, "{} super-frames", supers.len());
    for (len, meta) in &supers {
        assert!(*len - 14 > MTU && *len - 14 <= 65535);
        assert!(meta.csum_partial, "the link finishes their checksums");
        assert_eq!(usize::from(meta.gso_size), mss);
    }
    let large = supers.iter().filter(|f| f.0 > 40_000).count();
    assert!(large > 10, "most are large ({large})");
    assert!(
        frames.len() < data.len() / mss / 4,
        "{} frames",
        frames.len()
    );
    assert_eq!(a.counters().tx_drop_too_big, 0);

    // Without TSO, nothing leaves larger than the MTU.
    let (mut a, mut b, ca, cb) = pair(false);
    let frames = transfer(&mut a, &mut b, (ca, cb), &data[..500_000]);
    assert!(frames.iter().all(|f| f.0 - 14 <= MTU && f.1.gso_size == 0));
}

#[test]
fn nagle_and_cork_hold_a_short_tail_of_a_super_frame() {
    for (nodelay, cork) in [(false, false), (true, false), (true, true)] {
        let (mut a, _b, ca, _cb) = pair(true);
        let mss = a.tcp_info(ca).unwrap().snd_mss as usize;
        let now = Instant::from_secs(2);
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

/// Software GSO's case: a link that cuts super-frames but puts ordinary
/// frames on the wire as they are (no checksum offload). Super-frames
/// still leave in the partial form, for the cut to finish; every other
/// frame carries its whole checksum, which the peer verifies.
#[test]
fn super_frames_leave_partial_on_a_link_without_checksum_offload() {
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i * 13 % 251) as u8).collect();
    let (mut a, mut b, ca, cb) = pair_offloading(true, false);
    let frames = transfer(&mut a, &mut b, (ca, cb), &data);
    let supers = frames.iter().filter(|f| f.1.gso_size > 0).count();
    assert!(supers > 5, "{supers} super-frames");
    for (len, meta) in &frames {
        assert_eq!(
            meta.csum_partial,
            meta.gso_size > 0,
            "only super-frames are partial ({len} bytes)"
        );
    }
}
