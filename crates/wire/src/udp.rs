//! UDP (RFC 768), over IPv4 and IPv6.
//!
//! No-panic contract: [`UdpPacket::new_checked`] validates, once, that the
//! 8-byte header is present and that `8 <= len <= buffer length`; after that
//! no accessor panics (`payload()` is limited to `len`, so trailing bytes
//! such as Ethernet padding are ignored). [`UdpRepr::parse`] never panics.

use core::net::IpAddr;

use crate::checksum;
use crate::ip::IpProtocol;
use crate::{ChecksumMode, Error, Result};

mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = field::CHECKSUM.end;

/// A view over a UDP datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wrap without checking. Only for buffers sized by the caller for emitting.
    pub const fn new_unchecked(buffer: T) -> UdpPacket<T> {
        UdpPacket { buffer }
    }

    /// Wrap, checking the header and the length field.
    pub fn new_checked(buffer: T) -> Result<UdpPacket<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Buffer shorter than 8 or than `len`: `Truncated`; `len < 8`: `Malformed`.
    pub fn check_len(&self) -> Result<()> {
        let buf_len = self.buffer.as_ref().len();
        if buf_len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let len = usize::from(self.len());
        if len < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if len > buf_len {
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

    pub fn src_port(&self) -> u16 {
        self.u16_at(field::SRC_PORT)
    }

    pub fn dst_port(&self) -> u16 {
        self.u16_at(field::DST_PORT)
    }

    /// The length field (header + payload).
    pub fn len(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }

    /// True when the length field says there is no payload.
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= HEADER_LEN
    }

    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// The datagram as announced by `len` (empty if it does not fit).
    fn datagram(&self) -> &[u8] {
        self.buffer
            .as_ref()
            .get(..usize::from(self.len()))
            .unwrap_or(&[])
    }

    /// The payload, from 8 to `len`.
    pub fn payload(&self) -> &[u8] {
        self.buffer
            .as_ref()
            .get(HEADER_LEN..usize::from(self.len()))
            .unwrap_or(&[])
    }

    /// Verify the checksum with the pseudo header of `src`/`dst`.
    ///
    /// Over IPv4 a zero checksum means "none" and verifies; over IPv6 a zero
    /// checksum is invalid (RFC 8200 section 8.1) and does not.
    pub fn verify_checksum(&self, src: &IpAddr, dst: &IpAddr) -> bool {
        if self.checksum() == 0 {
            return matches!(src, IpAddr::V4(_));
        }
        let d = self.datagram();
        if d.is_empty() {
            return false;
        }
        let ph = checksum::pseudo_header(src, dst, IpProtocol::Udp, d.len() as u32);
        checksum::combine(&[ph, checksum::data(d)]) == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> UdpPacket<&'a T> {
    /// The payload with the lifetime of the underlying buffer.
    pub fn into_payload(self) -> &'a [u8] {
        let b: &'a [u8] = self.buffer.as_ref();
        let len = b
            .get(field::LENGTH)
            .map_or(0, |l| usize::from(u16::from_be_bytes([l[0], l[1]])));
        b.get(HEADER_LEN..len).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    fn set_u16_at(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_src_port(&mut self, v: u16) {
        self.set_u16_at(field::SRC_PORT, v);
    }

    pub fn set_dst_port(&mut self, v: u16) {
        self.set_u16_at(field::DST_PORT, v);
    }

    pub fn set_len(&mut self, v: u16) {
        self.set_u16_at(field::LENGTH, v);
    }

    pub fn set_checksum(&mut self, v: u16) {
        self.set_u16_at(field::CHECKSUM, v);
    }

    /// Mutable payload, from 8 to `len` (empty if it does not fit).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.len());
        self.buffer
            .as_mut()
            .get_mut(HEADER_LEN..len)
            .unwrap_or(&mut [])
    }

    /// Compute and store the checksum over `len` bytes with the pseudo
    /// header. A computed zero is sent as 0xffff (RFC 768).
    pub fn fill_checksum(&mut self, src: &IpAddr, dst: &IpAddr) {
        self.set_checksum(0);
        let d = self.datagram();
        let ph = checksum::pseudo_header(src, dst, IpProtocol::Udp, d.len() as u32);
        let c = !checksum::combine(&[ph, checksum::data(d)]);
        self.set_checksum(if c == 0 { 0xffff } else { c });
    }

    /// Store the pseudo-header sum (not inverted) for checksum offload.
    pub fn fill_partial_checksum(&mut self, src: &IpAddr, dst: &IpAddr) {
        let len = u32::from(self.len());
        self.set_checksum(checksum::pseudo_header(src, dst, IpProtocol::Udp, len));
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for UdpPacket<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// A UDP header as plain values (the payload stays in the buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    pub src_port: u16,
    pub dst_port: u16,
}

impl UdpRepr {
    /// Parse the header.
    ///
    /// Destination port 0: `Malformed`. With [`ChecksumMode::Full`], a
    /// checksum that does not verify (see [`UdpPacket::verify_checksum`]):
    /// `BadChecksum`. Use [`ChecksumMode::Offload`] for frames whose
    /// checksum is partial (left for the NIC) or was checked by the NIC.
    pub fn parse<T: AsRef<[u8]>>(
        packet: &UdpPacket<T>,
        src: &IpAddr,
        dst: &IpAddr,
        checksum: ChecksumMode,
    ) -> Result<UdpRepr> {
        packet.check_len()?;
        if packet.dst_port() == 0 {
            return Err(Error::Malformed);
        }
        if checksum.is_full() && !packet.verify_checksum(src, dst) {
            return Err(Error::BadChecksum);
        }
        Ok(UdpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
        })
    }

    /// Header length (8).
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus payload.
    pub const fn buffer_len(&self, payload_len: usize) -> usize {
        HEADER_LEN + payload_len
    }

    /// Write the header with `len = 8 + payload_len`, then the checksum.
    ///
    /// The payload must already be in place at `packet.payload_mut()` (write
    /// it first, then emit the header in front of it), and the buffer must
    /// be at least `8 + payload_len` bytes. With [`ChecksumMode::Full`] the
    /// full checksum is computed; with [`ChecksumMode::Offload`] only the
    /// pseudo-header sum is stored for the NIC to complete.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut UdpPacket<T>,
        src: &IpAddr,
        dst: &IpAddr,
        payload_len: usize,
        checksum: ChecksumMode,
    ) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len((HEADER_LEN + payload_len) as u16);
        match checksum {
            ChecksumMode::Full => packet.fill_checksum(src, dst),
            ChecksumMode::Offload => packet.fill_partial_checksum(src, dst),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    const SRC: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 168, 1, 1));
    const DST: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 168, 1, 2));

    // A Linux `echo -n hello | nc -u 192.168.1.2 9999` datagram from port
    // 41000, whole IPv4 packet (DF set, TTL 64).
    const LINUX_UDP: [u8; 33] = [
        0x45, 0x00, 0x00, 0x21, 0x8a, 0x3c, 0x40, 0x00, 0x40, 0x11, 0x2d, 0x3c, 0xc0, 0xa8, 0x01,
        0x01, 0xc0, 0xa8, 0x01, 0x02, // IPv4
        0xa0, 0x28, 0x27, 0x0f, 0x00, 0x0d, 0x71, 0x76, // UDP header
        b'h', b'e', b'l', b'l', b'o',
    ];

    #[test]
    fn parse_linux_datagram() {
        let ip = crate::Ipv4Packet::new_checked(&LINUX_UDP[..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(ip.next_header(), IpProtocol::Udp);
        let ipr = crate::Ipv4Repr::parse(&ip, ChecksumMode::Full).unwrap();
        let (s, d) = (IpAddr::V4(ipr.src_addr), IpAddr::V4(ipr.dst_addr));
        let p = UdpPacket::new_checked(ip.into_payload()).unwrap();
        assert_eq!(p.src_port(), 41000);
        assert_eq!(p.dst_port(), 9999);
        assert_eq!(p.len(), 13);
        assert!(p.verify_checksum(&s, &d));
        assert_eq!(p.payload(), b"hello");
        let r = UdpRepr::parse(&p, &s, &d, ChecksumMode::Full).unwrap();
        assert_eq!(
            r,
            UdpRepr {
                src_port: 41000,
                dst_port: 9999
            }
        );
    }

    #[test]
    fn round_trip() {
        let repr = UdpRepr {
            src_port: 41000,
            dst_port: 9999,
        };
        let mut buf = [0u8; 13];
        buf[8..].copy_from_slice(b"hello");
        repr.emit(
            &mut UdpPacket::new_unchecked(&mut buf[..]),
            &SRC,
            &DST,
            5,
            ChecksumMode::Full,
        );
        assert_eq!(buf[..], LINUX_UDP[20..]);
        let p = UdpPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(
            UdpRepr::parse(&p, &SRC, &DST, ChecksumMode::Full).unwrap(),
            repr
        );
    }

    #[test]
    fn partial_checksum_completes() {
        let repr = UdpRepr {
            src_port: 41000,
            dst_port: 9999,
        };
        let mut buf = [0u8; 13];
        buf[8..].copy_from_slice(b"hello");
        repr.emit(
            &mut UdpPacket::new_unchecked(&mut buf[..]),
            &SRC,
            &DST,
            5,
            ChecksumMode::Offload,
        );
        let p = UdpPacket::new_checked(&buf[..]).unwrap();
        assert!(!p.verify_checksum(&SRC, &DST));
        assert!(UdpRepr::parse(&p, &SRC, &DST, ChecksumMode::Offload).is_ok());
        assert_eq!(
            UdpRepr::parse(&p, &SRC, &DST, ChecksumMode::Full).unwrap_err(),
            Error::BadChecksum
        );
        // What the NIC does: sum from the UDP header on, store the complement.
        let c = !checksum::data(&buf);
        buf[6..8].copy_from_slice(&c.to_be_bytes());
        assert_eq!(buf[..], LINUX_UDP[20..]);
    }

    #[test]
    fn ipv6_checksum() {
        let s = IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1));
        let d = IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2));
        let repr = UdpRepr {
            src_port: 546,
            dst_port: 547,
        };
        let mut buf = [0u8; 12];
        buf[8..].copy_from_slice(&[1, 2, 3, 4]);
        repr.emit(
            &mut UdpPacket::new_unchecked(&mut buf[..]),
            &s,
            &d,
            4,
            ChecksumMode::Full,
        );
        let p = UdpPacket::new_checked(&buf[..]).unwrap();
        assert!(p.verify_checksum(&s, &d));
        assert!(!p.verify_checksum(&d, &IpAddr::V6(Ipv6Addr::LOCALHOST)));
        // zero checksum: none over IPv4, invalid over IPv6
        buf[6] = 0;
        buf[7] = 0;
        let p = UdpPacket::new_checked(&buf[..]).unwrap();
        assert!(!p.verify_checksum(&s, &d));
        assert!(p.verify_checksum(&SRC, &DST));
    }

    #[test]
    fn truncated_at_every_length() {
        let d = &LINUX_UDP[20..];
        for len in 0..d.len() {
            assert_eq!(
                UdpPacket::new_checked(&d[..len]).unwrap_err(),
                Error::Truncated
            );
        }
    }

    #[test]
    fn len_below_eight() {
        for l in 0..8u16 {
            let mut b = [0u8; 13];
            b.copy_from_slice(&LINUX_UDP[20..]);
            b[4..6].copy_from_slice(&l.to_be_bytes());
            assert_eq!(
                UdpPacket::new_checked(&b[..]).unwrap_err(),
                Error::Malformed
            );
        }
    }

    #[test]
    fn len_above_buffer() {
        let mut b = [0u8; 13];
        b.copy_from_slice(&LINUX_UDP[20..]);
        b[4..6].copy_from_slice(&14u16.to_be_bytes());
        assert_eq!(
            UdpPacket::new_checked(&b[..]).unwrap_err(),
            Error::Truncated
        );
        // shorter len than buffer: trailing bytes ignored, checksum then fails
        b[4..6].copy_from_slice(&12u16.to_be_bytes());
        let p = UdpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.payload(), b"hell");
        assert!(!p.verify_checksum(&SRC, &DST));
    }

    #[test]
    fn bad_checksum_and_zero_port() {
        let mut b = [0u8; 13];
        b.copy_from_slice(&LINUX_UDP[20..]);
        b[12] = b'O';
        let p = UdpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(
            UdpRepr::parse(&p, &SRC, &DST, ChecksumMode::Full).unwrap_err(),
            Error::BadChecksum
        );
        let mut b = [0u8; 8];
        b[5] = 8;
        let p = UdpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(
            UdpRepr::parse(&p, &SRC, &DST, ChecksumMode::Offload).unwrap_err(),
            Error::Malformed
        );
    }

    #[test]
    fn fuzz_no_panic() {
        let v6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
        crate::test_util::fuzz(6, 4000, &LINUX_UDP[20..], |b| {
            if let Ok(p) = UdpPacket::new_checked(&b[..]) {
                let _ = UdpRepr::parse(&p, &SRC, &DST, ChecksumMode::Full);
                let _ = UdpRepr::parse(&p, &v6, &v6, ChecksumMode::Full);
                let _ = UdpRepr::parse(&p, &SRC, &v6, ChecksumMode::Offload);
                let _ = p.payload();
            }
        });
    }
}
