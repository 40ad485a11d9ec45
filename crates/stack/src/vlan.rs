//! VLAN interfaces, FIBs and policy rules: what the stack offers a
//! configuration or a control channel to set up and change them live.
//!
//! A VLAN interface is an interface of its own (its addresses, VIPs,
//! neighbours, routes and counters) whose frames ride on a port with an
//! 802.1Q tag: the stack strips the tag on receive (`ethernet.rs`) and
//! inserts it on transmit, so the link below sees only the port.

use core::net::IpAddr;

use crate::iface::{IfaceId, IfaceTraffic, Interface, InterfaceConfig, Vlan};
use crate::policy::{PolicyRule, MAX_FIBS};
use crate::route::{IpCidr, Route, RouteError, RouteTable};
use crate::stack::{Stack, StackError};

/// The highest VLAN id (4095 is reserved, 802.1Q table 9-2).
pub const MAX_VLAN_ID: u16 = 4094;

impl Stack {
    /// Adds a port's interface without addresses: it only carries VLAN
    /// interfaces, and an untagged frame on it is dropped (counted in
    /// `rx_drop_untagged_no_address`).
    pub fn add_port(
        &mut self,
        name: &str,
        mac: [u8; 6],
        mtu: usize,
    ) -> Result<IfaceId, StackError> {
        let id = self.next_iface_id()?;
        if !(68..=65535).contains(&mtu) {
            return Err(StackError::BadMtu(mtu));
        }
        self.push_interface(Interface::new_bare(id, name, mac, mtu));
        Ok(id)
    }

    /// Adds VLAN `vid`'s interface on port `port`, with `cfg`'s addresses
    /// and routes (as [`add_interface`](Self::add_interface) has them).
    /// `cfg.mac` must be the port's and `cfg.mtu` at most the port's: the
    /// tag rides outside the IP packet, on the port's link.
    pub fn add_vlan(
        &mut self,
        port: IfaceId,
        vid: u16,
        cfg: &InterfaceConfig,
    ) -> Result<IfaceId, StackError> {
        if vid == 0 || vid > MAX_VLAN_ID {
            return Err(StackError::BadVlanId(vid));
        }
        let Some(p) = self.ip.interface(port) else {
            return Err(StackError::NoSuchInterface);
        };
        if p.vlan.is_some() {
            return Err(StackError::NotAPort);
        }
        if p.vlan_iface(vid).is_some() {
            return Err(StackError::VlanExists(vid));
        }
        if cfg.mac != p.mac || cfg.mtu > p.mtu {
            return Err(StackError::VlanLinkDiffers);
        }
        // A destroyed VLAN interface's place first: destroying and making
        // VLAN interfaces again and again does not grow the table.
        let id = match self.ip.ifaces.iter().find(|i| i.gone()) {
            Some(i) => i.id,
            None => self.next_iface_id()?,
        };
        let mut iface = Interface::new(id, cfg);
        iface.vlan = Some(Vlan { port, vid });
        let id = self.install_interface(iface, cfg)?;
        if let Some(p) = self.ip.ifaces.get_mut(usize::from(port.0)) {
            let at = p.vlans.partition_point(|&(v, _)| v < vid);
            p.vlans.insert(at, (vid, id));
        }
        Ok(id)
    }

    /// A VLAN interface's frames and bytes each way (`None` for a port,
    /// whose traffic is in [`counters`](Self::counters), a destroyed
    /// VLAN interface, or no interface).
    pub fn interface_traffic(&self, id: IfaceId) -> Option<IfaceTraffic> {
        let ifc = self.ip.interface(id)?;
        ifc.vlan?;
        if ifc.gone() {
            return None;
        }
        self.ip.links.get(usize::from(id.0)).map(|l| l.traffic)
    }

    /// The live VLAN interface `id`, or why not.
    fn live_vlan(&self, id: IfaceId) -> Result<Vlan, StackError> {
        let ifc = self
            .ip
            .interface(id)
            .filter(|i| !i.gone())
            .ok_or(StackError::NoSuchInterface)?;
        ifc.vlan.ok_or(StackError::NotAVlan)
    }

    /// Takes a VLAN interface down or up alone (`ifconfig port0.10
    /// down`): while down its frames are dropped both ways, counted in
    /// its `rx_drop_down` / `tx_drop_down` (and the stack's
    /// `rx_drop_vlan_down`); its addresses, routes and connections stay,
    /// as a port's do.  A port goes down with its VLANs in the engine.
    pub fn set_vlan_up(&mut self, id: IfaceId, up: bool) -> Result<(), StackError> {
        self.live_vlan(id)?;
        let link = self
            .ip
            .links
            .get_mut(usize::from(id.0))
            .ok_or(StackError::NoSuchInterface)?;
        link.up = up;
        self.ip.iface_epoch += 1;
        Ok(())
    }

    /// Whether VLAN interface `id` is up (`None`: not a live VLAN
    /// interface).
    pub fn vlan_up(&self, id: IfaceId) -> Option<bool> {
        self.live_vlan(id).ok()?;
        self.ip.links.get(usize::from(id.0)).map(|l| l.up)
    }

    /// Destroys VLAN interface `id` live (`ifconfig port0.10 destroy`):
    /// its port stops taking its tag (counted in
    /// `rx_drop_vlan_unknown_id`), its addresses and IPv6 go, and with
    /// them every route through it (in every FIB), every rule naming it
    /// and every neighbour on it (packets held for one are dropped and
    /// counted in `tx_drop_no_neighbor`).  Sockets are left as they are,
    /// as Linux leaves them when an address goes: a connection from one
    /// of its addresses finds no route from then on (it times out), a
    /// send from one fails.  Its place in the table is kept for the next
    /// VLAN interface made.
    pub fn destroy_vlan(&mut self, id: IfaceId) -> Result<(), StackError> {
        let vlan = self.live_vlan(id)?;
        if let Some(p) = self.ip.ifaces.get_mut(usize::from(vlan.port.0)) {
            p.vlans.retain(|&(_, v)| v != id);
        }
        self.ip.routes.remove_iface(id);
        self.ip.policy.remove_iface(id);
        let (_, held) = self.ip.neighbors.remove_iface(id);
        self.ip.counters.tx_drop_no_neighbor += held as u64;
        if let Some(ifc) = self.ip.ifaces.get_mut(usize::from(id.0)) {
            ifc.bury();
        }
        self.ip.sources_removed = true;
        self.ip.iface_epoch += 1;
        Ok(())
    }

    /// Gives interface `id` FIB `fib` of its own (1..`MAX_FIBS`): its
    /// connected routes and its gateways' default routes are added there,
    /// for the rules that send packets to that FIB (`ipfw_pr`).  Call it
    /// after [`enable_ipv6`](Self::enable_ipv6) for the IPv6 routes too.
    pub fn set_interface_fib(&mut self, id: IfaceId, fib: u16) -> Result<(), StackError> {
        if fib == 0 || fib >= MAX_FIBS {
            return Err(crate::policy::PolicyError::NoSuchFib(fib).into());
        }
        let Some(ifc) = self.ip.interface(id) else {
            return Err(StackError::NoSuchInterface);
        };
        let mut routes = Vec::new();
        if let Some(a) = ifc.addr() {
            let dest = IpCidr::new(IpAddr::V4(a), ifc.prefix_len)
                .map_err(|e| StackError::BadPrefixLen(e.0))?;
            routes.push(Route {
                dest,
                gateway: None,
                iface: id,
            });
            if let Some(gw) = ifc.gateway {
                routes.push(Route {
                    dest: IpCidr::default_route(false),
                    gateway: Some(IpAddr::V4(gw)),
                    iface: id,
                });
            }
        }
        if let Some(v6) = &ifc.ipv6 {
            for a in v6.addrs.iter().skip(1) {
                let dest = IpCidr::new(IpAddr::V6(a.addr), a.prefix_len)
                    .map_err(|e| StackError::BadPrefixLen(e.0))?;
                routes.push(Route {
                    dest,
                    gateway: None,
                    iface: id,
                });
            }
            if let Some(gw) = v6.gateway {
                routes.push(Route {
                    dest: IpCidr::default_route(true),
                    gateway: Some(IpAddr::V6(gw)),
                    iface: id,
                });
            }
        }
        let table = self.ip.policy.fib_mut(fib)?;
        for r in routes {
            match table.add(r) {
                Ok(()) | Err(RouteError::Exists) => {}
                Err(e) => return Err(e.into()),
            }
        }
        if let Some(i) = self.ip.ifaces.get_mut(usize::from(id.0)) {
            i.fib = fib;
        }
        self.ip.iface_epoch += 1;
        Ok(())
    }

    /// FIB `fib`: 0 is the main table; `None` when it was never made.
    pub fn fib(&self, fib: u16) -> Option<&RouteTable> {
        if fib == 0 {
            Some(&self.ip.routes)
        } else {
            self.ip.policy.fib(fib)
        }
    }

    /// How many FIBs exist (numbered 0..), FIB 0 included.
    pub fn fib_count(&self) -> u16 {
        self.ip.policy.fib_count()
    }

    /// Adds `route` to FIB `fib` (made if it was not).  Connections whose
    /// packets the FIB routes take the new route with their next segment.
    pub fn add_route(&mut self, fib: u16, route: Route) -> Result<(), StackError> {
        if self.ip.interface(route.iface).is_none() {
            return Err(StackError::NoSuchInterface);
        }
        self.fib_table_mut(fib)?.add(route)?;
        self.ip.iface_epoch += 1;
        Ok(())
    }

    /// Removes the route to `dest` from FIB `fib`.
    pub fn remove_route(&mut self, fib: u16, dest: IpCidr) -> Result<Route, StackError> {
        let r = self.fib_table_mut(fib)?.remove(dest)?;
        self.ip.iface_epoch += 1;
        Ok(r)
    }

    /// Replaces the route to `route.dest` in FIB `fib` in one step (no
    /// packet sees the table without a route there); the old route stays
    /// when the new one is refused.
    pub fn change_route(&mut self, fib: u16, route: Route) -> Result<Route, StackError> {
        if self.ip.interface(route.iface).is_none() {
            return Err(StackError::NoSuchInterface);
        }
        let table = self.fib_table_mut(fib)?;
        let old = table.remove(route.dest)?;
        if let Err(e) = table.add(route) {
            let _ = table.add(old);
            return Err(e.into());
        }
        self.ip.iface_epoch += 1;
        Ok(old)
    }

    fn fib_table_mut(&mut self, fib: u16) -> Result<&mut RouteTable, StackError> {
        if fib == 0 {
            Ok(&mut self.ip.routes)
        } else {
            Ok(self.ip.policy.fib_mut(fib)?)
        }
    }

    /// Adds a policy rule (its FIB is made if it was not).  Established
    /// connections follow it from their next segment.
    pub fn add_rule(&mut self, rule: PolicyRule) -> Result<(), StackError> {
        if let crate::policy::RuleMatch::Interface(i) = rule.matches {
            if self.ip.interface(i).is_none() {
                return Err(StackError::NoSuchInterface);
            }
        }
        self.ip.policy.add_rule(rule)?;
        self.ip.iface_epoch += 1;
        Ok(())
    }

    /// Removes a rule equal to `rule`.
    pub fn remove_rule(&mut self, rule: &PolicyRule) -> Result<(), StackError> {
        self.ip.policy.remove_rule(rule)?;
        self.ip.iface_epoch += 1;
        Ok(())
    }

    /// The rules, in the order they are tried.
    pub fn rules(&self) -> &[PolicyRule] {
        self.ip.policy.rules()
    }

    /// The FIB a packet from `src` of a socket marked `mark` (0: none)
    /// uses.
    pub fn fib_of_source(&self, src: IpAddr, mark: u32) -> u16 {
        if self.ip.policy.is_empty() {
            return 0;
        }
        self.ip.fib_number(Some(src), mark)
    }
}
