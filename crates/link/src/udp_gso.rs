//! UDP super-frames from a peer using `UDP_SEGMENT` (UDP GSO), cut into
//! the datagrams it sent.
//!
//! A socket with `UDP_SEGMENT` hands its kernel one large UDP packet of
//! datagrams of `gso_size` payload bytes each (the last may be shorter).
//! Across a veth nobody cuts it: a packet socket receives it whole, the
//! segment size in its `virtio_net_hdr` (GSO type `UDP_L4`). Each datagram
//! is cut as Linux's `__udp_gso_segment` would: the same Ethernet and IP
//! headers, the IPv4 identification counted up by one per datagram and its
//! header sum made again, the IP and UDP lengths of each, and the UDP
//! checksum left in the partial form (the pseudo-header's sum), vouched
//! for by the kernel, which marked the super-frame's checksum partial.
//!
//! Nothing here panics on any bytes: what is not Ethernet with IPv4 (no
//! options needed, no fragment) or IPv6 (UDP as the first header) and
//! UDP, with every length consistent, is refused.

use wire::checksum;
use wire::ip::IpProtocol;

use crate::pseudo_header;

/// A UDP super-frame, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpSuperFrame {
    /// The IP header's offset and length.
    l3: usize,
    ip_len: usize,
    v6: bool,
    /// All the datagrams' payload bytes, and each one's but the last.
    payload: usize,
    seg: usize,
}

/// Why a frame is no UDP super-frame: not UDP over IPv4 or IPv6 as above,
/// or its lengths do not agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotUdp;

impl UdpSuperFrame {
    /// Reads `frame` as UDP datagrams of `seg` payload bytes each (more
    /// than 0).
    pub fn parse(frame: &[u8], seg: usize) -> Result<UdpSuperFrame, NotUdp> {
        let be16 = |at: usize| {
            frame
                .get(at..at + 2)
                .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
                .ok_or(NotUdp)
        };
        let (l3, ethertype) = match be16(12)? {
            0x8100 => (18, be16(16)?),
            t => (14, t),
        };
        let ip = frame.get(l3..).ok_or(NotUdp)?;
        let (v6, ip_len, total) = match ethertype {
            0x0800 => {
                let h = ip.get(..20).ok_or(NotUdp)?;
                let hl = usize::from(h[0] & 0x0f) * 4;
                let fragment = u16::from_be_bytes([h[6], h[7]]) & 0x3fff;
                if h[0] >> 4 != 4 || hl < 20 || h[9] != 17 || fragment != 0 {
                    return Err(NotUdp);
                }
                (false, hl, be16(l3 + 2)?)
            }
            0x86dd => {
                let h = ip.get(..40).ok_or(NotUdp)?;
                if h[0] >> 4 != 6 || h[6] != 17 {
                    return Err(NotUdp);
                }
                (true, 40, 40 + be16(l3 + 4)?)
            }
            _ => return Err(NotUdp),
        };
        if seg == 0 || total > ip.len() || ip_len + 8 > total {
            return Err(NotUdp);
        }
        Ok(UdpSuperFrame {
            l3,
            ip_len,
            v6,
            payload: total - ip_len - 8,
            seg,
        })
    }

    /// How many datagrams it makes (at least one).
    pub fn datagrams(&self) -> usize {
        self.payload.div_ceil(self.seg).max(1)
    }

    fn payload_of(&self, i: usize) -> std::ops::Range<usize> {
        let start = (i * self.seg).min(self.payload);
        start..(start + self.seg).min(self.payload)
    }

    /// The length of datagram `i`'s frame.
    pub fn datagram_len(&self, i: usize) -> usize {
        self.l3 + self.ip_len + 8 + self.payload_of(i).len()
    }

    /// Writes datagram `i` of `frame` into `dst`, which is
    /// [`datagram_len`](Self::datagram_len)`(i)` bytes long. Its UDP
    /// checksum holds the partial form.
    pub fn write_datagram(&self, frame: &[u8], i: usize, dst: &mut [u8]) {
        let head = self.l3 + self.ip_len + 8;
        let range = self.payload_of(i);
        dst[..head].copy_from_slice(&frame[..head]);
        dst[head..].copy_from_slice(&frame[head + range.start..head + range.end]);
        let udp_bytes = 8 + range.len();
        let ip = self.l3;
        if self.v6 {
            dst[ip + 4..ip + 6].copy_from_slice(&(udp_bytes as u16).to_be_bytes());
        } else {
            let total = (self.ip_len + udp_bytes) as u16;
            dst[ip + 2..ip + 4].copy_from_slice(&total.to_be_bytes());
            let id = u16::from_be_bytes([frame[ip + 4], frame[ip + 5]]).wrapping_add(i as u16);
            dst[ip + 4..ip + 6].copy_from_slice(&id.to_be_bytes());
            dst[ip + 10..ip + 12].fill(0);
            let sum = !checksum::data(&dst[ip..ip + self.ip_len]);
            dst[ip + 10..ip + 12].copy_from_slice(&sum.to_be_bytes());
        }
        let pseudo = pseudo_header::sum(&dst[ip..], self.v6, IpProtocol::Udp, udp_bytes);
        let u = ip + self.ip_len;
        dst[u + 4..u + 6].copy_from_slice(&(udp_bytes as u16).to_be_bytes());
        dst[u + 6..u + 8].copy_from_slice(&pseudo.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_frames;

    fn cut(f: &[u8], seg: usize) -> Result<Vec<Vec<u8>>, NotUdp> {
        let sf = UdpSuperFrame::parse(f, seg)?;
        Ok((0..sf.datagrams())
            .map(|i| {
                let mut d = vec![0u8; sf.datagram_len(i)];
                sf.write_datagram(f, i, &mut d);
                d
            })
            .collect())
    }

    #[test]
    fn a_udp_super_frame_becomes_its_datagrams() {
        let payload: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 253) as u8).collect();
        for v6 in [false, true] {
            // IPv4 identification 0xfffe: the datagrams' identifications wrap.
            let f = test_frames::udp_frame(v6, 0xfffe, &payload);
            let ip_len = if v6 { 40 } else { 20 };
            let dgrams = cut(&f, 1200).unwrap();
            assert_eq!(dgrams.len(), 9, "8 of 1200 bytes and one of 400");
            for (i, d) in dgrams.iter().enumerate() {
                let u = 14 + ip_len;
                let want = if i < 8 { 1200 } else { 400 };
                assert_eq!(d.len(), u + 8 + want);
                assert_eq!(
                    usize::from(u16::from_be_bytes([d[u + 4], d[u + 5]])),
                    8 + want
                );
                assert_eq!(&d[u + 8..], &payload[i * 1200..i * 1200 + want]);
                assert!(wire::partial_checksum::holds_partial_form(d));
                let mut whole = d.clone();
                assert!(wire::partial_checksum::complete(&mut whole));
                if v6 {
                    let pl = u16::from_be_bytes([d[18], d[19]]);
                    assert_eq!(usize::from(pl), 8 + want);
                } else {
                    let ip = &d[14..34];
                    assert_eq!(usize::from(u16::from_be_bytes([ip[2], ip[3]])), 28 + want);
                    assert_eq!(
                        u16::from_be_bytes([ip[4], ip[5]]),
                        0xfffeu16.wrapping_add(i as u16)
                    );
                    assert_eq!(checksum::data(ip), 0xffff, "IPv4 header sum");
                }
            }
        }
    }

    #[test]
    fn what_is_not_udp_is_refused_and_nothing_panics() {
        let f = test_frames::udp_frame(false, 0xfffe, &[3u8; 3000]);
        let mut tcp = f.clone();
        tcp[23] = 6;
        assert_eq!(cut(&tcp, 1000), Err(NotUdp));
        let mut frag = f.clone();
        frag[20] = 0x20;
        assert_eq!(cut(&frag, 1000), Err(NotUdp));
        assert_eq!(cut(&f, 0), Err(NotUdp));
        for n in 0..f.len() {
            let _ = cut(&f[..n], 1000);
        }
        for g in test_frames::noise_frames(99, &[0, 13, 14, 33, 42, 61, 2000], 17) {
            for seg in [1, 8, 1000] {
                let _ = cut(&g, seg);
            }
        }
    }
}
