//! The operator's changes to a running stack (the `ustack` command's
//! ifconfig, arp and ndp): addresses, MTU, permanent neighbours.  Each
//! change moves the epoch that cached paths check, so no packet leaves by
//! what was true before it.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::iface::IfaceId;
use crate::ipv6::addr::{AddrState, Ipv6IfAddr};
use crate::route::{IpCidr, Route};
use crate::sink::FrameSink;
use crate::stack::{Stack, StackError};
use crate::time::Instant;
use wire::EthernetAddress;

/// Why an operator's change was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminError {
    NoSuchInterface,
    /// The address is already on the interface.
    Exists,
    /// The address is not on the interface.
    NotFound,
    /// The interface's primary IPv4 address, or its IPv6 link-local one:
    /// they go with the interface.
    Primary,
    /// IPv6 is not on for the interface (no `addr6` in its port).
    NoIpv6,
    /// Not an address an interface can hold.
    BadAddress,
    /// An MTU outside what the interface's protocols need.
    BadMtu {
        min: usize,
        max: usize,
    },
    /// The neighbour cache is full of permanent entries.
    CacheFull,
    Stack(StackError),
}

impl core::fmt::Display for AdminError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            AdminError::NoSuchInterface => f.write_str("no such interface"),
            AdminError::Exists => f.write_str("the interface already has this address"),
            AdminError::NotFound => f.write_str("the interface does not have this address"),
            AdminError::Primary => f.write_str(
                "the primary IPv4 address and the IPv6 link-local address cannot be removed",
            ),
            AdminError::NoIpv6 => f.write_str("IPv6 is not on for this interface"),
            AdminError::BadAddress => f.write_str("not a unicast address"),
            AdminError::BadMtu { min, max } => write!(f, "the MTU must be within {min}..={max}"),
            AdminError::CacheFull => f.write_str("the neighbour cache is full"),
            AdminError::Stack(e) => write!(f, "{e}"),
        }
    }
}

impl Stack {
    /// Adds an IPv4 address (an alias, answered like a VIP) to `iface`.
    pub fn add_ipv4_addr(&mut self, iface: IfaceId, ip: Ipv4Addr) -> Result<(), AdminError> {
        if ip.is_unspecified() || ip.is_multicast() || ip.is_broadcast() || ip.is_loopback() {
            return Err(AdminError::BadAddress);
        }
        let ifc = self.iface_mut(iface)?;
        if ifc.has_addr(ip) {
            return Err(AdminError::Exists);
        }
        ifc.push_addr(ip);
        self.ip.iface_epoch += 1;
        Ok(())
    }

    /// Removes an IPv4 address other than the primary.
    pub fn remove_ipv4_addr(&mut self, iface: IfaceId, ip: Ipv4Addr) -> Result<(), AdminError> {
        let ifc = self.iface_mut(iface)?;
        if ifc.addr() == Some(ip) {
            return Err(AdminError::Primary);
        }
        if !ifc.remove_addr(ip) {
            return Err(AdminError::NotFound);
        }
        self.ip.iface_epoch += 1;
        self.ip.sources_removed = true;
        Ok(())
    }

    /// Adds an IPv6 address to `iface`, checked by duplicate address
    /// detection first as a configured one is, with an on-link route to
    /// its prefix.
    pub fn add_ipv6_addr(
        &mut self,
        now: Instant,
        iface: IfaceId,
        addr: Ipv6Addr,
        prefix_len: u8,
    ) -> Result<(), AdminError> {
        if prefix_len > 128 {
            return Err(AdminError::Stack(StackError::BadPrefixLen(prefix_len)));
        }
        if addr.is_multicast() || addr.is_unspecified() || addr.is_loopback() {
            return Err(AdminError::BadAddress);
        }
        let dad = self.ip.cfg.ip6_dad_count;
        let ifc = self.iface_mut(iface)?;
        let v6 = ifc.ipv6.as_mut().ok_or(AdminError::NoIpv6)?;
        if v6.find(addr).is_some() {
            return Err(AdminError::Exists);
        }
        v6.addrs.push(Ipv6IfAddr {
            addr,
            prefix_len,
            state: if dad == 0 {
                AddrState::Preferred
            } else {
                AddrState::Tentative {
                    probes_left: dad,
                    next: now,
                }
            },
        });
        let dest = IpCidr::new(IpAddr::V6(addr), prefix_len)
            .map_err(|e| AdminError::Stack(StackError::BadPrefixLen(e.0)))?;
        if self.ip.routes.iter().all(|r| r.dest != dest) {
            let added = self.ip.routes.add(Route {
                dest,
                gateway: None,
                iface,
            });
            added.map_err(|e| AdminError::Stack(StackError::Route(e)))?;
        }
        self.ip.iface_epoch += 1;
        Ok(())
    }

    /// Removes an IPv6 address other than the link-local one, and the
    /// route to its prefix when no other address of the interface is on
    /// it.
    pub fn remove_ipv6_addr(&mut self, iface: IfaceId, addr: Ipv6Addr) -> Result<(), AdminError> {
        let ifc = self.iface_mut(iface)?;
        let v6 = ifc.ipv6.as_mut().ok_or(AdminError::NoIpv6)?;
        let at = v6
            .addrs
            .iter()
            .position(|a| a.addr == addr)
            .ok_or(AdminError::NotFound)?;
        if at == 0 {
            return Err(AdminError::Primary);
        }
        let gone = v6.addrs.remove(at);
        let prefix_used = v6
            .addrs
            .iter()
            .skip(1)
            .any(|a| a.prefix_len == gone.prefix_len && gone.on_prefix(a.addr));
        if !prefix_used {
            if let Ok(dest) = IpCidr::new(IpAddr::V6(addr), gone.prefix_len) {
                let on_link = self
                    .ip
                    .routes
                    .iter()
                    .any(|r| r.dest == dest && r.gateway.is_none() && r.iface == iface);
                if on_link {
                    let _ = self.ip.routes.remove(dest);
                }
            }
        }
        self.ip.iface_epoch += 1;
        self.ip.sources_removed = true;
        Ok(())
    }

    /// Sets the largest IP packet `iface` sends, within `max` (the link's).
    /// New connections take their MSS from it.
    pub fn set_mtu(&mut self, iface: IfaceId, mtu: usize, max: usize) -> Result<(), AdminError> {
        let ifc = self.iface_mut(iface)?;
        let min = if ifc.ipv6.is_some() {
            wire::ipv6::MIN_MTU
        } else {
            68
        };
        if mtu < min || mtu > max {
            return Err(AdminError::BadMtu { min, max });
        }
        ifc.mtu = mtu;
        self.ip.iface_epoch += 1;
        Ok(())
    }

    /// Sets a permanent neighbour entry (`arp -s`): `ip` is at `mac` on
    /// `iface` until removed, whatever the network says; packets that
    /// waited for it go now.
    pub fn add_permanent_neighbor(
        &mut self,
        now: Instant,
        iface: IfaceId,
        ip: IpAddr,
        mac: [u8; 6],
        sink: &mut dyn FrameSink,
    ) -> Result<(), AdminError> {
        self.iface_mut(iface)?;
        let learned = self
            .ip
            .neighbors
            .set_permanent(iface, ip, mac)
            .ok_or(AdminError::CacheFull)?;
        for packet in learned.released {
            match ip {
                IpAddr::V4(_) => {
                    self.ip
                        .transmit_ipv4_packet(iface, EthernetAddress(mac), &packet, sink);
                }
                IpAddr::V6(_) => {
                    self.ip
                        .transmit_ipv6_packet(now, iface, EthernetAddress(mac), &packet, sink);
                }
            }
        }
        Ok(())
    }

    /// Forgets a neighbour (`arp -d`).  Returns whether there was one.
    pub fn remove_neighbor(&mut self, iface: IfaceId, ip: IpAddr) -> bool {
        self.ip.neighbors.remove(iface, ip)
    }

    /// Forgets every neighbour of a family, permanent ones too (`arp -F`,
    /// `ndp -c`).  Returns how many.
    pub fn flush_neighbors(&mut self, v6: bool) -> usize {
        self.ip.neighbors.flush(v6, true)
    }

    fn iface_mut(&mut self, iface: IfaceId) -> Result<&mut crate::iface::Interface, AdminError> {
        self.ip
            .ifaces
            .get_mut(usize::from(iface.0))
            .ok_or(AdminError::NoSuchInterface)
    }
}

/// A tunable that can change while the stack runs: each is read where it
/// is used (a TTL when a packet is built, a buffer size when a socket is
/// made), so a new value holds for what comes next and leaves what exists
/// alone.  The others are read once, when the stack is made.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Tunable {
    IpTtl(u8),
    Ip6HopLimit(u8),
    /// ICMP errors a second (the bucket starts full again).
    IcmpRateLimit(u32),
    TcpMsl(core::time::Duration),
    TcpDelayedAck(bool),
    /// Send buffer of new connections.
    TcpSendSpace(usize),
    /// Receive buffer of new connections.
    TcpRecvSpace(usize),
    TcpSendbufMax(usize),
    TcpRecvbufMax(usize),
    /// Congestion control of new connections.
    TcpCc(crate::tcp::CcAlgorithm),
    Somaxconn(usize),
    TcpSyncookies(bool),
    TcpKeepIdle(core::time::Duration),
    TcpKeepIntvl(core::time::Duration),
    TcpKeepCnt(u32),
    /// ECN of new connections.
    TcpEcn(crate::tcp::EcnMode),
    /// Lifetime of a neighbour resolved from then on
    /// (`net.link.ether.inet.max_age`).
    ArpMaxAge(core::time::Duration),
    /// Packets held per unresolved neighbour from then on
    /// (`net.link.ether.inet.maxhold`).
    ArpMaxHold(usize),
}

impl Stack {
    /// Sets a live tunable.
    pub fn set_tunable(&mut self, t: Tunable) {
        let tcp = &mut self.tcp.cfg;
        match t {
            Tunable::IpTtl(v) => self.ip.cfg.ip_ttl = v,
            Tunable::Ip6HopLimit(v) => self.ip.cfg.ip6_hop_limit = v,
            Tunable::IcmpRateLimit(v) => {
                self.ip.cfg.icmp_rate_limit = v;
                self.ip.icmp_errors = crate::ratelimit::TokenBucket::new(v);
            }
            Tunable::TcpMsl(v) => tcp.msl = v,
            Tunable::TcpDelayedAck(v) => tcp.delayed_ack = v,
            Tunable::TcpSendSpace(v) => tcp.send_space = v,
            Tunable::TcpRecvSpace(v) => tcp.recv_space = v,
            Tunable::TcpSendbufMax(v) => tcp.sendbuf_max = v,
            Tunable::TcpRecvbufMax(v) => tcp.recvbuf_max = v,
            Tunable::TcpCc(v) => tcp.cc = v,
            Tunable::Somaxconn(v) => tcp.somaxconn = v,
            Tunable::TcpSyncookies(v) => tcp.syncookies = v,
            Tunable::TcpKeepIdle(v) => tcp.keepidle = v,
            Tunable::TcpKeepIntvl(v) => tcp.keepintvl = v,
            Tunable::TcpKeepCnt(v) => tcp.keepcnt = v,
            Tunable::TcpEcn(v) => tcp.ecn = v,
            Tunable::ArpMaxAge(v) => {
                self.ip.cfg.arp_max_age = v;
                self.ip.neighbors.set_max_age(v);
            }
            Tunable::ArpMaxHold(v) => {
                self.ip.cfg.arp_maxhold = v;
                self.ip.neighbors.set_max_hold(v);
            }
        }
        // What `Stack::config` shows stays what is in force.
        self.ip.cfg.tcp = self.tcp.cfg.clone();
    }
}
