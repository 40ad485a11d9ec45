//! The stack: interfaces, tables and sockets of one engine, and the entry
//! points that drive it.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::config::StackConfig;
use crate::counters::Counters;
use crate::iface::{IfaceId, Interface, InterfaceConfig};
use crate::ip::IpLayer;
use crate::neighbor::NeighborCache;
use crate::rand::{KeyedState, Rng};
use crate::route::{IpCidr, Route, RouteError, RouteTable};
use crate::sink::{FrameSink, RxMeta};
use crate::socket::table::SocketTable;
use crate::tcp::shared::TcpShared;
use crate::time::Instant;

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
    /// The IPv6 default router is on no prefix of the interface (nor
    /// link-local).
    Ipv6GatewayNotOnLink(Ipv6Addr),
    /// Not a unicast address an interface can hold.
    BadIpv6Address(Ipv6Addr),
    Ipv6AlreadyOn,
    NoSuchInterface,
    Route(RouteError),
    Policy(crate::policy::PolicyError),
    /// VLAN ids are 1..=4094.
    BadVlanId(u16),
    /// The port has a VLAN interface of this id already.
    VlanExists(u16),
    /// A VLAN interface rides on a port, not on another VLAN interface.
    NotAPort,
    /// A VLAN interface takes its port's MAC and at most its MTU.
    VlanLinkDiffers,
    /// Only a VLAN interface can be destroyed or taken down alone.
    NotAVlan,
}

impl fmt::Display for StackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StackError::TooManyInterfaces => write!(f, "more than {MAX_INTERFACES} interfaces"),
            StackError::BadMtu(m) => write!(f, "MTU {m} is outside 68..=65535"),
            StackError::BadPrefixLen(p) => {
                write!(f, "prefix length {p} is too long for the address family")
            }
            StackError::GatewayNotOnLink(g) => {
                write!(f, "gateway {g} is not on the interface's subnet")
            }
            StackError::Ipv6GatewayNotOnLink(g) => {
                write!(f, "IPv6 gateway {g} is on no prefix of the interface")
            }
            StackError::BadIpv6Address(a) => write!(f, "{a} is not a unicast address"),
            StackError::Ipv6AlreadyOn => f.write_str("IPv6 is already on for this interface"),
            StackError::NoSuchInterface => f.write_str("no such interface"),
            StackError::Route(e) => write!(f, "route: {e}"),
            StackError::Policy(e) => write!(f, "policy: {e}"),
            StackError::BadVlanId(v) => write!(f, "VLAN id {v} is outside 1..=4094"),
            StackError::VlanExists(v) => write!(f, "the port has VLAN {v} already"),
            StackError::NotAPort => f.write_str("a VLAN interface rides on a port"),
            StackError::VlanLinkDiffers => {
                f.write_str("a VLAN interface has its port's MAC and at most its MTU")
            }
            StackError::NotAVlan => f.write_str("not a VLAN interface"),
        }
    }
}

impl From<crate::policy::PolicyError> for StackError {
    fn from(e: crate::policy::PolicyError) -> Self {
        StackError::Policy(e)
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
    pub(crate) ip: IpLayer,
    pub(crate) sockets: SocketTable,
    pub(crate) tcp: TcpShared,
    pub(crate) rng: Rng,
}

impl Stack {
    pub fn new(cfg: StackConfig) -> Self {
        let mut rng = Rng::new(cfg.seed);
        let ip = IpLayer::new(cfg.clone(), &mut rng);
        let sockets = SocketTable::new(cfg.max_sockets, || KeyedState::from_rng(&mut rng));
        let tcp = TcpShared::new(cfg.tcp.clone(), &mut rng);
        Stack {
            ip,
            sockets,
            tcp,
            rng,
        }
    }

    pub fn config(&self) -> &StackConfig {
        &self.ip.cfg
    }

    /// Outgoing connections from now on take source ports whose replies
    /// hash to engine `steering.engine` of `steering.engines` (`None`:
    /// any port), for a stack whose place among the engines sharing its
    /// ports is learnt after it is made (a process joining a group).
    pub fn set_flow_steering(&mut self, steering: Option<crate::steer::FlowSteering>) {
        self.tcp.cfg.steering = steering.clone();
        self.tcp.ports.set_steering(steering);
    }

    /// Local ports picked for connections under RSS steering, and the
    /// Toeplitz hashes computed to find them.
    pub fn port_choice_rss_effort(&self) -> (u64, u64) {
        self.tcp.ports.rss_effort()
    }

    /// Other processes share this stack's ports (one AF_PACKET fanout
    /// group), and a flow may reach a process that does not have it while
    /// processes join or leave the group.  With `on`, a TCP segment of no
    /// connection of ours (nor a new connection for a listener) is not
    /// answered with a reset: [`Stack::take_handoff`] says so after the
    /// receive, and the caller offers the frame to the other processes,
    /// which give it to [`Stack::receive_handed_over`].
    pub fn set_flow_handoff(&mut self, on: bool) {
        self.tcp.handoff.on = on;
    }

    /// Whether the frame just received is to be offered to the other
    /// processes (see [`Stack::set_flow_handoff`]); asking clears it.
    #[inline]
    pub fn take_handoff(&mut self) -> bool {
        std::mem::take(&mut self.tcp.handoff.offer)
    }

    /// Receives a frame another process of the group offered: taken by a
    /// connection or listener of ours (true: tell the offerer), or dropped
    /// (counted) if it is not ours either.
    pub fn receive_handed_over(
        &mut self,
        now: Instant,
        iface: IfaceId,
        frame: &[u8],
        meta: RxMeta,
        sink: &mut dyn FrameSink,
    ) -> bool {
        self.tcp.handoff.forwarded = true;
        self.tcp.handoff.unclaimed = false;
        self.receive(now, iface, frame, meta, sink);
        self.tcp.handoff.forwarded = false;
        self.tcp.handoff.offer = false;
        let taken = !std::mem::take(&mut self.tcp.handoff.unclaimed);
        if taken {
            self.ip.counters.tcp_handoff_taken += 1;
        }
        taken
    }

    /// Receives a frame this stack offered to the group and nobody took:
    /// as if the ports were not shared (a segment of no connection gets
    /// its reset now), but for a SYN to a port whose listener this stack
    /// closed while sharing it, which is dropped (counted in
    /// `rx_drop_tcp_syn_listener_moved`): another process's listener takes
    /// the port over (nginx's new workers after a reload, which may not
    /// receive yet) and the client's next SYN finds it, as on Linux,
    /// where the port is never refused while any process listens.
    pub fn receive_unclaimed(
        &mut self,
        now: Instant,
        iface: IfaceId,
        frame: &[u8],
        meta: RxMeta,
        sink: &mut dyn FrameSink,
    ) {
        let on = std::mem::replace(&mut self.tcp.handoff.on, false);
        self.tcp.handoff.unclaimed_offer = true;
        self.receive(now, iface, frame, meta, sink);
        self.tcp.handoff.unclaimed_offer = false;
        self.tcp.handoff.on = on;
    }

    /// Adds an interface with its connected route and, if it has a gateway,
    /// a default route (unless one exists).
    pub fn add_interface(&mut self, cfg: &InterfaceConfig) -> Result<IfaceId, StackError> {
        let id = self.next_iface_id()?;
        self.install_interface(Interface::new(id, cfg), cfg)
    }

    /// The id the next interface gets.
    pub(crate) fn next_iface_id(&self) -> Result<IfaceId, StackError> {
        if self.ip.ifaces.len() >= MAX_INTERFACES {
            return Err(StackError::TooManyInterfaces);
        }
        Ok(IfaceId(self.ip.ifaces.len() as u16))
    }

    /// Checks `cfg` and adds `iface` (made from it) with its routes in the
    /// main FIB.
    pub(crate) fn install_interface(
        &mut self,
        iface: Interface,
        cfg: &InterfaceConfig,
    ) -> Result<IfaceId, StackError> {
        let id = iface.id;
        if !(68..=65535).contains(&cfg.mtu) {
            return Err(StackError::BadMtu(cfg.mtu));
        }
        if cfg.prefix_len > 32 {
            return Err(StackError::BadPrefixLen(cfg.prefix_len));
        }
        if let Some(gw) = cfg.gateway {
            if !iface.on_link(gw) {
                return Err(StackError::GatewayNotOnLink(gw));
            }
        }
        let subnet = IpCidr::new(IpAddr::V4(cfg.addr), cfg.prefix_len)
            .map_err(|e| StackError::BadPrefixLen(e.0))?;
        let connected = Route {
            dest: subnet,
            gateway: None,
            iface: id,
        };
        self.ip.routes.add(connected)?;
        if let Some(gw) = cfg.gateway {
            let default = IpCidr::default_route(false);
            if self.ip.routes.iter().all(|r| r.dest != default) {
                self.ip.routes.add(Route {
                    dest: default,
                    gateway: Some(IpAddr::V4(gw)),
                    iface: id,
                })?;
            }
        }
        self.push_interface(iface);
        Ok(id)
    }

    /// Appends `iface` (whose id is the next one) and its link state, or
    /// puts it in the place of the destroyed VLAN interface whose id it
    /// took.
    pub(crate) fn push_interface(&mut self, iface: Interface) {
        let link = crate::iface::LinkState {
            out: iface.link_out(),
            traffic: Default::default(),
            up: true,
        };
        let at = usize::from(iface.id.0);
        match (self.ip.ifaces.get_mut(at), self.ip.links.get_mut(at)) {
            (Some(slot), Some(l)) => {
                *slot = iface;
                *l = link;
            }
            _ => {
                self.ip.links.push(link);
                self.ip.ifaces.push(iface);
            }
        }
        self.ip.iface_epoch += 1;
    }

    pub fn interfaces(&self) -> &[Interface] {
        &self.ip.ifaces
    }

    pub fn interface(&self, id: IfaceId) -> Option<&Interface> {
        self.ip.interface(id)
    }

    /// Tells the stack that the link under `id` finishes TCP and UDP
    /// checksums (a NIC's offload; the shared-memory pair, which like Linux
    /// loopback carries frames between trusted memories): it then writes
    /// only the pseudo-header sum of frames it sends whole and marks them
    /// [`TxMeta::csum_partial`](crate::TxMeta).  Returns whether `id` exists.
    pub fn set_tx_checksum_offload(&mut self, id: IfaceId, on: bool) -> bool {
        match self.ip.ifaces.get_mut(usize::from(id.0)) {
            Some(i) => {
                i.tx_checksum_offload = on;
                self.ip.iface_epoch += 1;
                true
            }
            None => false,
        }
    }

    /// Tells the stack that the link under `id` takes TCP super-frames of
    /// up to `max` bytes of IP packet and cuts them into segments itself
    /// (a NIC's TSO, the kernel's GSO behind AF_PACKET); 0 turns it off.
    /// An IPv4 or IPv6 connection on such an interface then sends a burst of new
    /// data as one segment of several MSS (marked
    /// [`TxMeta::gso_size`](crate::TxMeta)), its checksum in the partial
    /// form whatever [`set_tx_checksum_offload`](Self::set_tx_checksum_offload)
    /// says: what cuts it (a NIC, the kernel, the engine's software GSO)
    /// finishes each segment's.  Returns whether `id` exists.
    pub fn set_tso(&mut self, id: IfaceId, max: usize) -> bool {
        match self.ip.ifaces.get_mut(usize::from(id.0)) {
            Some(i) => {
                i.tso_max = max.min(usize::from(u16::MAX));
                self.ip.iface_epoch += 1;
                true
            }
            None => false,
        }
    }

    /// Tells the stack that the link under `id` vouches for the IPv4
    /// header checksum of every frame it hands out (a NIC that verified
    /// it; the shared-memory pair, whose frames no wire touches): the stack
    /// then does not verify it again.  Returns whether `id` exists.
    pub fn set_rx_ip_checksum_offload(&mut self, id: IfaceId, on: bool) -> bool {
        match self.ip.ifaces.get_mut(usize::from(id.0)) {
            Some(i) => {
                i.rx_ip_checksum_offload = on;
                true
            }
            None => false,
        }
    }

    pub fn routes(&self) -> &RouteTable {
        &self.ip.routes
    }

    pub fn routes_mut(&mut self) -> &mut RouteTable {
        &mut self.ip.routes
    }

    pub fn neighbors(&self) -> &NeighborCache {
        &self.ip.neighbors
    }

    pub fn counters(&self) -> &Counters {
        &self.ip.counters
    }

    /// Whether `ip` is one of our addresses on any interface.
    pub fn is_local_addr(&self, ip: Ipv4Addr) -> bool {
        self.ip.is_local_addr(ip)
    }

    /// Whether `ip` is one of our usable addresses, of either family.
    pub fn is_local_ip(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => self.ip.is_local_addr(a),
            IpAddr::V6(a) => self.ip.is_local_ipv6(a),
        }
    }

    /// Turns IPv6 on for interface `id`: its link-local address from the
    /// MAC and `cfg`'s addresses, each checked for duplicates before use
    /// (`net.inet6.ip6.dad_count` probes, one a second, from the next
    /// [`poll`](Self::poll)); routes to their prefixes; the default router
    /// `cfg.gateway`, or router solicitation when there is none and
    /// `net.inet6.ip6.accept_rtadv` is on.
    pub fn enable_ipv6(
        &mut self,
        now: Instant,
        id: IfaceId,
        cfg: &crate::ipv6::Ipv6Config,
    ) -> Result<(), StackError> {
        use crate::ipv6::addr::{link_local_from_mac, AddrState, Ipv6IfAddr, Ipv6Iface};
        let Some(ifc) = self.ip.interface(id) else {
            return Err(StackError::NoSuchInterface);
        };
        if ifc.mtu < wire::ipv6::MIN_MTU {
            return Err(StackError::BadMtu(ifc.mtu));
        }
        if ifc.ipv6.is_some() {
            return Err(StackError::Ipv6AlreadyOn);
        }
        let state = if self.ip.cfg.ip6_dad_count == 0 {
            AddrState::Preferred
        } else {
            AddrState::Tentative {
                probes_left: self.ip.cfg.ip6_dad_count,
                next: now,
            }
        };
        let mut addrs = vec![Ipv6IfAddr {
            addr: link_local_from_mac(ifc.mac),
            prefix_len: 64,
            state,
        }];
        for &(addr, prefix_len) in &cfg.addrs {
            if prefix_len > 128 {
                return Err(StackError::BadPrefixLen(prefix_len));
            }
            if addr.is_multicast() || addr.is_unspecified() || addr.is_loopback() {
                return Err(StackError::BadIpv6Address(addr));
            }
            if addrs.iter().all(|a| a.addr != addr) {
                addrs.push(Ipv6IfAddr {
                    addr,
                    prefix_len,
                    state,
                });
            }
        }
        let v6 = Ipv6Iface {
            addrs,
            gateway: cfg.gateway,
            learned_router: None,
            solicits_left: if cfg.gateway.is_none() && self.ip.cfg.ip6_accept_rtadv {
                crate::ipv6::ndp::MAX_SOLICITS
            } else {
                0
            },
            next_solicit: now,
        };
        if let Some(gw) = cfg.gateway {
            if !v6.on_link(gw) {
                return Err(StackError::Ipv6GatewayNotOnLink(gw));
            }
        }
        let mut routes = Vec::new();
        for a in v6.addrs.iter().skip(1) {
            let dest = IpCidr::new(IpAddr::V6(a.addr), a.prefix_len)
                .map_err(|e| StackError::BadPrefixLen(e.0))?;
            routes.push(Route {
                dest,
                gateway: None,
                iface: id,
            });
        }
        if let Some(gw) = cfg.gateway {
            routes.push(Route {
                dest: IpCidr::default_route(true),
                gateway: Some(IpAddr::V6(gw)),
                iface: id,
            });
        }
        for r in routes {
            if self.ip.routes.iter().all(|have| have.dest != r.dest) {
                self.ip.routes.add(r)?;
            }
        }
        if let Some(i) = self.ip.ifaces.get_mut(usize::from(id.0)) {
            i.ipv6 = Some(v6);
        }
        self.ip.iface_epoch += 1;
        Ok(())
    }

    /// Announces every address with a gratuitous ARP (at start, and after
    /// an address change), so that peers replace stale cache entries.
    pub fn announce(&mut self, sink: &mut dyn FrameSink) {
        self.ip.announce(sink)
    }

    /// Runs the timers: neighbor retries and aging, reassembly timeouts,
    /// TCP's timers.
    pub fn poll(&mut self, now: Instant, sink: &mut dyn FrameSink) {
        self.ip.poll(now, sink);
        self.tcp_poll(now, sink);
    }

    /// The earliest time [`poll`](Self::poll) has work, if any.
    pub fn next_deadline(&self) -> Option<Instant> {
        [
            self.ip.next_deadline(),
            self.tcp.wheel.next_deadline(),
            self.tcp_trim_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Open sockets of every kind.
    pub fn socket_count(&self) -> usize {
        self.sockets.len()
    }

    /// Sends an IPv4 packet whose payload `fill` writes (see
    /// [`Ipv4Send`](crate::ipv4::Ipv4Send)).
    pub fn send_ipv4(
        &mut self,
        now: Instant,
        hdr: crate::ipv4::Ipv4Send,
        payload_len: usize,
        fill: &mut dyn FnMut(&mut [u8], Ipv4Addr),
        sink: &mut dyn FrameSink,
    ) -> Result<(), crate::ipv4::SendError> {
        let hdr = crate::ipv4::Ipv4Send {
            l4_checksum: false,
            ..hdr
        };
        self.ip.send_ipv4(
            now,
            hdr,
            payload_len,
            &mut |buf, src, _| fill(buf, src),
            sink,
        )
    }

    /// The source address a packet to `dst` would leave with.
    pub fn ipv4_source_for(&self, dst: Ipv4Addr) -> Option<Ipv4Addr> {
        self.ip.ipv4_source_for(dst, 0)
    }

    /// The source address an IPv6 packet to `dst` would leave with (RFC
    /// 6724 among the outgoing interface's usable addresses).
    pub fn ipv6_source_for(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        self.ip.ipv6_source_for(dst, 0)
    }
}
