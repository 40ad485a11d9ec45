//! ICMPv4 (RFC 792, RFC 1122 3.2.2): echo, and the errors we send.

use wire::icmpv4::{Icmpv4DstUnreachable, Icmpv4Packet, Icmpv4Repr};
use wire::ip::IpProtocol;
use wire::ipv4::Ipv4Repr;
use wire::{ChecksumMode, Error as WireError};

use crate::ip::IpLayer;
use crate::ipv4::Ipv4Datagram;
use crate::ipv4::Ipv4Send;
use crate::sink::FrameSink;
use crate::socket::SocketError;
use crate::tcp::icmp_error::{frag_needed_mtu, IcmpErrorKind};
use crate::time::Instant;

/// How much of the offending datagram an error quotes: as much as keeps the
/// error within the 576 bytes every host accepts (RFC 1812 4.3.2.3).
const MAX_QUOTE: usize = 576 - 20 - 8;

/// An error about a datagram we sent, for its transport protocol: what it
/// says, the quoted IP header and the bytes that followed it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Icmpv4Error<'a> {
    pub kind: IcmpErrorKind,
    pub header: Ipv4Repr,
    pub data: &'a [u8],
}

/// What destination unreachable with `reason` means to a transport
/// (RFC 1122 4.2.3.9: codes 2 and 3 are hard, 4 asks for a smaller
/// datagram, the rest are soft; the errno as Linux's `icmp_err_convert`).
fn unreachable_kind(
    reason: Icmpv4DstUnreachable,
    next_hop_mtu: u16,
    header: &Ipv4Repr,
) -> IcmpErrorKind {
    use Icmpv4DstUnreachable as U;
    match reason {
        U::ProtoUnreachable | U::PortUnreachable => IcmpErrorKind::Refused,
        U::FragRequired => {
            let total = (header.buffer_len() + header.payload_len).min(usize::from(u16::MAX));
            IcmpErrorKind::PathMtu(frag_needed_mtu(next_hop_mtu, total as u16))
        }
        U::NetUnreachable | U::DstNetUnknown | U::NetProhibited | U::NetUnreachToS => {
            IcmpErrorKind::Soft(SocketError::NetworkUnreachable)
        }
        _ => IcmpErrorKind::Soft(SocketError::HostUnreachable),
    }
}

impl IpLayer {
    /// Answers echo; returns an error about one of our datagrams for its
    /// transport to act on.
    pub(crate) fn icmpv4_input<'a>(
        &mut self,
        now: Instant,
        d: &Ipv4Datagram<'a>,
        sink: &mut dyn FrameSink,
    ) -> Option<Icmpv4Error<'a>> {
        let packet = match Icmpv4Packet::new_checked(d.payload) {
            Ok(p) => p,
            Err(_) => {
                self.counters.rx_drop_icmp_malformed += 1;
                return None;
            }
        };
        let mode = if d.meta.csum_partial {
            ChecksumMode::Offload
        } else {
            ChecksumMode::Full
        };
        match Icmpv4Repr::parse(&packet, mode) {
            Ok(Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            }) => {
                // RFC 1122 3.2.2.6 lets a host ignore echo to broadcast, as
                // Linux does by default (smurf amplification).
                if d.broadcast {
                    self.counters.rx_drop_icmp_to_broadcast += 1;
                    return None;
                }
                self.counters.rx_accept_icmp_echo_request += 1;
                let reply = Icmpv4Repr::EchoReply {
                    ident,
                    seq_no,
                    data,
                };
                let hdr = Ipv4Send {
                    src: Some(d.dst),
                    ..Ipv4Send::new(d.src, IpProtocol::Icmp)
                };
                let len = reply.buffer_len();
                let sent = self.send_ipv4(
                    now,
                    hdr,
                    len,
                    &mut |buf, _, _| reply.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..len])),
                    sink,
                );
                if sent.is_ok() {
                    self.counters.icmp_echo_replies_sent += 1;
                }
            }
            Ok(Icmpv4Repr::EchoReply { .. }) => self.counters.rx_accept_icmp_echo_reply += 1,
            Ok(Icmpv4Repr::DstUnreachable {
                reason,
                header,
                data,
            }) => {
                self.counters.rx_accept_icmp_error += 1;
                let kind = unreachable_kind(reason, packet.next_hop_mtu(), &header);
                return Some(Icmpv4Error { kind, header, data });
            }
            // RFC 1122 4.2.3.9: soft, as Linux (EHOSTUNREACH).
            Ok(Icmpv4Repr::TimeExceeded { header, data, .. }) => {
                self.counters.rx_accept_icmp_error += 1;
                let kind = IcmpErrorKind::Soft(SocketError::HostUnreachable);
                return Some(Icmpv4Error { kind, header, data });
            }
            // Source quench among them: RFC 9293 MUST-55 (RFC 6633)
            // ignores it.
            Err(WireError::Unsupported) => self.counters.rx_accept_icmp_other += 1,
            Err(WireError::BadChecksum) => self.counters.rx_drop_icmp_bad_checksum += 1,
            Err(_) => self.counters.rx_drop_icmp_malformed += 1,
        }
        None
    }

    /// Sends destination unreachable with `code` about datagram `d`, unless
    /// RFC 1122 3.2.2 forbids it (broadcast, non-first fragment, an ICMP
    /// error) or the rate limit (`net.inet.icmp.icmplim`) is reached.
    pub(crate) fn send_icmpv4_unreachable(
        &mut self,
        now: Instant,
        d: &Ipv4Datagram<'_>,
        code: u8,
        sink: &mut dyn FrameSink,
    ) {
        if d.broadcast {
            return;
        }
        let Ok((quoted, _)) = Ipv4Repr::parse_quoted(d.header) else {
            return;
        };
        if d.protocol == IpProtocol::Icmp
            && d.payload
                .first()
                .is_some_and(|&t| !matches!(t, 0 | 8 | 13 | 14 | 15 | 16 | 17 | 18))
        {
            return;
        }
        if !self.icmp_errors.take(now) {
            self.counters.icmp_errors_rate_limited += 1;
            return;
        }
        let quote_len = d
            .payload
            .len()
            .min(MAX_QUOTE.saturating_sub(quoted.buffer_len()));
        let header = Ipv4Repr {
            payload_len: d.payload.len(),
            ..quoted
        };
        let error = Icmpv4Repr::DstUnreachable {
            reason: Icmpv4DstUnreachable::from(code),
            header,
            data: &d.payload[..quote_len],
        };
        let len = error.buffer_len();
        let hdr = Ipv4Send {
            src: Some(d.dst),
            ..Ipv4Send::new(d.src, IpProtocol::Icmp)
        };
        let sent = self.send_ipv4(
            now,
            hdr,
            len,
            &mut |buf, _, _| error.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..len])),
            sink,
        );
        if sent.is_ok() {
            self.counters.icmp_errors_sent += 1;
        }
    }
}
