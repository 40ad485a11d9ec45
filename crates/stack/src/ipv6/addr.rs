//! An interface's IPv6 addresses: the link-local one made from the MAC,
//! the configured ones, their duplicate address detection (RFC 4862 5.4),
//! and which of them a packet leaves with (RFC 6724, the rules a host with
//! few addresses needs).

use core::net::Ipv6Addr;

use crate::time::Instant;

/// Where an address stands in duplicate address detection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrState {
    /// Being checked: `probes_left` solicitations still to send, the next
    /// (or, with none left, the verdict) at `next`.  Packets to it are not
    /// taken, and it is never a source.
    Tentative { probes_left: u8, next: Instant },
    /// Checked; in use.
    Preferred,
    /// Another node holds it; never used.
    Duplicate,
}

/// One IPv6 address of an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6IfAddr {
    pub addr: Ipv6Addr,
    pub prefix_len: u8,
    pub state: AddrState,
}

impl Ipv6IfAddr {
    pub fn is_preferred(&self) -> bool {
        self.state == AddrState::Preferred
    }

    pub fn is_tentative(&self) -> bool {
        matches!(self.state, AddrState::Tentative { .. })
    }

    /// Whether `ip` is on this address's prefix.
    pub fn on_prefix(&self, ip: Ipv6Addr) -> bool {
        common_prefix_len(self.addr, ip) >= self.prefix_len
    }
}

/// IPv6 on one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6Iface {
    /// The link-local address first, then the configured ones.
    pub addrs: Vec<Ipv6IfAddr>,
    /// The default router set by configuration (`gateway6`).
    pub gateway: Option<Ipv6Addr>,
    /// The default router learned from router advertisements, and when its
    /// lifetime ends.
    pub learned_router: Option<(Ipv6Addr, Instant)>,
    /// Router solicitations still to send (RFC 4861 6.3.7), the next at
    /// `next_solicit`.
    pub solicits_left: u8,
    pub next_solicit: Instant,
}

impl Ipv6Iface {
    /// Whether `ip` is a usable (not tentative, not duplicate) address of
    /// the interface.
    pub fn has_addr(&self, ip: Ipv6Addr) -> bool {
        self.addrs.iter().any(|a| a.addr == ip && a.is_preferred())
    }

    /// The address entry for `ip`, whatever its state.
    pub fn find(&self, ip: Ipv6Addr) -> Option<&Ipv6IfAddr> {
        self.addrs.iter().find(|a| a.addr == ip)
    }

    /// Whether `ip` is a multicast group the interface listens to: all
    /// nodes, or the solicited-node group of one of its addresses
    /// (tentative ones too, for duplicate address detection).
    pub fn listens_to(&self, ip: Ipv6Addr) -> bool {
        ip == ALL_NODES
            || self
                .addrs
                .iter()
                .any(|a| a.state != AddrState::Duplicate && solicited_node(a.addr) == ip)
    }

    /// Whether `ip` is on the link by a configured prefix.
    pub fn on_link(&self, ip: Ipv6Addr) -> bool {
        is_link_local(ip) || self.addrs.iter().any(|a| a.on_prefix(ip))
    }
}

/// ff02::1, every node on the link.
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
/// ff02::2, every router on the link.
pub const ALL_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);

/// The solicited-node group of `addr` (RFC 4291 2.7.1).
pub fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    wire::icmpv6::solicited_node(&addr)
}

/// The Ethernet address a multicast group is sent to (RFC 2464 7).
pub fn multicast_mac(group: Ipv6Addr) -> [u8; 6] {
    let o = group.octets();
    [0x33, 0x33, o[12], o[13], o[14], o[15]]
}

/// The link-local address of a MAC: fe80::/64 with the modified EUI-64
/// interface identifier (RFC 4291 2.5.1 and appendix A).
pub fn link_local_from_mac(mac: [u8; 6]) -> Ipv6Addr {
    let mut o = [0u8; 16];
    o[0] = 0xfe;
    o[1] = 0x80;
    o[8] = mac[0] ^ 0x02;
    o[9] = mac[1];
    o[10] = mac[2];
    o[11] = 0xff;
    o[12] = 0xfe;
    o[13] = mac[3];
    o[14] = mac[4];
    o[15] = mac[5];
    Ipv6Addr::from(o)
}

/// How many leading bits two addresses share.
pub fn common_prefix_len(a: Ipv6Addr, b: Ipv6Addr) -> u8 {
    (u128::from(a) ^ u128::from(b)).leading_zeros().min(128) as u8
}

/// Whether `ip` is a link-local unicast address (fe80::/10).
pub fn is_link_local(ip: Ipv6Addr) -> bool {
    ip.segments()[0] & 0xffc0 == 0xfe80
}

/// The address a packet to `dst` leaves with, among `addrs` (RFC 6724 5):
/// preferred addresses first; the same scope as the destination first (a
/// link-local destination gets the link-local source); then the longest
/// prefix shared with it.  An address still under duplicate detection is
/// taken only when no checked one will do, as an optimistic address (RFC
/// 4429): a program that connects as soon as its engine starts is not
/// refused for the second detection takes (the reply reaches it once the
/// address is checked; see `ndp.rs` for what such a source may not say).
pub fn select_source(addrs: &[Ipv6IfAddr], dst: Ipv6Addr) -> Option<Ipv6Addr> {
    let link_scope = is_link_local(dst) || (dst.is_multicast() && dst.segments()[0] & 0x000f <= 2);
    addrs
        .iter()
        .filter(|a| a.state != AddrState::Duplicate)
        .max_by_key(|a| {
            let same_scope = is_link_local(a.addr) == link_scope;
            (a.is_preferred(), same_scope, common_prefix_len(a.addr, dst))
        })
        .map(|a| a.addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str, prefix_len: u8, state: AddrState) -> Ipv6IfAddr {
        Ipv6IfAddr {
            addr: s.parse().unwrap(),
            prefix_len,
            state,
        }
    }

    #[test]
    fn link_local_flips_the_universal_bit_and_inserts_fffe() {
        let ll = link_local_from_mac([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
        assert_eq!(ll, "fe80::5054:ff:fe12:3456".parse::<Ipv6Addr>().unwrap());
        assert!(is_link_local(ll));
    }

    #[test]
    fn source_follows_scope_then_prefix_and_skips_unusable_addresses() {
        let addrs = [
            addr("fe80::1", 64, AddrState::Preferred),
            addr("fd99::2", 64, AddrState::Preferred),
            addr("fd98::2", 64, AddrState::Preferred),
            addr(
                "fd97::2",
                64,
                AddrState::Tentative {
                    probes_left: 1,
                    next: Instant::ZERO,
                },
            ),
        ];
        let pick = |d: &str| select_source(&addrs, d.parse().unwrap()).map(|a| a.to_string());
        assert_eq!(pick("fe80::9").as_deref(), Some("fe80::1"));
        assert_eq!(pick("ff02::1").as_deref(), Some("fe80::1"));
        assert_eq!(pick("fd99::9").as_deref(), Some("fd99::2"));
        assert_eq!(pick("fd98::9").as_deref(), Some("fd98::2"));
        // The tentative address shares more bits but a checked one wins.
        assert_eq!(pick("fd97::9").as_deref(), Some("fd98::2"));
        let only_dup = [addr("fd99::2", 64, AddrState::Duplicate)];
        assert_eq!(select_source(&only_dup, "fd99::9".parse().unwrap()), None);
        // With nothing checked yet, a tentative address is used
        // optimistically (RFC 4429).
        let early = [addr(
            "fd99::2",
            64,
            AddrState::Tentative {
                probes_left: 1,
                next: Instant::ZERO,
            },
        )];
        assert_eq!(
            select_source(&early, "fd99::9".parse().unwrap()),
            Some("fd99::2".parse().unwrap())
        );
    }

    #[test]
    fn prefixes() {
        let a = addr("fd99:0:0:1::2", 64, AddrState::Preferred);
        assert!(a.on_prefix("fd99:0:0:1::ffff".parse().unwrap()));
        assert!(!a.on_prefix("fd99:0:0:2::2".parse().unwrap()));
        assert_eq!(common_prefix_len(a.addr, a.addr), 128);
    }
}
