//! ICMP for IPv6 (RFC 4443) and the Neighbor Discovery messages (RFC 4861).
//!
//! No-panic contract: [`Icmpv6Packet::new_checked`] ensures the 8-byte
//! header is present; after that no accessor panics. Accessors of fields
//! past the first 8 bytes (NDP bodies) read as zero / unspecified when the
//! message is too short; [`Icmpv6Repr::parse`] checks each type's minimum
//! length first and never panics. NDP options are validated with
//! [`crate::ndp::check_options`] (zero length or overrun: the message is
//! rejected, RFC 4861 section 4.6).
//!
//! Checksums use the IPv6 pseudo header (RFC 4443 section 2.3).

use core::net::Ipv6Addr;

use crate::checksum;
use crate::ethernet::EthernetAddress;
use crate::ip::IpProtocol;
use crate::ipv6::Ipv6Repr;
use crate::ndp;
use crate::{ChecksumMode, Error, Result};

enum_with_unknown! {
    /// ICMPv6 message type.
    pub enum Icmpv6Message(u8) {
        DstUnreachable = 1,
        PktTooBig = 2,
        TimeExceeded = 3,
        ParamProblem = 4,
        EchoRequest = 128,
        EchoReply = 129,
        MldQuery = 130,
        MldReport = 131,
        MldDone = 132,
        RouterSolicit = 133,
        RouterAdvert = 134,
        NeighborSolicit = 135,
        NeighborAdvert = 136,
        Redirect = 137,
        MldReportV2 = 143,
    }
}

impl Icmpv6Message {
    /// Error messages have types 0..=127 (RFC 4443 section 2.1).
    pub fn is_error(self) -> bool {
        u8::from(self) < 128
    }
}

enum_with_unknown! {
    /// Codes of Destination Unreachable.
    pub enum Icmpv6DstUnreachable(u8) {
        NoRoute = 0,
        AdminProhibit = 1,
        BeyondScope = 2,
        AddrUnreachable = 3,
        PortUnreachable = 4,
        FailedPolicy = 5,
        RejectRoute = 6,
    }
}

enum_with_unknown! {
    /// Codes of Time Exceeded.
    pub enum Icmpv6TimeExceeded(u8) {
        HopLimitExceeded = 0,
        FragReassemblyExceeded = 1,
    }
}

enum_with_unknown! {
    /// Codes of Parameter Problem.
    pub enum Icmpv6ParamProblem(u8) {
        ErroneousHeaderField = 0,
        UnrecognizedNxtHdr = 1,
        UnrecognizedOption = 2,
    }
}

mod field {
    use core::ops::{Range, RangeFrom};
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    // Echo.
    pub const ECHO_IDENT: Range<usize> = 4..6;
    pub const ECHO_SEQNO: Range<usize> = 6..8;
    // Errors.
    pub const MTU: Range<usize> = 4..8;
    pub const POINTER: Range<usize> = 4..8;
    pub const BODY: RangeFrom<usize> = 8..;
    // Router Solicitation.
    pub const RS_OPTIONS: usize = 8;
    // Router Advertisement.
    pub const CUR_HOP_LIMIT: usize = 4;
    pub const ROUTER_FLAGS: usize = 5;
    pub const ROUTER_LIFETIME: Range<usize> = 6..8;
    pub const REACHABLE_TIME: Range<usize> = 8..12;
    pub const RETRANS_TIME: Range<usize> = 12..16;
    pub const RA_OPTIONS: usize = 16;
    // Neighbor Solicitation / Advertisement, Redirect.
    pub const NEIGH_FLAGS: usize = 4;
    pub const TARGET: Range<usize> = 8..24;
    pub const NEIGH_OPTIONS: usize = 24;
    pub const REDIRECT_DEST: Range<usize> = 24..40;
    pub const REDIRECT_OPTIONS: usize = 40;
}

/// Length of the ICMPv6 header (type, code, checksum, 4 bytes of message body).
pub const HEADER_LEN: usize = field::BODY.start;
/// Largest ICMPv6 error message that keeps the IPv6 packet within the
/// minimum MTU (RFC 4443 section 2.4 (c)).
pub const MAX_ERROR_LEN: usize = crate::ipv6::MIN_MTU - crate::ipv6::HEADER_LEN;

const ROUTER_FLAG_MANAGED: u8 = 0x80;
const ROUTER_FLAG_OTHER: u8 = 0x40;
const NEIGH_FLAG_ROUTER: u8 = 0x80;
const NEIGH_FLAG_SOLICITED: u8 = 0x40;
const NEIGH_FLAG_OVERRIDE: u8 = 0x20;

/// A view over an ICMPv6 message (the upper-layer payload of an IPv6 packet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// Wrap without checking. Only for buffers sized by the caller for emitting.
    pub const fn new_unchecked(buffer: T) -> Icmpv6Packet<T> {
        Icmpv6Packet { buffer }
    }

    /// Wrap, checking that the 8-byte header is present.
    pub fn new_checked(buffer: T) -> Result<Icmpv6Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

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

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    fn u8_at(&self, i: usize) -> u8 {
        self.b().get(i).copied().unwrap_or(0)
    }

    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        self.b()
            .get(r)
            .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32_at(&self, r: core::ops::Range<usize>) -> u32 {
        self.b()
            .get(r)
            .map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn addr_at(&self, r: core::ops::Range<usize>) -> Ipv6Addr {
        let mut a = [0u8; 16];
        if let Some(b) = self.b().get(r) {
            a.copy_from_slice(b);
        }
        Ipv6Addr::from(a)
    }

    fn tail(&self, from: usize) -> &[u8] {
        self.b().get(from..).unwrap_or(&[])
    }

    pub fn msg_type(&self) -> Icmpv6Message {
        Icmpv6Message::from(self.u8_at(field::TYPE))
    }

    pub fn msg_code(&self) -> u8 {
        self.u8_at(field::CODE)
    }

    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    pub fn echo_ident(&self) -> u16 {
        self.u16_at(field::ECHO_IDENT)
    }

    pub fn echo_seq_no(&self) -> u16 {
        self.u16_at(field::ECHO_SEQNO)
    }

    /// MTU of a Packet Too Big message.
    pub fn pkt_too_big_mtu(&self) -> u32 {
        self.u32_at(field::MTU)
    }

    /// Pointer of a Parameter Problem message.
    pub fn param_problem_ptr(&self) -> u32 {
        self.u32_at(field::POINTER)
    }

    /// Everything after the 8-byte header (echo data, the quoted packet of
    /// an error).
    pub fn body(&self) -> &[u8] {
        self.tail(field::BODY.start)
    }

    /// Router Advertisement: current hop limit.
    pub fn cur_hop_limit(&self) -> u8 {
        self.u8_at(field::CUR_HOP_LIMIT)
    }

    /// Router Advertisement: flags byte (M = 0x80, O = 0x40).
    pub fn router_flags(&self) -> u8 {
        self.u8_at(field::ROUTER_FLAGS)
    }

    /// Router Advertisement: router lifetime in seconds.
    pub fn router_lifetime(&self) -> u16 {
        self.u16_at(field::ROUTER_LIFETIME)
    }

    /// Router Advertisement: reachable time in milliseconds.
    pub fn reachable_time(&self) -> u32 {
        self.u32_at(field::REACHABLE_TIME)
    }

    /// Router Advertisement: retransmission timer in milliseconds.
    pub fn retrans_time(&self) -> u32 {
        self.u32_at(field::RETRANS_TIME)
    }

    /// Neighbor Advertisement: flags byte (R = 0x80, S = 0x40, O = 0x20).
    pub fn neighbor_flags(&self) -> u8 {
        self.u8_at(field::NEIGH_FLAGS)
    }

    /// Target address of NS, NA and Redirect.
    pub fn target_addr(&self) -> Ipv6Addr {
        self.addr_at(field::TARGET)
    }

    /// Destination address of a Redirect.
    pub fn redirect_dst_addr(&self) -> Ipv6Addr {
        self.addr_at(field::REDIRECT_DEST)
    }

    /// The NDP option bytes of this message type (empty for non-NDP types
    /// or too-short messages).
    pub fn ndp_options(&self) -> &[u8] {
        match ndp_options_offset(self.msg_type()) {
            Some(off) => self.tail(off),
            None => &[],
        }
    }

    /// True when the checksum verifies with the pseudo header of `src`/`dst`.
    pub fn verify_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        let b = self.b();
        let ph = checksum::pseudo_header_v6(src, dst, IpProtocol::Icmpv6, b.len() as u32);
        checksum::combine(&[ph, checksum::data(b)]) == 0xffff
    }
}

fn ndp_options_offset(t: Icmpv6Message) -> Option<usize> {
    match t {
        Icmpv6Message::RouterSolicit => Some(field::RS_OPTIONS),
        Icmpv6Message::RouterAdvert => Some(field::RA_OPTIONS),
        Icmpv6Message::NeighborSolicit | Icmpv6Message::NeighborAdvert => {
            Some(field::NEIGH_OPTIONS)
        }
        Icmpv6Message::Redirect => Some(field::REDIRECT_OPTIONS),
        _ => None,
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    fn set_u8_at(&mut self, i: usize, v: u8) {
        if let Some(b) = self.buffer.as_mut().get_mut(i) {
            *b = v;
        }
    }

    fn set_bytes_at(&mut self, r: core::ops::Range<usize>, v: &[u8]) {
        if let Some(b) = self.buffer.as_mut().get_mut(r) {
            if b.len() == v.len() {
                b.copy_from_slice(v);
            }
        }
    }

    fn tail_mut(&mut self, from: usize) -> &mut [u8] {
        self.buffer.as_mut().get_mut(from..).unwrap_or(&mut [])
    }

    pub fn set_msg_type(&mut self, v: Icmpv6Message) {
        self.set_u8_at(field::TYPE, v.into());
    }

    pub fn set_msg_code(&mut self, v: u8) {
        self.set_u8_at(field::CODE, v);
    }

    pub fn set_checksum(&mut self, v: u16) {
        self.set_bytes_at(field::CHECKSUM, &v.to_be_bytes());
    }

    pub fn set_echo_ident(&mut self, v: u16) {
        self.set_bytes_at(field::ECHO_IDENT, &v.to_be_bytes());
    }

    pub fn set_echo_seq_no(&mut self, v: u16) {
        self.set_bytes_at(field::ECHO_SEQNO, &v.to_be_bytes());
    }

    /// Set the 4-byte field after the checksum (MTU, pointer, reserved).
    pub fn set_word1(&mut self, v: u32) {
        self.set_bytes_at(field::MTU, &v.to_be_bytes());
    }

    pub fn set_cur_hop_limit(&mut self, v: u8) {
        self.set_u8_at(field::CUR_HOP_LIMIT, v);
    }

    pub fn set_router_flags(&mut self, v: u8) {
        self.set_u8_at(field::ROUTER_FLAGS, v);
    }

    pub fn set_router_lifetime(&mut self, v: u16) {
        self.set_bytes_at(field::ROUTER_LIFETIME, &v.to_be_bytes());
    }

    pub fn set_reachable_time(&mut self, v: u32) {
        self.set_bytes_at(field::REACHABLE_TIME, &v.to_be_bytes());
    }

    pub fn set_retrans_time(&mut self, v: u32) {
        self.set_bytes_at(field::RETRANS_TIME, &v.to_be_bytes());
    }

    pub fn set_neighbor_flags(&mut self, v: u8) {
        self.set_u8_at(field::NEIGH_FLAGS, v);
    }

    pub fn set_target_addr(&mut self, a: Ipv6Addr) {
        self.set_bytes_at(field::TARGET, &a.octets());
    }

    pub fn set_redirect_dst_addr(&mut self, a: Ipv6Addr) {
        self.set_bytes_at(field::REDIRECT_DEST, &a.octets());
    }

    /// Mutable bytes after the 8-byte header.
    pub fn body_mut(&mut self) -> &mut [u8] {
        self.tail_mut(field::BODY.start)
    }

    /// Compute and store the checksum over the whole buffer.
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        self.set_checksum(0);
        let b = self.b();
        let ph = checksum::pseudo_header_v6(src, dst, IpProtocol::Icmpv6, b.len() as u32);
        let c = !checksum::combine(&[ph, checksum::data(b)]);
        self.set_checksum(c);
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Icmpv6Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// An ICMPv6 message as plain values.
///
/// For NDP messages `options` holds the raw option bytes (validated on
/// parse); read them with [`crate::ndp::NdpOptions`] or
/// [`Icmpv6Repr::lladdr`], and build them with
/// [`crate::ndp::source_lladdr_option`] / [`crate::ndp::target_lladdr_option`]
/// or [`crate::ndp::NdpOptionRepr::emit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv6Repr<'a> {
    /// `header` is the quoted IPv6 header, `data` the quoted bytes after it.
    DstUnreachable {
        reason: Icmpv6DstUnreachable,
        header: Ipv6Repr,
        data: &'a [u8],
    },
    PktTooBig {
        mtu: u32,
        header: Ipv6Repr,
        data: &'a [u8],
    },
    TimeExceeded {
        reason: Icmpv6TimeExceeded,
        header: Ipv6Repr,
        data: &'a [u8],
    },
    ParamProblem {
        reason: Icmpv6ParamProblem,
        pointer: u32,
        header: Ipv6Repr,
        data: &'a [u8],
    },
    EchoRequest {
        ident: u16,
        seq_no: u16,
        data: &'a [u8],
    },
    EchoReply {
        ident: u16,
        seq_no: u16,
        data: &'a [u8],
    },
    RouterSolicit {
        options: &'a [u8],
    },
    RouterAdvert {
        /// Current hop limit (0: unspecified).
        hop_limit: u8,
        /// M flag.
        managed: bool,
        /// O flag.
        other: bool,
        /// Seconds (0: not a default router).
        router_lifetime: u16,
        /// Milliseconds (0: unspecified).
        reachable_time: u32,
        /// Milliseconds (0: unspecified).
        retrans_time: u32,
        options: &'a [u8],
    },
    NeighborSolicit {
        target_addr: Ipv6Addr,
        options: &'a [u8],
    },
    NeighborAdvert {
        /// R flag.
        router: bool,
        /// S flag.
        solicited: bool,
        /// O flag.
        override_: bool,
        target_addr: Ipv6Addr,
        options: &'a [u8],
    },
    Redirect {
        target_addr: Ipv6Addr,
        dst_addr: Ipv6Addr,
        options: &'a [u8],
    },
}

impl<'a> Icmpv6Repr<'a> {
    /// Parse a message carried from `src` to `dst`.
    ///
    /// With [`ChecksumMode::Full`] a wrong checksum gives `BadChecksum`.
    /// Messages shorter than their type's fixed part: `Truncated`. Echo or
    /// NDP with a non-zero code, malformed NDP options, and the RFC 4861
    /// validity checks this function can make without the IP header's hop
    /// limit: `Malformed` (a multicast target in NS/NA; an NS from the
    /// unspecified address with a source link-layer option or not sent to a
    /// solicited-node group; a solicited NA to a multicast address; an RA
    /// or Redirect whose source is not link-local; a multicast Redirect
    /// destination). The caller must still check that NDP messages arrived
    /// with hop limit 255. Other types (MLD, ...): `Unsupported`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Icmpv6Packet<&'a T>,
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
        checksum: ChecksumMode,
    ) -> Result<Icmpv6Repr<'a>> {
        packet.check_len()?;
        if checksum.is_full() && !packet.verify_checksum(src, dst) {
            return Err(Error::BadChecksum);
        }
        let buf: &'a [u8] = packet.buffer.as_ref();
        let body = buf.get(field::BODY).unwrap_or(&[]);
        let code = packet.msg_code();
        let ty = packet.msg_type();
        let ndp = ndp_options_offset(ty);
        let options: &'a [u8] = match ndp {
            Some(off) => {
                if code != 0 {
                    return Err(Error::Malformed);
                }
                let o = buf.get(off..).ok_or(Error::Truncated)?;
                ndp::check_options(o)?;
                o
            }
            None => &[],
        };
        match ty {
            Icmpv6Message::EchoRequest | Icmpv6Message::EchoReply if code != 0 => {
                Err(Error::Malformed)
            }
            Icmpv6Message::EchoRequest => Ok(Icmpv6Repr::EchoRequest {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data: body,
            }),
            Icmpv6Message::EchoReply => Ok(Icmpv6Repr::EchoReply {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data: body,
            }),
            Icmpv6Message::DstUnreachable => {
                let (header, data) = Ipv6Repr::parse_quoted(body)?;
                Ok(Icmpv6Repr::DstUnreachable {
                    reason: code.into(),
                    header,
                    data,
                })
            }
            Icmpv6Message::PktTooBig => {
                let (header, data) = Ipv6Repr::parse_quoted(body)?;
                Ok(Icmpv6Repr::PktTooBig {
                    mtu: packet.pkt_too_big_mtu(),
                    header,
                    data,
                })
            }
            Icmpv6Message::TimeExceeded => {
                let (header, data) = Ipv6Repr::parse_quoted(body)?;
                Ok(Icmpv6Repr::TimeExceeded {
                    reason: code.into(),
                    header,
                    data,
                })
            }
            Icmpv6Message::ParamProblem => {
                let (header, data) = Ipv6Repr::parse_quoted(body)?;
                Ok(Icmpv6Repr::ParamProblem {
                    reason: code.into(),
                    pointer: packet.param_problem_ptr(),
                    header,
                    data,
                })
            }
            Icmpv6Message::RouterSolicit => {
                if src.is_unspecified() && ndp::find_lladdr(options, false).is_some() {
                    return Err(Error::Malformed);
                }
                Ok(Icmpv6Repr::RouterSolicit { options })
            }
            Icmpv6Message::RouterAdvert => {
                if !is_link_local(src) {
                    return Err(Error::Malformed);
                }
                let flags = packet.router_flags();
                Ok(Icmpv6Repr::RouterAdvert {
                    hop_limit: packet.cur_hop_limit(),
                    managed: flags & ROUTER_FLAG_MANAGED != 0,
                    other: flags & ROUTER_FLAG_OTHER != 0,
                    router_lifetime: packet.router_lifetime(),
                    reachable_time: packet.reachable_time(),
                    retrans_time: packet.retrans_time(),
                    options,
                })
            }
            Icmpv6Message::NeighborSolicit => {
                let target_addr = packet.target_addr();
                if target_addr.is_multicast() {
                    return Err(Error::Malformed);
                }
                if src.is_unspecified()
                    && (!is_solicited_node(dst) || ndp::find_lladdr(options, false).is_some())
                {
                    return Err(Error::Malformed);
                }
                Ok(Icmpv6Repr::NeighborSolicit {
                    target_addr,
                    options,
                })
            }
            Icmpv6Message::NeighborAdvert => {
                let target_addr = packet.target_addr();
                let flags = packet.neighbor_flags();
                let solicited = flags & NEIGH_FLAG_SOLICITED != 0;
                if target_addr.is_multicast() || (solicited && dst.is_multicast()) {
                    return Err(Error::Malformed);
                }
                Ok(Icmpv6Repr::NeighborAdvert {
                    router: flags & NEIGH_FLAG_ROUTER != 0,
                    solicited,
                    override_: flags & NEIGH_FLAG_OVERRIDE != 0,
                    target_addr,
                    options,
                })
            }
            Icmpv6Message::Redirect => {
                let dst_addr = packet.redirect_dst_addr();
                if !is_link_local(src) || dst_addr.is_multicast() {
                    return Err(Error::Malformed);
                }
                Ok(Icmpv6Repr::Redirect {
                    target_addr: packet.target_addr(),
                    dst_addr,
                    options,
                })
            }
            _ => Err(Error::Unsupported),
        }
    }

    /// The link-layer address an NDP message carries: the source option of
    /// RS, RA and NS, the target option of NA and Redirect.
    pub fn lladdr(&self) -> Option<EthernetAddress> {
        match *self {
            Icmpv6Repr::RouterSolicit { options }
            | Icmpv6Repr::RouterAdvert { options, .. }
            | Icmpv6Repr::NeighborSolicit { options, .. } => ndp::find_lladdr(options, false),
            Icmpv6Repr::NeighborAdvert { options, .. } | Icmpv6Repr::Redirect { options, .. } => {
                ndp::find_lladdr(options, true)
            }
            _ => None,
        }
    }

    fn msg_type(&self) -> Icmpv6Message {
        match self {
            Icmpv6Repr::DstUnreachable { .. } => Icmpv6Message::DstUnreachable,
            Icmpv6Repr::PktTooBig { .. } => Icmpv6Message::PktTooBig,
            Icmpv6Repr::TimeExceeded { .. } => Icmpv6Message::TimeExceeded,
            Icmpv6Repr::ParamProblem { .. } => Icmpv6Message::ParamProblem,
            Icmpv6Repr::EchoRequest { .. } => Icmpv6Message::EchoRequest,
            Icmpv6Repr::EchoReply { .. } => Icmpv6Message::EchoReply,
            Icmpv6Repr::RouterSolicit { .. } => Icmpv6Message::RouterSolicit,
            Icmpv6Repr::RouterAdvert { .. } => Icmpv6Message::RouterAdvert,
            Icmpv6Repr::NeighborSolicit { .. } => Icmpv6Message::NeighborSolicit,
            Icmpv6Repr::NeighborAdvert { .. } => Icmpv6Message::NeighborAdvert,
            Icmpv6Repr::Redirect { .. } => Icmpv6Message::Redirect,
        }
    }

    /// Length of the emitted message.
    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv6Repr::DstUnreachable { header, data, .. }
            | Icmpv6Repr::PktTooBig { header, data, .. }
            | Icmpv6Repr::TimeExceeded { header, data, .. }
            | Icmpv6Repr::ParamProblem { header, data, .. } => {
                HEADER_LEN + header.buffer_len() + data.len()
            }
            Icmpv6Repr::EchoRequest { data, .. } | Icmpv6Repr::EchoReply { data, .. } => {
                HEADER_LEN + data.len()
            }
            Icmpv6Repr::RouterSolicit { options } => field::RS_OPTIONS + options.len(),
            Icmpv6Repr::RouterAdvert { options, .. } => field::RA_OPTIONS + options.len(),
            Icmpv6Repr::NeighborSolicit { options, .. }
            | Icmpv6Repr::NeighborAdvert { options, .. } => field::NEIGH_OPTIONS + options.len(),
            Icmpv6Repr::Redirect { options, .. } => field::REDIRECT_OPTIONS + options.len(),
        }
    }

    /// Write the message and its checksum for `src` -> `dst`. The buffer
    /// must be exactly `buffer_len()` bytes (the checksum covers the whole
    /// buffer). For errors, keep `buffer_len() <= MAX_ERROR_LEN` by
    /// shortening `data`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Icmpv6Packet<T>,
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
    ) {
        packet.set_msg_type(self.msg_type());
        packet.set_word1(0);
        let copy = |dst: &mut [u8], src: &[u8]| {
            let n = src.len().min(dst.len());
            dst[..n].copy_from_slice(&src[..n]);
        };
        let quoted = |packet: &mut Icmpv6Packet<T>, header: &Ipv6Repr, data: &[u8]| {
            let body = packet.body_mut();
            let hl = header.buffer_len();
            if let Some(h) = body.get_mut(..hl) {
                header.emit(&mut crate::ipv6::Ipv6Packet::new_unchecked(h));
            }
            if let Some(rest) = body.get_mut(hl..) {
                copy(rest, data);
            }
        };
        let mut code = 0;
        match *self {
            Icmpv6Repr::DstUnreachable {
                reason,
                ref header,
                data,
            } => {
                code = reason.into();
                quoted(packet, header, data);
            }
            Icmpv6Repr::PktTooBig {
                mtu,
                ref header,
                data,
            } => {
                packet.set_word1(mtu);
                quoted(packet, header, data);
            }
            Icmpv6Repr::TimeExceeded {
                reason,
                ref header,
                data,
            } => {
                code = reason.into();
                quoted(packet, header, data);
            }
            Icmpv6Repr::ParamProblem {
                reason,
                pointer,
                ref header,
                data,
            } => {
                code = reason.into();
                packet.set_word1(pointer);
                quoted(packet, header, data);
            }
            Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data,
            }
            | Icmpv6Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                packet.set_echo_ident(ident);
                packet.set_echo_seq_no(seq_no);
                copy(packet.body_mut(), data);
            }
            Icmpv6Repr::RouterSolicit { options } => {
                copy(packet.tail_mut(field::RS_OPTIONS), options);
            }
            Icmpv6Repr::RouterAdvert {
                hop_limit,
                managed,
                other,
                router_lifetime,
                reachable_time,
                retrans_time,
                options,
            } => {
                packet.set_cur_hop_limit(hop_limit);
                packet.set_router_flags(
                    if managed { ROUTER_FLAG_MANAGED } else { 0 }
                        | if other { ROUTER_FLAG_OTHER } else { 0 },
                );
                packet.set_router_lifetime(router_lifetime);
                packet.set_reachable_time(reachable_time);
                packet.set_retrans_time(retrans_time);
                copy(packet.tail_mut(field::RA_OPTIONS), options);
            }
            Icmpv6Repr::NeighborSolicit {
                target_addr,
                options,
            } => {
                packet.set_target_addr(target_addr);
                copy(packet.tail_mut(field::NEIGH_OPTIONS), options);
            }
            Icmpv6Repr::NeighborAdvert {
                router,
                solicited,
                override_,
                target_addr,
                options,
            } => {
                packet.set_neighbor_flags(
                    if router { NEIGH_FLAG_ROUTER } else { 0 }
                        | if solicited { NEIGH_FLAG_SOLICITED } else { 0 }
                        | if override_ { NEIGH_FLAG_OVERRIDE } else { 0 },
                );
                packet.set_target_addr(target_addr);
                copy(packet.tail_mut(field::NEIGH_OPTIONS), options);
            }
            Icmpv6Repr::Redirect {
                target_addr,
                dst_addr,
                options,
            } => {
                packet.set_target_addr(target_addr);
                packet.set_redirect_dst_addr(dst_addr);
                copy(packet.tail_mut(field::REDIRECT_OPTIONS), options);
            }
        }
        packet.set_msg_code(code);
        packet.fill_checksum(src, dst);
    }
}

/// True for a unicast link-local address fe80::/10.
pub fn is_link_local(addr: &Ipv6Addr) -> bool {
    addr.segments()[0] & 0xffc0 == 0xfe80
}

/// True for a solicited-node multicast address ff02::1:ffXX:XXXX.
pub fn is_solicited_node(addr: &Ipv6Addr) -> bool {
    let s = addr.segments();
    s[..5] == [0xff02, 0, 0, 0, 0] && s[5] == 1 && s[6] & 0xff00 == 0xff00
}

/// The solicited-node multicast address of `addr` (RFC 4291 section 2.7.1).
pub fn solicited_node(addr: &Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

#[cfg(test)]
mod tests;
