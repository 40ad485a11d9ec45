//! Receive aggregation in software (GRO): in-order TCP segments of one
//! flow, received in one burst, joined into one large segment, so the
//! stack pays its per-segment costs (lookup, header prediction, ACK
//! decision) once for the lot.
//!
//! A link offers each frame of a burst, in order, before it keeps it
//! ([`Aggregator::offer`]); a frame that extends a flow's open aggregate
//! has its payload appended there and is not kept itself. At the end of
//! the burst [`Aggregator::finish`] writes the aggregates' headers.
//!
//! What is joined (the rules of Linux's `tcp_gro_receive`, kept strict):
//! untagged Ethernet, IPv4 without options or fragmentation or IPv6 with
//! TCP as the first header; segments with data and the flags ACK (PSH on
//! the last only), the next sequence number of the aggregate, and the same
//! MACs, addresses, ports, TOS/traffic class and flow label, TTL/hop
//! limit, DF, acknowledgment, window and options (timestamps included) as
//! the aggregate's first; every segment but the last as long as the first
//! (a shorter one ends the aggregate, as PSH does). FIN, SYN, RST, URG,
//! ECE and CWR are never joined: such a segment, or any other segment of
//! the flow that does not join, closes the flow's aggregate, so nothing of
//! a flow is handed over ahead of what came before it. Frames of other
//! flows keep their order relative to each other.
//!
//! Checksums: every joined segment is verified before it joins (its IPv4
//! header's sum always; its TCP sum unless the link vouches for it, the
//! kernel's partial mark), the first when the second joins. A segment
//! that fails is not joined: it is handed over alone, for the stack to
//! count and drop. An aggregate carries the partial form (its
//! pseudo-header's sum) and is marked `csum_partial`: the link vouches for
//! it, as for a partial frame from the kernel.
//!
//! Nothing here panics on any bytes: every field is read through a bound
//! check, and a frame not understood is simply not joined.

use wire::checksum;
use wire::ip::IpProtocol;

use crate::pseudo_header;

use crate::pool::{PacketPool, PoolBuf};
use crate::PacketBuffer;

const FIN: u8 = 0x01;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;

/// The most bytes an aggregate's IP packet may hold: the IPv4 total length
/// and IPv6 payload length fields are 16 bits.
const MAX_IP_BYTES: usize = 65535;

/// Flows with an open aggregate at once; a further flow closes the
/// oldest.
const MAX_OPEN: usize = 8;

/// The size of a large buffer: the largest IP packet (65535 bytes) with
/// its Ethernet header and a VLAN tag, and not a power of two, so it is
/// never mistaken for a pool's ordinary buffer.
pub const LARGE_BUF_SIZE: usize = 65535 + 18 + 1;

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// A TCP segment's geometry in an untagged Ethernet frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSegment {
    /// The IP header's offset, the IP and TCP headers' lengths.
    l3: usize,
    ip_len: usize,
    tcp_len: usize,
    v6: bool,
    /// The TCP payload's length.
    payload: usize,
    seq: u32,
    flags: u8,
}

impl TcpSegment {
    /// Reads `frame` as untagged Ethernet with IPv4 (no options, not a
    /// fragment) or IPv6 (TCP the next header) and TCP, its lengths within
    /// the frame (what follows the IP packet is padding). `None` for
    /// anything else.
    pub fn parse(frame: &[u8]) -> Option<TcpSegment> {
        let l3 = 14;
        let (v6, ip_len, total) = match frame.get(12..14)? {
            [0x08, 0x00] => {
                let h = frame.get(l3..l3 + 20)?;
                if h[0] != 0x45 || h[9] != 6 || be16(h, 6) & 0x3fff != 0 {
                    return None;
                }
                (false, 20, usize::from(be16(h, 2)))
            }
            [0x86, 0xdd] => {
                let h = frame.get(l3..l3 + 40)?;
                if h[0] >> 4 != 6 || h[6] != 6 {
                    return None;
                }
                (true, 40, 40 + usize::from(be16(h, 4)))
            }
            _ => return None,
        };
        if l3 + total > frame.len() || total < ip_len + 20 {
            return None;
        }
        let t = l3 + ip_len;
        let tcp_len = usize::from(frame[t + 12] >> 4) * 4;
        if tcp_len < 20 || ip_len + tcp_len > total {
            return None;
        }
        Some(TcpSegment {
            l3,
            ip_len,
            tcp_len,
            v6,
            payload: total - ip_len - tcp_len,
            seq: be32(frame, t + 4),
            flags: frame[t + 13],
        })
    }

    fn tcp(&self) -> usize {
        self.l3 + self.ip_len
    }

    fn head(&self) -> usize {
        self.tcp() + self.tcp_len
    }

    /// The frame's length without padding.
    pub fn frame_len(&self) -> usize {
        self.head() + self.payload
    }

    /// Data with ACK and at most PSH besides: what may join or start an
    /// aggregate.
    fn joinable_kind(&self) -> bool {
        self.payload > 0 && self.flags & !PSH == ACK
    }

    /// Whether `a` (this segment's frame) and `b` (`other`'s) belong to one
    /// flow: the same family, addresses and ports.
    fn same_flow(&self, a: &[u8], other: &TcpSegment, b: &[u8]) -> bool {
        if self.v6 != other.v6 {
            return false;
        }
        let addrs = if self.v6 { 8..40 } else { 12..20 };
        let (ta, tb) = (self.tcp(), other.tcp());
        a[self.l3 + addrs.start..self.l3 + addrs.end]
            == b[other.l3 + addrs.start..other.l3 + addrs.end]
            && a[ta..ta + 4] == b[tb..tb + 4]
    }

    /// Whether `b` (`other`'s frame, of this segment's flow) agrees with
    /// `a` in every header field but the sequence number, lengths,
    /// checksums, IPv4 identification and PSH.
    fn headers_agree(&self, a: &[u8], other: &TcpSegment, b: &[u8]) -> bool {
        if self.tcp_len != other.tcp_len || a[..14] != b[..14] {
            return false;
        }
        let (ia, ib) = (&a[self.l3..], &b[other.l3..]);
        let ip_same = if self.v6 {
            ia[..4] == ib[..4] && ia[7] == ib[7]
        } else {
            ia[1] == ib[1] && ia[6..9] == ib[6..9]
        };
        let (ta, tb) = (self.tcp(), other.tcp());
        ip_same
            // Acknowledgment, data offset (and the reserved bits).
            && a[ta + 8..ta + 13] == b[tb + 8..tb + 13]
            // The window.
            && a[ta + 14..ta + 16] == b[tb + 14..tb + 16]
            // The options.
            && a[ta + 20..ta + self.tcp_len] == b[tb + 20..tb + self.tcp_len]
    }

    fn pseudo(&self, frame: &[u8], tcp_bytes: usize) -> u16 {
        pseudo_header::sum(&frame[self.l3..], self.v6, IpProtocol::Tcp, tcp_bytes)
    }

    /// Whether the frame's sums hold: the IPv4 header's always, the TCP
    /// segment's unless `vouched` (the kernel's partial mark).
    fn sums_hold(&self, frame: &[u8], vouched: bool) -> bool {
        if !self.v6 && checksum::data(&frame[self.l3..self.l3 + 20]) != 0xffff {
            return false;
        }
        if vouched {
            return true;
        }
        let (t, len) = (self.tcp(), self.tcp_len + self.payload);
        let pseudo = self.pseudo(frame, len);
        checksum::combine(&[pseudo, checksum::data(&frame[t..t + len])]) == 0xffff
    }
}

/// One flow's aggregate in the burst.
#[derive(Debug, Clone, Copy)]
struct Open {
    /// Where the aggregate's frame is in the burst's output.
    index: usize,
    /// The first segment's geometry (its headers head the aggregate).
    first: TcpSegment,
    /// Whether the first frame's sums were vouched for by the link.
    first_vouched: bool,
    /// The sequence number that would come next.
    next_seq: u32,
    /// The length of every segment but the last.
    seg_size: usize,
    /// The aggregate's frame length now.
    len: usize,
    /// Segments in it.
    segments: u32,
    /// Open to more (no PSH, no short segment yet).
    open: bool,
}

/// What became of an offered frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// Its payload joined an aggregate: the frame is not to be kept.
    Joined,
    /// To be kept as it is; `start`: push it, then call
    /// [`Aggregator::started`] with its index, for later segments to join.
    Keep { start: bool },
}

/// Aggregation counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroStats {
    /// Aggregates of two or more segments handed over.
    pub aggregates: u64,
    /// Segments joined to an earlier one (not handed over themselves).
    pub joined: u64,
    /// Segments that could have joined but whose sums failed.
    pub bad_checksum: u64,
    /// Times no large buffer was free for an aggregate.
    pub no_buffer: u64,
}

/// The per-link aggregation state of one burst.
#[derive(Debug, Default)]
pub struct Aggregator {
    /// Flows with an aggregate in the burst, open or closed, in order.
    flows: Vec<Open>,
    stats: GroStats,
}

impl Aggregator {
    pub fn new() -> Aggregator {
        Aggregator {
            flows: Vec::with_capacity(crate::MAX_BURST),
            stats: GroStats::default(),
        }
    }

    pub fn stats(&self) -> GroStats {
        self.stats
    }

    /// Offers the next frame of the burst, `frame` with the kernel's
    /// partial mark `vouched`; `out` holds the frames kept so far in this
    /// burst (those since the burst began), `home` the pool they came
    /// from, `large` the large buffers an aggregate grows into.
    pub fn offer(
        &mut self,
        frame: &[u8],
        vouched: bool,
        out: &mut [PoolBuf],
        home: &mut PacketPool,
        large: &mut PacketPool,
    ) -> Offer {
        let Some(seg) = TcpSegment::parse(frame) else {
            return Offer::Keep { start: false };
        };
        let joinable = seg.joinable_kind();
        let start = joinable && seg.flags & PSH == 0;
        let Some(at) = self
            .flows
            .iter()
            .rposition(|f| f.open && f.first.same_flow(out[f.index].data(), &seg, frame))
        else {
            return Offer::Keep { start };
        };
        let f = self.flows[at];
        let fits = f.len + seg.payload - f.first.l3 <= MAX_IP_BYTES
            && f.len + seg.payload <= large.buf_size();
        let agrees = joinable
            && fits
            && seg.seq == f.next_seq
            && seg.payload <= f.seg_size
            && f.first.headers_agree(out[f.index].data(), &seg, frame);
        if !agrees {
            // Whatever of the flow does not join ends its aggregate: what
            // follows must not overtake it.
            self.flows[at].open = false;
            return Offer::Keep { start };
        }
        if !seg.sums_hold(frame, vouched) {
            self.stats.bad_checksum += 1;
            self.flows[at].open = false;
            return Offer::Keep { start: false };
        }
        if f.segments == 1 {
            // The second segment: the first is verified now, and moves
            // into a large buffer.
            let head = &mut out[f.index];
            if !f.first.sums_hold(head.data(), f.first_vouched) {
                self.stats.bad_checksum += 1;
                self.flows[at].open = false;
                return Offer::Keep { start };
            }
            let Some(mut big) = large.alloc() else {
                self.stats.no_buffer += 1;
                self.flows[at].open = false;
                return Offer::Keep { start: false };
            };
            big.set_len(f.len);
            big.data_mut().copy_from_slice(&head.data()[..f.len]);
            home.free(std::mem::replace(head, big));
        }
        let buf = &mut out[f.index];
        let len = f.len + seg.payload;
        buf.set_len(len);
        buf.data_mut()[f.len..].copy_from_slice(&frame[seg.head()..seg.frame_len()]);
        let o = &mut self.flows[at];
        o.len = len;
        o.next_seq = o.next_seq.wrapping_add(seg.payload as u32);
        o.segments += 1;
        if seg.flags & PSH != 0 {
            let t = o.first.tcp();
            buf.data_mut()[t + 13] |= PSH;
            o.open = false;
        }
        if seg.payload < o.seg_size {
            o.open = false;
        }
        self.stats.joined += 1;
        Offer::Joined
    }

    /// The frame offered last, kept at `index` of the burst's output,
    /// starts its flow's aggregate (as [`Offer::Keep`] said it may).
    pub fn started(&mut self, index: usize, frame: &[u8], vouched: bool) {
        let Some(seg) = TcpSegment::parse(frame) else {
            return;
        };
        if self.flows.iter().filter(|f| f.open).count() >= MAX_OPEN {
            if let Some(oldest) = self.flows.iter_mut().find(|f| f.open) {
                oldest.open = false;
            }
        }
        let open = seg.flags & (PSH | FIN) == 0 && seg.joinable_kind();
        self.flows.push(Open {
            index,
            first: seg,
            first_vouched: vouched,
            next_seq: seg.seq.wrapping_add(seg.payload as u32),
            seg_size: seg.payload,
            len: seg.frame_len(),
            segments: 1,
            open,
        });
    }

    /// Ends the burst: each aggregate's lengths and sums written (the
    /// TCP checksum in the partial form) and marked vouched for.
    pub fn finish(&mut self, out: &mut [PoolBuf]) {
        for f in self.flows.drain(..) {
            if f.segments < 2 {
                continue;
            }
            self.stats.aggregates += 1;
            let Some(buf) = out.get_mut(f.index) else {
                continue;
            };
            let s = f.first;
            let d = buf.data_mut();
            let ip = s.l3;
            let tcp_bytes = f.len - s.tcp();
            if s.v6 {
                d[ip + 4..ip + 6].copy_from_slice(&(tcp_bytes as u16).to_be_bytes());
            } else {
                let total = (s.ip_len + tcp_bytes) as u16;
                d[ip + 2..ip + 4].copy_from_slice(&total.to_be_bytes());
                d[ip + 10..ip + 12].fill(0);
                let sum = !checksum::data(&d[ip..ip + 20]);
                d[ip + 10..ip + 12].copy_from_slice(&sum.to_be_bytes());
            }
            let pseudo = s.pseudo(d, tcp_bytes);
            let t = s.tcp();
            d[t + 16..t + 18].copy_from_slice(&pseudo.to_be_bytes());
            buf.set_csum_partial(true);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const URG: u8 = 0x20;

    /// A frame of flow `port` (the source port), IPv4 or IPv6, with `seq`,
    /// `flags`, the timestamp option (`tsval`) and `payload`
    /// (`test_frames::tcp_frame`); its TCP checksum whole. The IPv4
    /// identification changes with `seq`, as merging must not look at it.
    pub(crate) fn segment(
        v6: bool,
        port: u16,
        seq: u32,
        flags: u8,
        tsval: u32,
        payload: &[u8],
    ) -> Vec<u8> {
        let f = crate::test_frames::tcp_frame(v6, seq as u16, port, seq, flags, tsval, payload);
        assert!(TcpSegment::parse(&f).unwrap().sums_hold(&f, false));
        f
    }

    fn v4(port: u16, seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
        segment(false, port, seq, flags, 5, payload)
    }

    fn data(n: usize, salt: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(7).wrapping_add(salt))
            .collect()
    }

    /// One burst through an aggregator as a link takes it: the frames
    /// kept, after `finish`.
    fn burst(frames: &[(Vec<u8>, bool)], large_count: usize) -> (Vec<PoolBuf>, GroStats) {
        let mut home = PacketPool::new(2048, 64);
        let mut large = PacketPool::new(LARGE_BUF_SIZE, large_count);
        let mut gro = Aggregator::new();
        let mut out: Vec<PoolBuf> = Vec::new();
        for (f, vouched) in frames {
            match gro.offer(f, *vouched, &mut out, &mut home, &mut large) {
                Offer::Joined => {}
                Offer::Keep { start } => {
                    let mut b = home.alloc().unwrap();
                    assert!(b.fill_from(f));
                    b.set_csum_partial(*vouched);
                    out.push(b);
                    if start {
                        gro.started(out.len() - 1, f, *vouched);
                    }
                }
            }
        }
        gro.finish(&mut out);
        (out, gro.stats())
    }

    /// The kept frame's sequence number, flags and payload; an
    /// aggregate's sums checked (its TCP sum in the partial form,
    /// completed).
    fn read(b: &PoolBuf) -> (u32, u8, Vec<u8>) {
        let d = b.data();
        let s = TcpSegment::parse(d).expect("a TCP frame");
        assert_eq!(s.frame_len(), d.len());
        if b.capacity() == LARGE_BUF_SIZE {
            assert!(b.csum_partial());
            assert!(wire::partial_checksum::holds_partial_form(d));
            let mut whole = d.to_vec();
            assert!(wire::partial_checksum::complete(&mut whole));
            assert!(s.sums_hold(&whole, false), "completes to a whole sum");
        }
        (s.seq, s.flags, d[s.head()..].to_vec())
    }

    #[test]
    fn in_order_segments_join_into_one_with_sums_made_again() {
        for v6 in [false, true] {
            let payload = data(1448 * 20, 3);
            let frames: Vec<(Vec<u8>, bool)> = payload
                .chunks(1448)
                .enumerate()
                .map(|(i, c)| {
                    let last = i == 19;
                    let flags = if last { ACK | PSH } else { ACK };
                    let f = segment(v6, 4000, 1000 + (i * 1448) as u32, flags, 5, c);
                    (f, i % 2 == 0)
                })
                .collect();
            let (out, st) = burst(&frames, 4);
            assert_eq!(out.len(), 1, "v6 {v6}");
            assert!(out[0].csum_partial());
            assert_eq!(out[0].capacity(), LARGE_BUF_SIZE);
            let (seq, flags, got) = read(&out[0]);
            assert_eq!((seq, flags), (1000, ACK | PSH));
            assert_eq!(got, payload);
            assert_eq!((st.aggregates, st.joined, st.bad_checksum), (1, 19, 0));
        }
    }

    #[test]
    fn out_of_order_and_retransmitted_segments_stay_apart() {
        let p = data(1000, 1);
        let frames = vec![
            (v4(4000, 1000, ACK, &p), false),
            (v4(4000, 3000, ACK, &p), false), // a gap
            (v4(4000, 4000, ACK, &p), false),
            (v4(4000, 1000, ACK, &p), false), // old
        ];
        let (out, st) = burst(&frames, 4);
        let seqs: Vec<u32> = out.iter().map(|b| read(b).0).collect();
        assert_eq!(seqs, [1000, 3000, 1000]);
        assert_eq!(read(&out[1]).2.len(), 2000, "3000 and 4000 joined");
        assert_eq!(st.joined, 1);
    }

    #[test]
    fn a_bad_checksum_mid_burst_is_handed_over_alone_and_ends_the_aggregate() {
        let p = data(1000, 9);
        let mut bad = v4(4000, 3000, ACK, &p);
        let n = bad.len();
        bad[n - 3] ^= 0x10;
        let frames = vec![
            (v4(4000, 1000, ACK, &p), false),
            (v4(4000, 2000, ACK, &p), false),
            (bad.clone(), false),
            (v4(4000, 4000, ACK, &p), false),
            (v4(4000, 5000, ACK, &p), false),
        ];
        let (out, st) = burst(&frames, 4);
        assert_eq!(out.len(), 3);
        assert_eq!(read(&out[0]).0, 1000);
        assert_eq!(read(&out[0]).2.len(), 2000);
        assert_eq!(out[1].data(), &bad[..], "the bad one, untouched");
        assert!(
            !out[1].csum_partial(),
            "not vouched for: the stack checks it"
        );
        assert_eq!((read(&out[2]).0, read(&out[2]).2.len()), (4000, 2000));
        assert_eq!(st.bad_checksum, 1);
        // A bad first segment: found when the second comes.
        let mut bad_first = v4(4000, 1000, ACK, &p);
        bad_first[60] ^= 1;
        let (out, _) = burst(
            &[(bad_first.clone(), false), (v4(4000, 2000, ACK, &p), false)],
            4,
        );
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].data(), &bad_first[..]);
        // A bad IPv4 header sum counts too, even on a vouched frame.
        let mut bad_ip = v4(4000, 2000, ACK, &p);
        bad_ip[24] ^= 1;
        let (out, _) = burst(&[(v4(4000, 1000, ACK, &p), true), (bad_ip, true)], 4);
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn interleaved_flows_each_join_their_own() {
        let p = data(500, 4);
        let mut frames = Vec::new();
        for i in 0..4u32 {
            frames.push((v4(4000, 1000 + i * 500, ACK, &p), true));
            frames.push((v4(4001, 9000 + i * 500, ACK, &p), true));
            frames.push((segment(true, 4000, 100 + i * 500, ACK, 5, &p), true));
        }
        // Something of no flow in between.
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        frames.insert(4, (arp.clone(), false));
        let (out, st) = burst(&frames, 8);
        assert_eq!(out.len(), 4);
        assert_eq!(read(&out[0]).0, 1000);
        assert_eq!(read(&out[1]).0, 9000);
        assert_eq!(read(&out[2]).0, 100);
        assert_eq!(out[3].data(), &arp[..]);
        for b in &out[..3] {
            assert_eq!(read(b).2.len(), 2000);
        }
        assert_eq!(st.aggregates, 3);
    }

    #[test]
    fn fin_psh_urg_and_changed_headers_are_boundaries() {
        let p = data(1000, 5);
        // PSH ends an aggregate; what follows starts anew.
        let (out, _) = burst(
            &[
                (v4(1, 1000, ACK, &p), true),
                (v4(1, 2000, ACK | PSH, &p), true),
                (v4(1, 3000, ACK, &p), true),
                (v4(1, 4000, ACK, &p), true),
            ],
            4,
        );
        let got: Vec<(u32, u8, usize)> = out
            .iter()
            .map(|b| {
                let (s, f, d) = read(b);
                (s, f, d.len())
            })
            .collect();
        assert_eq!(got, [(1000, ACK | PSH, 2000), (3000, ACK, 2000)]);
        // FIN, URG, SYN, RST, ECE and CWR never join, nor does anything
        // of the flow after them in the burst.
        for odd in [FIN, URG, 0x02, 0x04, 0x40, 0x80] {
            let (out, st) = burst(
                &[
                    (v4(1, 1000, ACK, &p), true),
                    (v4(1, 2000, ACK | odd, &p), true),
                    (v4(1, 3000, ACK, &p), true),
                ],
                4,
            );
            assert_eq!(out.len(), 3, "flag {odd:#x}");
            assert_eq!(st.joined, 0);
            assert_eq!(read(&out[1]).1, ACK | odd);
        }
        // A different timestamp, window or acknowledgment, a pure ACK in
        // between, or a segment longer than the first: apart.
        let mut window = v4(1, 2000, ACK, &p);
        window[14 + 20 + 15] ^= 1;
        let mut ack = v4(1, 2000, ACK, &p);
        ack[14 + 20 + 11] ^= 1;
        for second in [
            segment(false, 1, 2000, ACK, 6, &p),
            window,
            ack,
            v4(1, 2000, ACK, &data(1001, 5)),
        ] {
            let (out, _) = burst(&[(v4(1, 1000, ACK, &p), true), (second, true)], 4);
            assert_eq!(out.len(), 2);
        }
        let (out, _) = burst(
            &[
                (v4(1, 1000, ACK, &p), true),
                (v4(1, 2000, ACK, &[]), true),
                (v4(1, 2000, ACK, &p), true),
            ],
            4,
        );
        assert_eq!(out.len(), 3, "nothing overtakes the pure ACK");
        // A shorter segment joins as the last.
        let (out, _) = burst(
            &[
                (v4(1, 1000, ACK, &p), true),
                (v4(1, 2000, ACK, &p[..10]), true),
                (v4(1, 2010, ACK, &p), true),
            ],
            4,
        );
        assert_eq!(out.len(), 2);
        assert_eq!(read(&out[0]).2.len(), 1010);
    }

    #[test]
    fn without_large_buffers_frames_pass_apart() {
        let p = data(1000, 6);
        let (out, st) = burst(
            &[
                (v4(1, 1000, ACK, &p), true),
                (v4(1, 2000, ACK, &p), true),
                (v4(1, 3000, ACK, &p), true),
            ],
            0,
        );
        assert_eq!(out.len(), 3);
        assert!(out.iter().all(|b| b.capacity() == 2048));
        assert_eq!(st.no_buffer, 1);
    }

    #[test]
    fn an_aggregate_stops_at_the_largest_ip_packet() {
        let p = data(1448, 2);
        let frames: Vec<(Vec<u8>, bool)> = (0..60u32)
            .map(|i| (v4(1, i * 1448, ACK, &p), true))
            .collect();
        let (out, _) = burst(&frames, 4);
        assert!(out.len() > 1);
        let mut total = 0;
        let mut next = 0;
        for b in &out {
            assert!(b.data().len() - 14 <= MAX_IP_BYTES);
            let (seq, _, d) = read(b);
            assert_eq!(seq, next);
            next += d.len() as u32;
            total += d.len();
        }
        assert_eq!(total, 60 * 1448);
    }

    #[test]
    fn no_bytes_make_it_panic() {
        let good = v4(1, 1000, ACK, &data(300, 8));
        let mut x = 99u32;
        let mut rnd = || {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (x >> 16) as u8
        };
        let mut frames = Vec::new();
        for n in 0..good.len() {
            frames.push((good[..n].to_vec(), rnd() & 1 == 0));
        }
        for _ in 0..2000 {
            let mut f = good.clone();
            for _ in 0..3 {
                let at = usize::from(rnd()) % 80;
                f[at] = rnd();
            }
            frames.push((f, rnd() & 1 == 0));
            frames.push((good.clone(), true));
        }
        for chunk in frames.chunks(32) {
            let (out, _) = burst(chunk, 8);
            for b in &out {
                let _ = TcpSegment::parse(b.data());
            }
        }
    }
}
