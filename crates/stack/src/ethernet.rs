//! Ethernet and 802.1Q: the first step of every received frame, and the last
//! of every sent one.

use wire::ethernet::{self, EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
use wire::vlan::{self, VlanHeader};

use crate::counters::Counters;
use crate::iface::{IfaceId, LinkState};
use crate::sink::{FrameSink, RxMeta, TxMeta};
use crate::stack::Stack;
use crate::time::Instant;

impl Stack {
    /// Handles one received frame.  Every frame ends in exactly one outcome
    /// counter (see [`Counters`]).
    pub fn receive(
        &mut self,
        now: Instant,
        iface: IfaceId,
        frame: &[u8],
        meta: RxMeta,
        sink: &mut dyn FrameSink,
    ) {
        self.ip.counters.rx_frames += 1;
        self.ip.counters.rx_bytes += frame.len() as u64;
        if self.ip.cfg.tcp.fast_path && self.tcp_receive_early(now, iface, frame, meta, sink) {
            return;
        }
        let Some(port) = self.ip.interface(iface) else {
            self.ip.counters.rx_drop_eth_not_for_us += 1;
            return;
        };
        let (our_mac, bare) = (EthernetAddress(port.mac), port.bare());
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            self.ip.counters.rx_drop_eth_truncated += 1;
            return;
        };
        let dst = eth.dst_addr();
        // IPv6 multicast (33:33:…, RFC 2464 7) goes to the IPv6 layer,
        // which keeps the groups the interface listens to.
        if dst != our_mac
            && !dst.is_broadcast()
            && !(dst.0[..2] == [0x33, 0x33] && self.ip.listens_ipv6(iface))
        {
            self.ip.counters.rx_drop_eth_not_for_us += 1;
            return;
        }
        let src = eth.src_addr();
        if src.is_multicast() {
            self.ip.counters.rx_drop_eth_src_multicast += 1;
            return;
        }
        let payload = eth.payload();
        match eth.ethertype() {
            t @ (EtherType::Vlan | EtherType::QinQ) => {
                let tag = VlanFrame {
                    port: iface,
                    service: t == EtherType::QinQ,
                    broadcast: dst.is_broadcast(),
                };
                self.vlan_input(now, tag, payload, meta, sink)
            }
            // A port that only carries VLAN interfaces has no address for
            // an untagged frame.
            _ if bare => self.ip.counters.rx_drop_untagged_no_address += 1,
            t => self.l3_input(now, iface, t, dst.is_broadcast(), payload, meta, sink),
        }
    }

    /// The protocol under the Ethernet header (or under its VLAN tag) on
    /// interface `iface`.  Inlined into both callers: the untagged path
    /// pays no call for it.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn l3_input(
        &mut self,
        now: Instant,
        iface: IfaceId,
        ethertype: EtherType,
        broadcast: bool,
        payload: &[u8],
        meta: RxMeta,
        sink: &mut dyn FrameSink,
    ) {
        match ethertype {
            EtherType::Arp => self.ip.arp_input(now, iface, payload, sink),
            EtherType::Ipv4 => self.ipv4_input(now, iface, broadcast, payload, meta, sink),
            EtherType::Ipv6 => self.ipv6_input(now, iface, payload, meta, sink),
            EtherType::Vlan | EtherType::QinQ => self.ip.counters.rx_drop_vlan_nested += 1,
            EtherType::Unknown(_) => self.ip.counters.rx_drop_eth_unknown_type += 1,
        }
    }

    /// An 802.1Q-tagged frame on port `port`: stripped of its tag and
    /// handed to the port's VLAN interface of that id, or dropped (counted)
    /// when the port has none.  VLAN id 0 marks a priority-tagged frame of
    /// the port itself (802.1Q 9.6).  An 802.1ad service tag outermost is
    /// no interface's.
    #[inline(never)]
    fn vlan_input(
        &mut self,
        now: Instant,
        frame: VlanFrame,
        payload: &[u8],
        meta: RxMeta,
        sink: &mut dyn FrameSink,
    ) {
        let VlanFrame {
            port,
            service,
            broadcast,
        } = frame;
        let tag = match VlanHeader::new_checked(payload) {
            Ok(tag) => tag,
            Err(_) => {
                self.ip.counters.rx_drop_vlan_truncated += 1;
                return;
            }
        };
        let (vid, inner) = (tag.vid(), tag.ethertype());
        if matches!(inner, EtherType::Vlan | EtherType::QinQ) {
            self.ip.counters.rx_drop_vlan_nested += 1;
            return;
        }
        if service {
            self.ip.counters.rx_drop_vlan_service_tag += 1;
            return;
        }
        let Some(ifc) = self.ip.interface(port) else {
            return;
        };
        let iface = if vid == 0 {
            if ifc.bare() {
                self.ip.counters.rx_drop_untagged_no_address += 1;
                return;
            }
            port
        } else {
            match ifc.vlan_iface(vid) {
                Some(id) => id,
                None => {
                    self.ip.counters.rx_drop_vlan_unknown_id += 1;
                    return;
                }
            }
        };
        if let Some(link) = self.ip.links.get_mut(usize::from(iface.0)) {
            if !link.up {
                link.traffic.rx_drop_down += 1;
                self.ip.counters.rx_drop_vlan_down += 1;
                return;
            }
            link.traffic.rx_frames += 1;
            link.traffic.rx_bytes += (ethernet::HEADER_LEN + payload.len()) as u64;
        }
        self.l3_input(now, iface, inner, broadcast, tag.payload(), meta, sink);
    }
}

/// Where a tagged frame came from, for [`Stack::vlan_input`].
#[derive(Debug, Clone, Copy)]
struct VlanFrame {
    port: IfaceId,
    /// The outer tag is 802.1ad's (0x88a8).
    service: bool,
    /// Sent to the Ethernet broadcast address.
    broadcast: bool,
}

/// Hands a frame of `len` bytes for interface `iface` to the sink: as it
/// is for a port's own interface, or out of the VLAN interface's port
/// with its 802.1Q tag inserted after the addresses.  `fill` writes the
/// untagged frame (addresses, EtherType, payload) either way.  Counts
/// nothing but a VLAN interface's traffic.
#[inline]
pub(crate) fn transmit(
    links: &mut [LinkState],
    sink: &mut dyn FrameSink,
    iface: IfaceId,
    len: usize,
    meta: TxMeta,
    fill: &mut dyn FnMut(&mut [u8]),
) -> bool {
    match links.get_mut(usize::from(iface.0)) {
        Some(link) if link.out.vid.is_some() => transmit_tagged(link, sink, len, meta, fill),
        _ => sink.transmit_with(iface, len, meta, fill),
    }
}

/// [`transmit`] on a VLAN interface: the frame, written 4 bytes in, has
/// its addresses moved to the front and the tag written between them and
/// the EtherType.  A VLAN interface that is down takes the frame and
/// drops it, counted as its own (as the engine does for a port that is
/// down): the stack above sees it sent.
#[inline(never)]
pub(crate) fn transmit_tagged(
    link: &mut LinkState,
    sink: &mut dyn FrameSink,
    len: usize,
    meta: TxMeta,
    fill: &mut dyn FnMut(&mut [u8]),
) -> bool {
    if !link.up {
        link.traffic.tx_drop_down += 1;
        return true;
    }
    let vid = link.out.vid.unwrap_or(0);
    let tagged = len + vlan::HEADER_LEN;
    let sent = sink.transmit_with(link.out.port, tagged, meta, &mut |buf: &mut [u8]| {
        let Some(frame) = buf.get_mut(..tagged) else {
            return;
        };
        fill(&mut frame[vlan::HEADER_LEN..]);
        frame.copy_within(vlan::HEADER_LEN..vlan::HEADER_LEN + 12, 0);
        frame[12..14].copy_from_slice(&u16::from(EtherType::Vlan).to_be_bytes());
        let mut tag = VlanHeader::new_unchecked(&mut frame[14..]);
        tag.set_vid(vid);
        tag.set_pcp(0);
        tag.set_dei(false);
    });
    if sent {
        link.traffic.tx_frames += 1;
        link.traffic.tx_bytes += tagged as u64;
    } else {
        link.traffic.tx_drop_no_buffer += 1;
    }
    sent
}

/// Sends one Ethernet frame whose payload `fill` writes, counting it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn send_frame(
    counters: &mut Counters,
    links: &mut [LinkState],
    sink: &mut dyn FrameSink,
    iface: IfaceId,
    header: EthernetRepr,
    payload_len: usize,
    meta: TxMeta,
    fill: &mut dyn FnMut(&mut [u8]),
) -> bool {
    let len = ethernet::HEADER_LEN + payload_len;
    let mut wrote = false;
    let sent = transmit(links, sink, iface, len, meta, &mut |buf: &mut [u8]| {
        // A sink lends at least `len` bytes; a shorter buffer is left
        // unwritten (and counted) rather than indexed past.
        let Some(buf) = buf.get_mut(..len) else {
            return;
        };
        wrote = true;
        let mut frame = EthernetFrame::new_unchecked(buf);
        header.emit(&mut frame);
        fill(frame.payload_mut());
    });
    if sent && !wrote {
        counters.tx_sink_short_buffer += 1;
    }
    if sent {
        counters.tx_frames += 1;
        counters.tx_bytes += len as u64;
    } else {
        counters.tx_drop_no_buffer += 1;
    }
    sent
}
