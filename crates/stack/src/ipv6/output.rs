//! IPv6 output: route, pick the source (RFC 6724), resolve the neighbor
//! (RFC 4861 7.2), fragment at the source when the path is narrower than
//! the packet (RFC 8200 4.5).

use core::net::{IpAddr, Ipv6Addr};

use wire::ethernet::{EtherType, EthernetAddress, EthernetRepr};
use wire::ip::IpProtocol;
use wire::ipv6::{self, Ipv6FragmentHeader, Ipv6FragmentRepr, Ipv6Packet, Ipv6Repr};
use wire::ChecksumMode;

use crate::ethernet::send_frame;
use crate::iface::IfaceId;
use crate::ip::IpLayer;
use crate::ipv4::SendError;
use crate::ipv6::addr::{is_link_local, multicast_mac, select_source};
use crate::neighbor::Lookup;
use crate::sink::{FrameSink, TxMeta};
use crate::time::Instant;

/// The header fields of an IPv6 packet to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Send {
    /// The source address; `None` picks one (RFC 6724).
    pub src: Option<Ipv6Addr>,
    pub dst: Ipv6Addr,
    /// The upper-layer protocol (no extension headers are sent).
    pub protocol: IpProtocol,
    /// `None` uses `net.inet6.ip6.hlim`.
    pub hop_limit: Option<u8>,
    pub traffic_class: u8,
    /// Send out of this interface: needed for link-local and multicast
    /// destinations, which no route names; `None` routes.
    pub iface: Option<IfaceId>,
    /// The payload is TCP or UDP whose checksum the link may finish.
    pub l4_checksum: bool,
    /// May be split into fragments at the source when larger than the
    /// path; TCP sizes its segments to the path instead.
    pub may_fragment: bool,
    /// The sending socket's SO_MARK (0: none), which policy rules may
    /// route by.
    pub mark: u32,
}

impl Ipv6Send {
    pub fn new(dst: Ipv6Addr, protocol: IpProtocol) -> Self {
        Ipv6Send {
            src: None,
            dst,
            protocol,
            hop_limit: None,
            traffic_class: 0,
            iface: None,
            l4_checksum: false,
            may_fragment: true,
            mark: 0,
        }
    }
}

impl IpLayer {
    /// Whether `ip` is a usable IPv6 address of any interface.
    pub(crate) fn is_local_ipv6(&self, ip: Ipv6Addr) -> bool {
        self.ifaces
            .iter()
            .any(|i| i.ipv6.as_ref().is_some_and(|v6| v6.has_addr(ip)))
    }

    /// Where a packet to `dst` leaves: the interface and the neighbor to
    /// send it to (the destination itself on the link, else a router).
    pub(crate) fn ipv6_route(
        &self,
        dst: Ipv6Addr,
        iface: Option<IfaceId>,
    ) -> Option<(IfaceId, Ipv6Addr)> {
        self.ipv6_route_from(None, 0, dst, iface)
    }

    /// [`ipv6_route`](Self::ipv6_route) of a packet from `src` of a socket
    /// marked `mark`, in the FIB the policy rules give them.
    pub(crate) fn ipv6_route_from(
        &self,
        src: Option<Ipv6Addr>,
        mark: u32,
        dst: Ipv6Addr,
        iface: Option<IfaceId>,
    ) -> Option<(IfaceId, Ipv6Addr)> {
        if dst.is_multicast() || is_link_local(dst) {
            let id =
                iface.or_else(|| self.ifaces.iter().find(|i| i.ipv6.is_some()).map(|i| i.id))?;
            self.interface(id)?.ipv6.as_ref()?;
            return Some((id, dst));
        }
        if self.source_gone(src.map(IpAddr::V6)) {
            return None;
        }
        let hop = self
            .fib_for(src.map(IpAddr::V6), mark)
            .next_hop(IpAddr::V6(dst))?;
        let IpAddr::V6(neighbor) = hop.neighbor else {
            return None;
        };
        self.interface(hop.iface)?.ipv6.as_ref()?;
        Some((hop.iface, neighbor))
    }

    /// The source address a packet to `dst` of a socket marked `mark`
    /// would leave with.
    pub(crate) fn ipv6_source_for(&self, dst: Ipv6Addr, mark: u32) -> Option<Ipv6Addr> {
        let (iface, _) = self.ipv6_route_from(None, mark, dst, None)?;
        let v6 = self.interface(iface)?.ipv6.as_ref()?;
        select_source(&v6.addrs, dst)
    }

    /// The largest packet toward `dst` out of `iface`: the link's MTU, or
    /// less where a packet too big said so (RFC 8201).
    pub(crate) fn ipv6_path_mtu(&self, iface: IfaceId, dst: Ipv6Addr, now: Instant) -> usize {
        let link = self.interface(iface).map_or(ipv6::MIN_MTU, |i| i.mtu);
        self.pmtu6.get(dst, now).map_or(link, |m| m.min(link))
    }

    /// Sends an IPv6 packet whose `payload_len` bytes `fill` writes; `fill`
    /// also gets the chosen source and how to write the L4 checksum.
    pub(crate) fn send_ipv6(
        &mut self,
        now: Instant,
        hdr: Ipv6Send,
        payload_len: usize,
        fill: &mut dyn FnMut(&mut [u8], Ipv6Addr, ChecksumMode),
        sink: &mut dyn FrameSink,
    ) -> Result<(), SendError> {
        let Some((iface, neighbor)) = self.ipv6_route_from(hdr.src, hdr.mark, hdr.dst, hdr.iface)
        else {
            self.counters.tx_drop_no_route += 1;
            return Err(SendError::NoRoute);
        };
        let Some(ifc) = self.interface(iface) else {
            return Err(SendError::NoRoute);
        };
        let Some(v6) = ifc.ipv6.as_ref() else {
            return Err(SendError::NoRoute);
        };
        let Some(src) = hdr.src.or_else(|| select_source(&v6.addrs, hdr.dst)) else {
            self.counters.tx_drop_no_source += 1;
            return Err(SendError::NoRoute);
        };
        let (our_mac, offload) = (ifc.mac, hdr.l4_checksum && ifc.tx_checksum_offload);
        let mtu = self.ipv6_path_mtu(iface, hdr.dst, now);
        let total = ipv6::HEADER_LEN + payload_len;
        if payload_len > usize::from(u16::MAX) || (!hdr.may_fragment && total > mtu) {
            self.counters.tx_drop_too_big += 1;
            return Err(SendError::TooBig);
        }
        let repr = Ipv6Repr {
            src_addr: src,
            dst_addr: hdr.dst,
            next_header: hdr.protocol,
            payload_len,
            hop_limit: hdr.hop_limit.unwrap_or(self.cfg.ip6_hop_limit),
            traffic_class: hdr.traffic_class,
            flow_label: 0,
        };
        let keys = self.flow_label_key;
        let dst_mac = if hdr.dst.is_multicast() {
            Some(EthernetAddress(multicast_mac(hdr.dst)))
        } else {
            match self
                .neighbors
                .lookup_to_send(iface, IpAddr::V6(neighbor), now)
            {
                Lookup::Found(mac) => Some(EthernetAddress(mac)),
                Lookup::Pending | Lookup::Missing => None,
            }
        };
        let write = |buf: &mut [u8],
                     mode: ChecksumMode,
                     fill: &mut dyn FnMut(&mut [u8], Ipv6Addr, ChecksumMode)| {
            let mut packet = Ipv6Packet::new_unchecked(&mut buf[..total]);
            // The header first: the view finds the payload by its length.
            repr.emit(&mut packet);
            fill(packet.payload_mut(), src, mode);
            let label = flow_label(keys, src, hdr.dst, hdr.protocol, packet.payload_mut());
            packet.set_flow_label(label);
        };
        if let (Some(mac), true) = (dst_mac, total <= mtu) {
            let header = EthernetRepr {
                src_addr: EthernetAddress(our_mac),
                dst_addr: mac,
                ethertype: EtherType::Ipv6,
            };
            let (mut meta, mode) = if offload {
                (
                    TxMeta {
                        csum_partial: true,
                        ..TxMeta::default()
                    },
                    ChecksumMode::Offload,
                )
            } else {
                (TxMeta::default(), ChecksumMode::Full)
            };
            meta.reserve = hdr.protocol == IpProtocol::Icmpv6;
            let sent = send_frame(
                &mut self.counters,
                &mut self.links,
                sink,
                iface,
                header,
                total,
                meta,
                &mut |buf| write(buf, mode, fill),
            );
            return if sent {
                Ok(())
            } else {
                Err(SendError::NoBuffer)
            };
        }
        // Built in memory, whole checksum: to be fragmented, or held for
        // the neighbor.
        let mut packet = vec![0u8; total];
        write(&mut packet, ChecksumMode::Full, fill);
        match dst_mac {
            Some(mac) => {
                if self.transmit_ipv6_packet(now, iface, mac, &packet, sink) {
                    Ok(())
                } else {
                    Err(SendError::NoBuffer)
                }
            }
            None => {
                let held = self
                    .neighbors
                    .hold(iface, IpAddr::V6(neighbor), now, packet);
                self.counters.ndp_held += 1;
                if held.dropped_oldest {
                    self.counters.ndp_hold_overflow += 1;
                }
                if held.evicted {
                    self.counters.arp_cache_evictions += 1;
                }
                if held.send_request {
                    self.send_neighbor_solicit(now, iface, neighbor, sink);
                }
                Ok(())
            }
        }
    }

    /// Sends a whole IPv6 packet built earlier (no extension headers), in
    /// fragments when it exceeds the path (RFC 8200 4.5).  Returns whether
    /// every piece went out.
    pub(crate) fn transmit_ipv6_packet(
        &mut self,
        now: Instant,
        iface: IfaceId,
        dst_mac: EthernetAddress,
        packet: &[u8],
        sink: &mut dyn FrameSink,
    ) -> bool {
        let Some(ifc) = self.interface(iface) else {
            return false;
        };
        let header = EthernetRepr {
            src_addr: EthernetAddress(ifc.mac),
            dst_addr: dst_mac,
            ethertype: EtherType::Ipv6,
        };
        let Ok(view) = Ipv6Packet::new_checked(packet) else {
            return false;
        };
        let mtu = self.ipv6_path_mtu(iface, view.dst_addr(), now);
        if packet.len() <= mtu {
            return send_frame(
                &mut self.counters,
                &mut self.links,
                sink,
                iface,
                header,
                packet.len(),
                TxMeta::default(),
                &mut |buf| buf[..packet.len()].copy_from_slice(packet),
            );
        }
        let fixed = &packet[..ipv6::HEADER_LEN];
        let next = view.next_header();
        let data = view.payload();
        // Every fragment but the last carries a multiple of 8 bytes.
        let room = mtu.saturating_sub(ipv6::HEADER_LEN + ipv6::FRAGMENT_HEADER_LEN);
        let chunk = room / 8 * 8;
        if chunk == 0 {
            self.counters.tx_drop_too_big += 1;
            return false;
        }
        self.next_ip6_ident = self.next_ip6_ident.wrapping_add(1);
        let ident = self.next_ip6_ident;
        let mut all_sent = true;
        for (i, piece) in data.chunks(chunk).enumerate() {
            let offset = i * chunk;
            let more = offset + piece.len() < data.len();
            let head = ipv6::HEADER_LEN + ipv6::FRAGMENT_HEADER_LEN;
            let len = head + piece.len();
            let sent = send_frame(
                &mut self.counters,
                &mut self.links,
                sink,
                iface,
                header,
                len,
                TxMeta::default(),
                &mut |buf| {
                    buf[..ipv6::HEADER_LEN].copy_from_slice(fixed);
                    let mut p = Ipv6Packet::new_unchecked(&mut buf[..len]);
                    p.set_next_header(IpProtocol::Ipv6Frag);
                    p.set_payload_len((len - ipv6::HEADER_LEN) as u16);
                    Ipv6FragmentRepr {
                        next_header: next,
                        frag_offset: offset as u16,
                        more_frags: more,
                        ident,
                    }
                    .emit(&mut Ipv6FragmentHeader::new_unchecked(
                        &mut buf[ipv6::HEADER_LEN..head],
                    ));
                    buf[head..len].copy_from_slice(piece);
                },
            );
            if sent {
                self.counters.ipv6_fragments_sent += 1;
            }
            all_sent &= sent;
        }
        all_sent
    }
}

/// RFC 6437: a flow's label, the same for every packet of it and hard to
/// guess: a keyed hash of the addresses, the protocol and, for TCP and
/// UDP, the ports (the payload's first four bytes).
pub(crate) fn flow_label(
    key: u64,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    protocol: IpProtocol,
    payload: &[u8],
) -> u32 {
    let ports = match protocol {
        IpProtocol::Tcp | IpProtocol::Udp => payload
            .get(..4)
            .map_or(0, |p| u32::from_be_bytes([p[0], p[1], p[2], p[3]])),
        _ => 0,
    };
    let mut h = key ^ u64::from(u8::from(protocol));
    for word in [
        (u128::from(src) >> 64) as u64,
        u128::from(src) as u64,
        (u128::from(dst) >> 64) as u64,
        u128::from(dst) as u64,
        u64::from(ports),
    ] {
        h = (h ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^= h >> 29;
    }
    // Zero means "no label".
    ((h >> 20) as u32 & 0x000f_ffff).max(1)
}
