//! IPv4 input: validate, decide whether the packet is ours, reassemble,
//! hand the payload to its protocol.

use core::net::{IpAddr, Ipv4Addr};

use wire::ip::IpProtocol;
use wire::ipv4::Ipv4Packet;
use wire::Error as WireError;

use crate::iface::IfaceId;
use crate::ip::L4Datagram;
use crate::reassembly::ReassemblyError;
use crate::sink::{FrameSink, RxMeta};
use crate::stack::Stack;
use crate::tcp::icmp_error::QuotedSegment;
use crate::time::Instant;

/// A received IPv4 datagram, whole (reassembled if it came in fragments).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ipv4Datagram<'a> {
    pub iface: IfaceId,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub protocol: IpProtocol,
    /// Sent to a broadcast address (no errors are sent back for these).
    pub broadcast: bool,
    /// The IP header as received, for quoting in ICMP errors.
    pub header: &'a [u8],
    pub payload: &'a [u8],
    pub meta: RxMeta,
}

impl Ipv4Datagram<'_> {
    /// What TCP and UDP see of it.
    pub(crate) fn l4(&self) -> L4Datagram<'_> {
        L4Datagram {
            iface: self.iface,
            src: IpAddr::V4(self.src),
            dst: IpAddr::V4(self.dst),
            broadcast: self.broadcast,
            payload: self.payload,
            meta: self.meta,
            ecn: self.header.get(1).map_or(0, |tos| tos & 3),
        }
    }
}

impl Stack {
    pub(crate) fn ipv4_input(
        &mut self,
        now: Instant,
        iface: IfaceId,
        link_broadcast: bool,
        bytes: &[u8],
        meta: RxMeta,
        sink: &mut dyn FrameSink,
    ) {
        let packet = match Ipv4Packet::new_checked(bytes) {
            Ok(p) => p,
            Err(WireError::Truncated) => {
                self.ip.counters.rx_drop_ipv4_truncated += 1;
                return;
            }
            Err(_) => {
                self.ip.counters.rx_drop_ipv4_malformed += 1;
                return;
            }
        };
        let Some(ifc) = self.ip.interface(iface) else {
            return;
        };
        if !ifc.rx_ip_checksum_offload && !packet.verify_checksum() {
            self.ip.counters.rx_drop_ipv4_bad_checksum += 1;
            return;
        }
        let (src, dst) = (packet.src_addr(), packet.dst_addr());
        // RFC 1122 3.2.1.3: a source must be a unicast host address.
        if src.is_broadcast()
            || src.is_multicast()
            || src.is_unspecified()
            || ifc.is_broadcast(src)
            || src.is_loopback()
        {
            self.ip.counters.rx_drop_ipv4_bad_src += 1;
            return;
        }
        if dst.is_multicast() {
            self.ip.counters.rx_drop_ipv4_multicast += 1;
            return;
        }
        let broadcast = ifc.is_broadcast(dst);
        // The weak host model: an address of any interface is ours.
        if !broadcast && !self.ip.is_local_addr(dst) {
            self.ip.counters.rx_drop_ipv4_not_for_us += 1;
            return;
        }
        let header_len = usize::from(packet.header_len());
        let header = &bytes[..header_len.min(bytes.len())];
        let datagram = Ipv4Datagram {
            iface,
            src,
            dst,
            protocol: packet.next_header(),
            broadcast: broadcast || link_broadcast,
            header,
            payload: packet.payload(),
            meta,
        };
        if !packet.is_fragment() {
            self.ipv4_deliver(now, &datagram, sink);
            return;
        }
        let key = (src, dst, u8::from(datagram.protocol), packet.ident());
        let offset = usize::from(packet.frag_offset());
        match self
            .ip
            .reass_v4
            .insert(now, key, offset, datagram.payload, packet.more_frags())
        {
            Ok(None) => self.ip.counters.rx_accept_ipv4_fragment += 1,
            Ok(Some(whole)) => {
                self.ip.counters.ipv4_reassembled += 1;
                // Fragments are never partially checksummed: the sender had
                // to compute the checksum before it could split the datagram.
                let meta = RxMeta {
                    csum_partial: false,
                };
                self.ipv4_deliver(
                    now,
                    &Ipv4Datagram {
                        payload: &whole,
                        meta,
                        ..datagram
                    },
                    sink,
                );
            }
            Err(ReassemblyError::Malformed) => self.ip.counters.rx_drop_ipv4_frag_malformed += 1,
            Err(ReassemblyError::Overlap) => self.ip.counters.rx_drop_ipv4_frag_overlap += 1,
            Err(ReassemblyError::TooBig) => self.ip.counters.rx_drop_ipv4_frag_too_big += 1,
            Err(ReassemblyError::NoRoom) => self.ip.counters.rx_drop_ipv4_frag_no_room += 1,
            Err(ReassemblyError::TooManyFragments) => {
                self.ip.counters.rx_drop_ipv4_frag_too_many += 1
            }
        }
    }

    fn ipv4_deliver(&mut self, now: Instant, d: &Ipv4Datagram<'_>, sink: &mut dyn FrameSink) {
        match d.protocol {
            IpProtocol::Icmp => {
                let Some(e) = self.ip.icmpv4_input(now, d, sink) else {
                    return;
                };
                // Errors about TCP reach their connection, about UDP a
                // connected socket.
                let (src, dst) = (IpAddr::V4(e.header.src_addr), IpAddr::V4(e.header.dst_addr));
                match e.header.next_header {
                    IpProtocol::Tcp => {
                        let quoted = QuotedSegment {
                            src,
                            dst,
                            tcp: e.data,
                        };
                        self.tcp_icmp_error(now, d.iface, e.kind, quoted, sink);
                    }
                    IpProtocol::Udp => self.udp_icmp_error(e.kind, src, dst, e.data),
                    _ => {}
                }
            }
            IpProtocol::Udp => {
                if !self.udp_input(now, &d.l4(), sink) {
                    self.ip.send_icmpv4_unreachable(now, d, 3, sink);
                }
            }
            IpProtocol::Tcp => self.tcp_input(now, d, sink),
            _ => {
                self.ip.counters.rx_drop_ipv4_unknown_protocol += 1;
                // RFC 1122 3.2.2.1: protocol unreachable.
                self.ip.send_icmpv4_unreachable(now, d, 2, sink);
            }
        }
    }
}
