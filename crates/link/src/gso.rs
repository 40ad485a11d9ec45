//! TCP super-frames from a peer with segmentation offload.
//!
//! A veth's peer with TSO or GSO on (every container's, by default) hands
//! over TCP segments of up to 64 KB as one frame: nobody segments them, as
//! there is no NIC between the two ends. An AF_PACKET socket receives them
//! whole. The stack takes frames of at most the interface's MTU, so the
//! link cuts such a frame into segments that fit, as the sender's NIC
//! would have: the same headers, the sequence number advanced by each
//! segment's offset, FIN and PSH on the last segment only, CWR on the
//! first only, the IPv4 identification counted up and its header sum made
//! again, the length fields of each. The TCP checksum of each segment is
//! left in the partial form (the pseudo-header's sum), vouched for by the
//! link: a super-frame whose checksum the sender left partial is one the
//! kernel vouched for; one with a whole checksum is verified first, over
//! all of it, and dropped when it fails.
//!
//! The same cut serves the send side (software GSO, the engine's
//! `[portN] gso`): the stack hands a link without segmentation offload a
//! super-frame in the partial form, and each segment is cut at the size
//! the stack chose (its MSS, [`TcpSuperFrame::parse_outgoing`]) and its
//! checksum made whole where the link does not finish checksums
//! ([`TcpSuperFrame::write_segment_whole`]).
//!
//! Nothing here panics on any bytes: what is not an Ethernet frame with
//! IPv4 (no fragment) or IPv6 (TCP as the first header) and TCP, with
//! every length consistent, is not a super-frame and is left alone.

use wire::checksum;
use wire::ip::IpProtocol;

use crate::pseudo_header;

/// A TCP super-frame, parsed: where its headers end and how it is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSuperFrame {
    /// The IP header's offset (after the Ethernet header and any VLAN
    /// tag), and the IP and TCP headers' lengths.
    l3: usize,
    ip_len: usize,
    tcp_len: usize,
    v6: bool,
    /// The TCP payload's length and the payload of each segment but the
    /// last.
    payload: usize,
    seg: usize,
}

/// Why a frame could not be cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotSplit {
    /// Not TCP over IPv4 or IPv6 as described above, or its lengths do not
    /// agree: the caller treats it as any frame too large.
    NotTcp,
    /// TCP whose whole checksum does not verify.
    BadChecksum,
}

/// Where a TCP-over-IP frame's headers lie and how long its payload is,
/// before any cut is chosen.
struct Headers {
    l3: usize,
    ip_len: usize,
    tcp_len: usize,
    v6: bool,
    payload: usize,
}

impl Headers {
    fn parse(frame: &[u8]) -> Result<Headers, NotSplit> {
        let mut l3 = 14;
        let field = |at: usize| -> Result<[u8; 2], NotSplit> {
            let b = frame.get(at..at + 2).ok_or(NotSplit::NotTcp)?;
            Ok([b[0], b[1]])
        };
        let mut ethertype = field(12)?;
        if ethertype == [0x81, 0x00] {
            ethertype = field(16)?;
            l3 = 18;
        }
        let ip = frame.get(l3..).ok_or(NotSplit::NotTcp)?;
        let (v6, ip_len, total) = match ethertype {
            [0x08, 0x00] => {
                let h = ip.get(..20).ok_or(NotSplit::NotTcp)?;
                let hl = usize::from(h[0] & 0x0f) * 4;
                let fragment = u16::from_be_bytes([h[6], h[7]]) & 0x3fff;
                if h[0] >> 4 != 4 || hl < 20 || h[9] != 6 || fragment != 0 {
                    return Err(NotSplit::NotTcp);
                }
                // A GSO frame's IPv4 total length may be 0 when it does
                // not fit 16 bits; the frame's own length says it then.
                let total = match usize::from(u16::from_be_bytes([h[2], h[3]])) {
                    0 => ip.len(),
                    t => t,
                };
                (false, hl, total)
            }
            [0x86, 0xdd] => {
                let h = ip.get(..40).ok_or(NotSplit::NotTcp)?;
                if h[0] >> 4 != 6 || h[6] != 6 {
                    return Err(NotSplit::NotTcp);
                }
                let total = match usize::from(u16::from_be_bytes([h[4], h[5]])) {
                    0 => ip.len(),
                    p => 40 + p,
                };
                (true, 40, total)
            }
            _ => return Err(NotSplit::NotTcp),
        };
        if total > ip.len() || ip_len + 20 > total {
            return Err(NotSplit::NotTcp);
        }
        let tcp_len = usize::from(ip[ip_len + 12] >> 4) * 4;
        if tcp_len < 20 || ip_len + tcp_len > total {
            return Err(NotSplit::NotTcp);
        }
        Ok(Headers {
            l3,
            ip_len,
            tcp_len,
            v6,
            payload: total - ip_len - tcp_len,
        })
    }

    /// The super-frame cut into segments of `seg` (above 0) payload bytes.
    fn cut_at(&self, seg: usize) -> TcpSuperFrame {
        TcpSuperFrame {
            l3: self.l3,
            ip_len: self.ip_len,
            tcp_len: self.tcp_len,
            v6: self.v6,
            payload: self.payload,
            seg,
        }
    }
}

impl TcpSuperFrame {
    /// Reads `frame` as a TCP super-frame to be cut into IP packets of at
    /// most `mtu` bytes. `partial`: the sender left its checksum partial
    /// (the kernel's mark), so it is not verified here.
    pub fn parse(frame: &[u8], mtu: usize, partial: bool) -> Result<TcpSuperFrame, NotSplit> {
        let h = Headers::parse(frame)?;
        if h.ip_len + h.tcp_len >= mtu {
            return Err(NotSplit::NotTcp);
        }
        let sf = h.cut_at(mtu - h.ip_len - h.tcp_len);
        if !partial && !sf.whole_checksum_holds(frame) {
            return Err(NotSplit::BadChecksum);
        }
        Ok(sf)
    }

    /// Reads `frame`, a super-frame this host sends (its checksum in the
    /// partial form, or any: every segment's is made again), to be cut
    /// into segments of `seg` payload bytes (the stack's `gso_size`). The
    /// caller checks [`segment_len`](Self::segment_len)`(0)` against its
    /// buffers and MTU.
    pub fn parse_outgoing(frame: &[u8], seg: u16) -> Result<TcpSuperFrame, NotSplit> {
        if seg == 0 {
            return Err(NotSplit::NotTcp);
        }
        Ok(Headers::parse(frame)?.cut_at(usize::from(seg)))
    }

    fn pseudo(&self, frame: &[u8], tcp_bytes: usize) -> u16 {
        pseudo_header::sum(&frame[self.l3..], self.v6, IpProtocol::Tcp, tcp_bytes)
    }

    fn whole_checksum_holds(&self, frame: &[u8]) -> bool {
        let start = self.l3 + self.ip_len;
        let len = self.tcp_len + self.payload;
        let pseudo = self.pseudo(frame, len);
        checksum::combine(&[pseudo, checksum::data(&frame[start..start + len])]) == 0xffff
    }

    /// Cut into segments of `seg` payload bytes (the sender's segment
    /// size, from a `virtio_net_hdr`) where that is less than the MTU
    /// allows; 0 changes nothing.
    pub fn cut_at(self, seg: usize) -> TcpSuperFrame {
        TcpSuperFrame {
            seg: if seg > 0 { seg.min(self.seg) } else { self.seg },
            ..self
        }
    }

    /// How many segments it makes (at least one).
    pub fn segments(&self) -> usize {
        self.payload.div_ceil(self.seg).max(1)
    }

    fn payload_of(&self, i: usize) -> std::ops::Range<usize> {
        let start = (i * self.seg).min(self.payload);
        start..(start + self.seg).min(self.payload)
    }

    /// The length of segment `i`'s frame.
    pub fn segment_len(&self, i: usize) -> usize {
        self.l3 + self.ip_len + self.tcp_len + self.payload_of(i).len()
    }

    /// Writes segment `i` of `frame` into `dst`, which is
    /// [`segment_len`](Self::segment_len)`(i)` bytes long. Its TCP
    /// checksum holds the partial form.
    pub fn write_segment(&self, frame: &[u8], i: usize, dst: &mut [u8]) {
        let head = self.l3 + self.ip_len + self.tcp_len;
        let range = self.payload_of(i);
        let last = i + 1 >= self.segments();
        dst[..head].copy_from_slice(&frame[..head]);
        dst[head..].copy_from_slice(&frame[head + range.start..head + range.end]);
        let tcp_bytes = self.tcp_len + range.len();
        let ip = self.l3;
        if self.v6 {
            dst[ip + 4..ip + 6].copy_from_slice(&(tcp_bytes as u16).to_be_bytes());
        } else {
            let total = (self.ip_len + tcp_bytes) as u16;
            dst[ip + 2..ip + 4].copy_from_slice(&total.to_be_bytes());
            let id = u16::from_be_bytes([frame[ip + 4], frame[ip + 5]]).wrapping_add(i as u16);
            dst[ip + 4..ip + 6].copy_from_slice(&id.to_be_bytes());
            dst[ip + 10..ip + 12].fill(0);
            let sum = !checksum::data(&dst[ip..ip + self.ip_len]);
            dst[ip + 10..ip + 12].copy_from_slice(&sum.to_be_bytes());
        }
        let t = ip + self.ip_len;
        let seq = u32::from_be_bytes([frame[t + 4], frame[t + 5], frame[t + 6], frame[t + 7]])
            .wrapping_add(range.start as u32);
        dst[t + 4..t + 8].copy_from_slice(&seq.to_be_bytes());
        const FIN: u8 = 0x01;
        const PSH: u8 = 0x08;
        const CWR: u8 = 0x80;
        let mut flags = frame[t + 13];
        if !last {
            flags &= !(FIN | PSH);
        }
        if i > 0 {
            flags &= !CWR;
        }
        dst[t + 13] = flags;
        let pseudo = self.pseudo(dst, tcp_bytes);
        dst[t + 16..t + 18].copy_from_slice(&pseudo.to_be_bytes());
    }

    /// [`write_segment`](Self::write_segment) with the TCP checksum made
    /// whole, for a link that puts the frame on a wire as it is.
    pub fn write_segment_whole(&self, frame: &[u8], i: usize, dst: &mut [u8]) {
        self.write_segment(frame, i, dst);
        // The field holds the pseudo-header's sum: summing the segment
        // over it adds exactly what the whole checksum covers.
        let t = self.l3 + self.ip_len;
        let sum = !checksum::data(&dst[t..]);
        dst[t + 16..t + 18].copy_from_slice(&sum.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_frames;

    /// A TCP frame (`test_frames::tcp_frame`) carrying `payload`, flags
    /// FIN|PSH|ACK|CWR, seq 1000, IPv4 identification 0xfffe (so that the
    /// segments' identifications wrap), its checksum whole.
    fn tcp_frame(v6: bool, payload: &[u8]) -> Vec<u8> {
        let f = test_frames::tcp_frame(
            v6,
            0xfffe,
            5000,
            1000,
            0x80 | 0x10 | 0x08 | 0x01,
            1,
            payload,
        );
        assert!(TcpSuperFrame::parse(&f, 65535, true)
            .unwrap()
            .whole_checksum_holds(&f));
        f
    }

    fn cut(f: &[u8], mtu: usize, partial: bool) -> Result<Vec<Vec<u8>>, NotSplit> {
        let sf = TcpSuperFrame::parse(f, mtu, partial)?;
        Ok((0..sf.segments())
            .map(|i| {
                let mut d = vec![0u8; sf.segment_len(i)];
                sf.write_segment(f, i, &mut d);
                d
            })
            .collect())
    }

    #[test]
    fn a_super_frame_becomes_mtu_sized_segments_that_add_up() {
        let payload: Vec<u8> = (0..20_000u32).map(|i| (i * 31 % 251) as u8).collect();
        for v6 in [false, true] {
            let f = tcp_frame(v6, &payload);
            let ip_len = if v6 { 40 } else { 20 };
            let segs = cut(&f, 1500, false).unwrap();
            let seg = 1500 - ip_len - 32;
            assert_eq!(segs.len(), payload.len().div_ceil(seg));
            let mut joined = Vec::new();
            for (i, s) in segs.iter().enumerate() {
                assert!(s.len() - 14 <= 1500);
                let t = 14 + ip_len;
                let seq = u32::from_be_bytes([s[t + 4], s[t + 5], s[t + 6], s[t + 7]]);
                assert_eq!(seq, 1000 + (i * seg) as u32);
                let flags = s[t + 13];
                let last = i + 1 == segs.len();
                assert_eq!(flags & 0x01 != 0, last, "FIN on the last only");
                assert_eq!(flags & 0x08 != 0, last, "PSH on the last only");
                assert_eq!(flags & 0x80 != 0, i == 0, "CWR on the first only");
                assert!(flags & 0x10 != 0);
                assert_eq!(&s[t + 20..t + 32], &f[t + 20..t + 32], "options kept");
                // The checksum is in the partial form, and a NIC would
                // complete it to one that verifies.
                assert!(wire::partial_checksum::holds_partial_form(s));
                let mut whole = s.clone();
                assert!(wire::partial_checksum::complete(&mut whole));
                let sf = TcpSuperFrame::parse(&whole, 65535, false);
                assert!(sf.is_ok(), "segment {i} verifies once completed");
                if !v6 {
                    let ip = &s[14..34];
                    assert_eq!(
                        usize::from(u16::from_be_bytes([ip[2], ip[3]])),
                        s.len() - 14
                    );
                    assert_eq!(
                        u16::from_be_bytes([ip[4], ip[5]]),
                        0xfffeu16.wrapping_add(i as u16)
                    );
                    assert_eq!(checksum::data(ip), 0xffff, "IPv4 header sum");
                } else {
                    let pl = usize::from(u16::from_be_bytes([s[18], s[19]]));
                    assert_eq!(pl, s.len() - 54);
                }
                joined.extend_from_slice(&s[t + 32..]);
            }
            assert_eq!(joined, payload);
        }
    }

    /// Parses segment `s` (Ethernet, then IPv4 or IPv6, then TCP) with
    /// wire's parsers, every checksum verified: its TCP header and payload.
    fn parse_verified(s: &[u8]) -> (wire::TcpRepr<'_>, Option<wire::Ipv4Repr>) {
        use std::net::IpAddr;
        use wire::{ChecksumMode, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, TcpPacket, TcpRepr};
        let (src, dst, tcp, v4): (IpAddr, IpAddr, &[u8], _) = if s[12..14] == [0x08, 0x00] {
            let p = Ipv4Packet::new_checked(&s[14..]).unwrap();
            let r = Ipv4Repr::parse(&p, ChecksumMode::Full).expect("IPv4 header sum");
            let hl = usize::from(p.header_len());
            let total = usize::from(p.total_len());
            assert_eq!(total, s.len() - 14, "IPv4 total length");
            (r.src_addr.into(), r.dst_addr.into(), &s[14 + hl..], Some(r))
        } else {
            let p = Ipv6Packet::new_checked(&s[14..]).unwrap();
            let r = Ipv6Repr::parse(&p).unwrap();
            assert_eq!(r.payload_len, s.len() - 54, "IPv6 payload length");
            (r.src_addr.into(), r.dst_addr.into(), &s[54..], None)
        };
        let t = TcpPacket::new_checked(tcp).unwrap();
        let repr = TcpRepr::parse(&t, &src, &dst, ChecksumMode::Full).expect("TCP checksum");
        // The repr borrows from `tcp`, which borrows from `s`.
        (repr, v4)
    }

    #[test]
    fn a_sent_super_frame_is_cut_at_the_stacks_size_with_whole_checksums() {
        let payload: Vec<u8> = (0..9_001u32).map(|i| (i * 7 % 253) as u8).collect();
        for v6 in [false, true] {
            let mut f = tcp_frame(v6, &payload);
            // The stack's super-frame carries the partial form, not a
            // whole sum: the cut must not depend on it.
            let t = 14 + if v6 { 40 } else { 20 };
            f[t + 16..t + 18].copy_from_slice(&[0xde, 0xad]);
            let seg = 1000u16;
            let sf = TcpSuperFrame::parse_outgoing(&f, seg).unwrap();
            assert_eq!(sf.segments(), 10);
            let mut joined = Vec::new();
            for i in 0..sf.segments() {
                let mut d = vec![0u8; sf.segment_len(i)];
                sf.write_segment_whole(&f, i, &mut d);
                let (tcp, v4) = parse_verified(&d);
                let last = i + 1 == sf.segments();
                assert_eq!(tcp.payload.len(), if last { 1 } else { 1000 });
                assert_eq!(tcp.seq_number.0 as u32, 1000 + i as u32 * 1000);
                assert_eq!(tcp.flags.fin(), last, "FIN on the last only");
                assert_eq!(tcp.flags.psh(), last, "PSH on the last only");
                assert!(tcp.flags.ack());
                assert_eq!(tcp.window_len, 512);
                assert_eq!(
                    tcp.timestamp,
                    Some((1, 2)),
                    "the options of every segment are the super-frame's"
                );
                if let Some(ip) = v4 {
                    assert_eq!(
                        ip.ident,
                        0xfffeu16.wrapping_add(i as u16),
                        "IP id counts up"
                    );
                    assert!(ip.dont_frag);
                }
                joined.extend_from_slice(tcp.payload);
            }
            assert_eq!(joined, payload);
        }
    }

    #[test]
    fn a_sent_super_frame_with_a_vlan_tag_or_no_size_is_handled() {
        let f = tcp_frame(false, &[3u8; 4000]);
        assert_eq!(
            TcpSuperFrame::parse_outgoing(&f, 0),
            Err(NotSplit::NotTcp),
            "no segment size, no cut"
        );
        let mut tagged = f[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
        tagged.extend_from_slice(&f[12..]);
        let sf = TcpSuperFrame::parse_outgoing(&tagged, 1448).unwrap();
        assert_eq!(sf.segments(), 3);
        let mut d = vec![0u8; sf.segment_len(2)];
        sf.write_segment_whole(&tagged, 2, &mut d);
        assert_eq!(&d[12..16], &[0x81, 0x00, 0x00, 0x07], "the tag is kept");
        let mut untagged = d[..12].to_vec();
        untagged.extend_from_slice(&d[16..]);
        let (tcp, _) = parse_verified(&untagged);
        assert_eq!(tcp.payload.len(), 4000 - 2 * 1448);
        for n in 0..f.len() {
            let _ = TcpSuperFrame::parse_outgoing(&f[..n], 1448);
        }
    }

    #[test]
    fn cut_at_takes_the_senders_segment_size_below_the_mtus() {
        let payload = vec![9u8; 5000];
        let f = tcp_frame(false, &payload);
        let sf = TcpSuperFrame::parse(&f, 1500, false).unwrap();
        assert_eq!(sf.cut_at(1000).segments(), 5);
        assert_eq!(sf.cut_at(1000).segment_len(4), 14 + 20 + 32 + 1000);
        // Never above what the MTU allows; 0 changes nothing.
        assert_eq!(sf.cut_at(9000), sf);
        assert_eq!(sf.cut_at(0), sf);
    }

    #[test]
    fn a_bad_whole_checksum_is_refused_unless_partial() {
        let mut f = tcp_frame(false, &[7u8; 5000]);
        let n = f.len();
        f[n - 1] ^= 0x40;
        assert_eq!(cut(&f, 1500, false), Err(NotSplit::BadChecksum));
        assert!(
            cut(&f, 1500, true).is_ok(),
            "the kernel vouched for a partial one"
        );
    }

    #[test]
    fn what_is_not_tcp_is_left_alone_and_nothing_panics() {
        let f = tcp_frame(false, &[1u8; 3000]);
        let mut udp = f.clone();
        udp[23] = 17;
        assert_eq!(cut(&udp, 1500, true), Err(NotSplit::NotTcp));
        let mut frag = f.clone();
        frag[20] = 0x20;
        assert_eq!(cut(&frag, 1500, true), Err(NotSplit::NotTcp));
        for n in 0..f.len() {
            // Cut short: the IP length runs past the end.
            let _ = cut(&f[..n], 1500, true);
        }
        for mtu in [0, 20, 52, 53, 100] {
            let _ = cut(&f, mtu, true);
        }
        for g in test_frames::noise_frames(7, &[0, 13, 14, 40, 60, 200, 2000], 6) {
            let _ = cut(&g, 1500, true);
        }
    }
}
