//! ICMPv6 (RFC 4443): echo, the errors we send, packet too big (RFC 8201),
//! and the hand-off of neighbor discovery to `ndp.rs`.

use wire::icmpv6::{
    Icmpv6DstUnreachable, Icmpv6Packet, Icmpv6ParamProblem, Icmpv6Repr, Icmpv6TimeExceeded,
    MAX_ERROR_LEN,
};
use wire::ip::IpProtocol;
use wire::ipv6::{HeaderProblem, Ipv6Repr};
use wire::{ChecksumMode, Error as WireError};

use crate::iface::IfaceId;
use crate::ip::IpLayer;
use crate::ipv6::{Ipv6Datagram, Ipv6Send};
use crate::sink::{FrameSink, RxMeta};
use crate::socket::SocketError;
use crate::stack::Stack;
use crate::tcp::icmp_error::{IcmpErrorKind, QuotedSegment};
use crate::time::Instant;

/// An error we send about a received packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Icmpv6Error {
    /// Destination unreachable, port unreachable: no UDP socket.
    PortUnreachable,
    /// Parameter problem, unrecognized next header.
    UnknownNextHeader,
    /// Parameter problem found walking the extension headers.
    HeaderProblem(HeaderProblem),
    /// Time exceeded: a datagram's fragments did not all arrive in time
    /// (sent about its first fragment).
    ReassemblyTimeExceeded,
}

/// NDP messages are valid only from the link itself (RFC 4861 6.1, 7.1).
const NDP_HOP_LIMIT: u8 = 255;

impl Stack {
    pub(crate) fn icmpv6_input(
        &mut self,
        now: Instant,
        d: &Ipv6Datagram<'_>,
        sink: &mut dyn FrameSink,
    ) {
        let packet = match Icmpv6Packet::new_checked(d.payload) {
            Ok(p) => p,
            Err(_) => {
                self.ip.counters.rx_drop_icmpv6_malformed += 1;
                return;
            }
        };
        let mode = if d.meta.csum_partial {
            ChecksumMode::Offload
        } else {
            ChecksumMode::Full
        };
        let repr = match Icmpv6Repr::parse(&packet, &d.src, &d.dst, mode) {
            Ok(r) => r,
            Err(WireError::BadChecksum) => {
                self.ip.counters.rx_drop_icmpv6_bad_checksum += 1;
                return;
            }
            Err(WireError::Unsupported) => {
                // Multicast listener discovery and the rest: a host that
                // joins no routed group has nothing to do with them.
                self.ip.counters.rx_accept_icmpv6_other += 1;
                return;
            }
            Err(_) => {
                self.ip.counters.rx_drop_icmpv6_malformed += 1;
                return;
            }
        };
        let ndp = matches!(
            repr,
            Icmpv6Repr::RouterSolicit { .. }
                | Icmpv6Repr::RouterAdvert { .. }
                | Icmpv6Repr::NeighborSolicit { .. }
                | Icmpv6Repr::NeighborAdvert { .. }
                | Icmpv6Repr::Redirect { .. }
        );
        if ndp {
            if d.hop_limit != NDP_HOP_LIMIT {
                self.ip.counters.rx_drop_ndp_bad_hop_limit += 1;
                return;
            }
            return self.ip.ndp_input(now, d, &repr, sink);
        }
        if d.src.is_unspecified() {
            self.ip.counters.rx_drop_ipv6_bad_src += 1;
            return;
        }
        match repr {
            Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => {
                // Linux answers echo to a multicast group
                // (net.ipv6.icmp.echo_ignore_multicast is off); so do we,
                // from the receiving interface's own address.
                self.ip.counters.rx_accept_icmpv6_echo_request += 1;
                let reply = Icmpv6Repr::EchoReply {
                    ident,
                    seq_no,
                    data,
                };
                let hdr = Ipv6Send {
                    src: (!d.dst.is_multicast()).then_some(d.dst),
                    iface: Some(d.iface),
                    ..Ipv6Send::new(d.src, IpProtocol::Icmpv6)
                };
                let len = reply.buffer_len();
                let sent = self.ip.send_ipv6(
                    now,
                    hdr,
                    len,
                    &mut |buf, src, _| {
                        reply.emit(
                            &mut Icmpv6Packet::new_unchecked(&mut buf[..len]),
                            &src,
                            &d.src,
                        )
                    },
                    sink,
                );
                if sent.is_ok() {
                    self.ip.counters.icmpv6_echo_replies_sent += 1;
                }
            }
            Icmpv6Repr::EchoReply { .. } => self.ip.counters.rx_accept_icmpv6_echo_reply += 1,
            Icmpv6Repr::PktTooBig { mtu, header, data } => {
                self.ip.counters.rx_accept_icmpv6_pkt_too_big += 1;
                self.ipv6_path_mtu_lowered(now, d.iface, header, data, mtu as usize, sink);
            }
            Icmpv6Repr::DstUnreachable {
                reason,
                header,
                data,
            } => {
                self.ip.counters.rx_accept_icmpv6_error += 1;
                let kind = match reason {
                    Icmpv6DstUnreachable::PortUnreachable => IcmpErrorKind::Refused,
                    Icmpv6DstUnreachable::NoRoute => {
                        IcmpErrorKind::Soft(SocketError::NetworkUnreachable)
                    }
                    _ => IcmpErrorKind::Soft(SocketError::HostUnreachable),
                };
                self.icmpv6_error_to_transport(now, d.iface, kind, header, data, sink);
            }
            Icmpv6Repr::TimeExceeded { header, data, .. } => {
                self.ip.counters.rx_accept_icmpv6_error += 1;
                let kind = IcmpErrorKind::Soft(SocketError::HostUnreachable);
                self.icmpv6_error_to_transport(now, d.iface, kind, header, data, sink);
            }
            // The destination does not know TCP: IPv6's protocol
            // unreachable.  Other parameter problems are about headers we
            // wrote as every packet is written: nothing to change.
            Icmpv6Repr::ParamProblem {
                reason: Icmpv6ParamProblem::UnrecognizedNxtHdr,
                header,
                data,
                ..
            } => {
                self.ip.counters.rx_accept_icmpv6_error += 1;
                let kind = IcmpErrorKind::Refused;
                self.icmpv6_error_to_transport(now, d.iface, kind, header, data, sink);
            }
            _ => self.ip.counters.rx_accept_icmpv6_error += 1,
        }
    }

    /// An error quoting a packet of ours: to its TCP connection if it was
    /// a TCP segment, to a connected UDP socket if a datagram (right after
    /// the fixed header: we send no extension headers before either).
    fn icmpv6_error_to_transport(
        &mut self,
        now: Instant,
        iface: crate::iface::IfaceId,
        kind: IcmpErrorKind,
        header: Ipv6Repr,
        data: &[u8],
        sink: &mut dyn FrameSink,
    ) {
        if header.next_header == IpProtocol::Udp {
            let (src, dst) = (header.src_addr.into(), header.dst_addr.into());
            return self.udp_icmp_error(kind, src, dst, data);
        }
        if header.next_header != IpProtocol::Tcp {
            return;
        }
        let quoted = QuotedSegment {
            src: header.src_addr.into(),
            dst: header.dst_addr.into(),
            tcp: data,
        };
        self.tcp_icmp_error(now, iface, kind, quoted, sink);
    }

    /// A packet too big about a packet of ours to `header.dst_addr`: the
    /// path MTU goes down and TCP's connections there send smaller
    /// segments.
    fn ipv6_path_mtu_lowered(
        &mut self,
        now: Instant,
        iface: crate::iface::IfaceId,
        header: Ipv6Repr,
        data: &[u8],
        mtu: usize,
        sink: &mut dyn FrameSink,
    ) {
        // Only about packets we could have sent (RFC 8201 4: the quote must
        // name one of our sources).
        if !self.ip.is_local_ipv6(header.src_addr) {
            self.ip.counters.icmpv6_pkt_too_big_ignored += 1;
            return;
        }
        // About a TCP segment: only if its connection has it in flight
        // (RFC 5927 7.2), which `tcp_icmp_error` checks.
        if header.next_header == IpProtocol::Tcp {
            let quoted = QuotedSegment {
                src: header.src_addr.into(),
                dst: header.dst_addr.into(),
                tcp: data,
            };
            return self.tcp_icmp_error(now, iface, IcmpErrorKind::PathMtu(mtu), quoted, sink);
        }
        let link = self.ip.interface(iface).map_or(0, |i| i.mtu);
        if self.ip.pmtu6.lower(header.dst_addr, mtu, link, now) {
            self.ip.counters.ipv6_path_mtu_lowered += 1;
            // Paths cached with the old MTU (TCP's templates) are stale.
            self.ip.iface_epoch += 1;
        }
        // Also when the MTU was known: a connection opened before it
        // was may still send larger segments.
        let pmtu = self.ip.ipv6_path_mtu(iface, header.dst_addr, now);
        self.tcp_path_mtu_changed(now, header.dst_addr.into(), pmtu, sink);
    }
}

impl IpLayer {
    /// RFC 8200 4.5: a datagram's time ran out after its first fragment
    /// came (`first`, the start of that packet, in on `iface`): its sender
    /// hears of it.
    pub(crate) fn send_reassembly_time_exceeded(
        &mut self,
        now: Instant,
        iface: IfaceId,
        first: &[u8],
        sink: &mut dyn FrameSink,
    ) {
        let Ok((header, _)) = Ipv6Repr::parse_quoted(first) else {
            return;
        };
        let d = Ipv6Datagram {
            iface,
            src: header.src_addr,
            dst: header.dst_addr,
            protocol: IpProtocol::Ipv6Frag,
            hop_limit: header.hop_limit,
            packet: first,
            payload: &[],
            next_header_at: None,
            meta: RxMeta::default(),
        };
        self.send_icmpv6_error(now, &d, Icmpv6Error::ReassemblyTimeExceeded, sink);
    }

    /// Sends `kind` about `d`, unless RFC 4443 2.4 (e) forbids it (about an
    /// error, to a multicast destination, from an address that is no
    /// host's) or the rate limit (`net.inet.icmp.icmplim`) is reached.
    pub(crate) fn send_icmpv6_error(
        &mut self,
        now: Instant,
        d: &Ipv6Datagram<'_>,
        kind: Icmpv6Error,
        sink: &mut dyn FrameSink,
    ) {
        // RFC 4443 2.4 (e.3): an option that says so is reported even
        // when the packet went to a multicast group.
        let to_multicast = matches!(kind, Icmpv6Error::HeaderProblem(p) if p.to_multicast);
        if (d.dst.is_multicast() && !to_multicast) || d.src.is_unspecified() || d.src.is_multicast()
        {
            return;
        }
        if d.protocol == IpProtocol::Icmpv6 && d.payload.first().is_some_and(|&t| t < 128) {
            return;
        }
        let Ok((header, after)) = Ipv6Repr::parse_quoted(d.packet) else {
            return;
        };
        if !self.icmp_errors.take(now) {
            self.counters.icmp_errors_rate_limited += 1;
            return;
        }
        let room = MAX_ERROR_LEN - wire::icmpv6::HEADER_LEN - header.buffer_len();
        let data = &after[..after.len().min(room)];
        // The pointer names the next header field that named the unknown
        // protocol; in a reassembled part the packet quoted does not
        // show, the start of the upper layer is the best we know.
        let named_at = d.next_header_at.map_or_else(
            || match d.packet.len() - d.payload.len() {
                40 => 6,
                upper_at => upper_at as u32,
            },
            |at| at as u32,
        );
        let error = match kind {
            Icmpv6Error::PortUnreachable => Icmpv6Repr::DstUnreachable {
                reason: Icmpv6DstUnreachable::PortUnreachable,
                header,
                data,
            },
            Icmpv6Error::UnknownNextHeader => Icmpv6Repr::ParamProblem {
                reason: Icmpv6ParamProblem::UnrecognizedNxtHdr,
                pointer: named_at,
                header,
                data,
            },
            Icmpv6Error::ReassemblyTimeExceeded => Icmpv6Repr::TimeExceeded {
                reason: Icmpv6TimeExceeded::FragReassemblyExceeded,
                header,
                data,
            },
            Icmpv6Error::HeaderProblem(p) => Icmpv6Repr::ParamProblem {
                reason: p.code.into(),
                pointer: p.pointer as u32,
                header,
                data,
            },
        };
        let len = error.buffer_len();
        let to = d.src;
        let hdr = Ipv6Send {
            // Never from a multicast group: then from our address there.
            src: (!d.dst.is_multicast()).then_some(d.dst),
            iface: Some(d.iface),
            ..Ipv6Send::new(to, IpProtocol::Icmpv6)
        };
        let sent = self.send_ipv6(
            now,
            hdr,
            len,
            &mut |buf, src, _| {
                error.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..len]), &src, &to)
            },
            sink,
        );
        if sent.is_ok() {
            self.counters.icmpv6_errors_sent += 1;
        }
    }
}
