//! TCP and UDP checksums left for an offload to finish.
//!
//! A sender with checksum offload (Linux's `CHECKSUM_PARTIAL`) writes only
//! the pseudo-header's sum, folded and not inverted, into the TCP or UDP
//! checksum field and leaves the rest to the NIC. When there is no NIC (a
//! veth, a TAP) the frame reaches its receiver in that form. Some links
//! say so per frame (AF_PACKET's `TP_STATUS_CSUMNOTREADY`, virtio-net's
//! `NEEDS_CSUM`); AF_XDP and DPDK's software drivers do not, so for them
//! the form itself is what can be recognised: [`holds_partial_form`].
//! [`complete`] finishes such a checksum, as a NIC would, for a frame that
//! must travel on as a whole one (to the kernel, or before a fault is
//! injected into it).
//!
//! Frames are Ethernet, with at most one 802.1Q tag, carrying IPv4 (not a
//! fragment: a sender completes the checksum before it fragments) or IPv6
//! whose first header is TCP or UDP. Everything else is not a partial
//! checksum here. Nothing panics, whatever the bytes.

use crate::checksum;
use crate::ip::IpProtocol;
use core::net::{Ipv4Addr, Ipv6Addr};

/// Where a frame's TCP or UDP checksum is, and the sum it would hold in the
/// partial form.
struct Site {
    /// The transport header's first byte, and the end of its payload.
    start: usize,
    end: usize,
    /// The checksum field's offset in the frame.
    field: usize,
    udp: bool,
    /// The pseudo-header's sum (folded, not inverted).
    pseudo: u16,
}

const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];
const ETHERTYPE_IPV6: [u8; 2] = [0x86, 0xdd];
const ETHERTYPE_VLAN: [u8; 2] = [0x81, 0x00];

fn locate(frame: &[u8]) -> Option<Site> {
    let mut l3 = 14;
    let mut ethertype = frame.get(12..14)?;
    if ethertype == ETHERTYPE_VLAN {
        ethertype = frame.get(16..18)?;
        l3 = 18;
    }
    let ip = frame.get(l3..)?;
    let (proto, start, end, pseudo_of): (u8, usize, usize, &dyn Fn(IpProtocol, u32) -> u16) =
        if ethertype == ETHERTYPE_IPV4 {
            let header: &[u8; 20] = ip.first_chunk()?;
            let hl = usize::from(header[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([header[2], header[3]]));
            let fragment = u16::from_be_bytes([header[6], header[7]]) & 0x3fff;
            if header[0] >> 4 != 4 || hl < 20 || total < hl || fragment != 0 {
                return None;
            }
            let src = Ipv4Addr::new(header[12], header[13], header[14], header[15]);
            let dst = Ipv4Addr::new(header[16], header[17], header[18], header[19]);
            (header[9], l3 + hl, l3 + total, &move |p, len| {
                checksum::pseudo_header_v4(&src, &dst, p, len)
            })
        } else if ethertype == ETHERTYPE_IPV6 {
            let header: &[u8; 40] = ip.first_chunk()?;
            if header[0] >> 4 != 6 {
                return None;
            }
            let payload = usize::from(u16::from_be_bytes([header[4], header[5]]));
            let mut s = [0u8; 16];
            s.copy_from_slice(&header[8..24]);
            let mut d = [0u8; 16];
            d.copy_from_slice(&header[24..40]);
            let (src, dst) = (Ipv6Addr::from(s), Ipv6Addr::from(d));
            (header[6], l3 + 40, l3 + 40 + payload, &move |p, len| {
                checksum::pseudo_header_v6(&src, &dst, p, len)
            })
        } else {
            return None;
        };
    let (udp, field) = match proto {
        6 => (false, 16),
        17 => (true, 6),
        _ => return None,
    };
    let minimum = if udp { 8 } else { 20 };
    if end > frame.len() || start + minimum > end {
        return None;
    }
    let protocol = if udp {
        IpProtocol::Udp
    } else {
        IpProtocol::Tcp
    };
    Some(Site {
        start,
        end,
        field: start + field,
        udp,
        pseudo: pseudo_of(protocol, (end - start) as u32),
    })
}

/// The 16-bit field at `at` (0 past the end, which `locate` rules out).
fn field(frame: &[u8], at: usize) -> u16 {
    frame
        .get(at..at + 2)
        .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]))
}

/// Whether `frame` is TCP or UDP whose checksum field holds exactly its
/// pseudo-header's sum: the form an offloading sender leaves for the NIC.
/// (Both one's-complement zeros count as equal.) A whole checksum holds
/// this value only when the rest of the segment sums to zero, one segment
/// in 65,536; taking such a segment as partial skips a check it would have
/// passed.
pub fn holds_partial_form(frame: &[u8]) -> bool {
    let Some(site) = locate(frame) else {
        return false;
    };
    let value = field(frame, site.field);
    value == site.pseudo || (value | site.pseudo == 0xffff && value & site.pseudo == 0)
}

/// Finishes the partial checksum of `frame` as a NIC would: the sum of the
/// segment, whose field holds the pseudo-header's sum, inverted into the
/// field (a UDP zero sent as `0xffff`). Returns false, changing nothing,
/// when `frame` is not TCP or UDP as [`holds_partial_form`] reads it.
pub fn complete(frame: &mut [u8]) -> bool {
    let Some(site) = locate(frame) else {
        return false;
    };
    // `locate` checked start <= field < field + 2 <= end <= frame.len().
    let Some(segment) = frame.get(site.start..site.end) else {
        return false;
    };
    let mut sum = !checksum::data(segment);
    if sum == 0 && site.udp {
        sum = 0xffff;
    }
    match frame.get_mut(site.field..site.field + 2) {
        Some(f) => f.copy_from_slice(&sum.to_be_bytes()),
        None => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// An Ethernet frame with IPv4 and a transport header of `proto` whose
    /// checksum field holds `check`, and `payload`.
    fn v4(proto: u8, payload: &[u8], fragment: u16) -> Vec<u8> {
        let l4 = if proto == 17 { 8 } else { 20 };
        let total = 20 + l4 + payload.len();
        let mut f = std::vec![0u8; 14 + total];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4);
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        ip[6..8].copy_from_slice(&fragment.to_be_bytes());
        ip[8] = 64;
        ip[9] = proto;
        ip[12..16].copy_from_slice(&[10, 99, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 99, 0, 2]);
        f[34..36].copy_from_slice(&4000u16.to_be_bytes());
        f[36..38].copy_from_slice(&80u16.to_be_bytes());
        if proto == 17 {
            f[38..40].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        } else {
            f[46] = 5 << 4;
        }
        f[34 + l4..].copy_from_slice(payload);
        f
    }

    fn v6(proto: u8, payload: &[u8]) -> Vec<u8> {
        let l4 = if proto == 17 { 8 } else { 20 };
        let mut f = std::vec![0u8; 14 + 40 + l4 + payload.len()];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV6);
        f[14] = 0x60;
        f[18..20].copy_from_slice(&((l4 + payload.len()) as u16).to_be_bytes());
        f[20] = proto;
        f[21] = 64;
        f[22..38].copy_from_slice(&Ipv6Addr::new(0xfd99, 0, 0, 0, 0, 0, 0, 1).octets());
        f[38..54].copy_from_slice(&Ipv6Addr::new(0xfd99, 0, 0, 0, 0, 0, 0, 2).octets());
        if proto == 17 {
            f[58..60].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        } else {
            f[66] = 5 << 4;
        }
        f[54 + l4..].copy_from_slice(payload);
        f
    }

    /// Writes the partial form into the frame, as an offloading sender.
    fn make_partial(f: &mut [u8]) {
        let site = locate(f).unwrap();
        f[site.field..site.field + 2].copy_from_slice(&site.pseudo.to_be_bytes());
    }

    /// Whether the whole checksum verifies.
    fn verifies(f: &[u8]) -> bool {
        let site = locate(f).unwrap();
        checksum::combine(&[site.pseudo, checksum::data(&f[site.start..site.end])]) == 0xffff
    }

    #[test]
    fn partial_form_is_recognised_and_completed_for_each_family_and_protocol() {
        let payload: Vec<u8> = (0..301u16).map(|i| (i * 7) as u8).collect();
        for mut f in [
            v4(6, &payload, 0),
            v4(17, &payload, 0),
            v6(6, &payload),
            v6(17, &payload),
        ] {
            make_partial(&mut f);
            assert!(holds_partial_form(&f));
            assert!(!verifies(&f));
            assert!(complete(&mut f));
            assert!(verifies(&f), "completed checksum verifies");
            assert!(
                !holds_partial_form(&f),
                "a whole checksum is not the partial form"
            );
        }
    }

    #[test]
    fn a_vlan_tag_is_looked_through() {
        let mut f = v4(6, b"hello", 0);
        make_partial(&mut f);
        let mut tagged = f[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x0a]);
        tagged.extend_from_slice(&f[12..]);
        assert!(holds_partial_form(&tagged));
        assert!(complete(&mut tagged));
        assert!(!holds_partial_form(&tagged));
    }

    #[test]
    fn fragments_other_protocols_and_short_frames_are_not_partial() {
        let mut frag = v4(17, b"datagram", 0x2000);
        // The sum in the field, but a fragment: never left partial.
        let site_pseudo = checksum::pseudo_header_v4(
            &Ipv4Addr::new(10, 99, 0, 1),
            &Ipv4Addr::new(10, 99, 0, 2),
            IpProtocol::Udp,
            16,
        );
        frag[40..42].copy_from_slice(&site_pseudo.to_be_bytes());
        assert!(!holds_partial_form(&frag));
        assert!(!complete(&mut frag.clone()));
        let mut icmp = v4(6, b"x", 0);
        icmp[23] = 1;
        assert!(!holds_partial_form(&icmp));
        let whole = v4(6, b"hello", 0);
        for n in 0..whole.len() {
            // A truncated frame (its IP length past the end) never is.
            let mut cut = whole[..n].to_vec();
            assert!(!holds_partial_form(&cut));
            assert!(!complete(&mut cut));
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut x: u32 = 1;
        for len in 0..200usize {
            let mut f: Vec<u8> = (0..len)
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (x >> 16) as u8
                })
                .collect();
            if len > 14 {
                f[12..14].copy_from_slice(if len % 2 == 0 {
                    &ETHERTYPE_IPV4
                } else {
                    &ETHERTYPE_IPV6
                });
                f[14] = if len % 2 == 0 { 0x45 } else { 0x60 };
            }
            let _ = holds_partial_form(&f);
            let _ = complete(&mut f);
        }
    }
}
