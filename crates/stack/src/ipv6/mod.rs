//! IPv6 (RFC 8200): input with extension headers and reassembly, output
//! with routing, neighbor discovery and fragmentation; the addresses of an
//! interface and their duplicate address detection.

pub mod addr;
mod icmp;
mod input;
pub(crate) mod ndp;
mod output;
pub mod pmtu;

pub(crate) use input::Ipv6Datagram;
pub(crate) use output::flow_label;
pub use output::Ipv6Send;

use core::net::Ipv6Addr;

/// The key of an IPv6 datagram under reassembly (RFC 8200 4.5: source,
/// destination and identification).
pub(crate) type Ipv6FragKey = (Ipv6Addr, Ipv6Addr, u32);

/// What `Stack::enable_ipv6` sets up on an interface.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ipv6Config {
    /// Addresses besides the link-local one, with their prefix lengths
    /// (F-Stack's `addr6`/`prefix_len` and `vip_addr6`/`vip_prefix_len`).
    pub addrs: Vec<(Ipv6Addr, u8)>,
    /// The default router (`gateway6`); without one, router
    /// advertisements may set it (`net.inet6.ip6.accept_rtadv`).
    pub gateway: Option<Ipv6Addr>,
}
