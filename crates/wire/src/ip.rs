//! Definitions shared by IPv4 and IPv6: the protocol / next header numbers.
//!
//! Everything here is total and never panics.

use core::fmt;

/// IP protocol number (IPv4 protocol field, IPv6 next header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IpProtocol {
    /// IPv6 Hop-by-Hop Options.
    HopByHop,
    Icmp,
    Igmp,
    Tcp,
    Udp,
    /// IPv6 Routing header.
    Ipv6Route,
    /// IPv6 Fragment header.
    Ipv6Frag,
    Icmpv6,
    /// IPv6 "no next header".
    Ipv6NoNxt,
    /// IPv6 Destination Options.
    Ipv6Opts,
    Unknown(u8),
}

impl From<u8> for IpProtocol {
    fn from(v: u8) -> Self {
        match v {
            0 => IpProtocol::HopByHop,
            1 => IpProtocol::Icmp,
            2 => IpProtocol::Igmp,
            6 => IpProtocol::Tcp,
            17 => IpProtocol::Udp,
            43 => IpProtocol::Ipv6Route,
            44 => IpProtocol::Ipv6Frag,
            58 => IpProtocol::Icmpv6,
            59 => IpProtocol::Ipv6NoNxt,
            60 => IpProtocol::Ipv6Opts,
            other => IpProtocol::Unknown(other),
        }
    }
}

impl From<IpProtocol> for u8 {
    fn from(v: IpProtocol) -> u8 {
        match v {
            IpProtocol::HopByHop => 0,
            IpProtocol::Icmp => 1,
            IpProtocol::Igmp => 2,
            IpProtocol::Tcp => 6,
            IpProtocol::Udp => 17,
            IpProtocol::Ipv6Route => 43,
            IpProtocol::Ipv6Frag => 44,
            IpProtocol::Icmpv6 => 58,
            IpProtocol::Ipv6NoNxt => 59,
            IpProtocol::Ipv6Opts => 60,
            IpProtocol::Unknown(other) => other,
        }
    }
}

impl IpProtocol {
    /// True for the IPv6 extension headers that [`crate::ipv6`] walks.
    pub fn is_ipv6_extension(self) -> bool {
        matches!(
            self,
            IpProtocol::HopByHop
                | IpProtocol::Ipv6Route
                | IpProtocol::Ipv6Frag
                | IpProtocol::Ipv6Opts
        )
    }
}

impl fmt::Display for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpProtocol::HopByHop => f.write_str("Hop-by-Hop"),
            IpProtocol::Icmp => f.write_str("ICMP"),
            IpProtocol::Igmp => f.write_str("IGMP"),
            IpProtocol::Tcp => f.write_str("TCP"),
            IpProtocol::Udp => f.write_str("UDP"),
            IpProtocol::Ipv6Route => f.write_str("IPv6-Route"),
            IpProtocol::Ipv6Frag => f.write_str("IPv6-Frag"),
            IpProtocol::Icmpv6 => f.write_str("ICMPv6"),
            IpProtocol::Ipv6NoNxt => f.write_str("IPv6-NoNxt"),
            IpProtocol::Ipv6Opts => f.write_str("IPv6-Opts"),
            IpProtocol::Unknown(v) => write!(f, "0x{v:02x}"),
        }
    }
}

/// IP version from the first nibble of a packet, if the buffer is not empty.
pub fn version(packet: &[u8]) -> Option<u8> {
    packet.first().map(|b| b >> 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions() {
        for v in 0..=255u8 {
            assert_eq!(u8::from(IpProtocol::from(v)), v);
        }
        assert_eq!(IpProtocol::from(6), IpProtocol::Tcp);
        assert_eq!(IpProtocol::from(200), IpProtocol::Unknown(200));
        assert!(IpProtocol::Ipv6Frag.is_ipv6_extension());
        assert!(!IpProtocol::Tcp.is_ipv6_extension());
        assert_eq!(version(&[0x45]), Some(4));
        assert_eq!(version(&[]), None);
    }
}
