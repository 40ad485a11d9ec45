//! IPv6 (RFC 8200): the fixed header, and extension header walking.
//!
//! No-panic contract: [`Ipv6Packet::new_checked`] validates, once, that the
//! buffer holds the 40-byte fixed header, that the version is 6 and that
//! `40 + payload_len <= buffer length` (the buffer may be longer: Ethernet
//! padding). After that no accessor panics. Extension headers are walked by
//! [`walk_extension_headers`], which checks every length against the bytes
//! that remain and stops after [`MAX_EXTENSION_HEADERS`] headers.
//! [`Ipv6Repr::parse`] never panics.

mod ext;

pub use ext::{
    walk_extension_headers, walk_extension_headers_reporting, ExtHeaderError, HeaderProblem,
    Ipv6ExtHeader, Ipv6FragmentHeader, Ipv6FragmentRepr, Ipv6HeaderChain, FRAGMENT_HEADER_LEN,
    MAX_EXTENSION_HEADERS,
};

use core::net::Ipv6Addr;

use crate::ip::IpProtocol;
use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Range<usize> = 8..24;
    pub const DST_ADDR: Range<usize> = 24..40;
}

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = field::DST_ADDR.end;
/// Minimum link MTU for IPv6 (RFC 8200 section 5).
pub const MIN_MTU: usize = 1280;

/// A view over an IPv6 packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wrap without checking. Only for buffers sized by the caller for emitting.
    pub const fn new_unchecked(buffer: T) -> Ipv6Packet<T> {
        Ipv6Packet { buffer }
    }

    /// Wrap, validating version and lengths (see the module doc).
    pub fn new_checked(buffer: T) -> Result<Ipv6Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Buffer shorter than 40 or than `40 + payload_len`: `Truncated`;
    /// version not 6: `Malformed`.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 6 {
            return Err(Error::Malformed);
        }
        if HEADER_LEN + usize::from(self.payload_len()) > len {
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

    fn word0(&self) -> u32 {
        let b = &self.b()[field::VER_TC_FLOW];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    pub fn version(&self) -> u8 {
        (self.word0() >> 28) as u8
    }

    /// Traffic class (DSCP << 2 | ECN).
    pub fn traffic_class(&self) -> u8 {
        (self.word0() >> 20) as u8
    }

    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        self.word0() & 0x000f_ffff
    }

    /// Payload length (everything after the fixed header, extension headers included).
    #[inline]
    pub fn payload_len(&self) -> u16 {
        let b = &self.b()[field::LENGTH];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// The next header field of the fixed header.
    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.b()[field::NXT_HDR])
    }

    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.b()[field::HOP_LIMIT]
    }

    #[inline]
    pub fn src_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.b()[field::SRC_ADDR]);
        Ipv6Addr::from(a)
    }

    #[inline]
    pub fn dst_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.b()[field::DST_ADDR]);
        Ipv6Addr::from(a)
    }

    /// The payload: 40 to `40 + payload_len` (padding excluded).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        self.b()
            .get(HEADER_LEN..HEADER_LEN + usize::from(self.payload_len()))
            .unwrap_or(&[])
    }

    /// Walk the extension headers of the payload (see [`walk_extension_headers`]).
    pub fn header_chain(&self) -> Result<Ipv6HeaderChain> {
        walk_extension_headers(self.next_header(), self.payload())
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv6Packet<&'a T> {
    /// The payload with the lifetime of the underlying buffer.
    pub fn into_payload(self) -> &'a [u8] {
        let b: &'a [u8] = self.buffer.as_ref();
        let len = b
            .get(field::LENGTH)
            .map_or(0, |l| usize::from(u16::from_be_bytes([l[0], l[1]])));
        b.get(HEADER_LEN..HEADER_LEN + len).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    fn set_word0(&mut self, v: u32) {
        self.buffer.as_mut()[field::VER_TC_FLOW].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_version(&mut self, v: u8) {
        let w = (self.word0() & 0x0fff_ffff) | (u32::from(v & 0x0f) << 28);
        self.set_word0(w);
    }

    pub fn set_traffic_class(&mut self, v: u8) {
        let w = (self.word0() & 0xf00f_ffff) | (u32::from(v) << 20);
        self.set_word0(w);
    }

    /// Set the flow label (low 20 bits of `v`).
    pub fn set_flow_label(&mut self, v: u32) {
        let w = (self.word0() & 0xfff0_0000) | (v & 0x000f_ffff);
        self.set_word0(w);
    }

    pub fn set_payload_len(&mut self, v: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_next_header(&mut self, v: IpProtocol) {
        self.buffer.as_mut()[field::NXT_HDR] = v.into();
    }

    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v;
    }

    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&a.octets());
    }

    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&a.octets());
    }

    /// Mutable payload, 40 to `40 + payload_len` (empty if it does not fit).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        self.buffer
            .as_mut()
            .get_mut(HEADER_LEN..end)
            .unwrap_or(&mut [])
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Ipv6Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The fixed IPv6 header as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    pub src_addr: Ipv6Addr,
    pub dst_addr: Ipv6Addr,
    /// The fixed header's next header (may be an extension header).
    pub next_header: IpProtocol,
    /// Bytes after the fixed header.
    pub payload_len: usize,
    pub hop_limit: u8,
    /// Traffic class (DSCP << 2 | ECN).
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// Read the fixed header (lengths re-validated as in [`Ipv6Packet::check_len`]).
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Result<Ipv6Repr> {
        packet.check_len()?;
        Ok(Self::from_header(packet))
    }

    fn from_header<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Ipv6Repr {
        Ipv6Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
        }
    }

    /// Parse the IPv6 header quoted in an ICMPv6 error: `payload_len` may
    /// exceed the bytes present. Returns the header and the quoted bytes
    /// after it.
    pub fn parse_quoted(bytes: &[u8]) -> Result<(Ipv6Repr, &[u8])> {
        let (hdr, rest) = bytes.split_at_checked(HEADER_LEN).ok_or(Error::Truncated)?;
        let p = Ipv6Packet::new_unchecked(hdr);
        if p.version() != 6 {
            return Err(Error::Malformed);
        }
        Ok((Self::from_header(&p), rest))
    }

    /// Fixed header length (40).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the fixed header. The buffer must be at least 40 bytes;
    /// `payload_len` above 65535 is truncated to 16 bits (never panics).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv6Packet<T>) {
        packet.set_word0(
            (6u32 << 28) | (u32::from(self.traffic_class) << 20) | (self.flow_label & 0x000f_ffff),
        );
        packet.set_payload_len(self.payload_len as u16);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

#[cfg(test)]
pub(crate) mod tests;
