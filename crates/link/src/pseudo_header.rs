//! The sum of a TCP or UDP pseudo-header, read from the IP header in front
//! of the segment: what the offload code (GSO, GRO, UDP segmentation)
//! puts in a checksum field it leaves partial, or starts a whole sum from.

use wire::checksum;
use wire::ip::IpProtocol;

/// The pseudo-header sum (not inverted) for `l4_bytes` of `proto` behind
/// `ip`, an IPv6 header (at least 40 bytes) if `v6`, else an IPv4 header
/// (at least 20 bytes); the caller has parsed it.
pub(crate) fn sum(ip: &[u8], v6: bool, proto: IpProtocol, l4_bytes: usize) -> u16 {
    if v6 {
        let mut s = [0u8; 16];
        let mut d = [0u8; 16];
        s.copy_from_slice(&ip[8..24]);
        d.copy_from_slice(&ip[24..40]);
        checksum::pseudo_header_v6(&s.into(), &d.into(), proto, l4_bytes as u32)
    } else {
        checksum::pseudo_header_v4(
            &[ip[12], ip[13], ip[14], ip[15]].into(),
            &[ip[16], ip[17], ip[18], ip[19]].into(),
            proto,
            l4_bytes as u32,
        )
    }
}
