//! Interfaces: a link the stack sends through, with its addresses.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr};

/// An interface's index in its stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IfaceId(pub u16);

impl fmt::Display for IfaceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "if{}", self.0)
    }
}

/// What an interface is made from (the engine builds it from `[portN]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceConfig {
    pub name: String,
    pub mac: [u8; 6],
    /// The largest IP packet the link carries.
    pub mtu: usize,
    pub addr: Ipv4Addr,
    pub prefix_len: u8,
    /// Defaults to the subnet's all-ones host address.
    pub broadcast: Option<Ipv4Addr>,
    /// Installs a default route through this interface.
    pub gateway: Option<Ipv4Addr>,
    /// More addresses answered on this interface (F-Stack's `vip_addr`).
    pub extra_addrs: Vec<Ipv4Addr>,
}

impl InterfaceConfig {
    /// Interface `name` with `mac` and `addr`/`prefix_len`: a 1500-byte
    /// MTU, the subnet's broadcast address, no gateway and no more
    /// addresses (struct update syntax sets those).
    pub fn new(
        name: impl Into<String>,
        mac: [u8; 6],
        addr: Ipv4Addr,
        prefix_len: u8,
    ) -> InterfaceConfig {
        InterfaceConfig {
            name: name.into(),
            mac,
            mtu: 1500,
            addr,
            prefix_len,
            broadcast: None,
            gateway: None,
            extra_addrs: Vec::new(),
        }
    }
}

/// What makes an interface an 802.1Q VLAN interface: the port it rides
/// on and its VLAN id.  Its frames carry the tag on the wire; the stack
/// inserts and strips it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Vlan {
    pub port: IfaceId,
    /// 1..=4094.
    pub vid: u16,
}

/// Frames and bytes through one VLAN interface (a port's own traffic is
/// the stack's [`Counters`](crate::Counters)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IfaceTraffic {
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// Frames not sent: the link had no free buffer.
    pub tx_drop_no_buffer: u64,
    /// Frames dropped while the interface was down, each way.
    pub rx_drop_down: u64,
    pub tx_drop_down: u64,
}

/// Where an interface's frames leave: through which port, with which
/// tag.  A port's own interface has no tag and is its own port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LinkOut {
    pub iface: IfaceId,
    pub port: IfaceId,
    pub vid: Option<u16>,
}

impl LinkOut {
    pub(crate) fn untagged(iface: IfaceId) -> Self {
        LinkOut {
            iface,
            port: iface,
            vid: None,
        }
    }
}

/// The per-interface state the transmit side writes: kept apart from
/// [`Interface`] so that a frame can be counted while an interface is
/// borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LinkState {
    pub out: LinkOut,
    pub traffic: IfaceTraffic,
    /// A VLAN interface taken down alone (`ifconfig port0.10 down`)
    /// drops its frames both ways; a port's state is the engine's.
    pub up: bool,
}

/// An interface of the stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    pub id: IfaceId,
    pub name: String,
    pub mac: [u8; 6],
    pub mtu: usize,
    /// The primary address first, then the extra ones; empty for a port
    /// that only carries VLAN interfaces ([`Stack::add_port`](crate::Stack::add_port)).
    addrs: Vec<Ipv4Addr>,
    pub prefix_len: u8,
    pub broadcast: Ipv4Addr,
    pub gateway: Option<Ipv4Addr>,
    /// The link finishes TCP and UDP checksums of frames sent whole (not
    /// fragmented): the stack writes only the pseudo-header sum.
    pub tx_checksum_offload: bool,
    /// The largest IP packet the link takes as one TCP super-frame and
    /// cuts into segments itself (TSO/GSO); 0: none larger than the MTU.
    /// Only with `tx_checksum_offload`.
    pub tso_max: usize,
    /// The link vouches for the IPv4 header checksum of every frame it
    /// hands out: the stack does not verify it.
    pub rx_ip_checksum_offload: bool,
    /// IPv6 on this interface; `None` until `Stack::enable_ipv6`.
    pub ipv6: Option<crate::ipv6::addr::Ipv6Iface>,
    /// Set on a VLAN interface.
    pub vlan: Option<Vlan>,
    /// On a port: its VLAN interfaces by VLAN id, ascending.
    pub(crate) vlans: Vec<(u16, IfaceId)>,
    /// A port made by `Stack::add_port`: untagged frames are not for it.
    bare: bool,
    /// The FIB packets from this interface's addresses use (0, the main
    /// table, unless a policy rule says otherwise).
    pub fib: u16,
    /// A VLAN interface destroyed live: its place is kept (interfaces are
    /// numbered by position) until a new VLAN interface takes it.
    gone: bool,
}

impl Interface {
    pub(crate) fn new(id: IfaceId, cfg: &InterfaceConfig) -> Self {
        let mask = netmask(cfg.prefix_len);
        let broadcast = cfg
            .broadcast
            .unwrap_or(Ipv4Addr::from(u32::from(cfg.addr) | !mask));
        let mut addrs = vec![cfg.addr];
        for a in &cfg.extra_addrs {
            if !addrs.contains(a) {
                addrs.push(*a);
            }
        }
        Interface {
            id,
            name: cfg.name.clone(),
            mac: cfg.mac,
            mtu: cfg.mtu,
            addrs,
            prefix_len: cfg.prefix_len,
            broadcast,
            gateway: cfg.gateway,
            tx_checksum_offload: false,
            tso_max: 0,
            rx_ip_checksum_offload: false,
            ipv6: None,
            vlan: None,
            vlans: Vec::new(),
            bare: false,
            fib: 0,
            gone: false,
        }
    }

    /// A port's interface without addresses, which only carries VLAN
    /// interfaces: untagged frames find no address on it.
    pub(crate) fn new_bare(id: IfaceId, name: &str, mac: [u8; 6], mtu: usize) -> Self {
        Interface {
            id,
            name: name.to_string(),
            mac,
            mtu,
            addrs: Vec::new(),
            prefix_len: 32,
            broadcast: Ipv4Addr::BROADCAST,
            gateway: None,
            tx_checksum_offload: false,
            tso_max: 0,
            rx_ip_checksum_offload: false,
            ipv6: None,
            vlan: None,
            vlans: Vec::new(),
            bare: true,
            fib: 0,
            gone: false,
        }
    }

    /// Whether this is a VLAN interface destroyed live: no name, address,
    /// route or frame is its any more; listings leave it out.
    pub fn gone(&self) -> bool {
        self.gone
    }

    /// Makes this (VLAN) interface a destroyed one: no address, no IPv6,
    /// no gateway, nothing on its link.
    pub(crate) fn bury(&mut self) {
        self.gone = true;
        self.addrs.clear();
        self.ipv6 = None;
        self.gateway = None;
        self.broadcast = Ipv4Addr::BROADCAST;
        self.prefix_len = 32;
        self.fib = 0;
    }

    /// Whether this is a port without addresses of its own, which only
    /// carries VLAN interfaces.
    pub fn bare(&self) -> bool {
        self.bare
    }

    /// The VLAN interfaces this port carries, by VLAN id.
    pub fn vlan_interfaces(&self) -> &[(u16, IfaceId)] {
        &self.vlans
    }

    /// The primary address; `None` on a port without addresses.
    pub fn addr(&self) -> Option<Ipv4Addr> {
        self.addrs.first().copied()
    }

    /// The primary address and prefix length (`10.99.1.2/24`), `none`
    /// on a port without addresses; `vlan N` after a VLAN interface's.
    pub fn addr_text(&self) -> String {
        let addr = match self.addr() {
            Some(a) => format!("{a}/{}", self.prefix_len),
            None => "none".to_string(),
        };
        match self.vlan {
            Some(v) => format!("{addr} vlan {} on {}", v.vid, v.port),
            None => addr,
        }
    }

    /// The VLAN interface of `vid` on this port.
    pub(crate) fn vlan_iface(&self, vid: u16) -> Option<IfaceId> {
        self.vlans
            .binary_search_by_key(&vid, |&(v, _)| v)
            .ok()
            .and_then(|at| self.vlans.get(at))
            .map(|&(_, id)| id)
    }

    /// Where this interface's frames leave.
    pub(crate) fn link_out(&self) -> LinkOut {
        match self.vlan {
            None => LinkOut::untagged(self.id),
            Some(v) => LinkOut {
                iface: self.id,
                port: v.port,
                vid: Some(v.vid),
            },
        }
    }

    /// Every address of the interface, the primary first.
    pub fn addrs(&self) -> &[Ipv4Addr] {
        &self.addrs
    }

    pub fn has_addr(&self, ip: Ipv4Addr) -> bool {
        self.addrs.contains(&ip)
    }

    /// Adds an address after the others (the caller checked it is new).
    pub(crate) fn push_addr(&mut self, ip: Ipv4Addr) {
        self.addrs.push(ip);
    }

    /// Removes an address other than the primary; whether it was there.
    pub(crate) fn remove_addr(&mut self, ip: Ipv4Addr) -> bool {
        match self.addrs.iter().skip(1).position(|&a| a == ip) {
            Some(i) => {
                self.addrs.remove(i + 1);
                true
            }
            None => false,
        }
    }

    pub fn netmask(&self) -> Ipv4Addr {
        Ipv4Addr::from(netmask(self.prefix_len))
    }

    /// Whether `ip` is a broadcast address on this interface's link.
    pub fn is_broadcast(&self, ip: Ipv4Addr) -> bool {
        ip == Ipv4Addr::BROADCAST || ip == self.broadcast
    }

    /// Whether `ip` is on this interface's subnet.
    pub fn on_link(&self, ip: Ipv4Addr) -> bool {
        let m = netmask(self.prefix_len);
        self.addr()
            .is_some_and(|a| u32::from(ip) & m == u32::from(a) & m)
    }

    /// The source address to use toward `dst`.
    pub fn source_for(&self, dst: IpAddr) -> Option<IpAddr> {
        match dst {
            IpAddr::V4(_) => self.addr().map(IpAddr::V4),
            IpAddr::V6(d) => self
                .ipv6
                .as_ref()
                .and_then(|v6| crate::ipv6::addr::select_source(&v6.addrs, d))
                .map(IpAddr::V6),
        }
    }
}

/// The mask of a prefix length (0..=32).
pub fn netmask(prefix_len: u8) -> u32 {
    if prefix_len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix_len.min(32)))
    }
}

/// The prefix length of a contiguous mask, or `None` if it has holes.
pub fn prefix_len_of(mask: Ipv4Addr) -> Option<u8> {
    let m = u32::from(mask);
    let len = m.leading_ones();
    (m.checked_shl(len).unwrap_or(0) == 0).then_some(len as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_broadcast() {
        let cfg = InterfaceConfig {
            name: "p0".into(),
            mac: [2, 0, 0, 0, 0, 1],
            mtu: 1500,
            addr: Ipv4Addr::new(10, 99, 1, 2),
            prefix_len: 24,
            broadcast: None,
            gateway: None,
            extra_addrs: vec![Ipv4Addr::new(10, 99, 1, 3), Ipv4Addr::new(10, 99, 1, 2)],
        };
        let i = Interface::new(IfaceId(0), &cfg);
        assert_eq!(
            i.addrs(),
            &[Ipv4Addr::new(10, 99, 1, 2), Ipv4Addr::new(10, 99, 1, 3)]
        );
        assert!(i.is_broadcast(Ipv4Addr::new(10, 99, 1, 255)));
        assert!(i.is_broadcast(Ipv4Addr::BROADCAST));
        assert!(!i.is_broadcast(Ipv4Addr::new(10, 99, 2, 255)));
        assert!(i.on_link(Ipv4Addr::new(10, 99, 1, 200)));
        assert!(!i.on_link(Ipv4Addr::new(10, 99, 2, 1)));
        assert_eq!(i.netmask(), Ipv4Addr::new(255, 255, 255, 0));
    }

    #[test]
    fn prefix_len_of_masks() {
        assert_eq!(prefix_len_of(Ipv4Addr::new(255, 255, 255, 0)), Some(24));
        assert_eq!(prefix_len_of(Ipv4Addr::new(0, 0, 0, 0)), Some(0));
        assert_eq!(prefix_len_of(Ipv4Addr::new(255, 255, 255, 255)), Some(32));
        assert_eq!(prefix_len_of(Ipv4Addr::new(255, 0, 255, 0)), None);
    }
}
