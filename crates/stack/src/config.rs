//! The stack's tunables.  The engine maps `[freebsd.sysctl]` keys onto these.

use core::time::Duration;

use crate::tcp::TcpConfig;

/// Tunables of one stack instance.
#[derive(Debug, Clone, PartialEq)]
pub struct StackConfig {
    /// The per-boot secret: keys the hash tables, later ISNs and cookies.
    pub seed: u64,
    /// TTL of packets we originate (`net.inet.ip.ttl`).
    pub ip_ttl: u8,
    /// Packets held per unresolved neighbor (`net.link.ether.inet.maxhold`).
    pub arp_maxhold: usize,
    /// Lifetime of a resolved neighbor (`net.link.ether.inet.max_age`).
    pub arp_max_age: Duration,
    /// Time between ARP requests for an unresolved neighbor.
    pub arp_retry_interval: Duration,
    /// Requests sent before a resolution fails.
    pub arp_max_retries: u32,
    /// Neighbor cache entries at most.
    pub arp_cache_size: usize,
    /// Datagrams under reassembly at most (`net.inet.ip.maxfragpackets`).
    pub reass_max_packets: usize,
    /// Fragments per datagram at most (`net.inet.ip.maxfragsperpacket`).
    pub reass_max_frags: usize,
    /// Reassembly buffer bytes at most, all datagrams together.
    pub reass_max_bytes: usize,
    /// Time a datagram may take to arrive whole (`net.inet.ip.fragttl`).
    pub reass_timeout: Duration,
    /// ICMP errors sent per second at most (`net.inet.icmp.icmplim`).
    pub icmp_rate_limit: u32,
    /// Receive queue bytes of a UDP socket (`net.inet.udp.recvspace`).
    pub udp_recv_space: usize,
    /// Sockets at most (`kern.ipc.maxsockets`).
    pub max_sockets: usize,
    /// Hop limit of IPv6 packets we originate (`net.inet6.ip6.hlim`).
    pub ip6_hop_limit: u8,
    /// Duplicate address probes per IPv6 address (`net.inet6.ip6.dad_count`;
    /// 0 takes addresses into use at once).
    pub ip6_dad_count: u8,
    /// Take a default router from router advertisements on interfaces
    /// without `gateway6` (`net.inet6.ip6.accept_rtadv`).
    pub ip6_accept_rtadv: bool,
    /// Follow valid redirects from a destination's router
    /// (`net.inet6.icmp6.rediraccept`).
    pub ip6_redirect_accept: bool,
    /// Destinations whose lowered path MTU is remembered, at most.
    pub ip6_pmtu_cache_size: usize,
    /// IPv4 destinations whose lowered path MTU (fragmentation needed,
    /// RFC 1191) is remembered, at most.
    pub ip4_pmtu_cache_size: usize,
    /// TCP's tunables.
    pub tcp: TcpConfig,
}

impl Default for StackConfig {
    fn default() -> Self {
        StackConfig {
            seed: 0,
            ip_ttl: 64,
            arp_maxhold: 16,
            arp_max_age: Duration::from_secs(1200),
            arp_retry_interval: Duration::from_secs(1),
            arp_max_retries: 5,
            arp_cache_size: 4096,
            reass_max_packets: 1024,
            reass_max_frags: 64,
            reass_max_bytes: 8 << 20,
            reass_timeout: Duration::from_secs(30),
            icmp_rate_limit: 200,
            udp_recv_space: 256 << 10,
            max_sockets: 1 << 20,
            ip6_hop_limit: 64,
            ip6_dad_count: 1,
            ip6_accept_rtadv: true,
            ip6_redirect_accept: true,
            ip6_pmtu_cache_size: 4096,
            ip4_pmtu_cache_size: 4096,
            tcp: TcpConfig::default(),
        }
    }
}
