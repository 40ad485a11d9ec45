//! Neighbor discovery (RFC 4861) and duplicate address detection (RFC
//! 4862) for a host: answering solicitations for our addresses, learning
//! neighbors from their advertisements, asking, checking our addresses,
//! and taking a default router from router advertisements.

use core::net::{IpAddr, Ipv6Addr};

use wire::ethernet::EthernetAddress;
use wire::icmpv6::{Icmpv6Packet, Icmpv6Repr};
use wire::ip::IpProtocol;
use wire::ndp::{find_lladdr, source_lladdr_option, target_lladdr_option};

use crate::iface::IfaceId;
use crate::ip::IpLayer;
use crate::ipv6::addr::{
    is_link_local, select_source, solicited_node, AddrState, ALL_NODES, ALL_ROUTERS,
};
use crate::ipv6::{Ipv6Datagram, Ipv6Send};
use crate::neighbor::{Learned, NdpNews};
use crate::route::{IpCidr, Route};
use crate::sink::FrameSink;
use crate::time::{Duration, Instant};

/// RetransTimer (RFC 4861 10): between duplicate address probes.
pub(crate) const RETRANS_TIMER: Duration = Duration::from_secs(1);
/// RtrSolicitationInterval and MAX_RTR_SOLICITATIONS (RFC 4861 10).
pub(crate) const SOLICIT_INTERVAL: Duration = Duration::from_secs(4);
pub(crate) const MAX_SOLICITS: u8 = 3;

impl IpLayer {
    /// TCP's hint (RFC 4861 7.3.1): new data `src` sent to `dst` (on a
    /// socket marked `mark`) was acknowledged, so the first hop toward
    /// `dst` is reachable.
    pub(crate) fn confirm_forward_progress(
        &mut self,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        mark: u32,
        now: Instant,
    ) {
        let Some((iface, neighbor)) = self.ipv6_route_from(Some(src), mark, dst, None) else {
            return;
        };
        if self
            .neighbors
            .confirm_reachable(iface, IpAddr::V6(neighbor), now)
        {
            self.counters.ndp_reachable_by_upper_layer += 1;
        }
    }

    pub(crate) fn ndp_input(
        &mut self,
        now: Instant,
        d: &Ipv6Datagram<'_>,
        repr: &Icmpv6Repr<'_>,
        sink: &mut dyn FrameSink,
    ) {
        match *repr {
            Icmpv6Repr::NeighborSolicit {
                target_addr,
                options,
            } => self.neighbor_solicit_input(now, d, target_addr, options, sink),
            Icmpv6Repr::NeighborAdvert {
                target_addr,
                options,
                solicited,
                override_,
                ..
            } => {
                let news = NdpNews::Advert {
                    solicited,
                    override_,
                };
                self.neighbor_advert_input(now, d, target_addr, options, news, sink)
            }
            Icmpv6Repr::RouterAdvert {
                router_lifetime,
                options,
                ..
            } => self.router_advert_input(now, d, router_lifetime, options, sink),
            // A host sends solicitations; it does not answer them.
            Icmpv6Repr::RouterSolicit { .. } => self.counters.rx_accept_ndp_router_solicit += 1,
            Icmpv6Repr::Redirect {
                target_addr,
                dst_addr,
                options,
            } => self.redirect_input(now, d, target_addr, dst_addr, options, sink),
            // Not neighbor discovery (the caller sends only that here).
            _ => self.counters.rx_accept_icmpv6_other += 1,
        }
    }

    /// RFC 4861 8.1, 8.3: the router we send `dst`'s packets to says a
    /// better first hop is `target` (or, when `target` is `dst`, that
    /// `dst` is on the link): a host route for `dst` says so from now on.
    fn redirect_input(
        &mut self,
        now: Instant,
        d: &Ipv6Datagram<'_>,
        target: Ipv6Addr,
        dst: Ipv6Addr,
        options: &[u8],
        sink: &mut dyn FrameSink,
    ) {
        self.counters.rx_accept_ndp_redirect += 1;
        if !self.cfg.ip6_redirect_accept {
            return;
        }
        // Only from the router now used for `dst`, for a unicast `dst`,
        // to a link-local router or to `dst` itself (8.1).
        let from_our_router = self
            .ipv6_route(dst, None)
            .is_some_and(|(iface, hop)| iface == d.iface && hop == d.src && hop != dst);
        let on_link = target == dst;
        if !from_our_router || dst.is_multicast() || !(on_link || is_link_local(target)) {
            return;
        }
        if let Some(mac) = find_lladdr(options, true).filter(|m| m.is_unicast()) {
            let learned =
                self.neighbors
                    .learn_ndp(d.iface, IpAddr::V6(target), mac.0, NdpNews::Source, now);
            self.after_learning(now, d.iface, mac, learned, sink);
        }
        let Ok(host) = IpCidr::new(IpAddr::V6(dst), 128) else {
            return;
        };
        let _ = self.routes.remove(host);
        let route = Route {
            dest: host,
            gateway: (!on_link).then_some(IpAddr::V6(target)),
            iface: d.iface,
        };
        if self.routes.add(route).is_ok() {
            self.counters.ndp_redirects_applied += 1;
        }
    }

    fn neighbor_solicit_input(
        &mut self,
        now: Instant,
        d: &Ipv6Datagram<'_>,
        target: Ipv6Addr,
        options: &[u8],
        sink: &mut dyn FrameSink,
    ) {
        let Some(state) = self
            .interface(d.iface)
            .and_then(|i| i.ipv6.as_ref())
            .and_then(|v6| v6.find(target))
            .map(|a| a.state)
        else {
            self.counters.rx_drop_ndp_not_for_us += 1;
            return;
        };
        match state {
            AddrState::Duplicate => {
                self.counters.rx_drop_ndp_not_for_us += 1;
                return;
            }
            AddrState::Tentative { .. } => {
                // RFC 4862 5.4.3: another node probes the address we probe:
                // neither may have it.  A solicitation from an address is
                // for a node that thinks the address is in use: ignored.
                if d.src.is_unspecified() {
                    self.address_is_duplicate(d.iface, target);
                } else {
                    self.counters.rx_drop_ndp_not_for_us += 1;
                }
                return;
            }
            AddrState::Preferred => {}
        }
        self.counters.rx_accept_ndp_neighbor_solicit += 1;
        let probe = d.src.is_unspecified();
        if !probe {
            if let Some(mac) = find_lladdr(options, false) {
                // RFC 4861 7.2.3: the solicitation tells us the sender's
                // link address.
                let learned = self.neighbors.learn_ndp(
                    d.iface,
                    IpAddr::V6(d.src),
                    mac.0,
                    NdpNews::Source,
                    now,
                );
                self.after_learning(now, d.iface, mac, learned, sink);
            }
        }
        // RFC 4861 7.2.4: to the soliciting address, or to all nodes for a
        // probe (which has no address to answer).
        let (to, solicited) = if probe {
            (ALL_NODES, false)
        } else {
            (d.src, true)
        };
        self.send_neighbor_advert(now, d.iface, target, to, solicited, sink);
    }

    fn neighbor_advert_input(
        &mut self,
        now: Instant,
        d: &Ipv6Datagram<'_>,
        target: Ipv6Addr,
        options: &[u8],
        news: NdpNews,
        sink: &mut dyn FrameSink,
    ) {
        let ours = self
            .interface(d.iface)
            .and_then(|i| i.ipv6.as_ref())
            .and_then(|v6| v6.find(target))
            .map(|a| a.state);
        match ours {
            Some(AddrState::Tentative { .. }) => {
                // RFC 4862 5.4.4: a node already has it.
                self.counters.rx_accept_ndp_neighbor_advert += 1;
                self.address_is_duplicate(d.iface, target);
                return;
            }
            Some(_) => {
                // Another node claims an address we hold: said, not obeyed.
                self.counters.rx_accept_ndp_neighbor_advert += 1;
                self.counters.ndp_address_conflicts += 1;
                return;
            }
            None => {}
        }
        self.counters.rx_accept_ndp_neighbor_advert += 1;
        // RFC 4861 7.2.5: only an entry we have is updated. An incomplete
        // one needs the link address; an entry that has one is updated by
        // an advertisement without it too (the answer to a unicast probe,
        // which may omit it, 7.2.4: Linux does), so a solicited one
        // confirms the neighbour reachable.
        let mac = match find_lladdr(options, true) {
            Some(mac) => mac,
            None => match self.neighbors.cached_mac(d.iface, IpAddr::V6(target)) {
                Some(mac) => EthernetAddress(mac),
                None => return,
            },
        };
        if !mac.is_unicast() {
            return;
        }
        let learned = self
            .neighbors
            .learn_ndp(d.iface, IpAddr::V6(target), mac.0, news, now);
        self.after_learning(now, d.iface, mac, learned, sink);
    }

    fn router_advert_input(
        &mut self,
        now: Instant,
        d: &Ipv6Datagram<'_>,
        lifetime_secs: u16,
        options: &[u8],
        sink: &mut dyn FrameSink,
    ) {
        self.counters.rx_accept_ndp_router_advert += 1;
        if let Some(mac) = find_lladdr(options, false).filter(|m| m.is_unicast()) {
            let learned =
                self.neighbors
                    .learn_ndp(d.iface, IpAddr::V6(d.src), mac.0, NdpNews::Source, now);
            self.after_learning(now, d.iface, mac, learned, sink);
        }
        let accept = self.cfg.ip6_accept_rtadv;
        let Some(v6) = self
            .ifaces
            .get_mut(usize::from(d.iface.0))
            .and_then(|i| i.ipv6.as_mut())
        else {
            return;
        };
        if !accept || v6.gateway.is_some() {
            return;
        }
        v6.solicits_left = 0;
        let default = default_v6();
        let was = v6.learned_router.map(|(r, _)| r);
        if lifetime_secs == 0 {
            // RFC 4861 6.3.4: a router lifetime of zero withdraws it.
            if was == Some(d.src) {
                v6.learned_router = None;
                let _ = self.routes.remove(default);
            }
            return;
        }
        let until = now + Duration::from_secs(u64::from(lifetime_secs));
        v6.learned_router = Some((d.src, until));
        if was != Some(d.src) {
            let _ = self.routes.remove(default);
            if self
                .routes
                .add(Route {
                    dest: default,
                    gateway: Some(IpAddr::V6(d.src)),
                    iface: d.iface,
                })
                .is_ok()
            {
                self.counters.ndp_default_routers_learned += 1;
            }
        }
    }

    /// Sends the packets that waited for a neighbor now known at `mac`.
    fn after_learning(
        &mut self,
        now: Instant,
        iface: IfaceId,
        mac: EthernetAddress,
        learned: Learned,
        sink: &mut dyn FrameSink,
    ) {
        if learned.changed {
            self.counters.arp_address_changed += 1;
        }
        if learned.evicted {
            self.counters.arp_cache_evictions += 1;
        }
        for packet in learned.released {
            self.transmit_ipv6_packet(now, iface, mac, &packet, sink);
        }
    }

    /// Duplicate address detection failed: the address is never used.
    fn address_is_duplicate(&mut self, iface: IfaceId, addr: Ipv6Addr) {
        let Some(v6) = self
            .ifaces
            .get_mut(usize::from(iface.0))
            .and_then(|i| i.ipv6.as_mut())
        else {
            return;
        };
        if let Some(a) = v6.addrs.iter_mut().find(|a| a.addr == addr) {
            a.state = AddrState::Duplicate;
            self.counters.ndp_dad_duplicates += 1;
            self.iface_epoch += 1;
        }
    }

    /// Asks for `target`'s link address (RFC 4861 7.2.2), on its
    /// solicited-node group.
    pub(crate) fn send_neighbor_solicit(
        &mut self,
        now: Instant,
        iface: IfaceId,
        target: Ipv6Addr,
        sink: &mut dyn FrameSink,
    ) -> bool {
        let sent = self.solicit(now, iface, target, solicited_node(target), sink);
        if sent {
            self.counters.ndp_neighbor_solicits_sent += 1;
        }
        sent
    }

    /// Checks that a neighbor we know is still there (RFC 4861 7.3.3,
    /// PROBE): a solicitation sent to it alone.
    pub(crate) fn send_neighbor_probe(
        &mut self,
        now: Instant,
        iface: IfaceId,
        target: Ipv6Addr,
        sink: &mut dyn FrameSink,
    ) -> bool {
        let sent = self.solicit(now, iface, target, target, sink);
        if sent {
            self.counters.ndp_neighbor_probes_sent += 1;
        }
        sent
    }

    /// A neighbor solicitation for `target` to `to`, with our link address
    /// unless it leaves from an address still under duplicate detection
    /// (RFC 4429 3.3: an optimistic address must not enter other nodes'
    /// caches, in case it is another node's).
    fn solicit(
        &mut self,
        now: Instant,
        iface: IfaceId,
        target: Ipv6Addr,
        to: Ipv6Addr,
        sink: &mut dyn FrameSink,
    ) -> bool {
        let Some(ifc) = self.interface(iface) else {
            return false;
        };
        let optimistic = ifc.ipv6.as_ref().is_some_and(|v6| {
            select_source(&v6.addrs, to)
                .and_then(|src| v6.find(src))
                .is_some_and(|a| a.is_tentative())
        });
        let option = source_lladdr_option(EthernetAddress(ifc.mac));
        let options: &[u8] = if optimistic { &[] } else { &option };
        self.send_ndp(
            now,
            iface,
            None,
            to,
            Icmpv6Repr::NeighborSolicit {
                target_addr: target,
                options,
            },
            sink,
        )
    }

    /// A duplicate address probe for our tentative `target` (RFC 4862
    /// 5.4.2): from the unspecified address, without a link address.
    fn send_dad_probe(
        &mut self,
        now: Instant,
        iface: IfaceId,
        target: Ipv6Addr,
        sink: &mut dyn FrameSink,
    ) -> bool {
        let sent = self.send_ndp(
            now,
            iface,
            Some(Ipv6Addr::UNSPECIFIED),
            solicited_node(target),
            Icmpv6Repr::NeighborSolicit {
                target_addr: target,
                options: &[],
            },
            sink,
        );
        if sent {
            self.counters.ndp_dad_probes_sent += 1;
        }
        sent
    }

    fn send_neighbor_advert(
        &mut self,
        now: Instant,
        iface: IfaceId,
        target: Ipv6Addr,
        to: Ipv6Addr,
        solicited: bool,
        sink: &mut dyn FrameSink,
    ) {
        let Some(mac) = self.interface(iface).map(|i| EthernetAddress(i.mac)) else {
            return;
        };
        let option = target_lladdr_option(mac);
        let sent = self.send_ndp(
            now,
            iface,
            Some(target),
            to,
            Icmpv6Repr::NeighborAdvert {
                router: false,
                solicited,
                override_: true,
                target_addr: target,
                options: &option,
            },
            sink,
        );
        if sent {
            self.counters.ndp_neighbor_adverts_sent += 1;
        }
    }

    fn send_router_solicit(&mut self, now: Instant, iface: IfaceId, sink: &mut dyn FrameSink) {
        let Some(mac) = self.interface(iface).map(|i| EthernetAddress(i.mac)) else {
            return;
        };
        let option = source_lladdr_option(mac);
        let sent = self.send_ndp(
            now,
            iface,
            None,
            ALL_ROUTERS,
            Icmpv6Repr::RouterSolicit { options: &option },
            sink,
        );
        if sent {
            self.counters.ndp_router_solicits_sent += 1;
        }
    }

    /// Sends an NDP message with hop limit 255 out of `iface`.
    fn send_ndp(
        &mut self,
        now: Instant,
        iface: IfaceId,
        src: Option<Ipv6Addr>,
        dst: Ipv6Addr,
        message: Icmpv6Repr<'_>,
        sink: &mut dyn FrameSink,
    ) -> bool {
        let hdr = Ipv6Send {
            src,
            hop_limit: Some(255),
            iface: Some(iface),
            ..Ipv6Send::new(dst, IpProtocol::Icmpv6)
        };
        let len = message.buffer_len();
        self.send_ipv6(
            now,
            hdr,
            len,
            &mut |buf, src, _| {
                message.emit(
                    &mut Icmpv6Packet::new_unchecked(&mut buf[..len]),
                    &src,
                    &dst,
                )
            },
            sink,
        )
        .is_ok()
    }

    /// Duplicate address detection, router solicitation and the learned
    /// router's lifetime.
    pub(crate) fn ipv6_poll(&mut self, now: Instant, sink: &mut dyn FrameSink) {
        for i in 0..self.ifaces.len() {
            let id = self.ifaces[i].id;
            let Some(v6) = self.ifaces[i].ipv6.as_mut() else {
                continue;
            };
            let mut probes = Vec::new();
            let mut settled = 0;
            for a in v6.addrs.iter_mut() {
                if let AddrState::Tentative { probes_left, next } = a.state {
                    if now < next {
                        continue;
                    }
                    if probes_left > 0 {
                        a.state = AddrState::Tentative {
                            probes_left: probes_left - 1,
                            next: now + RETRANS_TIMER,
                        };
                        probes.push(a.addr);
                    } else {
                        a.state = AddrState::Preferred;
                        settled += 1;
                    }
                }
            }
            let expired = v6.learned_router.is_some_and(|(_, until)| now >= until);
            if expired {
                v6.learned_router = None;
            }
            let solicit = v6.solicits_left > 0
                && now >= v6.next_solicit
                && v6.addrs.first().is_some_and(|a| a.is_preferred());
            if solicit {
                v6.solicits_left -= 1;
                v6.next_solicit = now + SOLICIT_INTERVAL;
            }
            if settled > 0 {
                self.counters.ndp_dad_completed += settled;
                self.iface_epoch += 1;
            }
            if expired {
                let _ = self.routes.remove(default_v6());
            }
            for target in probes {
                self.send_dad_probe(now, id, target, sink);
            }
            if solicit {
                self.send_router_solicit(now, id, sink);
            }
        }
    }

    /// When [`ipv6_poll`](Self::ipv6_poll) has work next.
    pub(crate) fn ipv6_next_deadline(&self) -> Option<Instant> {
        self.ifaces
            .iter()
            .filter_map(|i| i.ipv6.as_ref())
            .flat_map(|v6| {
                let dad = v6.addrs.iter().filter_map(|a| match a.state {
                    AddrState::Tentative { next, .. } => Some(next),
                    _ => None,
                });
                let solicit = (v6.solicits_left > 0).then_some(v6.next_solicit);
                let router = v6.learned_router.map(|(_, until)| until);
                dad.chain(solicit).chain(router)
            })
            .min()
    }
}

fn default_v6() -> IpCidr {
    IpCidr::default_route(true)
}
