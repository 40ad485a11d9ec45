//! `[portN]`: one network port, its link and its addresses.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::ini::{Entry, Section};
use super::types::{LinkSpec, PoolSize, XdpBindSetting, XdpModeSetting};
use super::value::{self, Reason, MAX_CORES};
use super::{ConfigError, Ctx};

/// The IPv4 side of a port (`addr`, `netmask`, `broadcast`, `gateway`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Config {
    pub addr: Ipv4Addr,
    /// Always contiguous.
    pub netmask: Ipv4Addr,
    /// The netmask's length.
    pub prefix_len: u8,
    /// `broadcast`, default `addr | !netmask`.
    pub broadcast: Ipv4Addr,
    /// The default route's next hop; inside the subnet.
    pub gateway: Option<Ipv4Addr>,
}

/// The IPv6 side of a port (`addr6`, `prefix_len`, `gateway6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Config {
    pub addr: Ipv6Addr,
    /// `addr6=...::1/48` or `prefix_len=`; default 64.
    pub prefix_len: u8,
    /// The default route's next hop, if NDP router discovery is not used.
    pub gateway: Option<Ipv6Addr>,
}

/// `[portN]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortConfig {
    /// N.
    pub id: u16,
    /// `if_name`: the interface's name inside ustack (default `ustackN`).
    pub if_name: String,
    /// `link`: how the port reaches the wire (default `dpdk`, port N, as in
    /// F-Stack).
    pub link: LinkSpec,
    /// `addr`/`netmask`/`broadcast`/`gateway`.
    pub ipv4: Option<Ipv4Config>,
    /// `addr6`/`prefix_len`/`gateway6`.
    pub ipv6: Option<Ipv6Config>,
    /// `vip_addr`: extra IPv4 addresses (/32) on the interface, at most 64.
    pub vip_addrs: Vec<Ipv4Addr>,
    /// `vip_addr6`: extra IPv6 addresses, at most 64.
    pub vip_addrs6: Vec<Ipv6Addr>,
    /// `vip_prefix_len`: prefix length of every `vip_addr6` (default 64).
    pub vip_prefix_len: u8,
    /// `lcore_list`: the cores whose engines serve this port; `None` (the
    /// default) means every core of `lcore_mask`.
    pub lcore_list: Option<Vec<u32>>,
    /// `memory`: packet pool per engine; `None` lets the engine choose.
    pub memory: Option<PoolSize>,
    /// `mtu`: override of the link's MTU.
    pub mtu: Option<u16>,
    /// `mac`: override of the link's Ethernet address.
    pub mac: Option<[u8; 6]>,
    /// `xdp_mode`: where an `af_xdp` port's XDP program runs.
    pub xdp_mode: XdpModeSetting,
    /// `xdp_bind`: zero-copy or copy mode for an `af_xdp` port.
    pub xdp_bind: XdpBindSetting,
}

/// F-Stack's limit on `vip_addr` and `vip_addr6`.
pub const MAX_VIPS: usize = 64;
/// The smallest MTU (IPv4's minimum), and F-Stack's.
pub const MTU_MIN: u16 = 68;
/// The smallest MTU of a link carrying IPv6.
pub const MTU_MIN_IPV6: u16 = 1280;

const KEYS: &[&str] = &[
    "addr",
    "netmask",
    "broadcast",
    "gateway",
    "addr6",
    "prefix_len",
    "gateway6",
    "vip_addr",
    "vip_addr6",
    "vip_prefix_len",
    "if_name",
    "lcore_list",
    "link",
    "memory",
    "mtu",
    "mac",
    "xdp_mode",
    "xdp_bind",
];

const IGNORED: &[(&str, &str)] = &[
    ("slave_port_list", "bonding is not supported"),
    (
        "vip_ifname",
        "virtual addresses are added to the port's own interface",
    ),
    ("ipfw_pr", "ipfw is not supported"),
];

fn unicast4(a: Ipv4Addr) -> Result<Ipv4Addr, Reason> {
    if a.is_unspecified() || a.is_multicast() || a.is_broadcast() || a.is_loopback() {
        return Err("is not a unicast address".into());
    }
    Ok(a)
}

fn unicast6(a: Ipv6Addr) -> Result<Ipv6Addr, Reason> {
    if a.is_unspecified() || a.is_multicast() || a.is_loopback() {
        return Err("is not a unicast address".into());
    }
    Ok(a)
}

fn vip4_list(v: &str) -> Result<Vec<Ipv4Addr>, Reason> {
    let mut out: Vec<Ipv4Addr> = Vec::new();
    for item in value::semicolon_items(v) {
        let a = value::ipv4(item)
            .and_then(unicast4)
            .map_err(|r| format!("has {item:?}, which {r}"))?;
        if out.contains(&a) {
            return Err(format!("lists {a} twice"));
        }
        out.push(a);
    }
    if out.len() > MAX_VIPS {
        return Err(format!("has {} addresses, more than {MAX_VIPS}", out.len()));
    }
    Ok(out)
}

fn vip6_list(v: &str) -> Result<Vec<Ipv6Addr>, Reason> {
    let mut out: Vec<Ipv6Addr> = Vec::new();
    for item in value::semicolon_items(v) {
        let a = value::ipv6(item)
            .and_then(unicast6)
            .map_err(|r| format!("has {item:?}, which {r}"))?;
        if out.contains(&a) {
            return Err(format!("lists {a} twice"));
        }
        out.push(a);
    }
    if out.len() > MAX_VIPS {
        return Err(format!("has {} addresses, more than {MAX_VIPS}", out.len()));
    }
    Ok(out)
}

/// A subnet for messages: `10.99.1.0/24`.
fn subnet(addr: Ipv4Addr, prefix_len: u8) -> String {
    let net = u32::from(addr) & u32::from(value::mask_of(prefix_len));
    format!("{}/{prefix_len}", Ipv4Addr::from(net))
}

pub(crate) fn build(cx: &mut Ctx<'_>, sec: &Section, id: u16) -> Result<PortConfig, ConfigError> {
    let s = sec.name.as_str();
    let mut p = PortConfig {
        id,
        if_name: format!("ustack{id}"),
        link: LinkSpec::Dpdk,
        ipv4: None,
        ipv6: None,
        vip_addrs: Vec::new(),
        vip_addrs6: Vec::new(),
        vip_prefix_len: 64,
        lcore_list: None,
        memory: None,
        mtu: None,
        mac: None,
        xdp_mode: XdpModeSetting::Auto,
        xdp_bind: XdpBindSetting::Auto,
    };
    // Raw values with their entries, validated together below.
    let mut addr: Option<(&Entry, Ipv4Addr, Option<u8>)> = None;
    let mut mask: Option<(&Entry, Ipv4Addr, u8)> = None;
    let mut bcast: Option<(&Entry, Ipv4Addr)> = None;
    let mut gw: Option<(&Entry, Ipv4Addr)> = None;
    let mut addr6: Option<(&Entry, Ipv6Addr, Option<u8>)> = None;
    let mut plen6: Option<(&Entry, u8)> = None;
    let mut gw6: Option<(&Entry, Ipv6Addr)> = None;
    let mut link: Option<&Entry> = None;
    let mut mtu: Option<&Entry> = None;

    for e in &sec.entries {
        match e.key.as_str() {
            "addr" => {
                let (a, p) = cx.value(s, e, |v| {
                    let (a, p) = value::ipv4_cidr(v)?;
                    Ok((unicast4(a)?, p))
                })?;
                addr = Some((e, a, p));
            }
            "netmask" => {
                let (m, l) = cx.value(s, e, value::netmask)?;
                mask = Some((e, m, l));
            }
            "broadcast" => bcast = Some((e, cx.value(s, e, value::ipv4)?)),
            "gateway" => {
                gw = Some((e, cx.value(s, e, |v| value::ipv4(v).and_then(unicast4))?));
            }
            "addr6" => {
                let (a, p) = cx.value(s, e, |v| {
                    let (a, p) = value::ipv6_cidr(v)?;
                    Ok((unicast6(a)?, p))
                })?;
                addr6 = Some((e, a, p));
            }
            "prefix_len" => {
                plen6 = Some((e, cx.value(s, e, |v| value::int(v, 1, 128))? as u8));
            }
            "gateway6" => {
                gw6 = Some((e, cx.value(s, e, |v| value::ipv6(v).and_then(unicast6))?));
            }
            "vip_addr" => p.vip_addrs = cx.value(s, e, vip4_list)?,
            "vip_addr6" => p.vip_addrs6 = cx.value(s, e, vip6_list)?,
            "vip_prefix_len" => {
                p.vip_prefix_len = cx.value(s, e, |v| value::int(v, 1, 128))? as u8;
            }
            "if_name" => p.if_name = cx.value(s, e, value::ifname)?,
            "lcore_list" => {
                p.lcore_list = Some(cx.value(s, e, |v| value::num_list(v, MAX_CORES - 1))?);
            }
            "link" => {
                p.link = cx.value(s, e, LinkSpec::parse)?;
                link = Some(e);
            }
            "memory" => p.memory = Some(cx.value(s, e, PoolSize::parse)?),
            "mtu" => {
                p.mtu = Some(cx.value(s, e, |v| value::int(v, MTU_MIN.into(), 65535))? as u16);
                mtu = Some(e);
            }
            "mac" => p.mac = Some(cx.value(s, e, value::mac)?),
            "xdp_mode" => p.xdp_mode = cx.value(s, e, XdpModeSetting::parse)?,
            "xdp_bind" => p.xdp_bind = cx.value(s, e, XdpBindSetting::parse)?,
            _ => cx.other_key(s, e, KEYS, IGNORED)?,
        }
    }

    // IPv4.
    match addr {
        None => {
            if let Some(e) = [mask.map(|m| m.0), bcast.map(|b| b.0), gw.map(|g| g.0)]
                .into_iter()
                .flatten()
                .next()
            {
                return Err(cx.error(e.origin, format!("[{s}] {} is set but addr is not", e.key)));
            }
        }
        Some((ae, a, cidr)) => {
            let prefix_len = match (cidr, mask) {
                (Some(p), None) => p,
                (None, Some((_, _, l))) => l,
                (Some(p), Some((_, _, l))) if p == l => p,
                (Some(p), Some((me, _, l))) => {
                    return Err(cx.error(
                        me.origin,
                        format!(
                            "[{s}] netmask: {:?} (/{l}) contradicts addr's /{p}",
                            me.value
                        ),
                    ))
                }
                (None, None) => {
                    return Err(cx.error(
                        ae.origin,
                        format!("[{s}] addr: netmask= is required (or write addr as {a}/24)"),
                    ))
                }
            };
            let m = u32::from(value::mask_of(prefix_len));
            let net = u32::from(a) & m;
            let bc = net | !m;
            let net_str = subnet(a, prefix_len);
            // On /31 and /32 there is no network or broadcast address.
            let special = |x: u32| prefix_len <= 30 && (x == net || x == bc);
            if special(u32::from(a)) {
                let what = if u32::from(a) == net {
                    "network"
                } else {
                    "broadcast"
                };
                return Err(cx.invalid(s, ae, &format!("is the {what} address of {net_str}")));
            }
            let broadcast = match bcast {
                None => Ipv4Addr::from(bc),
                Some((be, b)) => {
                    if u32::from(b) & m != net {
                        return Err(cx.invalid(s, be, &format!("is not inside {net_str}")));
                    }
                    b
                }
            };
            let gateway = match gw {
                None => None,
                Some((ge, g)) => {
                    let gu = u32::from(g);
                    if gu & m != net {
                        return Err(cx.invalid(
                            s,
                            ge,
                            &format!("is not inside the port's subnet {net_str}"),
                        ));
                    }
                    if g == a {
                        return Err(cx.invalid(s, ge, "is the port's own address"));
                    }
                    if special(gu) {
                        let what = if gu == net { "network" } else { "broadcast" };
                        return Err(cx.invalid(
                            s,
                            ge,
                            &format!("is the {what} address of {net_str}"),
                        ));
                    }
                    Some(g)
                }
            };
            p.ipv4 = Some(Ipv4Config {
                addr: a,
                netmask: Ipv4Addr::from(m),
                prefix_len,
                broadcast,
                gateway,
            });
        }
    }
    if let Some(a) = p.ipv4.map(|c| c.addr).filter(|a| p.vip_addrs.contains(a)) {
        let e = sec.entry("vip_addr").expect("vip_addr was parsed");
        return Err(cx.invalid(s, e, &format!("lists {a}, the port's addr")));
    }

    // IPv6.
    match addr6 {
        None => {
            if let Some(e) = [plen6.map(|x| x.0), gw6.map(|x| x.0)]
                .into_iter()
                .flatten()
                .next()
            {
                return Err(cx.error(e.origin, format!("[{s}] {} is set but addr6 is not", e.key)));
            }
        }
        Some((_, a, cidr)) => {
            let prefix_len = match (cidr, plen6) {
                (Some(p), None) => p,
                (None, Some((_, l))) => l,
                (None, None) => 64,
                (Some(p), Some((_, l))) if p == l => p,
                (Some(p), Some((pe, l))) => {
                    return Err(cx.error(
                        pe.origin,
                        format!("[{s}] prefix_len: {l} contradicts addr6's /{p}"),
                    ))
                }
            };
            let gateway = match gw6 {
                Some((ge, g)) if g == a => {
                    return Err(cx.invalid(s, ge, "is the port's own address"))
                }
                other => other.map(|(_, g)| g),
            };
            p.ipv6 = Some(Ipv6Config {
                addr: a,
                prefix_len,
                gateway,
            });
        }
    }
    if let Some(a) = p.ipv6.map(|c| c.addr).filter(|a| p.vip_addrs6.contains(a)) {
        let e = sec.entry("vip_addr6").expect("vip_addr6 was parsed");
        return Err(cx.invalid(s, e, &format!("lists {a}, the port's addr6")));
    }

    if let (Some(e), Some(m)) = (mtu, p.mtu) {
        if p.ipv6.is_some() && m < MTU_MIN_IPV6 {
            return Err(cx.invalid(
                s,
                e,
                &format!("is below {MTU_MIN_IPV6}, the IPv6 minimum (addr6 is set)"),
            ));
        }
    }

    // An address is what makes a port usable.
    if p.ipv4.is_none() {
        if let Some(le) = link {
            return Err(cx.error(
                le.origin,
                format!("[{s}] addr is required when link= is set"),
            ));
        }
        if p.ipv6.is_none() {
            return Err(cx.error(
                sec.origin,
                format!("[{s}] has no address: set addr= and netmask= (or addr6=)"),
            ));
        }
    }
    Ok(p)
}

/// Checks what must differ between ports: names, link interfaces, addresses.
pub(crate) fn check_distinct(
    cx: &mut Ctx<'_>,
    ports: &[(PortConfig, &Section)],
) -> Result<(), ConfigError> {
    for (i, (p, sec)) in ports.iter().enumerate() {
        for (q, _) in &ports[..i] {
            let at = |key: &str| sec.entry(key).map_or(sec.origin, |e| e.origin);
            if p.if_name == q.if_name {
                return Err(cx.error(
                    at("if_name"),
                    format!(
                        "[port{}] if_name: {:?} is also port{}'s",
                        p.id, p.if_name, q.id
                    ),
                ));
            }
            if p.link.interface().is_some() && p.link.interface() == q.link.interface() {
                return Err(cx.error(
                    at("link"),
                    format!("[port{}] link: {} is also port{}'s", p.id, p.link, q.id),
                ));
            }
            if let (Some(a), Some(b)) = (p.ipv4, q.ipv4) {
                if a.addr == b.addr {
                    return Err(cx.error(
                        at("addr"),
                        format!("[port{}] addr: {} is also port{}'s", p.id, a.addr, q.id),
                    ));
                }
            }
            if let (Some(a), Some(b)) = (p.ipv6, q.ipv6) {
                if a.addr == b.addr {
                    return Err(cx.error(
                        at("addr6"),
                        format!("[port{}] addr6: {} is also port{}'s", p.id, a.addr, q.id),
                    ));
                }
            }
        }
    }
    Ok(())
}
