//! The `virtio_net_hdr` a packet socket with `PACKET_VNET_HDR` puts
//! before each received frame, read without trusting it.
//!
//! The kernel writes it from the frame's socket buffer
//! (`virtio_net_hdr_from_skb`): a super-frame's GSO type and segment size
//! (the payload bytes of each segment its sender meant, so the sender's
//! MSS for TCP and its `UDP_SEGMENT` size for UDP), and whether its
//! checksum is partial (`NEEDS_CSUM`, with where the sum starts and where
//! its field is) or was verified already (`DATA_VALID`, a NIC's receive
//! offload). Every field is little-endian on a little-endian host (the
//! kernel's `vio_le()`).
//!
//! What makes no sense is refused with its reason, as Linux's own reader
//! of these headers (`virtio_net_hdr_to_skb`) refuses it: an unknown GSO
//! type or UFO (`GSO_UDP`, which Linux no longer makes), a segment size of
//! 0 or `GSO_BY_FRAGS`, a checksum start or field past the frame, a
//! checksum field not at TCP's or UDP's offset, the ECN bit on anything
//! but TCP, UDP GSO without a partial checksum, and a GSO type the frame's
//! own headers contradict. A frame whose payload is no longer than its
//! segment size needs no cutting (Linux: "too small packets are not really
//! GSO ones"; its TCP marks every segment it sends with its MSS, one
//! segment or many): it is taken as a plain frame, and counted.

/// `sizeof(struct virtio_net_hdr)`.
pub const VNET_HDR_LEN: usize = 10;

const F_NEEDS_CSUM: u8 = 1;
const F_DATA_VALID: u8 = 2;

const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_TCPV6: u8 = 4;
const GSO_UDP_L4: u8 = 5;
const GSO_ECN: u8 = 0x80;
/// `GSO_BY_FRAGS`: segments as the socket buffer's fragments lie, which
/// a header cannot describe.
const GSO_BY_FRAGS: u16 = 0xffff;

/// What a super-frame is to be cut into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GsoKind {
    TcpV4,
    TcpV6,
    /// UDP datagrams of `size` payload bytes each (`UDP_SEGMENT`), over
    /// IPv4 or IPv6.
    Udp,
}

/// A received frame's segmentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxGso {
    pub kind: GsoKind,
    /// Payload bytes per segment.
    pub size: u16,
    /// TCP with ECN: the first segment alone carries CWR (what the
    /// cutter does anyway).
    pub ecn: bool,
}

/// A received `virtio_net_hdr`, checked against its frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RxVnet {
    /// `NEEDS_CSUM`: the TCP or UDP checksum field holds the
    /// pseudo-header's sum, vouched for by the kernel.
    pub needs_csum: bool,
    /// `DATA_VALID`: the checksum was verified before the frame reached
    /// the socket.
    pub data_valid: bool,
    /// Segmentation, for a frame longer than one segment.
    pub gso: Option<RxGso>,
    /// The header said GSO, but the frame is no longer than one segment:
    /// taken as a plain frame.
    pub gso_not_needed: bool,
}

/// Why a header was refused (its frame is dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VnetRefusal {
    /// A GSO type Linux does not make (UFO included).
    BadGsoType,
    /// A segment size of 0 or `GSO_BY_FRAGS`.
    BadGsoSize,
    /// The checksum start or field past the frame, or the field not at
    /// TCP's (16) or UDP's (6) offset for a GSO frame.
    BadCsum,
    /// The ECN bit on a frame that is no TCP super-frame.
    BadEcn,
    /// UDP GSO without a partial checksum.
    UdpWithoutCsum,
    /// The frame's own headers are not what the GSO type says.
    GsoMismatch,
}

/// Counters of received headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VnetRxStats {
    /// TCP super-frames whose segment size came from their header.
    pub tcp_gso: u64,
    /// The last segment size a TCP super-frame's header gave.
    pub tcp_gso_size: u64,
    /// UDP super-frames (`UDP_SEGMENT`) cut into datagrams.
    pub udp_gso: u64,
    /// Datagrams cut from them.
    pub udp_datagrams: u64,
    /// The last segment size a UDP super-frame's header gave.
    pub udp_gso_size: u64,
    /// Frames marked `DATA_VALID`.
    pub data_valid: u64,
    /// Headers saying GSO on a frame of one segment (taken plain).
    pub gso_not_needed: u64,
    /// Refused headers, by reason (their frames dropped).
    pub bad_gso_type: u64,
    pub bad_gso_size: u64,
    pub bad_csum: u64,
    pub bad_ecn: u64,
    pub udp_without_csum: u64,
    pub gso_mismatch: u64,
}

impl VnetRxStats {
    /// Counts a refused header.
    pub fn refused(&mut self, why: VnetRefusal) {
        let c = match why {
            VnetRefusal::BadGsoType => &mut self.bad_gso_type,
            VnetRefusal::BadGsoSize => &mut self.bad_gso_size,
            VnetRefusal::BadCsum => &mut self.bad_csum,
            VnetRefusal::BadEcn => &mut self.bad_ecn,
            VnetRefusal::UdpWithoutCsum => &mut self.udp_without_csum,
            VnetRefusal::GsoMismatch => &mut self.gso_mismatch,
        };
        *c += 1;
    }

    /// The counters by name, for the runtime's `rx_vnet_*` keys.
    pub fn named(&self) -> [(&'static str, u64); 13] {
        [
            ("tcp_gso", self.tcp_gso),
            ("tcp_gso_size", self.tcp_gso_size),
            ("udp_gso", self.udp_gso),
            ("udp_datagrams", self.udp_datagrams),
            ("udp_gso_size", self.udp_gso_size),
            ("data_valid", self.data_valid),
            ("gso_not_needed", self.gso_not_needed),
            ("bad_gso_type", self.bad_gso_type),
            ("bad_gso_size", self.bad_gso_size),
            ("bad_csum", self.bad_csum),
            ("bad_ecn", self.bad_ecn),
            ("udp_without_csum", self.udp_without_csum),
            ("gso_mismatch", self.gso_mismatch),
        ]
    }
}

fn le16(h: &[u8; VNET_HDR_LEN], at: usize) -> u16 {
    u16::from_le_bytes([h[at], h[at + 1]])
}

/// The frame's IP version, transport protocol and transport header's
/// offset, when it is Ethernet (with at most one VLAN tag in it) and IPv4
/// or IPv6 whose first header after the fixed one is the transport.
fn transport(frame: &[u8]) -> Option<(bool, u8, usize)> {
    let be16 = |at: usize| {
        frame
            .get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
    };
    let (l3, ethertype) = match be16(12)? {
        0x8100 | 0x88a8 => (18, be16(16)?),
        t => (14, t),
    };
    match ethertype {
        0x0800 => Some((
            false,
            *frame.get(l3 + 9)?,
            l3 + usize::from(frame.get(l3)? & 0x0f) * 4,
        )),
        0x86dd => Some((true, *frame.get(l3 + 6)?, l3 + 40)),
        _ => None,
    }
}

/// Reads the header `h` of `frame`, whose length with any VLAN tag the
/// kernel took out is `len` (the offsets count the tag: the kernel's
/// `vlan_hlen`).
pub fn parse_rx(h: &[u8; VNET_HDR_LEN], frame: &[u8], len: usize) -> Result<RxVnet, VnetRefusal> {
    let flags = h[0];
    let gso_type = h[1];
    let gso_size = le16(h, 4);
    let csum_start = usize::from(le16(h, 6));
    let csum_offset = usize::from(le16(h, 8));
    let needs_csum = flags & F_NEEDS_CSUM != 0;
    if needs_csum && csum_start + csum_offset + 2 > len {
        return Err(VnetRefusal::BadCsum);
    }
    let ecn = gso_type & GSO_ECN != 0;
    let kind = match gso_type & !GSO_ECN {
        GSO_NONE => None,
        GSO_TCPV4 => Some(GsoKind::TcpV4),
        GSO_TCPV6 => Some(GsoKind::TcpV6),
        GSO_UDP_L4 => Some(GsoKind::Udp),
        // UFO (`GSO_UDP`) included: the kernel makes it no more.
        _ => return Err(VnetRefusal::BadGsoType),
    };
    let mut v = RxVnet {
        needs_csum,
        data_valid: flags & F_DATA_VALID != 0,
        gso: None,
        gso_not_needed: false,
    };
    let Some(kind) = kind else {
        return if ecn { Err(VnetRefusal::BadEcn) } else { Ok(v) };
    };
    if gso_size == 0 || gso_size == GSO_BY_FRAGS {
        return Err(VnetRefusal::BadGsoSize);
    }
    let (want_v6, want_proto, want_offset) = match kind {
        GsoKind::TcpV4 => (Some(false), 6, 16),
        GsoKind::TcpV6 => (Some(true), 6, 16),
        GsoKind::Udp => (None, 17, 6),
    };
    if kind == GsoKind::Udp {
        if ecn {
            return Err(VnetRefusal::BadEcn);
        }
        if !needs_csum {
            return Err(VnetRefusal::UdpWithoutCsum);
        }
    }
    if needs_csum && csum_offset != want_offset {
        return Err(VnetRefusal::BadCsum);
    }
    let l4 = match transport(frame) {
        Some((v6, proto, l4)) if proto == want_proto && want_v6.is_none_or(|w| w == v6) => l4,
        _ => return Err(VnetRefusal::GsoMismatch),
    };
    let l4_header = match kind {
        GsoKind::Udp => 8,
        _ => frame
            .get(l4 + 12)
            .map_or(20, |b| usize::from(b >> 4) * 4)
            .max(20),
    };
    let payload = frame.len().saturating_sub(l4 + l4_header);
    if payload <= usize::from(gso_size) {
        v.gso_not_needed = true;
        return Ok(v);
    }
    v.gso = Some(RxGso {
        kind,
        size: gso_size,
        ecn,
    });
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(flags: u8, gso_type: u8, gso_size: u16, start: u16, offset: u16) -> [u8; VNET_HDR_LEN] {
        let mut h = [0u8; VNET_HDR_LEN];
        h[0] = flags;
        h[1] = gso_type;
        h[2..4].copy_from_slice(&54u16.to_le_bytes());
        h[4..6].copy_from_slice(&gso_size.to_le_bytes());
        h[6..8].copy_from_slice(&start.to_le_bytes());
        h[8..10].copy_from_slice(&offset.to_le_bytes());
        h
    }

    /// Ethernet, IPv4 or IPv6 carrying `proto`, `len` bytes in all.
    fn frame(v6: bool, proto: u8, len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len];
        if v6 {
            f[12..14].copy_from_slice(&[0x86, 0xdd]);
            f[14] = 0x60;
            f[20] = proto;
        } else {
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f[14] = 0x45;
            f[23] = proto;
        }
        f
    }

    #[test]
    fn a_tcp_super_frame_gives_its_segment_size_and_partial_checksum() {
        let f = frame(false, 6, 20_000);
        let v = parse_rx(&hdr(1, GSO_TCPV4, 1448, 34, 16), &f, f.len()).unwrap();
        assert!(v.needs_csum && !v.data_valid && !v.gso_not_needed);
        assert_eq!(
            v.gso,
            Some(RxGso {
                kind: GsoKind::TcpV4,
                size: 1448,
                ecn: false
            })
        );
        let f6 = frame(true, 6, 20_000);
        let v = parse_rx(&hdr(1, GSO_TCPV6 | GSO_ECN, 1428, 54, 16), &f6, f6.len()).unwrap();
        assert_eq!(
            v.gso,
            Some(RxGso {
                kind: GsoKind::TcpV6,
                size: 1428,
                ecn: true
            })
        );
        // A plain frame, verified by a NIC.
        let v = parse_rx(&hdr(F_DATA_VALID, 0, 0, 0, 0), &f, 1514).unwrap();
        assert_eq!(
            v,
            RxVnet {
                data_valid: true,
                ..RxVnet::default()
            }
        );
    }

    #[test]
    fn udp_gso_needs_a_partial_checksum_at_udps_field() {
        let f = frame(false, 17, 10_000);
        let v = parse_rx(&hdr(1, GSO_UDP_L4, 1000, 34, 6), &f, f.len()).unwrap();
        assert_eq!(v.gso.map(|g| (g.kind, g.size)), Some((GsoKind::Udp, 1000)));
        let f6 = frame(true, 17, 10_000);
        assert!(parse_rx(&hdr(1, GSO_UDP_L4, 1000, 54, 6), &f6, f6.len()).is_ok());
        assert_eq!(
            parse_rx(&hdr(0, GSO_UDP_L4, 1000, 0, 0), &f, f.len()),
            Err(VnetRefusal::UdpWithoutCsum)
        );
        assert_eq!(
            parse_rx(&hdr(1, GSO_UDP_L4, 1000, 34, 16), &f, f.len()),
            Err(VnetRefusal::BadCsum)
        );
        assert_eq!(
            parse_rx(&hdr(1, GSO_UDP_L4 | GSO_ECN, 1000, 34, 6), &f, f.len()),
            Err(VnetRefusal::BadEcn)
        );
    }

    #[test]
    fn every_malformed_header_is_refused_with_its_reason() {
        let f = frame(false, 6, 5000);
        let n = f.len();
        for t in [2u8, 3, 6, 7, 0x7f, 0x83] {
            assert_eq!(
                parse_rx(&hdr(1, t, 1448, 34, 16), &f, n),
                Err(VnetRefusal::BadGsoType),
                "gso_type {t:#x}"
            );
        }
        for size in [0u16, 0xffff] {
            assert_eq!(
                parse_rx(&hdr(1, GSO_TCPV4, size, 34, 16), &f, n),
                Err(VnetRefusal::BadGsoSize)
            );
        }
        // The checksum field past the frame (start, or start + offset).
        assert_eq!(
            parse_rx(&hdr(1, 0, 0, 5000, 0), &f, n),
            Err(VnetRefusal::BadCsum)
        );
        assert_eq!(
            parse_rx(&hdr(1, 0, 0, 34, 4965), &f, n),
            Err(VnetRefusal::BadCsum)
        );
        assert!(parse_rx(&hdr(1, 0, 0, 34, 4964), &f, n).is_ok());
        assert_eq!(
            parse_rx(&hdr(1, 0, 0, 0xffff, 0xffff), &f, n),
            Err(VnetRefusal::BadCsum)
        );
        // TCP GSO with the field not at TCP's checksum.
        assert_eq!(
            parse_rx(&hdr(1, GSO_TCPV4, 1448, 34, 6), &f, n),
            Err(VnetRefusal::BadCsum)
        );
        // ECN without GSO.
        assert_eq!(
            parse_rx(&hdr(1, GSO_ECN, 0, 34, 16), &f, n),
            Err(VnetRefusal::BadEcn)
        );
        // The frame is not what the type says.
        assert_eq!(
            parse_rx(&hdr(1, GSO_TCPV6, 1448, 34, 16), &f, n),
            Err(VnetRefusal::GsoMismatch)
        );
        assert_eq!(
            parse_rx(&hdr(1, GSO_UDP_L4, 1448, 34, 6), &f, n),
            Err(VnetRefusal::GsoMismatch)
        );
        assert_eq!(
            parse_rx(&hdr(1, GSO_TCPV4, 1448, 34, 16), &f[..13], n),
            Err(VnetRefusal::GsoMismatch)
        );
        // A payload no longer than the segment size (4946 bytes after
        // 20 of TCP header): a plain frame.
        let v = parse_rx(&hdr(1, GSO_TCPV4, 4946, 34, 16), &f, n).unwrap();
        assert!(v.gso.is_none() && v.gso_not_needed && v.needs_csum);
        let v = parse_rx(&hdr(1, GSO_TCPV4, 4945, 34, 16), &f, n).unwrap();
        assert!(v.gso.is_some() && !v.gso_not_needed);
        // As Linux's TCP sends one segment: marked with its MSS.
        let one = frame(false, 6, 14 + 20 + 32 + 1448);
        let mut one = one;
        one[46] = 8 << 4;
        let v = parse_rx(&hdr(1, GSO_TCPV4, 1448, 34, 16), &one, one.len()).unwrap();
        assert!(v.gso.is_none() && v.gso_not_needed);
        // Offsets count a tag the kernel took out (`len` has it).
        assert!(parse_rx(&hdr(1, 0, 0, 38, 4964), &f, n + 4).is_ok());
    }

    #[test]
    fn no_header_bytes_panic() {
        let frames = [
            frame(false, 6, 3000),
            frame(true, 17, 3000),
            vec![0u8; 0],
            vec![0x81u8; 17],
        ];
        let mut x = 0x1234_5678u32;
        let mut stats = VnetRxStats::default();
        for _ in 0..20_000 {
            let mut h = [0u8; VNET_HDR_LEN];
            for b in h.iter_mut() {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                *b = (x >> 16) as u8;
            }
            h[1] &= [0x87, 0xff][(x & 1) as usize];
            for f in &frames {
                if let Err(why) = parse_rx(&h, f, f.len()) {
                    stats.refused(why);
                }
            }
        }
        let refused: u64 = stats.named()[7..].iter().map(|(_, v)| v).sum();
        assert!(refused > 0 && stats.bad_gso_type > 0 && stats.bad_csum > 0);
    }
}
