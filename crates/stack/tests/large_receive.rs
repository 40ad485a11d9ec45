//! Large receive: a TCP segment longer than the MSS, as a link hands over
//! a peer's super-frame whole or the segments it aggregated (`link::gro`),
//! is taken whole by either input path, ACKed at once (it stands for the
//! full-sized segments it holds), and verified like any other segment.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use stack::{IfaceId, Instant, InterfaceConfig, RxMeta, SocketHandle, Stack, StackConfig, VecSink};
use wire::checksum;
use wire::ip::IpProtocol;

const IF0: IfaceId = IfaceId(0);

fn ip(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 99, 31, last)
}

fn stack(last: u8, seed: u64) -> Stack {
    stack_with(last, seed, true)
}

fn stack_with(last: u8, seed: u64, fast_path: bool) -> Stack {
    let mut cfg = StackConfig {
        seed,
        ..StackConfig::default()
    };
    cfg.tcp.fast_path = fast_path;
    let mut s = Stack::new(cfg);
    s.add_interface(&InterfaceConfig::new(
        format!("p{last}"),
        [2, 0, 0, 0, 31, last],
        ip(last),
        24,
    ))
    .unwrap();
    s
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The TCP header's offset, sequence number, ACK, flags and payload of an
/// IPv4 TCP frame; `None` for anything else.
fn tcp(f: &[u8]) -> Option<(usize, u32, u32, u8, &[u8])> {
    if f.len() < 54 || f[12..14] != [0x08, 0x00] || f[23] != 6 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
    let t = 14 + usize::from(f[14] & 0x0f) * 4;
    let head = t + usize::from(f[t + 12] >> 4) * 4;
    Some((
        t,
        be32(f, t + 4),
        be32(f, t + 8),
        f[t + 13],
        &f[head..14 + total],
    ))
}

/// Writes the frame's TCP checksum: whole, or in the partial form.
fn set_tcp_checksum(f: &mut [u8], whole: bool) {
    let t = 34;
    let len = f.len() - t;
    f[t + 16..t + 18].fill(0);
    let pseudo = checksum::pseudo_header_v4(
        &[f[26], f[27], f[28], f[29]].into(),
        &[f[30], f[31], f[32], f[33]].into(),
        IpProtocol::Tcp,
        len as u32,
    );
    let sum = if whole {
        !checksum::combine(&[pseudo, checksum::data(&f[t..])])
    } else {
        pseudo
    };
    f[t + 16..t + 18].copy_from_slice(&sum.to_be_bytes());
}

/// One segment of consecutive data segments (`segments`, in order): the
/// first's headers, every payload, PSH if the last had it, the lengths and
/// sums made again, as a super-frame comes or a link aggregates.
fn join(segments: &[Vec<u8>], whole: bool) -> Vec<u8> {
    let (_, _, _, _, _) = tcp(&segments[0]).unwrap();
    let t = 34;
    let head = t + usize::from(segments[0][t + 12] >> 4) * 4;
    let mut f = segments[0][..head].to_vec();
    let mut flags = segments[0][t + 13];
    for s in segments {
        let (_, _, _, fl, payload) = tcp(s).unwrap();
        f.extend_from_slice(payload);
        flags = (flags & !0x08) | (fl & 0x08);
    }
    f[t + 13] = flags;
    let total = (f.len() - 14) as u16;
    f[16..18].copy_from_slice(&total.to_be_bytes());
    f[24..26].fill(0);
    let sum = !checksum::data(&f[14..34]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    set_tcp_checksum(&mut f, whole);
    f
}

/// Moves frames between the stacks until both are quiet.
fn shuttle(now: Instant, a: &mut Stack, b: &mut Stack, sa: &mut VecSink, sb: &mut VecSink) {
    for _ in 0..1000 {
        if sa.frames.is_empty() && sb.frames.is_empty() {
            return;
        }
        for (_, f) in std::mem::take(&mut sa.frames) {
            b.receive(now, IF0, &f, RxMeta::default(), sb);
        }
        for (_, f) in std::mem::take(&mut sb.frames) {
            a.receive(now, IF0, &f, RxMeta::default(), sa);
        }
    }
    panic!("the stacks never went quiet");
}

/// A client `a` connected to a server `b` (port 80): the connection's
/// handles on both ends.
fn connected(
    now: Instant,
    a: &mut Stack,
    b: &mut Stack,
    sa: &mut VecSink,
    sb: &mut VecSink,
) -> (SocketHandle, SocketHandle) {
    let l = b
        .tcp_listen(SocketAddr::new(IpAddr::V4(ip(2)), 80), 8)
        .unwrap();
    let ca = a
        .tcp_connect(now, SocketAddr::new(IpAddr::V4(ip(2)), 80), None, sa)
        .unwrap();
    shuttle(now, a, b, sa, sb);
    let (cb, _) = b.tcp_accept(l).unwrap();
    (ca, cb)
}

/// The data segments `a` sends for `data` (at most a window's worth).
fn segments_of(
    now: Instant,
    a: &mut Stack,
    ca: SocketHandle,
    data: &[u8],
    sa: &mut VecSink,
) -> Vec<Vec<u8>> {
    assert_eq!(a.tcp_send(now, ca, data, sa).unwrap(), data.len());
    a.poll(now, sa);
    let segs: Vec<Vec<u8>> = std::mem::take(&mut sa.frames)
        .into_iter()
        .map(|(_, f)| f)
        .filter(|f| tcp(f).is_some_and(|s| !s.4.is_empty()))
        .collect();
    assert!(segs.len() > 2, "several full-sized segments");
    segs
}

#[test]
fn a_super_frame_is_taken_whole_and_acked_at_once() {
    for fast_path in [true, false] {
        let (mut a, mut b) = (stack(1, 1), stack_with(2, 2, fast_path));
        let (mut sa, mut sb) = (VecSink::default(), VecSink::default());
        let now = Instant::from_secs(1);
        let (ca, cb) = connected(now, &mut a, &mut b, &mut sa, &mut sb);
        let data: Vec<u8> = (0..10 * 1448u32).map(|i| (i * 13 % 251) as u8).collect();
        let segs = segments_of(now, &mut a, ca, &data, &mut sa);
        let (_, seq0, _, _, _) = tcp(&segs[0]).unwrap();
        let big = join(&segs, true);
        assert!(big.len() > 1514, "longer than the MTU");
        let predicted = b.counters().tcp_predicted_segments;
        b.receive(now, IF0, &big, RxMeta::default(), &mut sb);
        // One ACK at once for all of it, no delayed-ACK wait.
        let acks: Vec<u32> = sb
            .frames
            .iter()
            .filter_map(|(_, f)| tcp(f))
            .map(|t| t.2)
            .collect();
        assert_eq!(
            acks,
            [seq0.wrapping_add(data.len() as u32)],
            "fast path {fast_path}"
        );
        assert_eq!(
            b.counters().tcp_predicted_segments - predicted,
            u64::from(fast_path),
            "taken by the path asked for"
        );
        let mut got = vec![0u8; data.len() + 10];
        let n = b.tcp_recv(now, cb, &mut got, &mut sb).unwrap();
        assert_eq!(&got[..n], &data[..]);
        assert_eq!(b.counters().rx_drops(), 0);
        // a takes the ACK: everything sent is acknowledged.
        shuttle(now, &mut a, &mut b, &mut sa, &mut sb);
        assert_eq!(a.tcp_info(ca).unwrap().unacked, 0);
    }
}

#[test]
fn a_super_frame_is_verified_whole_unless_the_link_vouches() {
    let (mut a, mut b) = (stack(1, 3), stack(2, 4));
    let (mut sa, mut sb) = (VecSink::default(), VecSink::default());
    let now = Instant::from_secs(1);
    let (ca, cb) = connected(now, &mut a, &mut b, &mut sa, &mut sb);
    let data: Vec<u8> = (0..10 * 1448u32).map(|i| (i * 7 % 253) as u8).collect();
    let segs = segments_of(now, &mut a, ca, &data, &mut sa);
    let mut bad = join(&segs, true);
    let n = bad.len();
    bad[n - 100] ^= 0x04;
    let before = b.counters().rx_drop_tcp_bad_checksum;
    b.receive(now, IF0, &bad, RxMeta::default(), &mut sb);
    assert_eq!(b.counters().rx_drop_tcp_bad_checksum, before + 1);
    assert!(sb.frames.is_empty(), "nothing said for a corrupt segment");
    let mut got = vec![0u8; data.len()];
    assert!(
        b.tcp_recv(now, cb, &mut got, &mut sb).is_err(),
        "nothing to read"
    );
    // The same bytes with the partial form and the link's mark: taken.
    let partial = join(&segs, false);
    b.receive(now, IF0, &partial, RxMeta { csum_partial: true }, &mut sb);
    let n = b.tcp_recv(now, cb, &mut got, &mut sb).unwrap();
    assert_eq!(&got[..n], &data[..]);
    // The partial form without the mark fails as any bad sum does.
    let (mut a2, mut b2) = (stack(1, 5), stack(2, 6));
    let (mut sa2, mut sb2) = (VecSink::default(), VecSink::default());
    let (ca2, _) = connected(now, &mut a2, &mut b2, &mut sa2, &mut sb2);
    let segs = segments_of(now, &mut a2, ca2, &data, &mut sa2);
    let before = b2.counters().rx_drop_tcp_bad_checksum;
    b2.receive(now, IF0, &join(&segs, false), RxMeta::default(), &mut sb2);
    assert_eq!(b2.counters().rx_drop_tcp_bad_checksum, before + 1);
}

#[test]
fn a_stream_aggregated_per_burst_arrives_intact() {
    let (mut a, mut b) = (stack(1, 7), stack(2, 8));
    let (mut sa, mut sb) = (VecSink::default(), VecSink::default());
    let mut now = Instant::from_secs(1);
    let (ca, cb) = connected(now, &mut a, &mut b, &mut sa, &mut sb);
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 31 % 241) as u8).collect();
    let mut sent = 0;
    let mut got = Vec::with_capacity(data.len());
    let mut buf = vec![0u8; 1 << 16];
    let mut joined = 0;
    for _ in 0..100_000 {
        if got.len() == data.len() {
            break;
        }
        now = now.add_micros(200);
        if sent < data.len() {
            sent += a.tcp_send(now, ca, &data[sent..], &mut sa).unwrap_or(0);
        }
        a.poll(now, &mut sa);
        b.poll(now, &mut sb);
        // a's burst, its in-order data segments joined as a link's GRO
        // would (up to 40 at a time), everything else as it is.
        let burst: Vec<Vec<u8>> = std::mem::take(&mut sa.frames)
            .into_iter()
            .map(|(_, f)| f)
            .collect();
        let mut run: Vec<Vec<u8>> = Vec::new();
        let mut deliver = |b: &mut Stack, run: &mut Vec<Vec<u8>>, sb: &mut VecSink| {
            if run.len() > 1 {
                joined += 1;
                b.receive(now, IF0, &join(run, true), RxMeta::default(), sb);
            } else if let Some(f) = run.first() {
                b.receive(now, IF0, f, RxMeta::default(), sb);
            }
            run.clear();
        };
        for f in burst {
            let Some((_, seq, _, flags, payload)) = tcp(&f) else {
                deliver(&mut b, &mut run, &mut sb);
                b.receive(now, IF0, &f, RxMeta::default(), &mut sb);
                continue;
            };
            let follows = run.last().is_some_and(|l| {
                let (_, ls, _, lf, lp) = tcp(l).unwrap();
                ls.wrapping_add(lp.len() as u32) == seq && lf & 0x08 == 0
            });
            let joinable = !payload.is_empty() && flags & !0x08 == 0x10;
            if !joinable || !follows || run.len() >= 40 {
                deliver(&mut b, &mut run, &mut sb);
            }
            if !joinable {
                b.receive(now, IF0, &f, RxMeta::default(), &mut sb);
            } else {
                run.push(f);
            }
        }
        deliver(&mut b, &mut run, &mut sb);
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
    assert!(got == data, "every byte in order");
    assert!(joined > 10, "segments were aggregated ({joined} times)");
    assert_eq!(a.counters().tcp_retransmitted_segments, 0, "nothing lost");
    assert_eq!(b.counters().rx_drops(), 0);
}
