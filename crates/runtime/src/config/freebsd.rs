//! `[freebsd.boot]` and `[freebsd.sysctl]`: FreeBSD's tunables by their
//! FreeBSD names, with FreeBSD's units, for those ustack implements.
//!
//! FreeBSD has thousands of names, so an unknown one is a warning, not an
//! error. The raw entries are kept as written (for `ustack sysctl -a`, and
//! for settings a later ustack will read); the typed [`Sysctls`] and
//! [`BootParams`] hold the validated values with defaults.

use std::time::Duration;

use super::ini::{Origin, Section};
use super::types::CongestionControl;
use super::value::Reason;
use super::{ConfigError, Ctx};

/// One `name=value` of a FreeBSD section, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysctlEntry {
    pub name: String,
    pub value: String,
    /// The line in the file; `None` for a command-line override.
    pub line: Option<usize>,
}

pub(crate) fn entries(sec: &Section) -> Vec<SysctlEntry> {
    sec.entries
        .iter()
        .map(|e| SysctlEntry {
            name: e.key.clone(),
            value: e.value.clone(),
            line: match e.origin {
                Origin::Line(l) => Some(l),
                Origin::Override => None,
            },
        })
        .collect()
}

/// Value kinds of the typed sysctls: each parses FreeBSD's text and shows
/// the value back in FreeBSD's unit.
mod kind {
    use super::Reason;
    use crate::config::value;
    use std::time::Duration;

    pub mod int {
        use super::*;
        pub fn parse<T: TryFrom<u64>>(v: &str, min: u64, max: u64) -> Result<T, Reason> {
            let n = value::int(v, min, max)?;
            T::try_from(n).map_err(|_| format!("is out of range ({min}..={max})"))
        }
        pub fn show<T: std::fmt::Display>(x: &T) -> String {
            x.to_string()
        }
    }

    pub mod flag {
        use super::*;
        pub fn parse(v: &str) -> Result<bool, Reason> {
            value::flag(v)
        }
        pub fn show(x: &bool) -> String {
            u8::from(*x).to_string()
        }
    }

    /// Milliseconds (FreeBSD's unit for `net.inet.tcp.msl`, `keepidle`, ...).
    pub mod ms {
        use super::*;
        pub fn parse(v: &str, min: u64, max: u64) -> Result<Duration, Reason> {
            value::int(v, min, max).map(Duration::from_millis)
        }
        pub fn show(x: &Duration) -> String {
            x.as_millis().to_string()
        }
    }

    /// Seconds.
    pub mod secs {
        use super::*;
        pub fn parse(v: &str, min: u64, max: u64) -> Result<Duration, Reason> {
            value::int(v, min, max).map(Duration::from_secs)
        }
        pub fn show(x: &Duration) -> String {
            x.as_secs().to_string()
        }
    }

    pub mod cc {
        use super::*;
        use crate::config::types::CongestionControl;
        pub fn parse(v: &str) -> Result<CongestionControl, Reason> {
            match v {
                "cubic" => Ok(CongestionControl::Cubic),
                "newreno" => Ok(CongestionControl::NewReno),
                _ => Err("must be cubic or newreno".into()),
            }
        }
        pub fn show(x: &CongestionControl) -> String {
            x.to_string()
        }
    }
}

macro_rules! sysctls {
    ($(
        $(#[doc = $doc:literal])*
        $field:ident: $ty:ty = $name:literal, $kind:ident($($arg:expr),*), default $def:expr;
    )*) => {
        /// The `[freebsd.sysctl]` values ustack uses, typed; every field
        /// names its sysctl. Values not written keep their defaults.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct Sysctls {
            $( $(#[doc = $doc])* pub $field: $ty, )*
        }

        impl Default for Sysctls {
            fn default() -> Self {
                Sysctls { $( $field: $def, )* }
            }
        }

        impl Sysctls {
            /// The sysctl names ustack implements.
            pub const NAMES: &'static [&'static str] = &[$($name),*];

            /// Sets sysctl `name` from FreeBSD's text. `Ok(false)` if ustack
            /// does not implement `name`; `Err(reason)` for an invalid value
            /// (worded to follow the quoted value). Checks only this value:
            /// see [`Sysctls::check`] for the relations between values.
            pub fn set(&mut self, name: &str, value: &str) -> Result<bool, String> {
                match name {
                    $( $name => self.$field = kind::$kind::parse(value $(, $arg)*)?, )*
                    _ => return Ok(false),
                }
                Ok(true)
            }

            /// Sysctl `name` in FreeBSD's text and unit.
            pub fn get(&self, name: &str) -> Option<String> {
                match name {
                    $( $name => Some(kind::$kind::show(&self.$field)), )*
                    _ => None,
                }
            }
        }
    };
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

sysctls! {
    /// `net.inet.ip.ttl`: TTL of packets ustack originates (1..=255, 64).
    ip_ttl: u8 = "net.inet.ip.ttl", int(1, 255), default 64;
    /// `net.inet6.ip6.hlim`: hop limit of IPv6 packets ustack originates
    /// (1..=255, 64).
    ip6_hlim: u8 = "net.inet6.ip6.hlim", int(1, 255), default 64;
    /// `net.inet6.ip6.dad_count`: duplicate address probes per IPv6
    /// address, one a second (0..=15, 1; 0 uses addresses at once).
    ip6_dad_count: u8 = "net.inet6.ip6.dad_count", int(0, 15), default 1;
    /// `net.inet6.ip6.accept_rtadv`: on a port without `gateway6`, solicit
    /// routers and take the default router from their advertisements
    /// (default 1).
    ip6_accept_rtadv: bool = "net.inet6.ip6.accept_rtadv", flag(), default true;
    /// `net.inet6.icmp6.rediraccept`: follow valid redirects from a
    /// destination's router (default 1, as FreeBSD).
    ip6_redirect_accept: bool = "net.inet6.icmp6.rediraccept", flag(), default true;
    /// `net.link.ether.inet.maxhold`: packets held per unresolved neighbor
    /// (1..=4096, 16; FreeBSD's default is 1, too few for a burst).
    arp_maxhold: u32 = "net.link.ether.inet.maxhold", int(1, 4096), default 16;
    /// `net.link.ether.inet.max_age`: lifetime of a resolved neighbor,
    /// seconds (1..=604800, 1200).
    arp_max_age: Duration = "net.link.ether.inet.max_age", secs(1, 604_800),
        default Duration::from_secs(1200);
    /// `net.inet.ip.maxfragpackets`: datagrams under reassembly at most
    /// (0..=1048576, 1024; 0 drops every fragment; FreeBSD's -1, unlimited,
    /// is refused: every queue has a limit).
    reass_max_packets: u32 = "net.inet.ip.maxfragpackets", int(0, MIB), default 1024;
    /// `net.inet.ip.maxfragsperpacket`: fragments per datagram at most
    /// (1..=8192, 64).
    reass_max_frags: u32 = "net.inet.ip.maxfragsperpacket", int(1, 8192), default 64;
    /// `net.inet.ip.fragttl`: time a datagram may take to arrive whole. In
    /// SECONDS (1..=255, 30), not FreeBSD's slow-timeout ticks.
    reass_timeout: Duration = "net.inet.ip.fragttl", secs(1, 255),
        default Duration::from_secs(30);
    /// `net.inet.icmp.icmplim`: ICMP errors sent per second at most
    /// (0..=1000000, 200; 0 = no limit, as in FreeBSD).
    icmp_rate_limit: u32 = "net.inet.icmp.icmplim", int(0, 1_000_000), default 200;
    /// `net.inet.icmp.drop_redirect`: ignore received ICMP redirects
    /// (default 1; FreeBSD's is 0).
    icmp_drop_redirect: bool = "net.inet.icmp.drop_redirect", flag(), default true;
    /// `net.inet.udp.recvspace`: receive queue bytes of a UDP socket
    /// (1024..=1G, 256K).
    udp_recv_space: u32 = "net.inet.udp.recvspace", int(KIB, GIB), default 256 << 10;
    /// `net.inet.tcp.msl`: maximum segment lifetime, milliseconds as in
    /// FreeBSD (1..=600000, 30000); TIME_WAIT lasts 2 MSL.
    tcp_msl: Duration = "net.inet.tcp.msl", ms(1, 600_000),
        default Duration::from_millis(30_000);
    /// `net.inet.tcp.delayed_ack` (default 1).
    tcp_delayed_ack: bool = "net.inet.tcp.delayed_ack", flag(), default true;
    /// `net.inet.tcp.fast_path`: header prediction and direct segment
    /// writing for established connections (default 1; 0 sends every
    /// segment through the general path, for comparison).
    tcp_fast_path: bool = "net.inet.tcp.fast_path", flag(), default true;
    /// `net.inet.tcp.sendspace`: initial send buffer bytes (1024..=1G, 32K).
    tcp_send_space: u32 = "net.inet.tcp.sendspace", int(KIB, GIB), default 32 << 10;
    /// `net.inet.tcp.recvspace`: initial receive buffer bytes (1024..=1G, 64K).
    tcp_recv_space: u32 = "net.inet.tcp.recvspace", int(KIB, GIB), default 64 << 10;
    /// `net.inet.tcp.sendbuf_max`: largest send buffer bytes (1024..=1G, 2M).
    tcp_sendbuf_max: u32 = "net.inet.tcp.sendbuf_max", int(KIB, GIB), default 2 << 20;
    /// `net.inet.tcp.recvbuf_max`: largest receive buffer bytes
    /// (1024..=1G, 2M).
    tcp_recvbuf_max: u32 = "net.inet.tcp.recvbuf_max", int(KIB, GIB), default 2 << 20;
    /// `net.inet.tcp.cc.algorithm`: cubic (default) or newreno.
    tcp_cc: CongestionControl = "net.inet.tcp.cc.algorithm", cc(),
        default CongestionControl::Cubic;
    /// `kern.ipc.somaxconn`: listen backlog at most (1..=1048576, 4096).
    somaxconn: u32 = "kern.ipc.somaxconn", int(1, MIB), default 4096;
    /// `kern.ipc.maxsockbuf`: largest socket buffer bytes a socket option
    /// may ask for (64K..=4G, 2M).
    max_sockbuf: u64 = "kern.ipc.maxsockbuf", int(64 * KIB, 4 * GIB), default 2 << 20;
    /// `net.inet.tcp.mssdflt`: MSS when the peer sends none (216..=65495,
    /// 536).
    tcp_mssdflt: u16 = "net.inet.tcp.mssdflt", int(216, 65_495), default 536;
    /// `net.inet.tcp.v6mssdflt`: the same over IPv6 (1220..=65475, 1220:
    /// RFC 9293 MUST-15).
    tcp_v6mssdflt: u16 = "net.inet.tcp.v6mssdflt", int(1220, 65_475), default 1220;
    /// `net.inet.tcp.syncookies` (default 1).
    tcp_syncookies: bool = "net.inet.tcp.syncookies", flag(), default true;
    /// `net.inet.tcp.keepidle`: idle time before the first keepalive,
    /// milliseconds as in FreeBSD (default 7200000, two hours).
    tcp_keepidle: Duration = "net.inet.tcp.keepidle", ms(1, i32::MAX as u64),
        default Duration::from_millis(7_200_000);
    /// `net.inet.tcp.keepintvl`: time between keepalives, milliseconds
    /// (default 75000).
    tcp_keepintvl: Duration = "net.inet.tcp.keepintvl", ms(1, i32::MAX as u64),
        default Duration::from_millis(75_000);
    /// `net.inet.tcp.keepcnt`: unanswered keepalives before the connection
    /// is dropped (1..=255, 8).
    tcp_keepcnt: u32 = "net.inet.tcp.keepcnt", int(1, 255), default 8;
    /// `net.inet.tcp.sack.enable` (default 1).
    tcp_sack: bool = "net.inet.tcp.sack.enable", flag(), default true;
    /// `net.inet.tcp.rfc1323`: window scaling and timestamps (default 1).
    tcp_rfc1323: bool = "net.inet.tcp.rfc1323", flag(), default true;
    /// `net.inet.tcp.ecn.enable`: ECN (RFC 3168): 0 off, 1 asked for and
    /// accepted, 2 accepted when a peer asks (default, as FreeBSD and
    /// Linux).
    tcp_ecn: u32 = "net.inet.tcp.ecn.enable", int(0, 2), default 2;
    /// `net.inet.tcp.memory_budget_mb` (ustack's own): MiB the TCP
    /// connections of one engine may hold in all, their state, rings and
    /// tables (0..=16777216, 0 = no budget); a handshake past it is refused
    /// (dropped, counted in `rx_drop_tcp_memory_budget`), a connect fails
    /// with ENOBUFS.
    tcp_memory_budget_mb: u32 = "net.inet.tcp.memory_budget_mb", int(0, 16 * MIB), default 0;
    /// `net.inet.ip.portrange.first`: lowest ephemeral port (default 10000).
    port_range_first: u16 = "net.inet.ip.portrange.first", int(1, 65_535), default 10_000;
    /// `net.inet.ip.portrange.last`: highest ephemeral port (default 65535).
    port_range_last: u16 = "net.inet.ip.portrange.last", int(1, 65_535), default 65_535;
}

impl Sysctls {
    /// Checks the relations between values: returns the names of the
    /// sysctls in conflict (the one to blame first) and the reason.
    pub fn check(&self) -> Result<(), (&'static str, &'static str, String)> {
        if self.port_range_first > self.port_range_last {
            return Err((
                "net.inet.ip.portrange.first",
                "net.inet.ip.portrange.last",
                format!(
                    "net.inet.ip.portrange.first ({}) is above net.inet.ip.portrange.last ({})",
                    self.port_range_first, self.port_range_last
                ),
            ));
        }
        if self.tcp_send_space > self.tcp_sendbuf_max {
            return Err((
                "net.inet.tcp.sendspace",
                "net.inet.tcp.sendbuf_max",
                format!(
                    "net.inet.tcp.sendspace ({}) is above net.inet.tcp.sendbuf_max ({})",
                    self.tcp_send_space, self.tcp_sendbuf_max
                ),
            ));
        }
        if self.tcp_recv_space > self.tcp_recvbuf_max {
            return Err((
                "net.inet.tcp.recvspace",
                "net.inet.tcp.recvbuf_max",
                format!(
                    "net.inet.tcp.recvspace ({}) is above net.inet.tcp.recvbuf_max ({})",
                    self.tcp_recv_space, self.tcp_recvbuf_max
                ),
            ));
        }
        Ok(())
    }
}

/// The `[freebsd.boot]` tunables ustack uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootParams {
    /// `kern.ipc.maxsockets`: sockets per engine at most (1..=16777216,
    /// 262144 as in F-Stack's sample).
    pub max_sockets: u32,
}

impl Default for BootParams {
    fn default() -> Self {
        BootParams {
            max_sockets: 262_144,
        }
    }
}

const BOOT_IGNORED: &[(&str, &str)] = &[
    ("hz", "ustack's timers do not run on a FreeBSD clock tick"),
    (
        "physmem",
        "packet memory is set per port with [portN] memory=",
    ),
    (
        "memsz_MB",
        "packet memory is set per port with [portN] memory=",
    ),
    (
        "fd_reserve",
        "ustack reserves its socket numbers from the kernel, so they never collide with kernel fds",
    ),
    ("tcp_ecn", "ECN is not configurable"),
    ("kern.ncallout", "ustack's timers are not FreeBSD callouts"),
    (
        "net.inet.tcp.syncache.hashsize",
        "ustack sizes its own tables",
    ),
    (
        "net.inet.tcp.syncache.bucketlimit",
        "ustack sizes its own tables",
    ),
    ("net.inet.tcp.tcbhashsize", "ustack sizes its own tables"),
    (
        "kern.features.inet6",
        "IPv6 is enabled per port with addr6=",
    ),
];

const SYSCTL_IGNORED: &[(&str, &str)] = &[
    (
        "net.inet.tcp.functions_default",
        "ustack has one TCP implementation",
    ),
    ("net.inet.ip.redirect", "ustack never sends ICMP redirects"),
    ("net.inet.ip.forwarding", "ustack does not forward packets"),
    (
        "net.inet.tcp.sendbuf_auto",
        "buffer autotuning is not configurable",
    ),
    (
        "net.inet.tcp.recvbuf_auto",
        "buffer autotuning is not configurable",
    ),
    (
        "net.inet.tcp.sendbuf_inc",
        "buffer autotuning is not configurable",
    ),
    (
        "net.inet.tcp.recvbuf_inc",
        "buffer autotuning is not configurable",
    ),
];

fn ignored_why<'a>(table: &[(&str, &'a str)], name: &str) -> &'a str {
    table
        .iter()
        .find(|(n, _)| *n == name)
        .map_or("not a setting ustack implements", |(_, why)| *why)
}

pub(crate) fn build_boot(cx: &mut Ctx<'_>, sec: &Section) -> Result<BootParams, ConfigError> {
    const S: &str = "freebsd.boot";
    let mut b = BootParams::default();
    for e in &sec.entries {
        match e.key.as_str() {
            "kern.ipc.maxsockets" => {
                b.max_sockets = cx.value(S, e, |v| kind::int::parse(v, 1, 1 << 24))?;
            }
            k if Sysctls::NAMES.contains(&k) => {
                cx.ignored(S, e, "ustack reads it from [freebsd.sysctl]");
            }
            k => cx.ignored(S, e, ignored_why(BOOT_IGNORED, k)),
        }
    }
    Ok(b)
}

pub(crate) fn build_sysctl(cx: &mut Ctx<'_>, sec: &Section) -> Result<Sysctls, ConfigError> {
    const S: &str = "freebsd.sysctl";
    let mut s = Sysctls::default();
    for e in &sec.entries {
        let known = cx.value(S, e, |v| s.set(&e.key, v))?;
        if !known {
            if e.key == "kern.ipc.maxsockets" {
                cx.ignored(S, e, "ustack reads it from [freebsd.boot]");
            } else {
                cx.ignored(S, e, ignored_why(SYSCTL_IGNORED, &e.key));
            }
        }
    }
    Ok(s)
}

pub(crate) fn check_sysctls(cx: &Ctx<'_>, sec: &Section, s: &Sysctls) -> Result<(), ConfigError> {
    if let Err((first, second, reason)) = s.check() {
        let origin = sec
            .entry(first)
            .or_else(|| sec.entry(second))
            .map_or(sec.origin, |e| e.origin);
        return Err(cx.error(origin, format!("[freebsd.sysctl] {reason}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_round_trip() {
        let mut s = Sysctls::default();
        for name in Sysctls::NAMES {
            let v = s.get(name).unwrap();
            assert_eq!(s.set(name, &v), Ok(true), "{name}={v}");
        }
        assert_eq!(s, Sysctls::default());
        assert_eq!(s.set("net.inet.tcp.msl", "2000"), Ok(true));
        assert_eq!(s.tcp_msl, Duration::from_secs(2));
        assert_eq!(s.get("net.inet.tcp.msl").as_deref(), Some("2000"));
        assert_eq!(s.set("net.inet.tcp.cc.algorithm", "newreno"), Ok(true));
        assert_eq!(s.tcp_cc, CongestionControl::NewReno);
        assert_eq!(s.set("no.such", "1"), Ok(false));
        assert_eq!(s.get("no.such"), None);
        assert_eq!(
            s.set("net.inet.ip.ttl", "0").unwrap_err(),
            "is out of range (1..=255)"
        );
        assert_eq!(
            s.set("net.inet.tcp.cc.algorithm", "bbr").unwrap_err(),
            "must be cubic or newreno"
        );
    }

    #[test]
    fn relations() {
        let mut s = Sysctls::default();
        assert!(s.check().is_ok());
        s.port_range_first = 60000;
        s.port_range_last = 50000;
        assert_eq!(s.check().unwrap_err().0, "net.inet.ip.portrange.first");
    }
}
