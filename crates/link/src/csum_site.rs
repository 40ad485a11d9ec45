//! Where a frame's TCP or UDP checksum lies, for a device told to finish
//! it: the transport header's offset in the frame (`csum_start`) and the
//! checksum field's offset in that header (`csum_offset`), as Linux's
//! `CHECKSUM_PARTIAL` skb, the `virtio_net_hdr` (`NEEDS_CSUM`) and AF_XDP's
//! TX metadata (`XDP_TXMD_FLAGS_CHECKSUM`) name them.
//!
//! The stack leaves a checksum partial only on Ethernet frames, with at
//! most one 802.1Q (or 802.1ad) tag, carrying IPv4 or IPv6 with TCP or UDP
//! as the first header after the IP header, and never on a fragment (a
//! fragmented datagram's checksum covers bytes of other frames, which a
//! device finishing one frame cannot see). Anything else has no site here,
//! and a link refuses to send it partial rather than send it wrong.
//! Nothing panics, whatever the bytes.

/// A frame's L4 checksum site.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CsumSite {
    /// The TCP or UDP header's first byte, from the frame's start.
    pub start: u16,
    /// The checksum field's offset from `start`: 16 (TCP) or 6 (UDP).
    pub offset: u16,
    pub protocol: L4,
    pub ipv6: bool,
}

/// The transport protocol whose checksum it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L4 {
    Tcp,
    Udp,
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;

/// The checksum site of `frame`, or `None` when it is not a whole TCP or
/// UDP packet over IPv4/IPv6 whose checksum field lies inside it.
pub fn locate(frame: &[u8]) -> Option<CsumSite> {
    let be16 = |at: usize| {
        frame
            .get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
    };
    let (l3, ethertype) = match be16(12)? {
        0x8100 | 0x88a8 => (18, be16(16)?),
        t => (14, t),
    };
    let (l4, protocol, ipv6) = match ethertype {
        ETHERTYPE_IPV4 => {
            let vihl = *frame.get(l3)?;
            let ihl = usize::from(vihl & 0x0f) * 4;
            // A fragment (more fragments, or an offset) has no whole
            // datagram to sum.
            let fragment = be16(l3 + 6)? & 0x3fff;
            if vihl >> 4 != 4 || ihl < 20 || fragment != 0 {
                return None;
            }
            (l3 + ihl, *frame.get(l3 + 9)?, false)
        }
        ETHERTYPE_IPV6 => {
            if frame.get(l3)? >> 4 != 6 {
                return None;
            }
            (l3 + 40, *frame.get(l3 + 6)?, true)
        }
        _ => return None,
    };
    let (protocol, offset) = match protocol {
        6 => (L4::Tcp, 16u16),
        17 => (L4::Udp, 6u16),
        _ => return None,
    };
    if l4 + usize::from(offset) + 2 > frame.len() {
        return None;
    }
    Some(CsumSite {
        start: u16::try_from(l4).ok()?,
        offset,
        protocol,
        ipv6,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4_udp() -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8 + 4];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        f[14] = 0x45;
        f[14 + 9] = 17;
        f
    }

    #[test]
    fn tcp_and_udp_over_both_families_tagged_or_not() {
        let udp = ipv4_udp();
        assert_eq!(
            locate(&udp),
            Some(CsumSite {
                start: 34,
                offset: 6,
                protocol: L4::Udp,
                ipv6: false
            })
        );
        let mut tcp = udp.clone();
        tcp[14 + 9] = 6;
        tcp.resize(14 + 20 + 20, 0);
        assert_eq!(locate(&tcp).map(|s| (s.start, s.offset)), Some((34, 16)));
        // IP options move the transport header.
        let mut opts = tcp.clone();
        opts[14] = 0x46;
        opts.resize(14 + 24 + 20, 0);
        assert_eq!(locate(&opts).map(|s| s.start), Some(38));
        // A tag moves everything by four.
        let mut tagged = udp[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
        tagged.extend_from_slice(&udp[12..]);
        assert_eq!(locate(&tagged).map(|s| s.start), Some(38));
        let mut v6 = vec![0u8; 14 + 40 + 20];
        v6[12..14].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        v6[14] = 0x60;
        v6[14 + 6] = 6;
        assert_eq!(
            locate(&v6),
            Some(CsumSite {
                start: 54,
                offset: 16,
                protocol: L4::Tcp,
                ipv6: true
            })
        );
    }

    #[test]
    fn fragments_other_protocols_and_short_frames_have_no_site() {
        let udp = ipv4_udp();
        // More fragments, or a later fragment: no whole datagram here.
        let mut first = udp.clone();
        first[14 + 6] = 0x20;
        assert_eq!(locate(&first), None);
        let mut later = udp.clone();
        later[14 + 7] = 0xb9;
        assert_eq!(locate(&later), None);
        // Don't-fragment is no fragment.
        let mut df = udp.clone();
        df[14 + 6] = 0x40;
        assert!(locate(&df).is_some());
        let mut icmp = udp.clone();
        icmp[14 + 9] = 1;
        assert_eq!(locate(&icmp), None);
        let mut arp = udp.clone();
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(locate(&arp), None);
        let mut bad_ihl = udp.clone();
        bad_ihl[14] = 0x44;
        assert_eq!(locate(&bad_ihl), None);
        // The checksum field must lie inside the frame.
        assert_eq!(locate(&udp[..14 + 20 + 7]), None);
        for n in 0..udp.len() {
            let _ = locate(&udp[..n]);
        }
    }
}
