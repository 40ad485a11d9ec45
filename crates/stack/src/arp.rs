//! ARP (RFC 826): answering for our addresses, learning neighbors, asking.

use core::net::{IpAddr, Ipv4Addr};

use wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use wire::ethernet::{EtherType, EthernetAddress, EthernetRepr};
use wire::Error as WireError;

use crate::ethernet::send_frame;
use crate::iface::IfaceId;
use crate::ip::IpLayer;
use crate::sink::{FrameSink, TxMeta};
use crate::time::Instant;

impl IpLayer {
    pub(crate) fn arp_input(
        &mut self,
        now: Instant,
        iface: IfaceId,
        payload: &[u8],
        sink: &mut dyn FrameSink,
    ) {
        let repr = match ArpPacket::new_checked(payload).and_then(|p| ArpRepr::parse(&p)) {
            Ok(r) => r,
            Err(WireError::Unsupported) => {
                self.counters.rx_drop_arp_unsupported += 1;
                return;
            }
            Err(_) => {
                self.counters.rx_drop_arp_malformed += 1;
                return;
            }
        };
        let ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr: sha,
            source_protocol_addr: spa,
            target_protocol_addr: tpa,
            ..
        } = repr;
        let Some(ifc) = self.interface(iface) else {
            return;
        };
        let our_mac = ifc.mac;
        // A sender claiming a broadcast or multicast address, or one of our
        // own addresses from another host, must not enter the cache.
        if !sha.is_unicast()
            || sha.0 == our_mac
            || spa.is_broadcast()
            || spa.is_multicast()
            || ifc.is_broadcast(spa)
            || ifc.has_addr(spa)
        {
            self.counters.rx_drop_arp_bad_sender += 1;
            return;
        }
        let for_us = ifc.has_addr(tpa);
        let gratuitous = spa == tpa;
        if !matches!(operation, ArpOperation::Request | ArpOperation::Reply) {
            self.counters.rx_drop_arp_unsupported += 1;
            return;
        }
        // RFC 826: update an entry we have; create one only when the packet
        // is for us.  An all-zero sender is an address probe (RFC 5227).
        if !spa.is_unspecified() {
            let learned = self
                .neighbors
                .learn(iface, IpAddr::V4(spa), sha.0, now, for_us);
            if learned.changed {
                self.counters.arp_address_changed += 1;
            }
            if learned.evicted {
                self.counters.arp_cache_evictions += 1;
            }
            for packet in learned.released {
                self.transmit_ipv4_packet(iface, sha, &packet, sink);
            }
        }
        match operation {
            ArpOperation::Request if for_us => {
                self.counters.rx_accept_arp_request += 1;
                let reply = ArpRepr::EthernetIpv4 {
                    operation: ArpOperation::Reply,
                    source_hardware_addr: EthernetAddress(our_mac),
                    source_protocol_addr: tpa,
                    target_hardware_addr: sha,
                    target_protocol_addr: spa,
                };
                if self.send_arp(iface, sha, &reply, sink) {
                    self.counters.arp_replies_sent += 1;
                }
            }
            ArpOperation::Request if gratuitous => self.counters.rx_accept_arp_request += 1,
            ArpOperation::Reply if for_us || gratuitous => self.counters.rx_accept_arp_reply += 1,
            _ => self.counters.rx_drop_arp_not_for_us += 1,
        }
    }

    /// Broadcasts a request for `target` from the interface's address that
    /// shares its subnet (its primary address otherwise).  A request for one
    /// of our own addresses is a gratuitous ARP.
    pub(crate) fn send_arp_request(
        &mut self,
        iface: IfaceId,
        target: Ipv4Addr,
        sink: &mut dyn FrameSink,
    ) -> bool {
        let Some(ifc) = self.interface(iface) else {
            return false;
        };
        let source = if ifc.has_addr(target) {
            target
        } else {
            match ifc.addr() {
                Some(a) => a,
                // No address to ask from (a port that only carries VLANs).
                None => return false,
            }
        };
        let request = ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: EthernetAddress(ifc.mac),
            source_protocol_addr: source,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: target,
        };
        let sent = self.send_arp(iface, EthernetAddress::BROADCAST, &request, sink);
        if sent {
            self.counters.arp_requests_sent += 1;
        }
        sent
    }

    fn send_arp(
        &mut self,
        iface: IfaceId,
        dst: EthernetAddress,
        repr: &ArpRepr,
        sink: &mut dyn FrameSink,
    ) -> bool {
        let Some(src) = self.interface(iface).map(|i| i.mac) else {
            return false;
        };
        let header = EthernetRepr {
            src_addr: EthernetAddress(src),
            dst_addr: dst,
            ethertype: EtherType::Arp,
        };
        send_frame(
            &mut self.counters,
            &mut self.links,
            sink,
            iface,
            header,
            repr.buffer_len(),
            TxMeta {
                reserve: true,
                ..TxMeta::default()
            },
            &mut |buf| repr.emit(&mut ArpPacket::new_unchecked(buf)),
        )
    }
}
