//! IEEE 802.1Q VLAN tags.
//!
//! A [`VlanHeader`] is a view over the 4 bytes that follow an outer
//! EtherType of 0x8100 (or 0x88a8 for 802.1ad): the tag control information
//! (PCP, DEI, VID) and the inner EtherType, then the payload.
//!
//! No-panic contract: [`VlanHeader::new_checked`] ensures the 4-byte tag is
//! present; after that, no accessor panics.

use crate::ethernet::EtherType;
use crate::{Error, Result};

mod field {
    use core::ops::{Range, RangeFrom};
    pub const TCI: Range<usize> = 0..2;
    pub const ETHERTYPE: Range<usize> = 2..4;
    pub const PAYLOAD: RangeFrom<usize> = 4..;
}

/// Length of a VLAN tag (after the outer EtherType).
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A view over an 802.1Q tag and what follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VlanHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanHeader<T> {
    /// Wrap without checking. Only for buffers sized by the caller for emitting.
    pub const fn new_unchecked(buffer: T) -> VlanHeader<T> {
        VlanHeader { buffer }
    }

    /// Wrap, checking that the 4-byte tag fits.
    pub fn new_checked(buffer: T) -> Result<VlanHeader<T>> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// `Err(Truncated)` if the buffer is shorter than the tag.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn tci(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::TCI];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Priority code point (3 bits).
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator.
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier (12 bits).
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }

    /// The inner EtherType.
    pub fn ethertype(&self) -> EtherType {
        let b = &self.buffer.as_ref()[field::ETHERTYPE];
        EtherType::from(u16::from_be_bytes([b[0], b[1]]))
    }

    /// Everything after the tag.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> VlanHeader<&'a T> {
    /// The payload with the lifetime of the underlying buffer.
    pub fn into_payload(self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanHeader<T> {
    fn set_tci(&mut self, v: u16) {
        self.buffer.as_mut()[field::TCI].copy_from_slice(&v.to_be_bytes());
    }

    /// Set the priority code point (low 3 bits of `pcp`).
    pub fn set_pcp(&mut self, pcp: u8) {
        let t = (self.tci() & 0x1fff) | (u16::from(pcp & 0x7) << 13);
        self.set_tci(t);
    }

    pub fn set_dei(&mut self, dei: bool) {
        let t = (self.tci() & !0x1000) | if dei { 0x1000 } else { 0 };
        self.set_tci(t);
    }

    /// Set the VLAN id (low 12 bits of `vid`).
    pub fn set_vid(&mut self, vid: u16) {
        let t = (self.tci() & 0xf000) | (vid & 0x0fff);
        self.set_tci(t);
    }

    pub fn set_ethertype(&mut self, t: EtherType) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&u16::from(t).to_be_bytes());
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// An 802.1Q tag as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanRepr {
    /// Priority code point, 0..=7.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN id, 0..=4095.
    pub vid: u16,
    /// The inner EtherType.
    pub ethertype: EtherType,
}

impl VlanRepr {
    /// Read a tag. VID 4095 is reserved (802.1Q table 9-2) and rejected as `Malformed`.
    pub fn parse<T: AsRef<[u8]>>(h: &VlanHeader<T>) -> Result<VlanRepr> {
        h.check_len()?;
        if h.vid() == 0x0fff {
            return Err(Error::Malformed);
        }
        Ok(VlanRepr {
            pcp: h.pcp(),
            dei: h.dei(),
            vid: h.vid(),
            ethertype: h.ethertype(),
        })
    }

    /// Tag length (4).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the tag. The buffer must be at least [`HEADER_LEN`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut VlanHeader<T>) {
        h.set_tci(
            (u16::from(self.pcp & 0x7) << 13)
                | if self.dei { 0x1000 } else { 0 }
                | (self.vid & 0x0fff),
        );
        h.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // PCP 5, DEI 0, VID 100, inner IPv4, then 2 bytes of payload.
    const TAG: [u8; 6] = [0xa0, 0x64, 0x08, 0x00, 0x45, 0x00];

    #[test]
    fn parse() {
        let h = VlanHeader::new_checked(&TAG[..]).unwrap();
        assert_eq!(h.pcp(), 5);
        assert!(!h.dei());
        assert_eq!(h.vid(), 100);
        assert_eq!(h.ethertype(), EtherType::Ipv4);
        assert_eq!(h.payload(), &[0x45, 0x00]);
    }

    #[test]
    fn round_trip() {
        let repr = VlanRepr {
            pcp: 5,
            dei: true,
            vid: 100,
            ethertype: EtherType::Ipv6,
        };
        let mut buf = [0u8; 4];
        repr.emit(&mut VlanHeader::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [0xb0, 0x64, 0x86, 0xdd]);
        let h = VlanHeader::new_checked(&buf[..]).unwrap();
        assert_eq!(VlanRepr::parse(&h).unwrap(), repr);

        let mut h = VlanHeader::new_unchecked(&mut buf[..]);
        h.set_vid(7);
        h.set_pcp(1);
        h.set_dei(false);
        assert_eq!(buf[..2], [0x20, 0x07]);
    }

    #[test]
    fn truncated() {
        for len in 0..HEADER_LEN {
            assert_eq!(
                VlanHeader::new_checked(&TAG[..len]).unwrap_err(),
                Error::Truncated
            );
        }
    }

    #[test]
    fn reserved_vid() {
        let b = [0x0f, 0xff, 0x08, 0x00];
        let h = VlanHeader::new_checked(&b[..]).unwrap();
        assert_eq!(VlanRepr::parse(&h).unwrap_err(), Error::Malformed);
    }

    #[test]
    fn fuzz_no_panic() {
        crate::test_util::fuzz(2, 2000, &TAG, |b| {
            if let Ok(h) = VlanHeader::new_checked(&b[..]) {
                let _ = VlanRepr::parse(&h);
                let _ = h.payload();
            }
        });
    }
}
