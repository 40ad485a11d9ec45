//! Ethernet II frames.
//!
//! No-panic contract: [`EthernetFrame::new_checked`] ensures the buffer holds
//! the 14-byte header; after that, no accessor panics. [`EthernetRepr::parse`]
//! never panics.

use core::fmt;

use crate::{Error, Result};

/// A 48-bit Ethernet (MAC) address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// ff:ff:ff:ff:ff:ff
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);
    /// 00:00:00:00:00:00
    pub const UNSPECIFIED: EthernetAddress = EthernetAddress([0; 6]);

    /// Build from a slice; `None` unless it is exactly 6 bytes long.
    pub fn from_bytes(b: &[u8]) -> Option<EthernetAddress> {
        let a: [u8; 6] = b.try_into().ok()?;
        Some(EthernetAddress(a))
    }

    /// The six octets.
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// True for ff:ff:ff:ff:ff:ff.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// True when the group bit is set (includes broadcast).
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// True when the group bit is clear.
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// True when the locally administered bit is set.
    pub const fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }

    /// The multicast MAC for an IPv4 multicast group (RFC 1112 section 6.4).
    pub const fn from_ipv4_multicast(addr: &core::net::Ipv4Addr) -> EthernetAddress {
        let o = addr.octets();
        EthernetAddress([0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]])
    }

    /// The multicast MAC for an IPv6 multicast group (RFC 2464 section 7).
    pub const fn from_ipv6_multicast(addr: &core::net::Ipv6Addr) -> EthernetAddress {
        let o = addr.octets();
        EthernetAddress([0x33, 0x33, o[12], o[13], o[14], o[15]])
    }
}

impl From<[u8; 6]> for EthernetAddress {
    fn from(a: [u8; 6]) -> Self {
        EthernetAddress(a)
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

/// The EtherType field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EtherType {
    Ipv4,
    Arp,
    Ipv6,
    /// 802.1Q customer VLAN tag.
    Vlan,
    /// 802.1ad service VLAN tag.
    QinQ,
    Unknown(u16),
}

impl From<u16> for EtherType {
    fn from(v: u16) -> Self {
        match v {
            0x0800 => EtherType::Ipv4,
            0x0806 => EtherType::Arp,
            0x86dd => EtherType::Ipv6,
            0x8100 => EtherType::Vlan,
            0x88a8 => EtherType::QinQ,
            other => EtherType::Unknown(other),
        }
    }
}

impl From<EtherType> for u16 {
    fn from(v: EtherType) -> u16 {
        match v {
            EtherType::Ipv4 => 0x0800,
            EtherType::Arp => 0x0806,
            EtherType::Ipv6 => 0x86dd,
            EtherType::Vlan => 0x8100,
            EtherType::QinQ => 0x88a8,
            EtherType::Unknown(other) => other,
        }
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EtherType::Ipv4 => f.write_str("IPv4"),
            EtherType::Arp => f.write_str("ARP"),
            EtherType::Ipv6 => f.write_str("IPv6"),
            EtherType::Vlan => f.write_str("802.1Q"),
            EtherType::QinQ => f.write_str("802.1ad"),
            EtherType::Unknown(v) => write!(f, "0x{v:04x}"),
        }
    }
}

mod field {
    use core::ops::{Range, RangeFrom};
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    pub const PAYLOAD: RangeFrom<usize> = 14..;
}

/// Length of the Ethernet II header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A view over an Ethernet II frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wrap without checking. Only for buffers sized by the caller for emitting.
    pub const fn new_unchecked(buffer: T) -> EthernetFrame<T> {
        EthernetFrame { buffer }
    }

    /// Wrap, checking that the header fits.
    pub fn new_checked(buffer: T) -> Result<EthernetFrame<T>> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// `Err(Truncated)` if the buffer is shorter than the header.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Length of the header (14).
    pub const fn header_len() -> usize {
        HEADER_LEN
    }

    /// Total frame length for a payload of `payload_len` bytes.
    pub const fn buffer_len(payload_len: usize) -> usize {
        HEADER_LEN + payload_len
    }

    pub fn dst_addr(&self) -> EthernetAddress {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        EthernetAddress(a)
    }

    pub fn src_addr(&self) -> EthernetAddress {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        EthernetAddress(a)
    }

    pub fn ethertype(&self) -> EtherType {
        let b = &self.buffer.as_ref()[field::ETHERTYPE];
        EtherType::from(u16::from_be_bytes([b[0], b[1]]))
    }

    /// Everything after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> EthernetFrame<&'a T> {
    /// The payload with the lifetime of the underlying buffer.
    pub fn into_payload(self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    pub fn set_dst_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&addr.0);
    }

    pub fn set_src_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&addr.0);
    }

    pub fn set_ethertype(&mut self, t: EtherType) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&u16::from(t).to_be_bytes());
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for EthernetFrame<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The Ethernet II header as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    pub src_addr: EthernetAddress,
    pub dst_addr: EthernetAddress,
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Read the header of a checked frame.
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<EthernetRepr> {
        frame.check_len()?;
        Ok(EthernetRepr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    /// Header length (14).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header. The frame must be at least [`HEADER_LEN`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) {
        frame.set_src_addr(self.src_addr);
        frame.set_dst_addr(self.dst_addr);
        frame.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;

    // Start of a Linux ARP request broadcast (header only).
    const FRAME: [u8; 18] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // dst
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56, // src
        0x08, 0x06, // ARP
        0xaa, 0xbb, 0xcc, 0xdd,
    ];

    #[test]
    fn parse() {
        let f = EthernetFrame::new_checked(&FRAME[..]).unwrap();
        assert!(f.dst_addr().is_broadcast());
        assert!(f.dst_addr().is_multicast());
        assert_eq!(
            f.src_addr(),
            EthernetAddress([0x52, 0x54, 0, 0x12, 0x34, 0x56])
        );
        assert!(f.src_addr().is_unicast());
        assert_eq!(f.ethertype(), EtherType::Arp);
        assert_eq!(f.payload(), &[0xaa, 0xbb, 0xcc, 0xdd]);
        assert_eq!(format!("{}", f.src_addr()), "52:54:00:12:34:56");
    }

    #[test]
    fn round_trip() {
        let repr = EthernetRepr::parse(&EthernetFrame::new_checked(&FRAME[..]).unwrap()).unwrap();
        let mut buf = [0u8; 18];
        let mut f = EthernetFrame::new_unchecked(&mut buf[..]);
        repr.emit(&mut f);
        f.payload_mut().copy_from_slice(&[0xaa, 0xbb, 0xcc, 0xdd]);
        assert_eq!(buf, FRAME);
        assert_eq!(
            EthernetRepr::parse(&EthernetFrame::new_checked(&buf[..]).unwrap()).unwrap(),
            repr
        );
    }

    #[test]
    fn ethertype_conversions() {
        for v in [0x0800u16, 0x0806, 0x86dd, 0x8100, 0x88a8, 0x1234] {
            assert_eq!(u16::from(EtherType::from(v)), v);
        }
        assert_eq!(EtherType::from(0x1234), EtherType::Unknown(0x1234));
    }

    #[test]
    fn truncated() {
        for len in 0..HEADER_LEN {
            assert_eq!(
                EthernetFrame::new_checked(&FRAME[..len]).unwrap_err(),
                Error::Truncated
            );
        }
        assert!(EthernetFrame::new_checked(&FRAME[..HEADER_LEN]).is_ok());
    }

    #[test]
    fn multicast_macs() {
        let a = EthernetAddress::from_ipv4_multicast(&core::net::Ipv4Addr::new(224, 129, 2, 3));
        assert_eq!(a, EthernetAddress([0x01, 0x00, 0x5e, 0x01, 0x02, 0x03]));
        let a = EthernetAddress::from_ipv6_multicast(&"ff02::1:ff00:2".parse().unwrap());
        assert_eq!(a, EthernetAddress([0x33, 0x33, 0xff, 0x00, 0x00, 0x02]));
    }

    #[test]
    fn fuzz_no_panic() {
        crate::test_util::fuzz(1, 3000, &FRAME, |b| {
            if let Ok(f) = EthernetFrame::new_checked(&b[..]) {
                let _ = EthernetRepr::parse(&f);
                let _ = f.payload();
            }
        });
    }
}
