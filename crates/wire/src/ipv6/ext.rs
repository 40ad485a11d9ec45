//! IPv6 extension headers (RFC 8200 section 4).
//!
//! No-panic contract: [`Ipv6ExtHeader::new_checked`] and
//! [`Ipv6FragmentHeader::new_checked`] check the header length against the
//! buffer once; [`walk_extension_headers`] checks every header's length
//! against the bytes that remain, walks options with their lengths checked,
//! and gives up after [`MAX_EXTENSION_HEADERS`] headers.

use crate::ip::IpProtocol;
use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub const NXT_HDR: usize = 0;
    /// Generic extension header: length in 8-octet units, not counting the first 8.
    pub const HDR_EXT_LEN: usize = 1;
    pub const EXT_DATA_START: usize = 2;
    /// Routing header: segments left.
    pub const SEGMENTS_LEFT: usize = 3;
    /// Fragment header.
    pub const FRAG_RESERVED: usize = 1;
    pub const FRAG_OFF_M: Range<usize> = 2..4;
    pub const FRAG_IDENT: Range<usize> = 4..8;
}

/// Length of the Fragment header.
pub const FRAGMENT_HEADER_LEN: usize = field::FRAG_IDENT.end;
/// Most extension headers [`walk_extension_headers`] walks before giving up.
pub const MAX_EXTENSION_HEADERS: usize = 8;

/// A view over a Hop-by-Hop, Routing or Destination Options header
/// (next header, length in 8-octet units, data).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6ExtHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6ExtHeader<T> {
    pub const fn new_unchecked(buffer: T) -> Ipv6ExtHeader<T> {
        Ipv6ExtHeader { buffer }
    }

    /// Wrap, checking that the header (as long as its length field says) fits.
    pub fn new_checked(buffer: T) -> Result<Ipv6ExtHeader<T>> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// `Truncated` if the buffer is shorter than 2 bytes or than `header_len()`.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < field::EXT_DATA_START || len < self.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(
            self.buffer
                .as_ref()
                .get(field::NXT_HDR)
                .copied()
                .unwrap_or(0),
        )
    }

    /// Header length in bytes: `(hdr_ext_len + 1) * 8`.
    pub fn header_len(&self) -> usize {
        let units = self
            .buffer
            .as_ref()
            .get(field::HDR_EXT_LEN)
            .copied()
            .unwrap_or(0);
        (usize::from(units) + 1) * 8
    }

    /// The bytes after the two fixed octets, up to `header_len()`.
    pub fn data(&self) -> &[u8] {
        self.buffer
            .as_ref()
            .get(field::EXT_DATA_START..self.header_len())
            .unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6ExtHeader<T> {
    pub fn set_next_header(&mut self, v: IpProtocol) {
        self.buffer.as_mut()[field::NXT_HDR] = v.into();
    }

    /// Set the length field (8-octet units after the first 8 octets).
    pub fn set_hdr_ext_len(&mut self, units: u8) {
        self.buffer.as_mut()[field::HDR_EXT_LEN] = units;
    }

    pub fn data_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        self.buffer
            .as_mut()
            .get_mut(field::EXT_DATA_START..end)
            .unwrap_or(&mut [])
    }
}

/// A view over a Fragment header (RFC 8200 section 4.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6FragmentHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6FragmentHeader<T> {
    pub const fn new_unchecked(buffer: T) -> Ipv6FragmentHeader<T> {
        Ipv6FragmentHeader { buffer }
    }

    /// Wrap, checking that the 8-byte header fits.
    pub fn new_checked(buffer: T) -> Result<Ipv6FragmentHeader<T>> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < FRAGMENT_HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn off_m(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::FRAG_OFF_M];
        u16::from_be_bytes([b[0], b[1]])
    }

    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::NXT_HDR])
    }

    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        self.off_m() & 0xfff8
    }

    pub fn more_frags(&self) -> bool {
        self.off_m() & 0x1 != 0
    }

    pub fn ident(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::FRAG_IDENT];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The fragment data after the header.
    pub fn payload(&self) -> &[u8] {
        self.buffer
            .as_ref()
            .get(FRAGMENT_HEADER_LEN..)
            .unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6FragmentHeader<T> {
    fn set_off_m(&mut self, v: u16) {
        self.buffer.as_mut()[field::FRAG_OFF_M].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_next_header(&mut self, v: IpProtocol) {
        self.buffer.as_mut()[field::NXT_HDR] = v.into();
    }

    /// Set the fragment offset in bytes (the low 3 bits are dropped).
    pub fn set_frag_offset(&mut self, bytes: u16) {
        let v = (self.off_m() & 0x0007) | (bytes & 0xfff8);
        self.set_off_m(v);
    }

    pub fn set_more_frags(&mut self, m: bool) {
        let v = (self.off_m() & 0xfff8) | u16::from(m);
        self.set_off_m(v);
    }

    pub fn set_ident(&mut self, v: u32) {
        self.buffer.as_mut()[field::FRAG_IDENT].copy_from_slice(&v.to_be_bytes());
    }
}

/// A Fragment header as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6FragmentRepr {
    /// The header that the reassembled fragmentable part starts with.
    pub next_header: IpProtocol,
    /// Offset of this fragment's data in bytes (a multiple of 8).
    pub frag_offset: u16,
    pub more_frags: bool,
    pub ident: u32,
}

impl Ipv6FragmentRepr {
    pub fn parse<T: AsRef<[u8]>>(h: &Ipv6FragmentHeader<T>) -> Result<Ipv6FragmentRepr> {
        h.check_len()?;
        Ok(Ipv6FragmentRepr {
            next_header: h.next_header(),
            frag_offset: h.frag_offset(),
            more_frags: h.more_frags(),
            ident: h.ident(),
        })
    }

    /// True for an atomic fragment (offset 0, no more fragments; RFC 6946):
    /// its data is the whole fragmentable part.
    pub const fn is_atomic(&self) -> bool {
        self.frag_offset == 0 && !self.more_frags
    }

    /// Header length (8).
    pub const fn buffer_len(&self) -> usize {
        FRAGMENT_HEADER_LEN
    }

    /// Write the header. The buffer must be at least 8 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Ipv6FragmentHeader<T>) {
        h.set_next_header(self.next_header);
        h.buffer.as_mut()[field::FRAG_RESERVED] = 0;
        h.set_off_m((self.frag_offset & 0xfff8) | u16::from(self.more_frags));
        h.set_ident(self.ident);
    }
}

/// Where the upper layer starts in an IPv6 payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6HeaderChain {
    /// The upper-layer protocol; after a Fragment header, the fragment
    /// header's next header (which may itself be an extension header: walk
    /// again over the reassembled data).
    pub next_header: IpProtocol,
    /// Offset of that header from the start of the IPv6 payload.
    pub offset: usize,
    /// The Fragment header, if the walk met one (the walk stops there).
    pub fragment: Option<Ipv6FragmentRepr>,
    /// Where the field naming `next_header` is, from the start of the
    /// IPv6 packet: what a parameter problem about it points to (RFC 8200
    /// 4; 6, the fixed header's, when no extension header came first).
    pub next_header_at: usize,
}

/// Why an extension header chain was refused: the error, and what to tell
/// the sender when RFC 8200 4 asks for a parameter problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtHeaderError {
    pub error: Error,
    pub problem: Option<HeaderProblem>,
}

impl From<Error> for ExtHeaderError {
    fn from(error: Error) -> Self {
        ExtHeaderError {
            error,
            problem: None,
        }
    }
}

/// A parameter problem to report (RFC 8200 4, 4.2, 4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderProblem {
    /// The ICMPv6 parameter problem code: 0 erroneous header field, 1
    /// unrecognized next header, 2 unrecognized option.
    pub code: u8,
    /// The offending octet, from the start of the IPv6 packet.
    pub pointer: usize,
    /// Sent even when the packet's destination was multicast (an option
    /// whose action bits are 10, RFC 8200 4.2).
    pub to_multicast: bool,
}

/// The fixed IPv6 header's length and where its next header field is.
const FIXED_HEADER_LEN: usize = 40;
const FIXED_NEXT_HEADER_AT: usize = 6;

/// Check the options of a Hop-by-Hop or Destination Options header
/// (RFC 8200 section 4.2). Pad1, PadN and Router Alert are accepted, as are
/// unknown options whose action bits are 00 ("skip"); other unknown options
/// require the packet to be discarded: `Unsupported`, with a parameter
/// problem pointing to the option's type for action bits 10 and 11 (`at`
/// is where the options start in the packet). An option running past the
/// header: `Malformed`.
fn check_options(mut rest: &[u8], at: usize) -> core::result::Result<(), ExtHeaderError> {
    const PAD1: u8 = 0;
    const PADN: u8 = 1;
    const ROUTER_ALERT: u8 = 5;
    let mut pointer = at;
    while let Some((&ty, after)) = rest.split_first() {
        if ty == PAD1 {
            rest = after;
            pointer += 1;
            continue;
        }
        let (&len, after) = after.split_first().ok_or(Error::Malformed)?;
        let (_, after) = after
            .split_at_checked(usize::from(len))
            .ok_or(Error::Malformed)?;
        match ty {
            PADN | ROUTER_ALERT => {}
            t if t >> 6 == 0 => {}
            t => {
                let action = t >> 6;
                return Err(ExtHeaderError {
                    error: Error::Unsupported,
                    problem: (action >= 2).then_some(HeaderProblem {
                        code: 2,
                        pointer,
                        to_multicast: action == 2,
                    }),
                });
            }
        }
        rest = after;
        pointer += 2 + usize::from(len);
    }
    Ok(())
}

/// Walk the extension headers of an IPv6 payload, starting from the fixed
/// header's next header.
///
/// Hop-by-Hop (only as the first header), Routing and Destination Options
/// headers are skipped after checking their length against the remaining
/// bytes (`Truncated` if it overruns) and, for options headers, their
/// options. The walk stops at the first non-extension header, or at a
/// Fragment header (what follows it is fragment data), and returns its
/// protocol and offset.
///
/// Errors: `Malformed` for a Hop-by-Hop header that is not first or a
/// malformed option; `Unsupported` for a Routing header with segments left
/// (this host does not forward), an option that demands discarding, or
/// more than [`MAX_EXTENSION_HEADERS`] headers.
pub fn walk_extension_headers(first: IpProtocol, payload: &[u8]) -> Result<Ipv6HeaderChain> {
    walk_extension_headers_reporting(first, payload).map_err(|e| e.error)
}

/// [`walk_extension_headers`], saying where the problem is when RFC 8200
/// asks for a parameter problem: an option that demands one (code 2), a
/// Routing header with segments left, which this host does not forward
/// (code 0, at its routing type, 4.4), or a Hop-by-Hop header after the
/// first (code 1, at the field that named it).  The payload is the IPv6
/// packet's, after its 40-byte fixed header.
pub fn walk_extension_headers_reporting(
    first: IpProtocol,
    payload: &[u8],
) -> core::result::Result<Ipv6HeaderChain, ExtHeaderError> {
    let mut next = first;
    let mut next_at = FIXED_NEXT_HEADER_AT;
    let mut offset = 0usize;
    for index in 0..=MAX_EXTENSION_HEADERS {
        let rest = payload.get(offset..).ok_or(Error::Truncated)?;
        let header_at = FIXED_HEADER_LEN + offset;
        match next {
            IpProtocol::HopByHop | IpProtocol::Ipv6Opts | IpProtocol::Ipv6Route => {
                if index == MAX_EXTENSION_HEADERS {
                    return Err(Error::Unsupported.into());
                }
                if next == IpProtocol::HopByHop && index != 0 {
                    return Err(ExtHeaderError {
                        error: Error::Malformed,
                        problem: Some(HeaderProblem {
                            code: 1,
                            pointer: next_at,
                            to_multicast: false,
                        }),
                    });
                }
                let h = Ipv6ExtHeader::new_checked(rest)?;
                if next == IpProtocol::Ipv6Route {
                    let segments_left = rest.get(field::SEGMENTS_LEFT).copied().unwrap_or(0);
                    if segments_left != 0 {
                        return Err(ExtHeaderError {
                            error: Error::Unsupported,
                            problem: Some(HeaderProblem {
                                code: 0,
                                pointer: header_at + field::EXT_DATA_START,
                                to_multicast: false,
                            }),
                        });
                    }
                } else {
                    check_options(h.data(), header_at + field::EXT_DATA_START)?;
                }
                next = h.next_header();
                next_at = header_at + field::NXT_HDR;
                offset += h.header_len();
            }
            IpProtocol::Ipv6Frag => {
                if index == MAX_EXTENSION_HEADERS {
                    return Err(Error::Unsupported.into());
                }
                let h = Ipv6FragmentHeader::new_checked(rest)?;
                let frag = Ipv6FragmentRepr::parse(&h)?;
                return Ok(Ipv6HeaderChain {
                    next_header: frag.next_header,
                    offset: offset + FRAGMENT_HEADER_LEN,
                    fragment: Some(frag),
                    next_header_at: header_at + field::NXT_HDR,
                });
            }
            other => {
                return Ok(Ipv6HeaderChain {
                    next_header: other,
                    offset,
                    fragment: None,
                    next_header_at: next_at,
                })
            }
        }
    }
    Err(Error::Unsupported.into())
}
