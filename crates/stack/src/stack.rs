//! The stack: interfaces, tables and sockets of one engine, and the entry
//! points that drive it.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr};

use crate::config::StackConfig;
use crate::counters::Counters;
use crate::iface::{IfaceId, Interface, InterfaceConfig};
use crate::neighbor::{NeighborCache, NeighborConfig, NeighborEvent};
use crate::rand::{KeyedState, Rng};
use crate::ratelimit::TokenBucket;
use crate::reassembly::{Reassembler, ReassemblyConfig};
use crate::route::{IpCidr, Route, RouteError, RouteTable};
use crate::sink::FrameSink;
use crate::socket::udp::UdpTable;
use crate::time::Instant;

/// The key of an IPv4 datagram under reassembly (RFC 791: source,
/// destination, protocol and identification).
pub(crate) type Ipv4FragKey = (Ipv4Addr, Ipv4Addr, u8, u16);

/// Interfaces at most in one stack.
pub const MAX_INTERFACES: usize = 64;

/// Why the stack could not be set up as asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StackError {
    TooManyInterfaces,
    /// The MTU is below what IPv4 requires (68) or above 65535.
    BadMtu(usize),
    BadPrefixLen(u8),
    /// The gateway is not on the interface's subnet.
    GatewayNotOnLink(Ipv4Addr),
    Route(RouteError),
}

impl fmt::Display for StackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StackError::TooManyInterfaces => write!(f, "more than {MAX_INTERFACES} interfaces"),
            StackError::BadMtu(m) => write!(f, "MTU {m} is outside 68..=65535"),
            StackError::BadPrefixLen(p) => write!(f, "prefix length {p} is longer than 32"),
            StackError::GatewayNotOnLink(g) => {
                write!(f, "gateway {g} is not on the interface's subnet")
            }
            StackError::Route(e) => write!(f, "route: {e}"),
        }
    }
}

impl From<RouteError> for StackError {
    fn from(e: RouteError) -> Self {
        StackError::Route(e)
    }
}

/// One protocol stack instance (one per engine).
#[derive(Debug)]
pub struct Stack {
    pub(crate) cfg: StackConfig,
    pub(crate) ifaces: Vec<Interface>,
    pub(crate) routes: RouteTable,
    pub(crate) neighbors: NeighborCache,
    pub(crate) reass_v4: Reassembler<Ipv4FragKey>,
    pub(crate) udp: UdpTable,
    pub(crate) icmp_errors: TokenBucket,
    pub(crate) counters: Counters,
    pub(crate) rng: Rng,
    pub(crate) next_ip_ident: u16,
}

impl Stack {
    pub fn new(cfg: StackConfig) -> Self {
        let mut rng = Rng::new(cfg.seed);
        let neighbors = NeighborCache::new(
            NeighborConfig {
                max_entries: cfg.arp_cache_size,
                max_hold: cfg.arp_maxhold,
                max_age: cfg.arp_max_age,
                retry_interval: cfg.arp_retry_interval,
                max_retries: cfg.arp_max_retries,
            },
            KeyedState::from_rng(&mut rng),
        );
        let reass_v4 = Reassembler::new(
            ReassemblyConfig {
                max_packets: cfg.reass_max_packets,
                max_frags: cfg.reass_max_frags,
                max_bytes: cfg.reass_max_bytes,
                max_payload: 65535 - 20,
                timeout: cfg.reass_timeout,
            },
            KeyedState::from_rng(&mut rng),
        );
        let udp = UdpTable::new(
            KeyedState::from_rng(&mut rng),
            cfg.max_sockets,
            cfg.udp_recv_space,
        );
        let next_ip_ident = rng.next_u32() as u16;
        Stack {
            icmp_errors: TokenBucket::new(cfg.icmp_rate_limit),
            cfg,
            ifaces: Vec::new(),
            routes: RouteTable::new(4096),
            neighbors,
            reass_v4,
            udp,
            counters: Counters::default(),
            rng,
            next_ip_ident,
        }
    }

    pub fn config(&self) -> &StackConfig {
        &self.cfg
    }

    /// Adds an interface with its connected route and, if it has a gateway,
    /// a default route (unless one exists).
    pub fn add_interface(&mut self, cfg: &InterfaceConfig) -> Result<IfaceId, StackError> {
        if self.ifaces.len() >= MAX_INTERFACES {
            return Err(StackError::TooManyInterfaces);
        }
        if !(68..=65535).contains(&cfg.mtu) {
            return Err(StackError::BadMtu(cfg.mtu));
        }
        if cfg.prefix_len > 32 {
            return Err(StackError::BadPrefixLen(cfg.prefix_len));
        }
        let id = IfaceId(self.ifaces.len() as u16);
        let iface = Interface::new(id, cfg);
        if let Some(gw) = cfg.gateway {
            if !iface.on_link(gw) {
                return Err(StackError::GatewayNotOnLink(gw));
            }
        }
        let subnet = IpCidr::new(IpAddr::V4(cfg.addr), cfg.prefix_len)
            .map_err(|e| StackError::BadPrefixLen(e.0))?;
        self.routes.add(Route {
            dest: subnet,
            gateway: None,
            iface: id,
        })?;
        if let Some(gw) = cfg.gateway {
            let default = IpCidr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)
                .map_err(|e| StackError::BadPrefixLen(e.0))?;
            if self.routes.iter().all(|r| r.dest != default) {
                self.routes.add(Route {
                    dest: default,
                    gateway: Some(IpAddr::V4(gw)),
                    iface: id,
                })?;
            }
        }
        self.ifaces.push(iface);
        Ok(id)
    }

    pub fn interfaces(&self) -> &[Interface] {
        &self.ifaces
    }

    pub fn interface(&self, id: IfaceId) -> Option<&Interface> {
        self.ifaces.get(usize::from(id.0))
    }

    pub fn routes(&self) -> &RouteTable {
        &self.routes
    }

    pub fn routes_mut(&mut self) -> &mut RouteTable {
        &mut self.routes
    }

    pub fn neighbors(&self) -> &NeighborCache {
        &self.neighbors
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Whether `ip` is one of our addresses on any interface.
    pub fn is_local_addr(&self, ip: Ipv4Addr) -> bool {
        self.ifaces.iter().any(|i| i.has_addr(ip))
    }

    /// Announces every address with a gratuitous ARP (at start, and after
    /// an address change), so that peers replace stale cache entries.
    pub fn announce(&mut self, sink: &mut dyn FrameSink) {
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

    /// Runs the timers: neighbor retries and aging, reassembly timeouts.
    pub fn poll(&mut self, now: Instant, sink: &mut dyn FrameSink) {
        let mut retries: Vec<(IfaceId, Ipv4Addr)> = Vec::new();
        let counters = &mut self.counters;
        self.neighbors.poll(now, |ev| match ev {
            NeighborEvent::Retry {
                iface,
                ip: IpAddr::V4(ip),
            } => retries.push((iface, ip)),
            NeighborEvent::Retry { .. } => {}
            NeighborEvent::Failed { dropped, .. } => {
                counters.arp_resolution_failed += 1;
                counters.tx_drop_no_neighbor += dropped as u64;
            }
        });
        for (iface, ip) in retries {
            self.send_arp_request(iface, ip, sink);
        }
        self.counters.ipv4_reassembly_timeout += self.reass_v4.poll(now) as u64;
    }

    /// The earliest time [`poll`](Self::poll) has work, if any.
    pub fn next_deadline(&self) -> Option<Instant> {
        [
            self.neighbors.next_deadline(),
            self.reass_v4.next_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    pub(crate) fn next_ident(&mut self) -> u16 {
        self.next_ip_ident = self.next_ip_ident.wrapping_add(1);
        self.next_ip_ident
    }
}
