//! The address keys `[portN]` and `[vlanN]` share: `addr`, `netmask`,
//! `broadcast`, `gateway`, the IPv6 keys, the VIPs and `ipfw_pr`.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::ini::{Entry, Section};
use super::port::{Ipv4Config, Ipv6Config};
use super::value::{self, Reason};
use super::{ConfigError, Ctx};

/// F-Stack's limit on `vip_addr` and `vip_addr6`.
pub const MAX_VIPS: usize = 64;
/// Prefixes at most in one `ipfw_pr`.
pub const MAX_IPFW_PR: usize = 64;

/// The keys [`AddressKeys::take`] handles.
pub(crate) const KEYS: &[&str] = &[
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
    "ipfw_pr",
];

/// One `ipfw_pr` prefix: packets from it use the interface's own FIB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourcePrefix {
    /// Host bits cleared (as ipfw masks `from 10.1.2.3/24`).
    pub addr: Ipv4Addr,
    pub prefix_len: u8,
}

impl std::fmt::Display for SourcePrefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

/// An interface's addresses as the address keys give them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Addresses {
    pub ipv4: Option<Ipv4Config>,
    pub ipv6: Option<Ipv6Config>,
    pub vip_addrs: Vec<Ipv4Addr>,
    pub vip_addrs6: Vec<Ipv6Addr>,
    pub vip_prefix_len: u8,
    pub ipfw_pr: Vec<SourcePrefix>,
}

pub(crate) fn unicast4(a: Ipv4Addr) -> Result<Ipv4Addr, Reason> {
    if a.is_unspecified() || a.is_multicast() || a.is_broadcast() || a.is_loopback() {
        return Err("is not a unicast address".into());
    }
    Ok(a)
}

pub(crate) fn unicast6(a: Ipv6Addr) -> Result<Ipv6Addr, Reason> {
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

/// `ipfw_pr=ADDR NETMASK;ADDR NETMASK` (F-Stack's form; `ADDR/LEN` is
/// taken too).
fn ipfw_pr_list(v: &str) -> Result<Vec<SourcePrefix>, Reason> {
    let mut out: Vec<SourcePrefix> = Vec::new();
    for item in value::semicolon_items(v) {
        let bad = |r: Reason| format!("has {item:?}, which {r}");
        let mut words = item.split_whitespace();
        let (addr, prefix_len) = match (words.next(), words.next(), words.next()) {
            (Some(a), Some(m), None) => {
                let a = value::ipv4(a).map_err(bad)?;
                let (_, l) =
                    value::netmask(m).map_err(|r| bad(format!("has a netmask that {r}")))?;
                (a, l)
            }
            (Some(a), None, None) => match value::ipv4_cidr(a).map_err(bad)? {
                (a, Some(l)) => (a, l),
                (_, None) => {
                    return Err(bad(
                        "lacks its netmask (write ADDR NETMASK or ADDR/LEN)".into()
                    ))
                }
            },
            _ => return Err(bad("is not ADDR NETMASK".into())),
        };
        let p = SourcePrefix {
            addr: Ipv4Addr::from(u32::from(addr) & u32::from(value::mask_of(prefix_len))),
            prefix_len,
        };
        if out.contains(&p) {
            return Err(format!("lists {p} twice"));
        }
        out.push(p);
    }
    if out.is_empty() {
        return Err("lists no prefix".into());
    }
    if out.len() > MAX_IPFW_PR {
        return Err(format!(
            "has {} prefixes, more than {MAX_IPFW_PR}",
            out.len()
        ));
    }
    Ok(out)
}

/// The address keys of one section, taken one entry at a time and
/// checked together at the end.
#[derive(Default)]
pub(crate) struct AddressKeys<'s> {
    addr: Option<(&'s Entry, Ipv4Addr, Option<u8>)>,
    mask: Option<(&'s Entry, Ipv4Addr, u8)>,
    bcast: Option<(&'s Entry, Ipv4Addr)>,
    gw: Option<(&'s Entry, Ipv4Addr)>,
    addr6: Option<(&'s Entry, Ipv6Addr, Option<u8>)>,
    plen6: Option<(&'s Entry, u8)>,
    gw6: Option<(&'s Entry, Ipv6Addr)>,
    vip_addrs: Vec<Ipv4Addr>,
    vip_addrs6: Vec<Ipv6Addr>,
    vip_prefix_len: Option<u8>,
    ipfw_pr: Vec<SourcePrefix>,
}

impl<'s> AddressKeys<'s> {
    /// Takes `e` if it is an address key (true), parsing its value.
    pub(crate) fn take(
        &mut self,
        cx: &Ctx<'_>,
        s: &str,
        e: &'s Entry,
    ) -> Result<bool, ConfigError> {
        match e.key.as_str() {
            "addr" => {
                let (a, p) = cx.value(s, e, |v| {
                    let (a, p) = value::ipv4_cidr(v)?;
                    Ok((unicast4(a)?, p))
                })?;
                self.addr = Some((e, a, p));
            }
            "netmask" => {
                let (m, l) = cx.value(s, e, value::netmask)?;
                self.mask = Some((e, m, l));
            }
            "broadcast" => self.bcast = Some((e, cx.value(s, e, value::ipv4)?)),
            "gateway" => {
                self.gw = Some((e, cx.value(s, e, |v| value::ipv4(v).and_then(unicast4))?));
            }
            "addr6" => {
                let (a, p) = cx.value(s, e, |v| {
                    let (a, p) = value::ipv6_cidr(v)?;
                    Ok((unicast6(a)?, p))
                })?;
                self.addr6 = Some((e, a, p));
            }
            "prefix_len" => {
                self.plen6 = Some((e, cx.value(s, e, |v| value::int(v, 1, 128))? as u8));
            }
            "gateway6" => {
                self.gw6 = Some((e, cx.value(s, e, |v| value::ipv6(v).and_then(unicast6))?));
            }
            "vip_addr" => self.vip_addrs = cx.value(s, e, vip4_list)?,
            "vip_addr6" => self.vip_addrs6 = cx.value(s, e, vip6_list)?,
            "vip_prefix_len" => {
                self.vip_prefix_len = Some(cx.value(s, e, |v| value::int(v, 1, 128))? as u8);
            }
            "ipfw_pr" => self.ipfw_pr = cx.value(s, e, ipfw_pr_list)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Checks the keys together; `owner` names the interface in messages
    /// ("port", "VLAN").
    pub(crate) fn finish(
        self,
        cx: &Ctx<'_>,
        s: &str,
        sec: &Section,
        owner: &str,
    ) -> Result<Addresses, ConfigError> {
        let AddressKeys {
            addr,
            mask,
            bcast,
            gw,
            addr6,
            plen6,
            gw6,
            vip_addrs,
            vip_addrs6,
            vip_prefix_len,
            ipfw_pr,
        } = self;
        let mut out = Addresses {
            vip_addrs,
            vip_addrs6,
            vip_prefix_len: vip_prefix_len.unwrap_or(64),
            ipfw_pr,
            ..Addresses::default()
        };
        // IPv4.
        match addr {
            None => {
                if let Some(e) = [mask.map(|m| m.0), bcast.map(|b| b.0), gw.map(|g| g.0)]
                    .into_iter()
                    .flatten()
                    .next()
                {
                    return Err(
                        cx.error(e.origin, format!("[{s}] {} is set but addr is not", e.key))
                    );
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
                                &format!("is not inside the {owner}'s subnet {net_str}"),
                            ));
                        }
                        if g == a {
                            return Err(cx.invalid(
                                s,
                                ge,
                                &format!("is the {owner}'s own address"),
                            ));
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
                out.ipv4 = Some(Ipv4Config {
                    addr: a,
                    netmask: Ipv4Addr::from(m),
                    prefix_len,
                    broadcast,
                    gateway,
                });
            }
        }
        if let Some(a) = out
            .ipv4
            .map(|c| c.addr)
            .filter(|a| out.vip_addrs.contains(a))
        {
            let e = sec.entry("vip_addr").expect("vip_addr was parsed");
            return Err(cx.invalid(s, e, &format!("lists {a}, the {owner}'s addr")));
        }

        // IPv6.
        match addr6 {
            None => {
                if let Some(e) = [plen6.map(|x| x.0), gw6.map(|x| x.0)]
                    .into_iter()
                    .flatten()
                    .next()
                {
                    return Err(
                        cx.error(e.origin, format!("[{s}] {} is set but addr6 is not", e.key))
                    );
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
                        return Err(cx.invalid(s, ge, &format!("is the {owner}'s own address")))
                    }
                    other => other.map(|(_, g)| g),
                };
                out.ipv6 = Some(Ipv6Config {
                    addr: a,
                    prefix_len,
                    gateway,
                });
            }
        }
        if let Some(a) = out
            .ipv6
            .map(|c| c.addr)
            .filter(|a| out.vip_addrs6.contains(a))
        {
            let e = sec.entry("vip_addr6").expect("vip_addr6 was parsed");
            return Err(cx.invalid(s, e, &format!("lists {a}, the {owner}'s addr6")));
        }

        Ok(out)
    }
}
