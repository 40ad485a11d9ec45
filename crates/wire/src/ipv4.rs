//! IPv4 (RFC 791).
//!
//! No-panic contract: [`Ipv4Packet::new_checked`] validates, once, that the
//! buffer holds the 20-byte fixed header, that the version is 4, that
//! `20 <= header_len <= total_len <= buffer length` (the buffer may be longer:
//! Ethernet padding). After that no accessor panics. `options()` and
//! `payload()` are additionally total even on an unchecked view (they return
//! an empty slice rather than index out of range). [`Ipv4Repr::parse`] never
//! panics.

use core::net::Ipv4Addr;

use crate::checksum;
use crate::ip::IpProtocol;
use crate::{ChecksumMode, Error, Result};

mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLG_OFF: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC_ADDR: Range<usize> = 12..16;
    pub const DST_ADDR: Range<usize> = 16..20;
}

/// Length of the IPv4 header without options.
pub const HEADER_LEN: usize = field::DST_ADDR.end;
/// Largest IPv4 header (IHL 15).
pub const MAX_HEADER_LEN: usize = 60;

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const OFFSET_MASK: u16 = 0x1fff;

/// A view over an IPv4 packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wrap without checking. Only for buffers sized by the caller for emitting.
    pub const fn new_unchecked(buffer: T) -> Ipv4Packet<T> {
        Ipv4Packet { buffer }
    }

    /// Wrap, validating version and all lengths (see the module doc).
    pub fn new_checked(buffer: T) -> Result<Ipv4Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Validate the fixed header, version 4, and
    /// `20 <= header_len <= total_len <= buffer length`.
    ///
    /// Errors: buffer shorter than 20 or than `total_len`: `Truncated`;
    /// version not 4, IHL < 5, or `header_len > total_len`: `Malformed`.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 4 {
            return Err(Error::Malformed);
        }
        let header_len = usize::from(self.header_len());
        let total_len = usize::from(self.total_len());
        if header_len < HEADER_LEN || header_len > total_len {
            return Err(Error::Malformed);
        }
        if total_len > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        let b = &self.b()[r];
        u16::from_be_bytes([b[0], b[1]])
    }

    pub fn version(&self) -> u8 {
        self.b()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL * 4).
    pub fn header_len(&self) -> u8 {
        (self.b()[field::VER_IHL] & 0x0f) * 4
    }

    /// Differentiated services code point (6 bits).
    pub fn dscp(&self) -> u8 {
        self.b()[field::DSCP_ECN] >> 2
    }

    /// Explicit congestion notification (2 bits).
    pub fn ecn(&self) -> u8 {
        self.b()[field::DSCP_ECN] & 0x03
    }

    /// The whole DSCP/ECN (former TOS) byte.
    pub fn dscp_ecn(&self) -> u8 {
        self.b()[field::DSCP_ECN]
    }

    /// Total length (header + payload) in bytes.
    pub fn total_len(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }

    pub fn ident(&self) -> u16 {
        self.u16_at(field::IDENT)
    }

    pub fn dont_frag(&self) -> bool {
        self.u16_at(field::FLG_OFF) & FLAG_DF != 0
    }

    pub fn more_frags(&self) -> bool {
        self.u16_at(field::FLG_OFF) & FLAG_MF != 0
    }

    /// The reserved (evil) bit.
    pub fn reserved_flag(&self) -> bool {
        self.u16_at(field::FLG_OFF) & 0x8000 != 0
    }

    /// Fragment offset in bytes (the field counts 8-byte units).
    pub fn frag_offset(&self) -> u16 {
        (self.u16_at(field::FLG_OFF) & OFFSET_MASK) << 3
    }

    /// True for any fragment: MF set or offset non-zero.
    pub fn is_fragment(&self) -> bool {
        self.u16_at(field::FLG_OFF) & (FLAG_MF | OFFSET_MASK) != 0
    }

    pub fn ttl(&self) -> u8 {
        self.b()[field::TTL]
    }

    /// The protocol field.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.b()[field::PROTOCOL])
    }

    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    pub fn src_addr(&self) -> Ipv4Addr {
        let b = &self.b()[field::SRC_ADDR];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = &self.b()[field::DST_ADDR];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// The header bytes (with options), empty if the header does not fit.
    fn header(&self) -> &[u8] {
        self.b()
            .get(..usize::from(self.header_len()))
            .unwrap_or(&[])
    }

    /// True when the header checksum verifies.
    pub fn verify_checksum(&self) -> bool {
        let h = self.header();
        !h.is_empty() && checksum::data(h) == 0xffff
    }

    /// The option bytes between the fixed header and `header_len`.
    pub fn options(&self) -> &[u8] {
        self.b()
            .get(HEADER_LEN..usize::from(self.header_len()))
            .unwrap_or(&[])
    }

    /// The payload: from `header_len` to `total_len` (padding excluded).
    pub fn payload(&self) -> &[u8] {
        self.b()
            .get(usize::from(self.header_len())..usize::from(self.total_len()))
            .unwrap_or(&[])
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv4Packet<&'a T> {
    /// The payload with the lifetime of the underlying buffer.
    pub fn into_payload(self) -> &'a [u8] {
        let b: &'a [u8] = self.buffer.as_ref();
        let h = usize::from(b.first().map_or(0, |v| v & 0x0f) * 4);
        let t = b
            .get(field::LENGTH)
            .map_or(0, |l| usize::from(u16::from_be_bytes([l[0], l[1]])));
        b.get(h..t).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    fn set_u16_at(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.bm()[r].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_version(&mut self, v: u8) {
        let b = &mut self.bm()[field::VER_IHL];
        *b = (*b & 0x0f) | (v << 4);
    }

    /// Set the header length in bytes (rounded down to a multiple of 4).
    pub fn set_header_len(&mut self, len: u8) {
        let b = &mut self.bm()[field::VER_IHL];
        *b = (*b & 0xf0) | ((len / 4) & 0x0f);
    }

    pub fn set_dscp(&mut self, dscp: u8) {
        let b = &mut self.bm()[field::DSCP_ECN];
        *b = (*b & 0x03) | (dscp << 2);
    }

    pub fn set_ecn(&mut self, ecn: u8) {
        let b = &mut self.bm()[field::DSCP_ECN];
        *b = (*b & !0x03) | (ecn & 0x03);
    }

    pub fn set_dscp_ecn(&mut self, v: u8) {
        self.bm()[field::DSCP_ECN] = v;
    }

    pub fn set_total_len(&mut self, len: u16) {
        self.set_u16_at(field::LENGTH, len);
    }

    pub fn set_ident(&mut self, v: u16) {
        self.set_u16_at(field::IDENT, v);
    }

    fn set_flg_off_bits(&mut self, mask: u16, on: bool) {
        let v = self.u16_at(field::FLG_OFF);
        self.set_u16_at(field::FLG_OFF, if on { v | mask } else { v & !mask });
    }

    /// Clear the three flag bits.
    pub fn clear_flags(&mut self) {
        let v = self.u16_at(field::FLG_OFF);
        self.set_u16_at(field::FLG_OFF, v & OFFSET_MASK);
    }

    pub fn set_dont_frag(&mut self, v: bool) {
        self.set_flg_off_bits(FLAG_DF, v);
    }

    pub fn set_more_frags(&mut self, v: bool) {
        self.set_flg_off_bits(FLAG_MF, v);
    }

    /// Set the fragment offset in bytes (must be a multiple of 8; the low 3
    /// bits are dropped).
    pub fn set_frag_offset(&mut self, bytes: u16) {
        let v = self.u16_at(field::FLG_OFF);
        self.set_u16_at(field::FLG_OFF, (v & !OFFSET_MASK) | (bytes >> 3));
    }

    pub fn set_ttl(&mut self, v: u8) {
        self.bm()[field::TTL] = v;
    }

    pub fn set_next_header(&mut self, v: IpProtocol) {
        self.bm()[field::PROTOCOL] = v.into();
    }

    pub fn set_checksum(&mut self, v: u16) {
        self.set_u16_at(field::CHECKSUM, v);
    }

    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.bm()[field::SRC_ADDR].copy_from_slice(&a.octets());
    }

    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.bm()[field::DST_ADDR].copy_from_slice(&a.octets());
    }

    /// Compute and store the header checksum.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = !checksum::data(self.header());
        self.set_checksum(c);
    }

    /// Mutable option bytes (empty if they do not fit).
    pub fn options_mut(&mut self) -> &mut [u8] {
        let h = usize::from(self.header_len());
        self.bm().get_mut(HEADER_LEN..h).unwrap_or(&mut [])
    }

    /// Mutable payload, from `header_len` to `total_len` (empty if it does not fit).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = usize::from(self.header_len());
        let t = usize::from(self.total_len());
        self.bm().get_mut(h..t).unwrap_or(&mut [])
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Ipv4Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// An IPv4 header as plain values. Options are skipped on parse and never
/// emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    pub src_addr: Ipv4Addr,
    pub dst_addr: Ipv4Addr,
    pub next_header: IpProtocol,
    /// Payload length in bytes (total_len - header_len).
    pub payload_len: usize,
    /// TTL.
    pub hop_limit: u8,
    /// The DSCP/ECN byte.
    pub dscp_ecn: u8,
    pub ident: u16,
    pub dont_frag: bool,
}

impl Ipv4Repr {
    /// Read the header of a packet.
    ///
    /// Re-validates lengths (`Truncated`/`Malformed`), and with
    /// [`ChecksumMode::Full`] rejects a wrong header checksum with
    /// `BadChecksum`. Fragments are *not* rejected: this only describes the
    /// header; check [`Ipv4Packet::is_fragment`] before handing the payload
    /// to an upper layer.
    pub fn parse<T: AsRef<[u8]>>(
        packet: &Ipv4Packet<T>,
        checksum: ChecksumMode,
    ) -> Result<Ipv4Repr> {
        packet.check_len()?;
        if checksum.is_full() && !packet.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        Ok(Self::from_header(packet))
    }

    fn from_header<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>) -> Ipv4Repr {
        Ipv4Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(
                packet
                    .total_len()
                    .saturating_sub(u16::from(packet.header_len())),
            ),
            hop_limit: packet.ttl(),
            dscp_ecn: packet.dscp_ecn(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
        }
    }

    /// Parse the IP header quoted inside an ICMP error: the header and some
    /// leading payload bytes, so `total_len` may exceed the bytes present.
    /// The quoted checksum is not verified. Returns the header and the
    /// quoted payload bytes that follow it.
    pub fn parse_quoted(bytes: &[u8]) -> Result<(Ipv4Repr, &[u8])> {
        if bytes.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let p = Ipv4Packet::new_unchecked(bytes);
        if p.version() != 4 {
            return Err(Error::Malformed);
        }
        let h = usize::from(p.header_len());
        if h < HEADER_LEN || h > usize::from(p.total_len()) {
            return Err(Error::Malformed);
        }
        let rest = bytes.get(h..).ok_or(Error::Truncated)?;
        Ok((Self::from_header(&p), rest))
    }

    /// Header length (20: no options are emitted).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write a 20-byte header with `total_len = 20 + payload_len`, no
    /// fragmentation, and a filled checksum. The buffer must be at least 20
    /// bytes; `payload_len` must be at most 65515 (larger values are
    /// truncated to 16 bits, never panic).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv4Packet<T>) {
        packet.set_version(4);
        packet.set_header_len(HEADER_LEN as u8);
        packet.set_dscp_ecn(self.dscp_ecn);
        packet.set_total_len((HEADER_LEN + self.payload_len) as u16);
        packet.set_ident(self.ident);
        packet.set_u16_at(field::FLG_OFF, if self.dont_frag { FLAG_DF } else { 0 });
        packet.set_ttl(self.hop_limit);
        packet.set_next_header(self.next_header);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        packet.fill_checksum();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::vec::Vec;

    /// A Linux `ping -c1 192.168.1.2` from 192.168.1.1: IPv4 header (DF set,
    /// TTL 64, id 0x5c1e) + ICMP echo request id 0x0f2a seq 1 with the usual
    /// 56 bytes of data (16-byte struct timeval + 0x10..0x37).
    pub(crate) fn linux_ping() -> Vec<u8> {
        let mut p = std::vec![
            0x45, 0x00, 0x00, 0x54, 0x5c, 0x1e, 0x40, 0x00, 0x40, 0x01, 0x5b, 0x37, 0xc0, 0xa8,
            0x01, 0x01, 0xc0, 0xa8, 0x01, 0x02, // IPv4
            0x08, 0x00, 0x00, 0x00, 0x0f, 0x2a, 0x00, 0x01, // ICMP, checksum filled below
            0x5b, 0x2f, 0x6a, 0x66, 0x00, 0x00, 0x00, 0x00, // timestamp sec
            0x21, 0x43, 0x0b, 0x00, 0x00, 0x00, 0x00, 0x00, // timestamp usec
        ];
        p.extend(0x10u8..0x38);
        // the ICMP checksum as Linux computes it
        let c = !checksum::data(&p[20..]);
        p[22..24].copy_from_slice(&c.to_be_bytes());
        p
    }

    #[test]
    fn header_checksum_is_linux() {
        // The header checksum in linux_ping() (0x5b37) is the one Linux sends.
        let p = linux_ping();
        let mut h = [0u8; 20];
        h.copy_from_slice(&p[..20]);
        h[10] = 0;
        h[11] = 0;
        assert_eq!(!checksum::data(&h), 0x5b37);
    }

    #[test]
    fn parse_linux_ping() {
        let buf = linux_ping();
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 84);
        assert_eq!(p.ident(), 0x5c1e);
        assert!(p.dont_frag());
        assert!(!p.more_frags());
        assert_eq!(p.frag_offset(), 0);
        assert!(!p.is_fragment());
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.next_header(), IpProtocol::Icmp);
        assert!(p.verify_checksum());
        assert_eq!(p.payload().len(), 64);
        assert!(p.options().is_empty());
        let repr = Ipv4Repr::parse(&p, ChecksumMode::Full).unwrap();
        assert_eq!(
            repr,
            Ipv4Repr {
                src_addr: Ipv4Addr::new(192, 168, 1, 1),
                dst_addr: Ipv4Addr::new(192, 168, 1, 2),
                next_header: IpProtocol::Icmp,
                payload_len: 64,
                hop_limit: 64,
                dscp_ecn: 0,
                ident: 0x5c1e,
                dont_frag: true,
            }
        );
    }

    #[test]
    fn round_trip() {
        let buf = linux_ping();
        let repr = Ipv4Repr::parse(
            &Ipv4Packet::new_checked(&buf[..]).unwrap(),
            ChecksumMode::Full,
        )
        .unwrap();
        let mut out = std::vec![0u8; 84];
        let mut p = Ipv4Packet::new_unchecked(&mut out[..]);
        repr.emit(&mut p);
        p.payload_mut().copy_from_slice(&buf[20..]);
        assert_eq!(out, buf);
        let p = Ipv4Packet::new_checked(&out[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&p, ChecksumMode::Full).unwrap(), repr);
    }

    #[test]
    fn ethernet_padding_ignored() {
        let mut buf = linux_ping();
        buf.truncate(28); // 20 + 8-byte ICMP
        buf[2..4].copy_from_slice(&28u16.to_be_bytes());
        buf.extend_from_slice(&[0; 18]); // padding to 46 bytes
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.payload().len(), 8);
        assert_eq!(p.into_payload().len(), 8);
    }

    #[test]
    fn setters_and_fragments() {
        let mut buf = linux_ping();
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        p.set_dont_frag(false);
        p.set_more_frags(true);
        p.set_frag_offset(1480);
        p.set_dscp(46);
        p.set_ecn(1);
        p.fill_checksum();
        assert!(p.verify_checksum());
        assert!(p.more_frags());
        assert!(!p.dont_frag());
        assert_eq!(p.frag_offset(), 1480);
        assert!(p.is_fragment());
        assert_eq!(p.dscp(), 46);
        assert_eq!(p.ecn(), 1);
        assert_eq!(buf[6..8], [0x20, 0xb9]);
        assert_eq!(buf[1], 0xb9);
    }

    #[test]
    fn options_are_skipped() {
        // Header with 4 bytes of options (NOP NOP NOP EOL).
        let mut buf = std::vec![0x46, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        buf.extend_from_slice(&[1, 1, 1, 0, 0xaa, 0xbb, 0xcc, 0xdd]);
        Ipv4Packet::new_unchecked(&mut buf[..]).fill_checksum();
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.options(), &[1, 1, 1, 0]);
        assert_eq!(p.payload(), &[0xaa, 0xbb, 0xcc, 0xdd]);
        let r = Ipv4Repr::parse(&p, ChecksumMode::Full).unwrap();
        assert_eq!(r.payload_len, 4);
    }

    #[test]
    fn truncated_at_every_length() {
        let buf = linux_ping();
        for len in 0..buf.len() {
            assert_eq!(
                Ipv4Packet::new_checked(&buf[..len]).unwrap_err(),
                Error::Truncated
            );
        }
    }

    #[test]
    fn total_len_larger_than_buffer() {
        let mut buf = linux_ping();
        buf[2..4].copy_from_slice(&85u16.to_be_bytes());
        assert_eq!(
            Ipv4Packet::new_checked(&buf[..]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn ihl_below_five() {
        for ihl in 0..5u8 {
            let mut buf = linux_ping();
            buf[0] = 0x40 | ihl;
            assert_eq!(
                Ipv4Packet::new_checked(&buf[..]).unwrap_err(),
                Error::Malformed
            );
        }
    }

    #[test]
    fn ihl_above_total_len() {
        let mut buf = linux_ping();
        buf[0] = 0x4f; // 60-byte header
        buf[2..4].copy_from_slice(&40u16.to_be_bytes());
        assert_eq!(
            Ipv4Packet::new_checked(&buf[..]).unwrap_err(),
            Error::Malformed
        );
        // header bigger than the whole buffer
        let mut buf = linux_ping();
        buf.truncate(24);
        buf[0] = 0x4f;
        buf[2..4].copy_from_slice(&24u16.to_be_bytes());
        assert_eq!(
            Ipv4Packet::new_checked(&buf[..]).unwrap_err(),
            Error::Malformed
        );
    }

    #[test]
    fn wrong_version() {
        let mut buf = linux_ping();
        buf[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&buf[..]).unwrap_err(),
            Error::Malformed
        );
    }

    #[test]
    fn bad_checksum() {
        let mut buf = linux_ping();
        buf[8] = 63; // TTL changed, checksum not updated
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert!(!p.verify_checksum());
        assert_eq!(
            Ipv4Repr::parse(&p, ChecksumMode::Full).unwrap_err(),
            Error::BadChecksum
        );
        assert!(Ipv4Repr::parse(&p, ChecksumMode::Offload).is_ok());
        // RFC 1624 update repairs it.
        let c = checksum::update(p.checksum(), 0x4001, 0x3f01);
        buf[10..12].copy_from_slice(&c.to_be_bytes());
        assert!(Ipv4Packet::new_checked(&buf[..]).unwrap().verify_checksum());
    }

    #[test]
    fn quoted_header() {
        let buf = linux_ping();
        let (r, rest) = Ipv4Repr::parse_quoted(&buf[..28]).unwrap();
        assert_eq!(r.payload_len, 64);
        assert_eq!(rest.len(), 8);
        for len in 0..20 {
            assert!(Ipv4Repr::parse_quoted(&buf[..len]).is_err());
        }
    }

    #[test]
    fn fuzz_no_panic() {
        let valid = linux_ping();
        crate::test_util::fuzz(4, 4000, &valid, |b| {
            let _ = Ipv4Repr::parse_quoted(b);
            if let Ok(p) = Ipv4Packet::new_checked(&b[..]) {
                let _ = Ipv4Repr::parse(&p, ChecksumMode::Full);
                let _ = Ipv4Repr::parse(&p, ChecksumMode::Offload);
                let _ = (
                    p.options(),
                    p.payload(),
                    p.verify_checksum(),
                    p.frag_offset(),
                );
            }
            // Unchecked views: variable-length accessors stay total.
            if b.len() >= HEADER_LEN {
                let p = Ipv4Packet::new_unchecked(&b[..]);
                let _ = (p.options(), p.payload(), p.verify_checksum());
                let _ = p.into_payload();
            }
        });
    }
}
