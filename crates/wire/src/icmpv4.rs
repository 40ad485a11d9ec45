//! ICMP for IPv4 (RFC 792).
//!
//! No-panic contract: [`Icmpv4Packet::new_checked`] ensures the 8-byte header
//! is present; after that no accessor panics. [`Icmpv4Repr::parse`] never
//! panics: unknown message types give `Unsupported`.

use crate::checksum;
use crate::ipv4::Ipv4Repr;
use crate::{ChecksumMode, Error, Result};

enum_with_unknown! {
    /// ICMPv4 message type.
    pub enum Icmpv4Message(u8) {
        EchoReply = 0,
        DstUnreachable = 3,
        Redirect = 5,
        EchoRequest = 8,
        RouterAdvert = 9,
        RouterSolicit = 10,
        TimeExceeded = 11,
        ParamProblem = 12,
        Timestamp = 13,
        TimestampReply = 14,
    }
}

enum_with_unknown! {
    /// Codes of Destination Unreachable.
    pub enum Icmpv4DstUnreachable(u8) {
        NetUnreachable = 0,
        HostUnreachable = 1,
        ProtoUnreachable = 2,
        PortUnreachable = 3,
        /// Fragmentation needed and DF set (RFC 1191: carries the next-hop MTU).
        FragRequired = 4,
        SrcRouteFailed = 5,
        DstNetUnknown = 6,
        DstHostUnknown = 7,
        SrcHostIsolated = 8,
        NetProhibited = 9,
        HostProhibited = 10,
        NetUnreachToS = 11,
        HostUnreachToS = 12,
        CommProhibited = 13,
        HostPrecedViol = 14,
        PrecedCutoff = 15,
    }
}

enum_with_unknown! {
    /// Codes of Time Exceeded.
    pub enum Icmpv4TimeExceeded(u8) {
        TtlExpired = 0,
        FragExpired = 1,
    }
}

mod field {
    use core::ops::{Range, RangeFrom};
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    pub const ECHO_IDENT: Range<usize> = 4..6;
    pub const ECHO_SEQNO: Range<usize> = 6..8;
    /// Next-hop MTU of Destination Unreachable / Fragmentation Needed.
    pub const MTU: Range<usize> = 6..8;
    pub const DATA: RangeFrom<usize> = 8..;
}

/// Length of the ICMPv4 header (type, code, checksum, 4 bytes of rest-of-header).
pub const HEADER_LEN: usize = field::DATA.start;

/// A view over an ICMPv4 message (the whole IPv4 payload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// Wrap without checking. Only for buffers sized by the caller for emitting.
    pub const fn new_unchecked(buffer: T) -> Icmpv4Packet<T> {
        Icmpv4Packet { buffer }
    }

    /// Wrap, checking that the 8-byte header is present.
    pub fn new_checked(buffer: T) -> Result<Icmpv4Packet<T>> {
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

    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        let b = &self.buffer.as_ref()[r];
        u16::from_be_bytes([b[0], b[1]])
    }

    pub fn msg_type(&self) -> Icmpv4Message {
        Icmpv4Message::from(self.buffer.as_ref()[field::TYPE])
    }

    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// Echo identifier (echo request/reply only).
    pub fn echo_ident(&self) -> u16 {
        self.u16_at(field::ECHO_IDENT)
    }

    /// Echo sequence number (echo request/reply only).
    pub fn echo_seq_no(&self) -> u16 {
        self.u16_at(field::ECHO_SEQNO)
    }

    /// Next-hop MTU (Destination Unreachable, Fragmentation Needed; RFC 1191).
    pub fn next_hop_mtu(&self) -> u16 {
        self.u16_at(field::MTU)
    }

    /// Everything after the 8-byte header.
    pub fn data(&self) -> &[u8] {
        self.buffer.as_ref().get(field::DATA).unwrap_or(&[])
    }

    /// True when the checksum over the whole message verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum::data(self.buffer.as_ref()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    fn set_u16_at(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_msg_type(&mut self, v: Icmpv4Message) {
        self.buffer.as_mut()[field::TYPE] = v.into();
    }

    pub fn set_msg_code(&mut self, v: u8) {
        self.buffer.as_mut()[field::CODE] = v;
    }

    pub fn set_checksum(&mut self, v: u16) {
        self.set_u16_at(field::CHECKSUM, v);
    }

    pub fn set_echo_ident(&mut self, v: u16) {
        self.set_u16_at(field::ECHO_IDENT, v);
    }

    pub fn set_echo_seq_no(&mut self, v: u16) {
        self.set_u16_at(field::ECHO_SEQNO, v);
    }

    pub fn set_next_hop_mtu(&mut self, v: u16) {
        self.set_u16_at(field::MTU, v);
    }

    pub fn data_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut().get_mut(field::DATA).unwrap_or(&mut [])
    }

    /// Compute and store the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = !checksum::data(self.buffer.as_ref());
        self.set_checksum(c);
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Icmpv4Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// An ICMPv4 message as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv4Repr<'a> {
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
    /// `header` is the quoted IPv4 header; `data` the quoted payload bytes
    /// that follow it (at least the first 8 on emit; on parse, all that
    /// were quoted).
    DstUnreachable {
        reason: Icmpv4DstUnreachable,
        header: Ipv4Repr,
        data: &'a [u8],
    },
    TimeExceeded {
        reason: Icmpv4TimeExceeded,
        header: Ipv4Repr,
        data: &'a [u8],
    },
}

impl<'a> Icmpv4Repr<'a> {
    /// Parse a message.
    ///
    /// With [`ChecksumMode::Full`] a wrong checksum gives `BadChecksum`.
    /// Echo with a non-zero code: `Malformed`. Types other than echo,
    /// destination unreachable and time exceeded: `Unsupported`. For errors,
    /// the quoted IPv4 header must parse (`Truncated`/`Malformed` otherwise).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Icmpv4Packet<&'a T>,
        checksum: ChecksumMode,
    ) -> Result<Icmpv4Repr<'a>> {
        packet.check_len()?;
        if checksum.is_full() && !packet.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        let buf: &'a [u8] = packet.buffer.as_ref();
        let data = buf.get(field::DATA).unwrap_or(&[]);
        match packet.msg_type() {
            Icmpv4Message::EchoRequest | Icmpv4Message::EchoReply if packet.msg_code() != 0 => {
                Err(Error::Malformed)
            }
            Icmpv4Message::EchoRequest => Ok(Icmpv4Repr::EchoRequest {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            }),
            Icmpv4Message::EchoReply => Ok(Icmpv4Repr::EchoReply {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            }),
            Icmpv4Message::DstUnreachable => {
                let (header, data) = Ipv4Repr::parse_quoted(data)?;
                Ok(Icmpv4Repr::DstUnreachable {
                    reason: Icmpv4DstUnreachable::from(packet.msg_code()),
                    header,
                    data,
                })
            }
            Icmpv4Message::TimeExceeded => {
                let (header, data) = Ipv4Repr::parse_quoted(data)?;
                Ok(Icmpv4Repr::TimeExceeded {
                    reason: Icmpv4TimeExceeded::from(packet.msg_code()),
                    header,
                    data,
                })
            }
            _ => Err(Error::Unsupported),
        }
    }

    /// Length of the emitted message.
    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv4Repr::EchoRequest { data, .. } | Icmpv4Repr::EchoReply { data, .. } => {
                HEADER_LEN + data.len()
            }
            Icmpv4Repr::DstUnreachable { header, data, .. }
            | Icmpv4Repr::TimeExceeded { header, data, .. } => {
                HEADER_LEN + header.buffer_len() + data.len()
            }
        }
    }

    /// Write the message and fill its checksum. The buffer must be exactly
    /// `buffer_len()` bytes (the checksum covers the whole buffer).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Icmpv4Packet<T>) {
        let (ty, code) = match *self {
            Icmpv4Repr::EchoRequest { .. } => (Icmpv4Message::EchoRequest, 0),
            Icmpv4Repr::EchoReply { .. } => (Icmpv4Message::EchoReply, 0),
            Icmpv4Repr::DstUnreachable { reason, .. } => {
                (Icmpv4Message::DstUnreachable, reason.into())
            }
            Icmpv4Repr::TimeExceeded { reason, .. } => (Icmpv4Message::TimeExceeded, reason.into()),
        };
        packet.set_msg_type(ty);
        packet.set_msg_code(code);
        match *self {
            Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            }
            | Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                packet.set_echo_ident(ident);
                packet.set_echo_seq_no(seq_no);
                let d = packet.data_mut();
                let n = data.len().min(d.len());
                d[..n].copy_from_slice(&data[..n]);
            }
            Icmpv4Repr::DstUnreachable { header, data, .. }
            | Icmpv4Repr::TimeExceeded { header, data, .. } => {
                packet.set_echo_ident(0);
                packet.set_echo_seq_no(0);
                let d = packet.data_mut();
                let hl = header.buffer_len();
                if let Some(h) = d.get_mut(..hl) {
                    header.emit(&mut crate::ipv4::Ipv4Packet::new_unchecked(h));
                }
                if let Some(rest) = d.get_mut(hl..) {
                    let n = data.len().min(rest.len());
                    rest[..n].copy_from_slice(&data[..n]);
                }
            }
        }
        packet.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ip::IpProtocol;
    use crate::ipv4::Ipv4Packet;
    use core::net::Ipv4Addr;
    use std::vec::Vec;

    #[test]
    fn parse_linux_ping() {
        let frame = crate::ipv4::tests::linux_ping();
        let ip = Ipv4Packet::new_checked(&frame[..]).unwrap();
        assert!(ip.verify_checksum());
        let icmp = Icmpv4Packet::new_checked(ip.into_payload()).unwrap();
        assert_eq!(icmp.msg_type(), Icmpv4Message::EchoRequest);
        assert!(icmp.verify_checksum());
        let repr = Icmpv4Repr::parse(&icmp, ChecksumMode::Full).unwrap();
        match repr {
            Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => {
                assert_eq!((ident, seq_no), (0x0f2a, 1));
                assert_eq!(data.len(), 56);
                assert_eq!(data[16..], (0x10u8..0x38).collect::<Vec<_>>()[..]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn echo_round_trip() {
        let repr = Icmpv4Repr::EchoReply {
            ident: 0x1234,
            seq_no: 0xabcd,
            data: &[0xaa, 0x00, 0x00, 0xff],
        };
        let mut buf = std::vec![0u8; repr.buffer_len()];
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..]));
        // sum of words: 0x1234 + 0xabcd + 0xaa00 + 0x00ff = 0x16900 -> 0x6901; !0x6901 = 0x96fe
        assert_eq!(
            buf,
            [0x00, 0x00, 0x96, 0xfe, 0x12, 0x34, 0xab, 0xcd, 0xaa, 0x00, 0x00, 0xff]
        );
        let p = Icmpv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&p, ChecksumMode::Full).unwrap(), repr);
    }

    #[test]
    fn dst_unreachable_round_trip() {
        let header = Ipv4Repr {
            src_addr: Ipv4Addr::new(10, 0, 0, 2),
            dst_addr: Ipv4Addr::new(10, 0, 0, 1),
            next_header: IpProtocol::Udp,
            payload_len: 12,
            hop_limit: 64,
            dscp_ecn: 0,
            ident: 7,
            dont_frag: true,
        };
        let quoted = [0x30, 0x39, 0x00, 0x35, 0x00, 0x0c, 0x00, 0x00];
        let repr = Icmpv4Repr::DstUnreachable {
            reason: Icmpv4DstUnreachable::PortUnreachable,
            header,
            data: &quoted,
        };
        assert_eq!(repr.buffer_len(), 36);
        let mut buf = std::vec![0u8; 36];
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf[..8], [3, 3, buf[2], buf[3], 0, 0, 0, 0]);
        assert_eq!(buf[8], 0x45);
        assert_eq!(buf[28..], quoted);
        let p = Icmpv4Packet::new_checked(&buf[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(Icmpv4Repr::parse(&p, ChecksumMode::Full).unwrap(), repr);

        let te = Icmpv4Repr::TimeExceeded {
            reason: Icmpv4TimeExceeded::TtlExpired,
            header,
            data: &quoted,
        };
        te.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..]));
        let p = Icmpv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&p, ChecksumMode::Full).unwrap(), te);
    }

    #[test]
    fn truncated() {
        let buf = [8u8, 0, 0xf7, 0xff, 0, 0, 0, 0];
        for len in 0..HEADER_LEN {
            assert_eq!(
                Icmpv4Packet::new_checked(&buf[..len]).unwrap_err(),
                Error::Truncated
            );
        }
        let p = Icmpv4Packet::new_checked(&buf[..]).unwrap();
        assert!(Icmpv4Repr::parse(&p, ChecksumMode::Full).is_ok());
    }

    #[test]
    fn truncated_quoted_header() {
        let mut buf = [0u8; 20];
        buf[0] = 3;
        buf[8] = 0x45;
        Icmpv4Packet::new_unchecked(&mut buf[..]).fill_checksum();
        let p = Icmpv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(
            Icmpv4Repr::parse(&p, ChecksumMode::Full).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn bad_checksum() {
        let mut buf = [8u8, 0, 0xf7, 0xff, 0, 0, 0, 0];
        buf[7] = 1;
        let p = Icmpv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(
            Icmpv4Repr::parse(&p, ChecksumMode::Full).unwrap_err(),
            Error::BadChecksum
        );
        assert!(Icmpv4Repr::parse(&p, ChecksumMode::Offload).is_ok());
    }

    #[test]
    fn unsupported_and_bad_code() {
        let mut buf = [13u8, 0, 0, 0, 0, 0, 0, 0];
        Icmpv4Packet::new_unchecked(&mut buf[..]).fill_checksum();
        let p = Icmpv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(
            Icmpv4Repr::parse(&p, ChecksumMode::Full).unwrap_err(),
            Error::Unsupported
        );
        let mut buf = [8u8, 1, 0, 0, 0, 0, 0, 0];
        Icmpv4Packet::new_unchecked(&mut buf[..]).fill_checksum();
        let p = Icmpv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(
            Icmpv4Repr::parse(&p, ChecksumMode::Full).unwrap_err(),
            Error::Malformed
        );
    }

    #[test]
    fn fuzz_no_panic() {
        let frame = crate::ipv4::tests::linux_ping();
        crate::test_util::fuzz(5, 4000, &frame[20..], |b| {
            // half the time make the checksum right so parse goes deeper
            if b.len() >= 8 && b[1] & 1 == 0 {
                Icmpv4Packet::new_unchecked(&mut b[..]).fill_checksum();
            }
            if let Ok(p) = Icmpv4Packet::new_checked(&b[..]) {
                let _ = Icmpv4Repr::parse(&p, ChecksumMode::Full);
                let _ = Icmpv4Repr::parse(&p, ChecksumMode::Offload);
                let _ = p.data();
            }
        });
    }
}
