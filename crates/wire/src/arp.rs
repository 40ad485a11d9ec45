//! ARP (RFC 826).
//!
//! No-panic contract: [`ArpPacket::new_checked`] checks that the buffer holds
//! the fixed 8-byte header and the four addresses whose lengths the header
//! announces; after that, no accessor panics. [`ArpRepr::parse`] accepts only
//! Ethernet/IPv4 and never panics.

use core::net::Ipv4Addr;

use crate::ethernet::{EtherType, EthernetAddress};
use crate::{Error, Result};

/// Hardware type field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpHardware {
    Ethernet,
    Unknown(u16),
}

impl From<u16> for ArpHardware {
    fn from(v: u16) -> Self {
        match v {
            1 => ArpHardware::Ethernet,
            other => ArpHardware::Unknown(other),
        }
    }
}

impl From<ArpHardware> for u16 {
    fn from(v: ArpHardware) -> u16 {
        match v {
            ArpHardware::Ethernet => 1,
            ArpHardware::Unknown(other) => other,
        }
    }
}

/// Operation field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpOperation {
    Request,
    Reply,
    Unknown(u16),
}

impl From<u16> for ArpOperation {
    fn from(v: u16) -> Self {
        match v {
            1 => ArpOperation::Request,
            2 => ArpOperation::Reply,
            other => ArpOperation::Unknown(other),
        }
    }
}

impl From<ArpOperation> for u16 {
    fn from(v: ArpOperation) -> u16 {
        match v {
            ArpOperation::Request => 1,
            ArpOperation::Reply => 2,
            ArpOperation::Unknown(other) => other,
        }
    }
}

mod field {
    use core::ops::Range;
    pub const HTYPE: Range<usize> = 0..2;
    pub const PTYPE: Range<usize> = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Range<usize> = 6..8;
    /// Start of the variable-length addresses.
    pub const ADDRS: usize = 8;

    pub const fn sha(hlen: u8, _plen: u8) -> Range<usize> {
        ADDRS..ADDRS + hlen as usize
    }
    pub const fn spa(hlen: u8, plen: u8) -> Range<usize> {
        let s = sha(hlen, plen).end;
        s..s + plen as usize
    }
    pub const fn tha(hlen: u8, plen: u8) -> Range<usize> {
        let s = spa(hlen, plen).end;
        s..s + hlen as usize
    }
    pub const fn tpa(hlen: u8, plen: u8) -> Range<usize> {
        let s = tha(hlen, plen).end;
        s..s + plen as usize
    }
}

/// Length of an Ethernet/IPv4 ARP packet.
pub const ETHERNET_IPV4_LEN: usize = field::tpa(6, 4).end;

/// A view over an ARP packet (any hardware/protocol type).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wrap without checking. Only for buffers sized by the caller for emitting.
    pub const fn new_unchecked(buffer: T) -> ArpPacket<T> {
        ArpPacket { buffer }
    }

    /// Wrap, checking the fixed header and the announced address lengths.
    pub fn new_checked(buffer: T) -> Result<ArpPacket<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Err(Truncated)` unless the header and all four addresses fit.
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < field::ADDRS {
            return Err(Error::Truncated);
        }
        if b.len() < field::tpa(b[field::HLEN], b[field::PLEN]).end {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        let b = &self.buffer.as_ref()[r];
        u16::from_be_bytes([b[0], b[1]])
    }

    pub fn hardware_type(&self) -> ArpHardware {
        ArpHardware::from(self.u16_at(field::HTYPE))
    }

    pub fn protocol_type(&self) -> EtherType {
        EtherType::from(self.u16_at(field::PTYPE))
    }

    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    pub fn operation(&self) -> ArpOperation {
        ArpOperation::from(self.u16_at(field::OPER))
    }

    pub fn source_hardware_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::sha(self.hardware_len(), self.protocol_len())]
    }

    pub fn source_protocol_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::spa(self.hardware_len(), self.protocol_len())]
    }

    pub fn target_hardware_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::tha(self.hardware_len(), self.protocol_len())]
    }

    pub fn target_protocol_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::tpa(self.hardware_len(), self.protocol_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    fn set_u16_at(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_hardware_type(&mut self, v: ArpHardware) {
        self.set_u16_at(field::HTYPE, v.into());
    }

    pub fn set_protocol_type(&mut self, v: EtherType) {
        self.set_u16_at(field::PTYPE, v.into());
    }

    pub fn set_hardware_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::HLEN] = v;
    }

    pub fn set_protocol_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::PLEN] = v;
    }

    pub fn set_operation(&mut self, v: ArpOperation) {
        self.set_u16_at(field::OPER, v.into());
    }

    /// Set the source hardware address; `addr` must be `hardware_len()` bytes.
    pub fn set_source_hardware_addr(&mut self, addr: &[u8]) {
        let r = field::sha(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[r].copy_from_slice(addr);
    }

    /// Set the source protocol address; `addr` must be `protocol_len()` bytes.
    pub fn set_source_protocol_addr(&mut self, addr: &[u8]) {
        let r = field::spa(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[r].copy_from_slice(addr);
    }

    /// Set the target hardware address; `addr` must be `hardware_len()` bytes.
    pub fn set_target_hardware_addr(&mut self, addr: &[u8]) {
        let r = field::tha(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[r].copy_from_slice(addr);
    }

    /// Set the target protocol address; `addr` must be `protocol_len()` bytes.
    pub fn set_target_protocol_addr(&mut self, addr: &[u8]) {
        let r = field::tpa(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[r].copy_from_slice(addr);
    }
}

/// An ARP packet as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpRepr {
    /// Ethernet hardware, IPv4 protocol: the only kind in use.
    EthernetIpv4 {
        operation: ArpOperation,
        source_hardware_addr: EthernetAddress,
        source_protocol_addr: Ipv4Addr,
        target_hardware_addr: EthernetAddress,
        target_protocol_addr: Ipv4Addr,
    },
}

fn ipv4_from(b: &[u8]) -> Ipv4Addr {
    let mut a = [0u8; 4];
    a.copy_from_slice(b);
    Ipv4Addr::from(a)
}

impl ArpRepr {
    /// Parse an Ethernet/IPv4 ARP packet.
    ///
    /// Hardware type other than Ethernet or protocol type other than IPv4:
    /// `Unsupported`. Ethernet/IPv4 with address lengths other than 6/4:
    /// `Malformed`.
    pub fn parse<T: AsRef<[u8]>>(packet: &ArpPacket<T>) -> Result<ArpRepr> {
        packet.check_len()?;
        if packet.hardware_type() != ArpHardware::Ethernet
            || packet.protocol_type() != EtherType::Ipv4
        {
            return Err(Error::Unsupported);
        }
        if packet.hardware_len() != 6 || packet.protocol_len() != 4 {
            return Err(Error::Malformed);
        }
        let mac = |b: &[u8]| EthernetAddress::from_bytes(b).ok_or(Error::Malformed);
        Ok(ArpRepr::EthernetIpv4 {
            operation: packet.operation(),
            source_hardware_addr: mac(packet.source_hardware_addr())?,
            source_protocol_addr: ipv4_from(packet.source_protocol_addr()),
            target_hardware_addr: mac(packet.target_hardware_addr())?,
            target_protocol_addr: ipv4_from(packet.target_protocol_addr()),
        })
    }

    /// Length of the emitted packet (28).
    pub const fn buffer_len(&self) -> usize {
        match self {
            ArpRepr::EthernetIpv4 { .. } => ETHERNET_IPV4_LEN,
        }
    }

    /// Write the packet. The buffer must be at least `buffer_len()` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut ArpPacket<T>) {
        match *self {
            ArpRepr::EthernetIpv4 {
                operation,
                source_hardware_addr,
                source_protocol_addr,
                target_hardware_addr,
                target_protocol_addr,
            } => {
                packet.set_hardware_type(ArpHardware::Ethernet);
                packet.set_protocol_type(EtherType::Ipv4);
                packet.set_hardware_len(6);
                packet.set_protocol_len(4);
                packet.set_operation(operation);
                packet.set_source_hardware_addr(&source_hardware_addr.0);
                packet.set_source_protocol_addr(&source_protocol_addr.octets());
                packet.set_target_hardware_addr(&target_hardware_addr.0);
                packet.set_target_protocol_addr(&target_protocol_addr.octets());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A Linux ARP request (after the Ethernet header): 10.0.0.1 at
    // 52:54:00:12:34:56 asks who has 10.0.0.2. Linux leaves the target
    // hardware address zero.
    const REQUEST: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, // htype, ptype, hlen, plen, op
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56, // sha
        0x0a, 0x00, 0x00, 0x01, // spa
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // tha
        0x0a, 0x00, 0x00, 0x02, // tpa
    ];

    fn request_repr() -> ArpRepr {
        ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]),
            source_protocol_addr: Ipv4Addr::new(10, 0, 0, 1),
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: Ipv4Addr::new(10, 0, 0, 2),
        }
    }

    #[test]
    fn parse_linux_request() {
        // Full frame as seen on the wire: Ethernet + ARP + 18 bytes of padding.
        let mut frame = [0u8; 60];
        frame[..6].copy_from_slice(&[0xff; 6]);
        frame[6..12].copy_from_slice(&[0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
        frame[12..14].copy_from_slice(&[0x08, 0x06]);
        frame[14..42].copy_from_slice(&REQUEST);
        let eth = crate::EthernetFrame::new_checked(&frame[..]).unwrap();
        assert_eq!(eth.ethertype(), EtherType::Arp);
        let p = ArpPacket::new_checked(eth.payload()).unwrap();
        assert_eq!(p.operation(), ArpOperation::Request);
        assert_eq!(ArpRepr::parse(&p).unwrap(), request_repr());
    }

    #[test]
    fn round_trip() {
        let repr = request_repr();
        assert_eq!(repr.buffer_len(), 28);
        let mut buf = [0u8; 28];
        repr.emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
        assert_eq!(buf, REQUEST);
        let reply = ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Reply,
            source_hardware_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
            source_protocol_addr: Ipv4Addr::new(10, 0, 0, 2),
            target_hardware_addr: EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]),
            target_protocol_addr: Ipv4Addr::new(10, 0, 0, 1),
        };
        reply.emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
        assert_eq!(buf[6..8], [0, 2]);
        assert_eq!(
            ArpRepr::parse(&ArpPacket::new_checked(&buf[..]).unwrap()).unwrap(),
            reply
        );
    }

    #[test]
    fn truncated() {
        for len in 0..REQUEST.len() {
            assert_eq!(
                ArpPacket::new_checked(&REQUEST[..len]).unwrap_err(),
                Error::Truncated
            );
        }
    }

    #[test]
    fn lying_lengths() {
        // hlen 255 / plen 255 announce far more than the buffer holds.
        let mut b = REQUEST;
        b[4] = 255;
        assert_eq!(
            ArpPacket::new_checked(&b[..]).unwrap_err(),
            Error::Truncated
        );
        // Shorter lengths fit but are not Ethernet/IPv4.
        let mut b = REQUEST;
        b[4] = 4;
        let p = ArpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(ArpRepr::parse(&p).unwrap_err(), Error::Malformed);
        let mut b = REQUEST;
        b[5] = 16;
        assert_eq!(
            ArpPacket::new_checked(&b[..]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn unsupported_types() {
        let mut b = REQUEST;
        b[1] = 6; // IEEE 802 hardware
        let p = ArpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(ArpRepr::parse(&p).unwrap_err(), Error::Unsupported);
        let mut b = REQUEST;
        b[2..4].copy_from_slice(&[0x86, 0xdd]);
        let p = ArpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(ArpRepr::parse(&p).unwrap_err(), Error::Unsupported);
    }

    #[test]
    fn fuzz_no_panic() {
        crate::test_util::fuzz(3, 3000, &REQUEST, |b| {
            if let Ok(p) = ArpPacket::new_checked(&b[..]) {
                let _ = ArpRepr::parse(&p);
                let _ = p.source_hardware_addr();
                let _ = p.target_protocol_addr();
            }
        });
    }
}
