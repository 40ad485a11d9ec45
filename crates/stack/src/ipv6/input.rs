//! IPv6 input: validate the fixed header, decide whether the packet is
//! ours, walk the extension headers, reassemble, hand the payload to its
//! protocol.

use core::net::{IpAddr, Ipv6Addr};

use wire::ip::IpProtocol;
use wire::ipv6::{
    walk_extension_headers, walk_extension_headers_reporting, Ipv6HeaderChain, Ipv6Packet,
};
use wire::tcp::TcpPacket;
use wire::Error as WireError;

use crate::iface::IfaceId;
use crate::ip::L4Datagram;
use crate::reassembly::ReassemblyError;
use crate::sink::{FrameSink, RxMeta};
use crate::stack::Stack;
use crate::tcp::fast_input::verified_meta;
use crate::time::Instant;

/// A received IPv6 packet, whole (reassembled if it came in fragments),
/// its extension headers walked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ipv6Datagram<'a> {
    pub iface: IfaceId,
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    /// The upper-layer protocol.
    pub protocol: IpProtocol,
    pub hop_limit: u8,
    /// The packet as received from its fixed header on (the first
    /// fragment, for a reassembled one), for quoting in ICMPv6 errors.
    pub packet: &'a [u8],
    /// The upper-layer header and data.
    pub payload: &'a [u8],
    /// Where the field that named `protocol` is in `packet` (`None` when
    /// it lies in a reassembled part that `packet` does not show).
    pub next_header_at: Option<usize>,
    pub meta: RxMeta,
}

impl Ipv6Datagram<'_> {
    /// What TCP and UDP see of it.
    pub(crate) fn l4(&self) -> L4Datagram<'_> {
        L4Datagram {
            iface: self.iface,
            src: IpAddr::V6(self.src),
            dst: IpAddr::V6(self.dst),
            broadcast: self.dst.is_multicast(),
            payload: self.payload,
            meta: self.meta,
            // The traffic class straddles the first two bytes; its low
            // two bits are the ECN field.
            ecn: self.packet.get(1).map_or(0, |b| (b >> 4) & 3),
        }
    }
}

/// The fewest bytes of an upper-layer header a first fragment must carry
/// (RFC 7112: the whole header chain is in the first fragment).
fn upper_header_len(p: IpProtocol) -> usize {
    match p {
        IpProtocol::Tcp => 20,
        IpProtocol::Udp | IpProtocol::Icmpv6 => 8,
        _ => 0,
    }
}

impl Stack {
    pub(crate) fn ipv6_input(
        &mut self,
        now: Instant,
        iface: IfaceId,
        bytes: &[u8],
        meta: RxMeta,
        sink: &mut dyn FrameSink,
    ) {
        let packet = match Ipv6Packet::new_checked(bytes) {
            Ok(p) if p.version() == 6 => p,
            Ok(_) => {
                self.ip.counters.rx_drop_ipv6_malformed += 1;
                return;
            }
            Err(WireError::Truncated) => {
                self.ip.counters.rx_drop_ipv6_truncated += 1;
                return;
            }
            Err(_) => {
                self.ip.counters.rx_drop_ipv6_malformed += 1;
                return;
            }
        };
        let Some(v6) = self.ip.interface(iface).and_then(|i| i.ipv6.as_ref()) else {
            self.ip.counters.rx_drop_ipv6_disabled += 1;
            return;
        };
        let (src, dst) = (packet.src_addr(), packet.dst_addr());
        // RFC 4291 2.5.2, 2.5.3, 2.7: never a multicast or loopback source;
        // the unspecified source only for neighbor discovery (checked once
        // the protocol is known).
        if src.is_multicast() || src.is_loopback() || dst.is_loopback() || dst.is_unspecified() {
            self.ip.counters.rx_drop_ipv6_bad_src += 1;
            return;
        }
        // A tentative address takes nothing but neighbor discovery (RFC
        // 4862 5.4), which `ndp.rs` tells apart.  The interface's own
        // addresses first: another interface's is the rare case.
        let (ours, tentative) = if dst.is_multicast() {
            (v6.listens_to(dst), false)
        } else {
            match v6.find(dst) {
                Some(a) if a.is_preferred() => (true, false),
                Some(a) if a.is_tentative() => (true, true),
                _ => (self.ip.is_local_ipv6(dst), false),
            }
        };
        if !ours {
            self.ip.counters.rx_drop_ipv6_not_for_us += 1;
            return;
        }
        let whole = &bytes[..wire::ipv6::HEADER_LEN + usize::from(packet.payload_len())];
        let payload = packet.payload();
        let next_header = packet.next_header();
        let chain = match next_header {
            // The usual packet has no extension header: nothing to walk.
            IpProtocol::Tcp | IpProtocol::Udp | IpProtocol::Icmpv6 => Ok(Ipv6HeaderChain {
                next_header,
                offset: 0,
                fragment: None,
                next_header_at: 6,
            }),
            _ => walk_extension_headers_reporting(next_header, payload),
        };
        let chain = match chain {
            Ok(c) => c,
            Err(e) => {
                if e.error == WireError::Unsupported {
                    self.ip.counters.rx_drop_ipv6_ext_unsupported += 1;
                } else {
                    self.ip.counters.rx_drop_ipv6_ext_malformed += 1;
                }
                if let Some(problem) = e.problem {
                    // RFC 8200 4: the sender hears where the problem is.
                    let d = Ipv6Datagram {
                        iface,
                        src,
                        dst,
                        protocol: packet.next_header(),
                        hop_limit: packet.hop_limit(),
                        packet: whole,
                        payload,
                        next_header_at: None,
                        meta,
                    };
                    self.ip
                        .send_icmpv6_error(now, &d, Icmpv6Error::HeaderProblem(problem), sink);
                }
                return;
            }
        };
        // The walk checked every header against the bytes present; a chain
        // ending past them is malformed all the same, never a panic.
        let Some(upper) = payload.get(chain.offset..) else {
            self.ip.counters.rx_drop_ipv6_ext_malformed += 1;
            return;
        };
        let mut d = Ipv6Datagram {
            iface,
            src,
            dst,
            protocol: chain.next_header,
            hop_limit: packet.hop_limit(),
            packet: whole,
            payload: upper,
            next_header_at: Some(chain.next_header_at),
            meta,
        };
        if tentative && d.protocol != IpProtocol::Icmpv6 {
            self.ip.counters.rx_drop_ipv6_not_for_us += 1;
            return;
        }
        let Some(frag) = chain.fragment else {
            return self.ipv6_deliver(now, &d, sink);
        };
        // Fragments are never partially checksummed: the sender had to
        // compute the checksum before it could split the datagram.
        d.meta = RxMeta {
            csum_partial: false,
        };
        if frag.is_atomic() {
            // RFC 6946: an atomic fragment is processed alone, apart from
            // any reassembly under way.
            return self.ipv6_after_fragment(now, &d, d.payload, sink);
        }
        if frag.frag_offset == 0 && !first_fragment_holds_chain(frag.next_header, d.payload) {
            self.ip.counters.rx_drop_ipv6_frag_chain_split += 1;
            return;
        }
        let key = (src, dst, frag.ident);
        match self.ip.reass_v6.insert(
            now,
            key,
            usize::from(frag.frag_offset),
            d.payload,
            frag.more_frags,
        ) {
            Ok(None) => {
                self.ip.counters.rx_accept_ipv6_fragment += 1;
                if frag.frag_offset == 0 {
                    self.ip.reass_v6.keep_first(&key, iface, whole);
                }
            }
            Ok(Some(reassembled)) => {
                self.ip.counters.ipv6_reassembled += 1;
                self.ipv6_after_fragment(now, &d, &reassembled, sink);
            }
            Err(ReassemblyError::Malformed) => self.ip.counters.rx_drop_ipv6_frag_malformed += 1,
            Err(ReassemblyError::Overlap) => self.ip.counters.rx_drop_ipv6_frag_overlap += 1,
            Err(ReassemblyError::TooBig) => self.ip.counters.rx_drop_ipv6_frag_too_big += 1,
            Err(ReassemblyError::NoRoom) => self.ip.counters.rx_drop_ipv6_frag_no_room += 1,
            Err(ReassemblyError::TooManyFragments) => {
                self.ip.counters.rx_drop_ipv6_frag_too_many += 1
            }
        }
    }

    /// A fragmentable part, whole: its own extension headers walked, then
    /// delivered.  `d.protocol` is the fragment header's next header.
    fn ipv6_after_fragment(
        &mut self,
        now: Instant,
        d: &Ipv6Datagram<'_>,
        fragmentable: &[u8],
        sink: &mut dyn FrameSink,
    ) {
        match walk_extension_headers(d.protocol, fragmentable) {
            Ok(Ipv6HeaderChain {
                fragment: Some(_), ..
            }) => self.ip.counters.rx_drop_ipv6_ext_malformed += 1,
            Ok(chain) => match fragmentable.get(chain.offset..) {
                Some(upper) => {
                    // With no extension header in the fragmentable part,
                    // the fragment header named the upper layer.
                    let named_by_fragment_header = chain.offset == 0;
                    let whole = Ipv6Datagram {
                        protocol: chain.next_header,
                        payload: upper,
                        next_header_at: d.next_header_at.filter(|_| named_by_fragment_header),
                        ..*d
                    };
                    self.ipv6_deliver(now, &whole, sink);
                }
                None => self.ip.counters.rx_drop_ipv6_ext_malformed += 1,
            },
            Err(WireError::Unsupported) => self.ip.counters.rx_drop_ipv6_ext_unsupported += 1,
            Err(_) => self.ip.counters.rx_drop_ipv6_ext_malformed += 1,
        }
    }

    fn ipv6_deliver(&mut self, now: Instant, d: &Ipv6Datagram<'_>, sink: &mut dyn FrameSink) {
        if d.src.is_unspecified() && d.protocol != IpProtocol::Icmpv6 {
            self.ip.counters.rx_drop_ipv6_bad_src += 1;
            return;
        }
        match d.protocol {
            IpProtocol::Icmpv6 => self.icmpv6_input(now, d, sink),
            IpProtocol::Udp => {
                if !self.udp_input(now, &d.l4(), sink) {
                    // RFC 4443 3.1: port unreachable.
                    self.ip
                        .send_icmpv6_error(now, d, Icmpv6Error::PortUnreachable, sink);
                }
            }
            IpProtocol::Tcp => self.ipv6_tcp_input(now, d, sink),
            IpProtocol::Ipv6NoNxt => self.ip.counters.rx_accept_ipv6_no_next_header += 1,
            _ => {
                self.ip.counters.rx_drop_ipv6_unknown_protocol += 1;
                // RFC 8200 4: parameter problem, unrecognized next header.
                self.ip
                    .send_icmpv6_error(now, d, Icmpv6Error::UnknownNextHeader, sink);
            }
        }
    }
}

impl Stack {
    /// TCP over IPv6: header prediction first, as over IPv4.
    fn ipv6_tcp_input(&mut self, now: Instant, d: &Ipv6Datagram<'_>, sink: &mut dyn FrameSink) {
        if !self.ip.cfg.tcp.fast_path || d.dst.is_multicast() {
            return self.tcp_input_general(now, &d.l4(), sink);
        }
        let verified = d.meta.csum_partial
            || TcpPacket::new_unchecked(d.payload)
                .verify_checksum(&IpAddr::V6(d.src), &IpAddr::V6(d.dst));
        // A Congestion Experienced mark is the general path's to see.
        let ce = d.packet.get(1).is_some_and(|b| (b >> 4) & 3 == 3);
        if verified && !ce && self.tcp_input_predicted_v6(now, (d.src, d.dst), d.payload, sink) {
            return;
        }
        let l4 = L4Datagram {
            meta: verified_meta(d.meta, verified),
            ..d.l4()
        };
        self.tcp_input_general(now, &l4, sink);
    }
}

/// RFC 7112: the first fragment holds every extension header and the
/// upper-layer header.
fn first_fragment_holds_chain(next: IpProtocol, data: &[u8]) -> bool {
    match walk_extension_headers(next, data) {
        Ok(chain) => {
            chain.fragment.is_none()
                && data.len() >= chain.offset + upper_header_len(chain.next_header)
        }
        Err(_) => false,
    }
}

pub(crate) use super::icmp::Icmpv6Error;
