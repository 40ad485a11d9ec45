//! `[vlanN]`: an 802.1Q VLAN interface on a port, as F-Stack's current
//! release configures it (`[dpdk] vlan_filter` lists the ids).

use std::net::{Ipv4Addr, Ipv6Addr};

use super::addrs::{self, AddressKeys, SourcePrefix};
use super::ini::Section;
use super::port::{Ipv4Config, Ipv6Config, PortConfig};
use super::value;
use super::{ConfigError, Ctx};

/// The highest VLAN id (4095 is reserved).
pub const MAX_VLAN_ID: u16 = 4094;

/// `[vlanN]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VlanConfig {
    /// N, the VLAN id (1..=4094).
    pub id: u16,
    /// `portid`: the port the VLAN rides on.
    pub portid: u16,
    /// `addr`/`netmask`/`broadcast`/`gateway`.
    pub ipv4: Option<Ipv4Config>,
    /// `addr6`/`prefix_len`/`gateway6`.
    pub ipv6: Option<Ipv6Config>,
    /// `vip_addr`: extra IPv4 addresses, at most 64.
    pub vip_addrs: Vec<Ipv4Addr>,
    /// `vip_addr6`: extra IPv6 addresses, at most 64.
    pub vip_addrs6: Vec<Ipv6Addr>,
    /// `vip_prefix_len` of every `vip_addr6` (default 64).
    pub vip_prefix_len: u8,
    /// `ipfw_pr`: packets from these prefixes use the VLAN's own FIB.
    pub ipfw_pr: Vec<SourcePrefix>,
}

impl VlanConfig {
    /// The interface's name: the port's, a dot, the VLAN id
    /// (`ustack0.10`, as `ifconfig` names VLANs).
    pub fn if_name(&self, port: &PortConfig) -> String {
        format!("{}.{}", port.if_name, self.id)
    }
}

const KEYS: &[&str] = &["portid"];

pub(crate) fn build(cx: &mut Ctx<'_>, sec: &Section, id: u16) -> Result<VlanConfig, ConfigError> {
    let s = sec.name.as_str();
    let mut keys = AddressKeys::default();
    let mut portid = None;
    for e in &sec.entries {
        if keys.take(cx, s, e)? {
            continue;
        }
        match e.key.as_str() {
            "portid" => portid = Some(cx.value(s, e, |v| value::int(v, 0, 65535))? as u16),
            _ => {
                let known: Vec<&str> = addrs::KEYS.iter().chain(KEYS).copied().collect();
                return Err(cx.unknown_key(s, e, &known, &[]));
            }
        }
    }
    let Some(portid) = portid else {
        return Err(cx.error(
            sec.origin,
            format!("[{s}] portid= is required (the port VLAN {id} rides on)"),
        ));
    };
    let a = keys.finish(cx, s, sec, "VLAN")?;
    if a.ipv4.is_none() {
        // As for a port: the stack's interfaces are made around an IPv4
        // address, IPv6 beside it.
        return Err(cx.error(
            sec.origin,
            format!("[{s}] has no address: set addr= and netmask= (addr6= goes beside them)"),
        ));
    }
    Ok(VlanConfig {
        id,
        portid,
        ipv4: a.ipv4,
        ipv6: a.ipv6,
        vip_addrs: a.vip_addrs,
        vip_addrs6: a.vip_addrs6,
        vip_prefix_len: a.vip_prefix_len,
        ipfw_pr: a.ipfw_pr,
    })
}

/// The VLAN sections against `[dpdk] vlan_filter` and the ports.  A
/// section whose id the filter lacks is an error: F-Stack makes no
/// interface for it, so its addresses would never answer.  A filter id
/// without a section is a warning: its frames are dropped and counted
/// (`rx_drop_vlan_unknown_id`), as an id listed ahead of the interface a
/// control command creates later would be.
pub(crate) fn check(
    cx: &mut Ctx<'_>,
    filter: &[u16],
    filter_section: Option<&Section>,
    vlans: &[(VlanConfig, &Section)],
    ports: &[(PortConfig, &Section)],
) -> Result<(), ConfigError> {
    let filter_origin = filter_section
        .and_then(|s| s.entry("vlan_filter"))
        .map(|e| e.origin);
    for (v, sec) in vlans {
        if !filter.contains(&v.id) {
            let listed = if filter.is_empty() {
                "it is not set".to_string()
            } else {
                super::dpdk::format_list(filter)
            };
            return Err(cx.error(
                sec.origin,
                format!(
                    "[vlan{}] is not in [dpdk] vlan_filter ({listed}): add {} there",
                    v.id, v.id
                ),
            ));
        }
        if !ports.iter().any(|(p, _)| p.id == v.portid) {
            let at = sec.entry("portid").map_or(sec.origin, |e| e.origin);
            return Err(cx.error(
                at,
                format!(
                    "[vlan{}] portid: port {} has no [port{}] section",
                    v.id, v.portid, v.portid
                ),
            ));
        }
    }
    if let Some(origin) = filter_origin {
        for id in filter {
            if !vlans.iter().any(|(v, _)| v.id == *id) {
                cx.warn(
                    origin,
                    format!(
                        "[dpdk] vlan_filter: VLAN {id} has no [vlan{id}] section; its frames \
                         are dropped (counted in rx_drop_vlan_unknown_id)"
                    ),
                );
            }
        }
    }
    check_distinct(cx, vlans, ports)
}

/// No two interfaces (ports' and VLANs') share an address.
fn check_distinct(
    cx: &Ctx<'_>,
    vlans: &[(VlanConfig, &Section)],
    ports: &[(PortConfig, &Section)],
) -> Result<(), ConfigError> {
    let mut seen4: Vec<(Ipv4Addr, String)> = ports
        .iter()
        .filter_map(|(p, _)| p.ipv4.map(|c| (c.addr, format!("port{}", p.id))))
        .collect();
    let mut seen6: Vec<(Ipv6Addr, String)> = ports
        .iter()
        .filter_map(|(p, _)| p.ipv6.map(|c| (c.addr, format!("port{}", p.id))))
        .collect();
    for (v, sec) in vlans {
        let at = |key: &str| sec.entry(key).map_or(sec.origin, |e| e.origin);
        if let Some(c) = v.ipv4 {
            if let Some((_, who)) = seen4.iter().find(|(a, _)| *a == c.addr) {
                return Err(cx.error(
                    at("addr"),
                    format!("[vlan{}] addr: {} is also {who}'s", v.id, c.addr),
                ));
            }
            seen4.push((c.addr, format!("vlan{}", v.id)));
        }
        if let Some(c) = v.ipv6 {
            if let Some((_, who)) = seen6.iter().find(|(a, _)| *a == c.addr) {
                return Err(cx.error(
                    at("addr6"),
                    format!("[vlan{}] addr6: {} is also {who}'s", v.id, c.addr),
                ));
            }
            seen6.push((c.addr, format!("vlan{}", v.id)));
        }
    }
    Ok(())
}

/// `[dpdk] vlan_filter`: ids and ranges, 1..=4094.
pub(crate) fn filter_list(v: &str) -> Result<Vec<u16>, value::Reason> {
    let list = value::num_list(v, MAX_VLAN_ID.into())?;
    if list.contains(&0) {
        return Err("has 0, which is not a VLAN id (1..=4094)".into());
    }
    Ok(list.into_iter().map(|n| n as u16).collect())
}
