//! `[portN]`: one network port, its link and its addresses.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::addrs::{self, AddressKeys, SourcePrefix};
use super::ini::{Entry, Section};
use super::types::{
    LinkSpec, PoolSize, RxRingSetting, XdpBindSetting, XdpModeSetting, XdpProgramSetting,
};
use super::value::{self, MAX_CORES};
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
    /// `ipfw_pr`: packets from these prefixes use the port's own FIB (its
    /// connected routes and gateway), as F-Stack sets with ipfw `setfib`.
    pub ipfw_pr: Vec<SourcePrefix>,
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
    /// `xdp_program`: which XDP program an AF_XDP port loads.
    pub xdp_program: XdpProgramSetting,
    /// `gro`: large receive on an `af_packet` port (default on): a peer's
    /// TCP super-frames handed to the stack whole, and in-order segments
    /// of a flow aggregated per receive burst. Other links warn when it is
    /// set on, and receive as they do.
    pub gro: bool,
    /// `rx_ring`: an `af_packet` port's RX ring, `v2` (default) or `v3`.
    /// Other links warn when it is set.
    pub rx_ring: RxRingSetting,
    /// `vnet_hdr`: an `af_packet` port asks for a `virtio_net_hdr` before
    /// each frame (default on, where the kernel allows it), which gives a
    /// received super-frame's segment size and checksum state. Other links
    /// warn when it is set.
    pub vnet_hdr: bool,
    /// `gso`: large send in software (`0` or `1`; `None`: not set, off):
    /// TCP sends super-frames of up to 64 KB that the engine cuts into
    /// segments of the MTU, where the link has no segmentation offload of
    /// its own.
    pub gso: Option<bool>,
    /// `kernel_rx_drop`: on an `af_packet` port (default on), a tc ingress
    /// program drops the frames to the port's addresses after ustack's
    /// socket has its copy, so the kernel's IP input does not handle them
    /// too (`link::kernel_rx_drop`). Other links warn when it is set on.
    pub kernel_rx_drop: bool,
}

impl PortConfig {
    /// Whether the port's engine cuts TCP super-frames in software where
    /// its link has no TSO: only when `gso=1` says so. Off by default:
    /// measured by callgrind over AF_XDP (`scripts/callgrind-stream.sh`),
    /// the cut's per-segment work (headers, the IPv4 sum, the checksum the
    /// stack would have made anyway) costs about what TCP saves per
    /// segment on its direct path, and it copies every byte once more.
    pub fn soft_gso(&self) -> bool {
        self.gso.unwrap_or(false)
    }
}

/// The smallest MTU (IPv4's minimum), and F-Stack's.
pub const MTU_MIN: u16 = 68;
/// The smallest MTU of a link carrying IPv6.
pub const MTU_MIN_IPV6: u16 = 1280;

/// The keys of `[portN]` beside the address keys.
const KEYS: &[&str] = &[
    "if_name",
    "lcore_list",
    "link",
    "memory",
    "mtu",
    "mac",
    "xdp_mode",
    "xdp_bind",
    "xdp_program",
    "gro",
    "rx_ring",
    "gso",
    "vnet_hdr",
    "kernel_rx_drop",
];

const IGNORED: &[(&str, &str)] = &[
    ("slave_port_list", "bonding is not supported"),
    (
        "vip_ifname",
        "virtual addresses are added to the port's own interface",
    ),
];

/// Every key of `[portN]`, for the hint of an unknown one.
fn all_keys() -> Vec<&'static str> {
    addrs::KEYS.iter().chain(KEYS).copied().collect()
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
        ipfw_pr: Vec::new(),
        lcore_list: None,
        memory: None,
        mtu: None,
        mac: None,
        xdp_mode: XdpModeSetting::Auto,
        xdp_bind: XdpBindSetting::Auto,
        xdp_program: XdpProgramSetting::Alone,
        gro: true,
        vnet_hdr: true,
        rx_ring: RxRingSetting::V2,
        gso: None,
        kernel_rx_drop: true,
    };
    let mut gro: Option<&Entry> = None;
    let mut vnet_hdr: Option<&Entry> = None;
    let mut kernel_rx_drop: Option<&Entry> = None;
    let mut rx_ring: Option<&Entry> = None;
    // Raw values with their entries, validated together below.
    let mut keys = AddressKeys::default();
    let mut mtu: Option<&Entry> = None;

    for e in &sec.entries {
        if keys.take(cx, s, e)? {
            continue;
        }
        match e.key.as_str() {
            "if_name" => p.if_name = cx.value(s, e, value::ifname)?,
            "lcore_list" => {
                p.lcore_list = Some(cx.value(s, e, |v| value::num_list(v, MAX_CORES - 1))?);
            }
            "link" => {
                p.link = cx.value(s, e, LinkSpec::parse)?;
            }
            "memory" => p.memory = Some(cx.value(s, e, PoolSize::parse)?),
            "mtu" => {
                p.mtu = Some(cx.value(s, e, |v| value::int(v, MTU_MIN.into(), 65535))? as u16);
                mtu = Some(e);
            }
            "mac" => p.mac = Some(cx.value(s, e, value::mac)?),
            "xdp_mode" => p.xdp_mode = cx.value(s, e, XdpModeSetting::parse)?,
            "xdp_bind" => p.xdp_bind = cx.value(s, e, XdpBindSetting::parse)?,
            "xdp_program" => p.xdp_program = cx.value(s, e, XdpProgramSetting::parse)?,
            "gro" => {
                p.gro = cx.value(s, e, value::flag)?;
                gro = Some(e);
            }
            "kernel_rx_drop" => {
                p.kernel_rx_drop = cx.value(s, e, value::flag)?;
                kernel_rx_drop = Some(e);
            }
            "rx_ring" => {
                p.rx_ring = cx.value(s, e, RxRingSetting::parse)?;
                rx_ring = Some(e);
            }
            "gso" => {
                if id >= 64 && cx.value(s, e, value::flag)? {
                    return Err(cx.invalid(s, e, "is for ports 0 to 63 only"));
                }
                p.gso = Some(cx.value(s, e, value::flag)?);
            }
            "vnet_hdr" => {
                p.vnet_hdr = cx.value(s, e, value::flag)?;
                vnet_hdr = Some(e);
            }
            _ => cx.other_key(s, e, &all_keys(), IGNORED)?,
        }
    }

    let a = keys.finish(cx, s, sec, "port")?;
    p.ipv4 = a.ipv4;
    p.ipv6 = a.ipv6;
    p.vip_addrs = a.vip_addrs;
    p.vip_addrs6 = a.vip_addrs6;
    p.vip_prefix_len = a.vip_prefix_len;
    p.ipfw_pr = a.ipfw_pr;

    if let (Some(e), true, false) = (gro, p.gro, matches!(p.link, LinkSpec::AfPacket(_))) {
        cx.warn(
            e.origin,
            format!(
                "[{s}] gro: only an af_packet link receives large segments; this port's \
                 link hands the stack frames of its MTU"
            ),
        );
    }
    if let (Some(e), true, false) = (
        kernel_rx_drop,
        p.kernel_rx_drop,
        matches!(p.link, LinkSpec::AfPacket(_)),
    ) {
        cx.warn(
            e.origin,
            format!(
                "[{s}] kernel_rx_drop: only an af_packet link shares its frames with the \
                 kernel's IP input; ignored here"
            ),
        );
    }
    if let (Some(e), false) = (rx_ring, matches!(p.link, LinkSpec::AfPacket(_))) {
        cx.warn(
            e.origin,
            format!("[{s}] rx_ring: only an af_packet link has TPACKET rings; ignored here"),
        );
    }
    if let (Some(e), false) = (vnet_hdr, matches!(p.link, LinkSpec::AfPacket(_))) {
        cx.warn(
            e.origin,
            format!("[{s}] vnet_hdr: only an af_packet link reads a virtio_net_hdr; ignored here"),
        );
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

    Ok(p)
}

/// An address is what makes a port usable, unless VLAN interfaces ride
/// on it (checked once the `[vlanN]` sections are known).
pub(crate) fn check_has_address(
    cx: &Ctx<'_>,
    p: &PortConfig,
    sec: &Section,
) -> Result<(), ConfigError> {
    let s = sec.name.as_str();
    if p.ipv4.is_none() {
        if let Some(le) = sec.entry("link") {
            return Err(cx.error(
                le.origin,
                format!("[{s}] addr is required when link= is set"),
            ));
        }
        if p.ipv6.is_none() {
            return Err(cx.error(
                sec.origin,
                format!(
                    "[{s}] has no address: set addr= and netmask= (or addr6=), or give it \
                     [vlanN] sections with portid={}",
                    p.id
                ),
            ));
        }
    }
    Ok(())
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
