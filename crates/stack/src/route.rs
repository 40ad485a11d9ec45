//! The routing table: longest-prefix match over IPv4 and IPv6 routes.
//!
//! Routes are kept sorted by prefix length, longest first, so a lookup is a
//! scan that stops at the first match.  Tables are small on a host (the
//! connected subnets, a default route, a few statics), where a scan of a
//! short sorted vector beats a trie.

use core::fmt;
use core::net::IpAddr;

use crate::iface::IfaceId;

/// An address prefix: an address and how many leading bits matter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpCidr {
    addr: IpAddr,
    prefix_len: u8,
}

/// Why an [`IpCidr`] could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadPrefixLen(pub u8);

impl fmt::Display for BadPrefixLen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "prefix length {} is too long for the address family",
            self.0
        )
    }
}

impl IpCidr {
    /// A prefix; the host bits of `addr` are cleared.
    pub fn new(addr: IpAddr, prefix_len: u8) -> Result<Self, BadPrefixLen> {
        let max = match addr {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        if prefix_len > max {
            return Err(BadPrefixLen(prefix_len));
        }
        Ok(IpCidr {
            addr: mask(addr, prefix_len),
            prefix_len,
        })
    }

    /// 0.0.0.0/0, or ::/0 with `v6`.
    pub fn default_route(v6: bool) -> Self {
        let addr = if v6 {
            IpAddr::V6(core::net::Ipv6Addr::UNSPECIFIED)
        } else {
            IpAddr::V4(core::net::Ipv4Addr::UNSPECIFIED)
        };
        IpCidr {
            addr,
            prefix_len: 0,
        }
    }

    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    pub fn prefix_len(&self) -> u8 {
        self.prefix_len
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_)) => {
                mask(ip, self.prefix_len) == self.addr
            }
            _ => false,
        }
    }
}

impl fmt::Display for IpCidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

fn mask(ip: IpAddr, prefix_len: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => {
            let bits = u32::from(a);
            let m = if prefix_len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(prefix_len.min(32)))
            };
            IpAddr::V4((bits & m).into())
        }
        IpAddr::V6(a) => {
            let bits = u128::from(a);
            let m = if prefix_len == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(prefix_len.min(128)))
            };
            IpAddr::V6((bits & m).into())
        }
    }
}

/// One route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub dest: IpCidr,
    /// The next hop, or `None` when the destination is on the link.
    pub gateway: Option<IpAddr>,
    pub iface: IfaceId,
}

/// Where a packet goes: out of which interface, to which neighbor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextHop {
    pub iface: IfaceId,
    pub neighbor: IpAddr,
}

/// Why a route could not be added or removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteError {
    Exists,
    NotFound,
    Full,
    FamilyMismatch,
}

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RouteError::Exists => "a route to this prefix exists",
            RouteError::NotFound => "no route to this prefix",
            RouteError::Full => "the routing table is full",
            RouteError::FamilyMismatch => "the gateway is not of the prefix's address family",
        })
    }
}

/// A routing table, longest prefix first.
#[derive(Debug, Clone, Default)]
pub struct RouteTable {
    routes: Vec<Route>,
    limit: usize,
    /// Counts changes, for paths cached from the table.
    epoch: u64,
}

impl RouteTable {
    pub fn new(limit: usize) -> Self {
        RouteTable {
            routes: Vec::new(),
            limit,
            epoch: 0,
        }
    }

    pub fn add(&mut self, route: Route) -> Result<(), RouteError> {
        if let Some(gw) = route.gateway {
            if gw.is_ipv4() != route.dest.addr().is_ipv4() {
                return Err(RouteError::FamilyMismatch);
            }
        }
        if self.routes.iter().any(|r| r.dest == route.dest) {
            return Err(RouteError::Exists);
        }
        if self.routes.len() >= self.limit {
            return Err(RouteError::Full);
        }
        let at = self
            .routes
            .partition_point(|r| r.dest.prefix_len() >= route.dest.prefix_len());
        self.routes.insert(at, route);
        self.epoch += 1;
        Ok(())
    }

    pub fn remove(&mut self, dest: IpCidr) -> Result<Route, RouteError> {
        let at = self
            .routes
            .iter()
            .position(|r| r.dest == dest)
            .ok_or(RouteError::NotFound)?;
        self.epoch += 1;
        Ok(self.routes.remove(at))
    }

    /// Removes every route out of `iface`.
    pub fn remove_iface(&mut self, iface: IfaceId) {
        self.routes.retain(|r| r.iface != iface);
        self.epoch += 1;
    }

    /// Grows with every change of the table.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The most specific route to `dst`.
    pub fn lookup(&self, dst: IpAddr) -> Option<&Route> {
        self.routes.iter().find(|r| r.dest.contains(dst))
    }

    /// Where to send a packet for `dst`.
    pub fn next_hop(&self, dst: IpAddr) -> Option<NextHop> {
        self.lookup(dst).map(|r| NextHop {
            iface: r.iface,
            neighbor: r.gateway.unwrap_or(dst),
        })
    }

    pub fn iter(&self) -> impl Iterator<Item = &Route> {
        self.routes.iter()
    }

    pub fn len(&self) -> usize {
        self.routes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(a, b, c, d))
    }

    fn cidr(ip: IpAddr, len: u8) -> IpCidr {
        IpCidr::new(ip, len).unwrap()
    }

    #[test]
    fn longest_prefix_wins() {
        let mut t = RouteTable::new(16);
        let (i0, i1) = (IfaceId(0), IfaceId(1));
        t.add(Route {
            dest: cidr(v4(0, 0, 0, 0), 0),
            gateway: Some(v4(10, 99, 1, 1)),
            iface: i0,
        })
        .unwrap();
        t.add(Route {
            dest: cidr(v4(10, 99, 1, 0), 24),
            gateway: None,
            iface: i0,
        })
        .unwrap();
        t.add(Route {
            dest: cidr(v4(10, 99, 0, 0), 16),
            gateway: Some(v4(10, 99, 1, 254)),
            iface: i1,
        })
        .unwrap();
        assert_eq!(
            t.next_hop(v4(10, 99, 1, 7)),
            Some(NextHop {
                iface: i0,
                neighbor: v4(10, 99, 1, 7)
            })
        );
        assert_eq!(
            t.next_hop(v4(10, 99, 2, 7)),
            Some(NextHop {
                iface: i1,
                neighbor: v4(10, 99, 1, 254)
            })
        );
        assert_eq!(
            t.next_hop(v4(192, 0, 2, 1)),
            Some(NextHop {
                iface: i0,
                neighbor: v4(10, 99, 1, 1)
            })
        );
        assert_eq!(t.next_hop(IpAddr::V6(Ipv6Addr::LOCALHOST)), None);
        assert_eq!(
            t.add(Route {
                dest: cidr(v4(10, 99, 1, 9), 24),
                gateway: None,
                iface: i1
            }),
            Err(RouteError::Exists)
        );
        t.remove(cidr(v4(10, 99, 0, 0), 16)).unwrap();
        assert_eq!(
            t.next_hop(v4(10, 99, 2, 7)).unwrap().neighbor,
            v4(10, 99, 1, 1)
        );
    }

    #[test]
    fn cidr_masks_and_rejects_long_prefixes() {
        assert_eq!(cidr(v4(10, 99, 1, 77), 24).addr(), v4(10, 99, 1, 0));
        assert!(IpCidr::new(v4(1, 2, 3, 4), 33).is_err());
        assert!(cidr(v4(0, 0, 0, 0), 0).contains(v4(255, 255, 255, 255)));
        assert!(!cidr(v4(0, 0, 0, 0), 0).contains(IpAddr::V6(Ipv6Addr::UNSPECIFIED)));
        let v6 = cidr(IpAddr::V6("2001:db8::1".parse().unwrap()), 64);
        assert!(v6.contains(IpAddr::V6("2001:db8::ffff".parse().unwrap())));
    }

    #[test]
    fn table_limit_and_family_checks() {
        let mut t = RouteTable::new(1);
        t.add(Route {
            dest: cidr(v4(10, 0, 0, 0), 8),
            gateway: None,
            iface: IfaceId(0),
        })
        .unwrap();
        assert_eq!(
            t.add(Route {
                dest: cidr(v4(11, 0, 0, 0), 8),
                gateway: None,
                iface: IfaceId(0)
            }),
            Err(RouteError::Full)
        );
        let mut t = RouteTable::new(4);
        let bad = Route {
            dest: cidr(v4(0, 0, 0, 0), 0),
            gateway: Some(IpAddr::V6(Ipv6Addr::LOCALHOST)),
            iface: IfaceId(0),
        };
        assert_eq!(t.add(bad), Err(RouteError::FamilyMismatch));
    }
}
