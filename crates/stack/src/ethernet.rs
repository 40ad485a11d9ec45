//! Ethernet and 802.1Q: the first step of every received frame, and the last
//! of every sent one.

use wire::ethernet::{self, EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
use wire::vlan::VlanHeader;

use crate::counters::Counters;
use crate::iface::IfaceId;
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
        let Some((our_mac, ipv6_on)) = self
            .ip
            .interface(iface)
            .map(|i| (EthernetAddress(i.mac), i.ipv6.is_some()))
        else {
            self.ip.counters.rx_drop_eth_not_for_us += 1;
            return;
        };
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            self.ip.counters.rx_drop_eth_truncated += 1;
            return;
        };
        let dst = eth.dst_addr();
        // IPv6 multicast (33:33:…, RFC 2464 7) goes to the IPv6 layer,
        // which keeps the groups the interface listens to.
        let ipv6_group = ipv6_on && dst.0[..2] == [0x33, 0x33];
        if dst != our_mac && !dst.is_broadcast() && !ipv6_group {
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
            EtherType::Arp => self.ip.arp_input(now, iface, payload, sink),
            EtherType::Ipv4 => self.ipv4_input(now, iface, dst.is_broadcast(), payload, meta, sink),
            EtherType::Ipv6 => self.ipv6_input(now, iface, payload, meta, sink),
            EtherType::Vlan | EtherType::QinQ => self.vlan_input(payload),
            EtherType::Unknown(_) => self.ip.counters.rx_drop_eth_unknown_type += 1,
        }
    }

    /// No VLAN interface exists yet, so a tagged frame is never ours; the
    /// reason is told apart for the counters.
    fn vlan_input(&mut self, payload: &[u8]) {
        match VlanHeader::new_checked(payload) {
            Err(_) => self.ip.counters.rx_drop_vlan_truncated += 1,
            Ok(tag) => match tag.ethertype() {
                EtherType::Vlan | EtherType::QinQ => self.ip.counters.rx_drop_vlan_nested += 1,
                _ => self.ip.counters.rx_drop_vlan_unknown_id += 1,
            },
        }
    }
}

/// Sends one Ethernet frame whose payload `fill` writes, counting it.
pub(crate) fn send_frame(
    counters: &mut Counters,
    sink: &mut dyn FrameSink,
    iface: IfaceId,
    header: EthernetRepr,
    payload_len: usize,
    meta: TxMeta,
    fill: &mut dyn FnMut(&mut [u8]),
) -> bool {
    let len = ethernet::HEADER_LEN + payload_len;
    let sent = sink.transmit_with(iface, len, meta, &mut |buf: &mut [u8]| {
        let mut frame = EthernetFrame::new_unchecked(&mut buf[..len]);
        header.emit(&mut frame);
        fill(frame.payload_mut());
    });
    if sent {
        counters.tx_frames += 1;
        counters.tx_bytes += len as u64;
    } else {
        counters.tx_drop_no_buffer += 1;
    }
    sent
}
