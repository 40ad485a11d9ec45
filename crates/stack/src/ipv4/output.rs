//! IPv4 output: route, pick the source, resolve the neighbor, fragment.
//!
//! The fast path writes the whole frame straight into the link's buffer:
//! Ethernet and IP headers here, the payload by the caller's `fill`.  Only a
//! packet that must wait for ARP or be fragmented is built in memory first.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr};

use wire::ethernet::{self, EtherType, EthernetAddress, EthernetRepr};
use wire::ip::IpProtocol;
use wire::ipv4::{self, Ipv4Packet, Ipv4Repr};
use wire::ChecksumMode;

use crate::ethernet::{send_frame, transmit_tagged};
use crate::iface::{IfaceId, LinkOut};
use crate::ip::IpLayer;
use crate::neighbor::Lookup;
use crate::sink::{FrameSink, TxMeta};
use crate::time::Instant;

/// The header fields of a packet to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Send {
    /// The source address; `None` picks the outgoing interface's.
    pub src: Option<Ipv4Addr>,
    pub dst: Ipv4Addr,
    pub protocol: IpProtocol,
    /// `None` uses `net.inet.ip.ttl`.
    pub ttl: Option<u8>,
    pub dscp_ecn: u8,
    pub dont_frag: bool,
    /// Send out of this interface (for limited broadcast); `None` routes.
    pub iface: Option<IfaceId>,
    /// The payload is TCP or UDP whose checksum the link may finish: `fill`
    /// is then told [`ChecksumMode::Offload`] when the interface offloads
    /// and the packet leaves whole.
    pub l4_checksum: bool,
    /// The sending socket's SO_MARK (0: none), which policy rules may
    /// route by.
    pub mark: u32,
}

impl Ipv4Send {
    pub fn new(dst: Ipv4Addr, protocol: IpProtocol) -> Self {
        Ipv4Send {
            src: None,
            dst,
            protocol,
            ttl: None,
            dscp_ecn: 0,
            dont_frag: false,
            iface: None,
            l4_checksum: false,
            mark: 0,
        }
    }
}

/// Where a connection's packets go, looked up once and kept while the
/// interfaces, routes and neighbors stay as they were (their
/// [`IpLayer::path_epoch`]) and the neighbor's entry has not expired: a
/// segment of an established connection then needs no route and no
/// neighbor lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ipv4Path {
    epoch: u64,
    expires: Instant,
    dst: Ipv4Addr,
    iface: IfaceId,
    /// How frames leave (the port and the tag of a VLAN interface).
    out: LinkOut,
    /// Destination and source MAC, then the EtherType: the frame's first
    /// 14 bytes.
    eth: [u8; 14],
    mtu: usize,
    offload: bool,
    /// The largest TCP super-frame the link cuts itself (0: none).
    tso_max: usize,
}

impl Ipv4Path {
    /// What tells one lookup's result from another's: the epoch it was
    /// looked up in and the neighbor entry's expiry (within one epoch, the
    /// same pair means the same path).
    pub(crate) fn stamp(&self) -> (u64, Instant) {
        (self.epoch, self.expires)
    }

    /// How the packets leave: through which port, with which tag.
    pub(crate) fn out(&self) -> LinkOut {
        self.out
    }

    /// The frame's first 14 bytes: destination and source MAC, EtherType.
    pub(crate) fn eth(&self) -> &[u8; 14] {
        &self.eth
    }

    pub(crate) fn mtu(&self) -> usize {
        self.mtu
    }

    /// The interface finishes TCP and UDP checksums.
    pub(crate) fn offload(&self) -> bool {
        self.offload
    }

    /// The largest IP packet the interface takes as a TCP super-frame
    /// (0: none beyond the MTU). A super-frame's checksum is in the
    /// partial form whatever [`offload`](Self::offload) says: what cuts it
    /// (the NIC, the kernel, the engine's software GSO) finishes each
    /// segment's.
    pub(crate) fn tso_max(&self) -> usize {
        self.tso_max
    }
}

/// Why a packet could not be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    NoRoute,
    /// Larger than an IPv4 datagram can be, or than the link with DF set.
    TooBig,
    /// The link had no free buffer.
    NoBuffer,
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SendError::NoRoute => "no route to host",
            SendError::TooBig => "packet too big",
            SendError::NoBuffer => "no transmit buffer",
        })
    }
}

/// How the L4 checksum is written, and the mark the frame then carries.
fn checksum_mode(offload: bool) -> (TxMeta, ChecksumMode) {
    if offload {
        (
            TxMeta {
                csum_partial: true,
                ..TxMeta::default()
            },
            ChecksumMode::Offload,
        )
    } else {
        (TxMeta::default(), ChecksumMode::Full)
    }
}

/// The identification of an atomic datagram (DF set, not a fragment):
/// RFC 6864 4.1 gives the field no use but reassembly, and lets a source
/// set it to any value for such datagrams; zero, as FreeBSD does
/// (`net.inet.ip.rfc6864`), which saves a counter per packet.  Receivers'
/// segment coalescing (Linux GRO) takes a fixed identification with DF.
pub(crate) const ATOMIC_IDENT: u16 = 0;

impl IpLayer {
    /// The header of a packet from `src` as `hdr` asks, with the next
    /// identification when it may be fragmented.
    fn ipv4_repr(&mut self, src: Ipv4Addr, hdr: &Ipv4Send, payload_len: usize) -> Ipv4Repr {
        Ipv4Repr {
            src_addr: src,
            dst_addr: hdr.dst,
            next_header: hdr.protocol,
            payload_len,
            hop_limit: hdr.ttl.unwrap_or(self.cfg.ip_ttl),
            dscp_ecn: hdr.dscp_ecn,
            ident: if hdr.dont_frag {
                ATOMIC_IDENT
            } else {
                self.next_ident()
            },
            dont_frag: hdr.dont_frag,
        }
    }

    /// Where a packet to `dst` leaves: interface, the neighbor to send to,
    /// and whether it is a link broadcast (routed in the main FIB).
    pub(crate) fn ipv4_route(
        &self,
        dst: Ipv4Addr,
        iface: Option<IfaceId>,
    ) -> Option<(IfaceId, Ipv4Addr, bool)> {
        self.ipv4_route_from(None, 0, dst, iface)
    }

    /// [`ipv4_route`](Self::ipv4_route) of a packet from `src` of a socket
    /// marked `mark`, in the FIB the policy rules give them.
    pub(crate) fn ipv4_route_from(
        &self,
        src: Option<Ipv4Addr>,
        mark: u32,
        dst: Ipv4Addr,
        iface: Option<IfaceId>,
    ) -> Option<(IfaceId, Ipv4Addr, bool)> {
        if dst.is_broadcast() {
            let id = iface.or_else(|| self.ifaces.first().map(|i| i.id))?;
            return Some((id, dst, true));
        }
        if self.source_gone(src.map(IpAddr::V4)) {
            return None;
        }
        let hop = self
            .fib_for(src.map(IpAddr::V4), mark)
            .next_hop(IpAddr::V4(dst))?;
        let IpAddr::V4(neighbor) = hop.neighbor else {
            return None;
        };
        let broadcast = self
            .interface(hop.iface)
            .is_some_and(|i| i.is_broadcast(dst));
        Some((hop.iface, neighbor, broadcast))
    }

    /// The largest datagram toward `dst` out of `iface`: the link's MTU,
    /// or less where a fragmentation needed said so (RFC 1191).
    pub(crate) fn ipv4_path_mtu(&self, iface: IfaceId, dst: Ipv4Addr, now: Instant) -> usize {
        let link = self.interface(iface).map_or(576, |i| i.mtu);
        self.pmtu4.get(dst, now).map_or(link, |m| m.min(link))
    }

    /// The path to `dst` of packets from `src` marked `mark`, if it can be
    /// cached: routed (not broadcast) and its next hop resolved.
    pub(crate) fn ipv4_path(
        &self,
        src: Ipv4Addr,
        mark: u32,
        dst: Ipv4Addr,
        now: Instant,
    ) -> Option<Ipv4Path> {
        let (iface, neighbor, broadcast) = self.ipv4_route_from(Some(src), mark, dst, None)?;
        if broadcast {
            return None;
        }
        let ifc = self.interface(iface)?;
        let (mac, expires) = self.neighbors.resolved(iface, IpAddr::V4(neighbor), now)?;
        let mut eth = [0u8; 14];
        eth[..6].copy_from_slice(&mac);
        eth[6..12].copy_from_slice(&ifc.mac);
        eth[12..].copy_from_slice(&0x0800u16.to_be_bytes());
        Some(Ipv4Path {
            epoch: self.path_epoch(),
            expires,
            dst,
            iface,
            out: ifc.link_out(),
            eth,
            mtu: ifc.mtu,
            offload: ifc.tx_checksum_offload,
            tso_max: ifc.tso_max,
        })
    }

    /// Refreshes `slot` for a packet from `src` to `dst` at `now`: keeps a
    /// path that is still right, looks it up again otherwise.  A slot
    /// belongs to one connection, whose source does not change, and
    /// whose owner empties it when the connection's mark changes.
    #[inline(always)]
    pub(crate) fn refresh_path(
        &self,
        slot: &mut Option<Ipv4Path>,
        (src, mark): (Ipv4Addr, u32),
        dst: Ipv4Addr,
        now: Instant,
    ) {
        let fresh = matches!(slot, Some(p) if p.epoch == self.path_epoch() && now < p.expires && p.dst == dst);
        if !fresh {
            self.lookup_path(slot, (src, mark), dst, now);
        }
    }

    #[inline(never)]
    fn lookup_path(
        &self,
        slot: &mut Option<Ipv4Path>,
        (src, mark): (Ipv4Addr, u32),
        dst: Ipv4Addr,
        now: Instant,
    ) {
        *slot = self.ipv4_path(src, mark, dst, now);
    }

    /// Sends a TCP or UDP packet from `src` along a fresh cached path
    /// (the caller refreshed it), with DF set: the Ethernet and IPv4
    /// headers are written in place and `fill` writes the `payload_len`
    /// bytes after them, told how to write the L4 checksum. `None`
    /// (nothing sent or counted) when the packet is larger than the path's
    /// MTU: the caller takes [`IpLayer::send_ipv4`].
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(crate) fn send_ipv4_on(
        &mut self,
        path: &Ipv4Path,
        src: Ipv4Addr,
        protocol: IpProtocol,
        ttl: Option<u8>,
        dscp_ecn: u8,
        payload_len: usize,
        mut fill: impl FnMut(&mut [u8], ChecksumMode),
        sink: &mut dyn FrameSink,
    ) -> Option<Result<(), SendError>> {
        let total = ipv4::HEADER_LEN + payload_len;
        if total > path.mtu {
            return None;
        }
        let mut h = [0u8; ipv4::HEADER_LEN];
        h[0] = 0x45;
        h[1] = dscp_ecn;
        h[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        // An atomic datagram.
        h[4..6].copy_from_slice(&ATOMIC_IDENT.to_be_bytes());
        h[6] = 0x40; // DF, offset 0
        h[8] = ttl.unwrap_or(self.cfg.ip_ttl);
        h[9] = protocol.into();
        h[12..16].copy_from_slice(&src.octets());
        h[16..20].copy_from_slice(&path.dst.octets());
        let c = !wire::checksum::data(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        let (meta, mode) = checksum_mode(path.offload);
        let len = ethernet::HEADER_LEN + total;
        let eth = &path.eth;
        let mut wrote = false;
        let mut write = |buf: &mut [u8]| {
            // A sink lends at least `len` bytes; a shorter buffer is left
            // unwritten (and counted) rather than indexed past.
            let Some(buf) = buf.get_mut(..len) else {
                return;
            };
            wrote = true;
            let (head, rest) = buf.split_at_mut(ethernet::HEADER_LEN);
            head.copy_from_slice(eth);
            let (ip, payload) = rest.split_at_mut(ipv4::HEADER_LEN);
            ip.copy_from_slice(&h);
            fill(payload, mode);
        };
        // A port's own interface hands the frame over as it is; a VLAN
        // interface's frame takes its tag on the way.
        let sent = match path.out.vid {
            None => sink.transmit_with(path.iface, len, meta, &mut write),
            Some(_) => match self.links.get_mut(usize::from(path.iface.0)) {
                Some(link) => transmit_tagged(link, sink, len, meta, &mut write),
                None => false,
            },
        };
        if sent && !wrote {
            self.counters.tx_sink_short_buffer += 1;
        }
        if sent {
            self.counters.tx_frames += 1;
            self.counters.tx_bytes += len as u64;
            Some(Ok(()))
        } else {
            self.counters.tx_drop_no_buffer += 1;
            Some(Err(SendError::NoBuffer))
        }
    }

    /// The source address a packet to `dst` of a socket marked `mark`
    /// would leave with.
    pub(crate) fn ipv4_source_for(&self, dst: Ipv4Addr, mark: u32) -> Option<Ipv4Addr> {
        let (iface, _, _) = self.ipv4_route_from(None, mark, dst, None)?;
        self.interface(iface).and_then(|i| i.addr())
    }

    /// Sends an IPv4 packet whose `payload_len` bytes of payload `fill`
    /// writes; `fill` also gets the chosen source address and how to write
    /// the L4 checksum (always `Full` unless `hdr.l4_checksum`).
    pub(crate) fn send_ipv4(
        &mut self,
        now: Instant,
        hdr: Ipv4Send,
        payload_len: usize,
        fill: &mut dyn FnMut(&mut [u8], Ipv4Addr, ChecksumMode),
        sink: &mut dyn FrameSink,
    ) -> Result<(), SendError> {
        let Some((iface, neighbor, broadcast)) =
            self.ipv4_route_from(hdr.src, hdr.mark, hdr.dst, hdr.iface)
        else {
            self.counters.tx_drop_no_route += 1;
            return Err(SendError::NoRoute);
        };
        let Some(ifc) = self.interface(iface) else {
            return Err(SendError::NoRoute);
        };
        let (our_mac, mtu) = (ifc.mac, ifc.mtu);
        let offload = hdr.l4_checksum && ifc.tx_checksum_offload;
        let Some(src) = hdr.src.or(ifc.addr()) else {
            self.counters.tx_drop_no_source += 1;
            return Err(SendError::NoRoute);
        };
        let total = ipv4::HEADER_LEN + payload_len;
        if total > usize::from(u16::MAX) || (hdr.dont_frag && total > mtu) {
            self.counters.tx_drop_too_big += 1;
            return Err(SendError::TooBig);
        }
        let repr = self.ipv4_repr(src, &hdr, payload_len);
        let dst_mac = if broadcast {
            Some(EthernetAddress::BROADCAST)
        } else {
            match self.neighbors.lookup(iface, IpAddr::V4(neighbor), now) {
                Lookup::Found(mac) => Some(EthernetAddress(mac)),
                Lookup::Pending | Lookup::Missing => None,
            }
        };
        if let (Some(mac), true) = (dst_mac, total <= mtu) {
            let header = EthernetRepr {
                src_addr: EthernetAddress(our_mac),
                dst_addr: mac,
                ethertype: EtherType::Ipv4,
            };
            let (mut meta, mode) = checksum_mode(offload);
            meta.reserve = hdr.protocol == IpProtocol::Icmp;
            let sent = send_frame(
                &mut self.counters,
                &mut self.links,
                sink,
                iface,
                header,
                total,
                meta,
                &mut |buf| {
                    let mut packet = Ipv4Packet::new_unchecked(&mut buf[..total]);
                    repr.emit(&mut packet);
                    fill(packet.payload_mut(), src, mode);
                },
            );
            return if sent {
                Ok(())
            } else {
                Err(SendError::NoBuffer)
            };
        }
        // The slow path: build the packet, then fragment it or hold it.
        // Its checksum is whole: fragments cannot be finished by the link,
        // and a held packet may leave after the interface changed.
        let mut packet_bytes = vec![0u8; total];
        {
            let mut packet = Ipv4Packet::new_unchecked(&mut packet_bytes[..]);
            repr.emit(&mut packet);
            fill(packet.payload_mut(), src, ChecksumMode::Full);
        }
        match dst_mac {
            Some(mac) => {
                if self.transmit_ipv4_packet(iface, mac, &packet_bytes, sink) {
                    Ok(())
                } else {
                    Err(SendError::NoBuffer)
                }
            }
            None => {
                let held = self
                    .neighbors
                    .hold(iface, IpAddr::V4(neighbor), now, packet_bytes);
                self.counters.arp_held += 1;
                if held.dropped_oldest {
                    self.counters.arp_hold_overflow += 1;
                }
                if held.evicted {
                    self.counters.arp_cache_evictions += 1;
                }
                if held.send_request {
                    self.send_arp_request(iface, neighbor, sink);
                }
                Ok(())
            }
        }
    }

    /// Sends a whole IPv4 packet built earlier, in fragments if it exceeds
    /// the link's MTU (RFC 791 3.2).  Returns whether every piece went out.
    pub(crate) fn transmit_ipv4_packet(
        &mut self,
        iface: IfaceId,
        dst_mac: EthernetAddress,
        packet: &[u8],
        sink: &mut dyn FrameSink,
    ) -> bool {
        let Some(ifc) = self.interface(iface) else {
            return false;
        };
        let mtu = ifc.mtu;
        let header = EthernetRepr {
            src_addr: EthernetAddress(ifc.mac),
            dst_addr: dst_mac,
            ethertype: EtherType::Ipv4,
        };
        // An ICMP packet (held for ARP, say) may take the link's reserve,
        // as it would have when sent at once: a ping answered while data
        // has drained the pool must not be lost on its way out of the hold.
        let meta = TxMeta {
            reserve: packet.get(9) == Some(&u8::from(IpProtocol::Icmp)),
            ..TxMeta::default()
        };
        if packet.len() <= mtu {
            return send_frame(
                &mut self.counters,
                &mut self.links,
                sink,
                iface,
                header,
                packet.len(),
                meta,
                &mut |buf| buf[..packet.len()].copy_from_slice(packet),
            );
        }
        let Ok(view) = Ipv4Packet::new_checked(packet) else {
            return false;
        };
        if view.dont_frag() {
            self.counters.tx_drop_too_big += 1;
            return false;
        }
        let header_len = usize::from(view.header_len());
        let payload = view.payload();
        // Every fragment but the last carries a multiple of 8 bytes.
        let chunk = (mtu - header_len) / 8 * 8;
        if chunk == 0 {
            self.counters.tx_drop_too_big += 1;
            return false;
        }
        let (eth, ip_header) = (header, &packet[..header_len]);
        let mut all_sent = true;
        for (i, data) in payload.chunks(chunk).enumerate() {
            let offset = i * chunk;
            let more = offset + data.len() < payload.len();
            let len = header_len + data.len();
            let sent = send_frame(
                &mut self.counters,
                &mut self.links,
                sink,
                iface,
                eth,
                len,
                meta,
                &mut |buf| {
                    buf[..header_len].copy_from_slice(ip_header);
                    buf[header_len..len].copy_from_slice(data);
                    let mut frag = Ipv4Packet::new_unchecked(&mut buf[..len]);
                    frag.set_total_len(len as u16);
                    frag.set_more_frags(more);
                    frag.set_frag_offset(offset as u16);
                    frag.fill_checksum();
                },
            );
            if sent {
                self.counters.ipv4_fragments_sent += 1;
            }
            all_sent &= sent;
        }
        all_sent
    }
}
