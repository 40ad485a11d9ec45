//! The IP layer of a stack: interfaces, routes, neighbors, reassembly and
//! the counters, apart from the sockets so that a socket's buffers can be
//! read while the IP layer writes a frame.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::config::StackConfig;
use crate::counters::Counters;
use crate::iface::{IfaceId, Interface, LinkState};
use crate::ipv6::pmtu::{PathMtuCache, PMTU4_MIN};
use crate::ipv6::Ipv6FragKey;
use crate::neighbor::{NeighborCache, NeighborConfig, NeighborEvent};
use crate::policy::Policy;
use crate::rand::{KeyedState, Rng};
use crate::ratelimit::TokenBucket;
use crate::reassembly::{Reassembler, ReassemblyConfig};
use crate::route::RouteTable;
use crate::sink::{FrameSink, RxMeta};
use crate::time::Instant;

/// The key of an IPv4 datagram under reassembly (RFC 791: source,
/// destination, protocol and identification).
pub(crate) type Ipv4FragKey = (Ipv4Addr, Ipv4Addr, u8, u16);

/// A received datagram of either family as TCP and UDP see it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct L4Datagram<'a> {
    pub iface: IfaceId,
    pub src: IpAddr,
    pub dst: IpAddr,
    /// Sent to a broadcast or multicast address.
    pub broadcast: bool,
    pub payload: &'a [u8],
    pub meta: RxMeta,
    /// The IP header's ECN field (RFC 3168 5).
    pub ecn: u8,
}

#[derive(Debug)]
pub(crate) struct IpLayer {
    pub(crate) cfg: StackConfig,
    pub(crate) ifaces: Vec<Interface>,
    /// Where each interface's frames leave, and a VLAN interface's
    /// traffic; indexed like `ifaces`.
    pub(crate) links: Vec<LinkState>,
    /// The FIBs beside the main one and the rules that pick them.
    pub(crate) policy: Policy,
    pub(crate) routes: RouteTable,
    pub(crate) neighbors: NeighborCache,
    pub(crate) reass_v4: Reassembler<Ipv4FragKey>,
    pub(crate) reass_v6: Reassembler<Ipv6FragKey>,
    /// Lowered IPv6 path MTUs (packet too big).
    pub(crate) pmtu6: PathMtuCache,
    /// Lowered IPv4 path MTUs (fragmentation needed).
    pub(crate) pmtu4: PathMtuCache<Ipv4Addr>,
    pub(crate) next_ip6_ident: u32,
    /// Keys the IPv6 flow labels (RFC 6437).
    pub(crate) flow_label_key: u64,
    pub(crate) icmp_errors: TokenBucket,
    pub(crate) counters: Counters,
    pub(crate) next_ip_ident: u16,
    /// Counts interface and path MTU changes (see [`IpLayer::path_epoch`]).
    pub(crate) iface_epoch: u64,
    /// An address was taken off (an alias removed, a VLAN interface
    /// destroyed): a packet from a source that is no longer ours finds no
    /// route (as Linux's output routing refuses such a source), so a
    /// socket left on it fails rather than sending from it.  Off until
    /// then, so the usual lookup does not pay for the check.
    pub(crate) sources_removed: bool,
    /// When the neighbor and reassembly tables are next scanned.
    next_scan: Instant,
}

/// How often the neighbor cache and the reassembly table are scanned: their
/// timeouts are in seconds, and a scan walks the whole table.
pub(crate) const SCAN_INTERVAL: crate::time::Duration = crate::time::Duration::from_millis(100);

impl IpLayer {
    pub(crate) fn new(cfg: StackConfig, rng: &mut Rng) -> Self {
        let neighbors = NeighborCache::new(
            NeighborConfig {
                max_entries: cfg.arp_cache_size,
                max_hold: cfg.arp_maxhold,
                max_age: cfg.arp_max_age,
                retry_interval: cfg.arp_retry_interval,
                max_retries: cfg.arp_max_retries,
            },
            KeyedState::from_rng(rng),
        );
        let reass_v4 = Reassembler::new(
            ReassemblyConfig {
                max_packets: cfg.reass_max_packets,
                max_frags: cfg.reass_max_frags,
                max_bytes: cfg.reass_max_bytes,
                max_payload: 65535 - 20,
                timeout: cfg.reass_timeout,
            },
            KeyedState::from_rng(rng),
        );
        let reass_v6 = Reassembler::new(
            ReassemblyConfig {
                max_packets: cfg.reass_max_packets,
                max_frags: cfg.reass_max_frags,
                max_bytes: cfg.reass_max_bytes,
                max_payload: 65535,
                timeout: cfg.reass_timeout,
            },
            KeyedState::from_rng(rng),
        );
        let pmtu6 = PathMtuCache::new(cfg.ip6_pmtu_cache_size, KeyedState::from_rng(rng));
        let pmtu4 = PathMtuCache::with_floor(
            cfg.ip4_pmtu_cache_size,
            PMTU4_MIN,
            KeyedState::from_rng(rng),
        );
        IpLayer {
            reass_v6,
            pmtu6,
            pmtu4,
            next_ip6_ident: rng.next_u32(),
            flow_label_key: rng.next_u64(),
            icmp_errors: TokenBucket::new(cfg.icmp_rate_limit),
            next_ip_ident: rng.next_u32() as u16,
            iface_epoch: 0,
            sources_removed: false,
            cfg,
            ifaces: Vec::new(),
            links: Vec::new(),
            policy: Policy::default(),
            routes: RouteTable::new(4096),
            neighbors,
            reass_v4,
            counters: Counters::default(),
            next_scan: Instant::ZERO,
        }
    }

    /// Changes whenever the interfaces, the routes or a neighbor's link
    /// address change: a path cached with another epoch must be looked up
    /// again. (Each part only grows, so their sum changes with any.)
    pub(crate) fn path_epoch(&self) -> u64 {
        self.iface_epoch + self.routes.epoch() + self.neighbors.epoch()
    }

    pub(crate) fn interface(&self, id: IfaceId) -> Option<&Interface> {
        self.ifaces.get(usize::from(id.0))
    }

    /// Whether port `port` or one of its VLAN interfaces runs IPv6 (and
    /// so listens to IPv6 multicast).
    pub(crate) fn listens_ipv6(&self, port: IfaceId) -> bool {
        self.interface(port).is_some_and(|p| {
            p.ipv6.is_some()
                || p.vlans
                    .iter()
                    .any(|&(_, v)| self.interface(v).is_some_and(|i| i.ipv6.is_some()))
        })
    }

    /// The routing table for a packet from `src` of a socket marked
    /// `mark` (FreeBSD's `setfib`, Linux's `ip rule`): the FIB of the
    /// first policy rule that matches, else the main one.  A rule's FIB
    /// is used alone: no route in it is no route.
    #[inline]
    pub(crate) fn fib_for(&self, src: Option<IpAddr>, mark: u32) -> &RouteTable {
        if self.policy.is_empty() {
            return &self.routes;
        }
        self.fib_by_policy(src, mark)
    }

    #[inline(never)]
    fn fib_by_policy(&self, src: Option<IpAddr>, mark: u32) -> &RouteTable {
        match self.fib_number(src, mark) {
            0 => &self.routes,
            // Rules make their FIBs; the main one stands in for none.
            n => self.policy.fib(n).unwrap_or(&self.routes),
        }
    }

    /// The FIB number the rules give a packet from `src` (`None`: not
    /// chosen yet) of a socket marked `mark`.
    pub(crate) fn fib_number(&self, src: Option<IpAddr>, mark: u32) -> u16 {
        self.policy.fib_of(src, mark, |iface, ip| {
            self.interface(iface).is_some_and(|i| match ip {
                IpAddr::V4(a) => i.has_addr(a),
                IpAddr::V6(a) => i.ipv6.as_ref().is_some_and(|v6| v6.has_addr(a)),
            })
        })
    }

    /// Whether a packet from `src` may not leave because `src` is no
    /// longer one of our addresses (see `sources_removed`).
    #[inline]
    pub(crate) fn source_gone(&self, src: Option<IpAddr>) -> bool {
        self.sources_removed && src.is_some_and(|s| self.source_gone_slow(s))
    }

    #[inline(never)]
    fn source_gone_slow(&self, src: IpAddr) -> bool {
        match src {
            IpAddr::V4(a) => !a.is_unspecified() && !self.is_local_addr(a),
            IpAddr::V6(a) => !a.is_unspecified() && !self.is_local_ipv6(a),
        }
    }

    /// Whether `ip` is one of our addresses on any interface.
    pub(crate) fn is_local_addr(&self, ip: Ipv4Addr) -> bool {
        self.ifaces.iter().any(|i| i.has_addr(ip))
    }

    pub(crate) fn next_ident(&mut self) -> u16 {
        self.next_ip_ident = self.next_ip_ident.wrapping_add(1);
        self.next_ip_ident
    }

    /// RFC 9293 3.8.3 (MUST-20), RFC 1122 4.2.3.5: "negative advice" from
    /// a connection to `dst` whose retransmissions went unanswered R1
    /// times: the next hop's link address is forgotten, so the next packet
    /// resolves it again (a neighbor that changed its address, or a router
    /// that is gone, is found out).  Returns whether an entry was dropped.
    pub(crate) fn negative_advice(&mut self, dst: IpAddr) -> bool {
        let hop = match dst {
            IpAddr::V4(d) => self
                .ipv4_route(d, None)
                .filter(|&(_, _, broadcast)| !broadcast)
                .map(|(iface, n, _)| (iface, IpAddr::V4(n))),
            IpAddr::V6(d) => self
                .ipv6_route(d, None)
                .map(|(iface, n)| (iface, IpAddr::V6(n))),
        };
        let Some((iface, neighbor)) = hop else {
            return false;
        };
        let dropped = self.neighbors.remove(iface, neighbor);
        if dropped {
            self.counters.neighbor_negative_advice += 1;
        }
        dropped
    }

    /// Announces every address with a gratuitous ARP.
    pub(crate) fn announce(&mut self, sink: &mut dyn FrameSink) {
        for i in 0..self.ifaces.len() {
            let iface = self.ifaces[i].id;
            for a in 0..self.ifaces[i].addrs().len() {
                let addr = self.ifaces[i].addrs()[a];
                if self.send_arp_request(iface, addr, sink) {
                    self.counters.arp_gratuitous_sent += 1;
                    self.counters.arp_requests_sent -= 1;
                }
            }
        }
    }

    /// Neighbor retries and aging, reassembly timeouts.
    pub(crate) fn poll(&mut self, now: Instant, sink: &mut dyn FrameSink) {
        if now < self.next_scan {
            return;
        }
        self.next_scan = now + SCAN_INTERVAL;
        let mut retries: Vec<(IfaceId, Ipv4Addr)> = Vec::new();
        let mut retries6: Vec<(IfaceId, Ipv6Addr)> = Vec::new();
        let mut probes6: Vec<(IfaceId, Ipv6Addr)> = Vec::new();
        let counters = &mut self.counters;
        self.neighbors.poll(now, |ev| match ev {
            NeighborEvent::Retry {
                iface,
                ip: IpAddr::V4(ip),
            } => retries.push((iface, ip)),
            NeighborEvent::Retry {
                iface,
                ip: IpAddr::V6(ip),
            } => retries6.push((iface, ip)),
            NeighborEvent::Probe {
                iface,
                ip: IpAddr::V6(ip),
                ..
            } => probes6.push((iface, ip)),
            NeighborEvent::Probe { .. } => {}
            NeighborEvent::Failed {
                dropped,
                ip: IpAddr::V4(_),
                ..
            } => {
                counters.arp_resolution_failed += 1;
                counters.tx_drop_no_neighbor += dropped as u64;
            }
            NeighborEvent::Failed {
                dropped,
                ip: IpAddr::V6(_),
                ..
            } => {
                counters.ndp_resolution_failed += 1;
                counters.tx_drop_no_neighbor += dropped as u64;
            }
        });
        for (iface, ip) in retries {
            self.send_arp_request(iface, ip, sink);
        }
        for (iface, ip) in retries6 {
            self.send_neighbor_solicit(now, iface, ip, sink);
        }
        for (iface, ip) in probes6 {
            self.send_neighbor_probe(now, iface, ip, sink);
        }
        self.counters.ipv4_reassembly_timeout += self.reass_v4.poll(now).count as u64;
        let expired = self.reass_v6.poll(now);
        self.counters.ipv6_reassembly_timeout += expired.count as u64;
        for (iface, first) in expired.first_fragments {
            self.send_reassembly_time_exceeded(now, iface, &first, sink);
        }
        self.ipv6_poll(now, sink);
    }

    /// When [`poll`](Self::poll) has work: not before its next scan, or
    /// an engine would call it in a loop that does nothing until then.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        [
            self.neighbors.next_deadline(),
            self.reass_v4.next_deadline(),
            self.reass_v6.next_deadline(),
            self.ipv6_next_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
        .map(|t| t.max(self.next_scan))
    }
}
