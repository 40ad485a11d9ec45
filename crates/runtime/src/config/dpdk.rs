//! `[dpdk]`: cores, ports, offloads and the engine loop's timing.
//!
//! Despite its name the section is read whatever the ports' links are: the
//! core mask, `port_list`, `idle_sleep` and `pkt_tx_delay` drive every
//! engine. The EAL-only keys (`channel`, `memory`, `file_prefix`, ...) matter
//! only to the DPDK link.

use std::time::Duration;

use super::ini::Section;
use super::types::{CoreSet, ProcType};
use super::value::{self, Reason};
use super::{ConfigError, Ctx};

/// `[dpdk]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DpdkConfig {
    /// `lcore_mask`: the cores to run engines on, one engine per core.
    /// `None` when not written: one engine, on the calling thread, unpinned.
    pub lcore_mask: Option<CoreSet>,
    /// `channel`: memory channels (EAL `-n`); `None` lets DPDK detect them.
    pub channel: Option<u32>,
    /// `promiscuous` (default on).
    pub promiscuous: bool,
    /// `numa_on` (default on): allocate each engine's pools on its core's
    /// NUMA node.
    pub numa_on: bool,
    /// `tx_csum_offoad_skip` (sic, F-Stack's spelling; default off): never ask
    /// the device to fill transmit checksums (a DPDK port's NIC; an
    /// af_packet port's kernel through the `virtio_net_hdr`; an af_xdp
    /// port's kernel through TX metadata): the stack computes them all.
    pub tx_csum_offload_skip: bool,
    /// `tso` (default off): TCP segmentation offload.
    pub tso: bool,
    /// `vlan_strip` (default on): the NIC removes VLAN tags on receive.
    pub vlan_strip: bool,
    /// `vlan_filter`: the VLAN ids of the `[vlanN]` sections, ascending
    /// (ids and ranges: `10,20,30-32`).
    pub vlan_filter: Vec<u16>,
    /// `idle_sleep`: sleep this long after a loop turn that received nothing
    /// (0, the default: poll without sleeping).
    pub idle_sleep: Duration,
    /// `pkt_tx_delay`: hold a partial TX burst at most this long (0..=100 us,
    /// default 100 us; larger values are clamped to 100 as in F-Stack).
    pub pkt_tx_delay: Duration,
    /// `symmetric_rss` (default off): RSS key that sends both directions of
    /// a flow to one queue.
    pub symmetric_rss: bool,
    /// The ports, ascending: `port_list` if written, else the `[portN]`
    /// sections present.
    pub port_list: Vec<u16>,
    /// `base_virtaddr`: EAL `--base-virtaddr`.
    pub base_virtaddr: Option<u64>,
    /// `file_prefix`: EAL `--file-prefix`.
    pub file_prefix: Option<String>,
    /// `no_huge` (default off): EAL `--no-huge`.
    pub no_huge: bool,
    /// `memory`: EAL `-m`, megabytes.
    pub memory_mb: Option<u32>,
    /// `pci_whitelist` and `allow` (comma-separated PCI addresses), in order:
    /// EAL `-a` each.
    pub pci_allow: Vec<String>,
    /// `vdev`: `;`-separated devargs, EAL `--vdev` each
    /// (`net_tap0,iface=x;net_pcap0,iface=y`).
    pub vdev: Vec<String>,
    /// `proc_type`: EAL `--proc-type` (default auto).
    pub proc_type: ProcType,
    /// `log_level`: EAL `--log-level`, 1 (emergency) ..= 8 (debug).
    pub log_level: Option<u8>,
}

impl Default for DpdkConfig {
    fn default() -> Self {
        DpdkConfig {
            lcore_mask: None,
            channel: None,
            promiscuous: true,
            numa_on: true,
            tx_csum_offload_skip: false,
            tso: false,
            vlan_strip: true,
            vlan_filter: Vec::new(),
            idle_sleep: Duration::ZERO,
            pkt_tx_delay: Duration::from_micros(PKT_TX_DELAY_MAX_US),
            symmetric_rss: false,
            port_list: Vec::new(),
            base_virtaddr: None,
            file_prefix: None,
            no_huge: false,
            memory_mb: None,
            pci_allow: Vec::new(),
            vdev: Vec::new(),
            proc_type: ProcType::Auto,
            log_level: None,
        }
    }
}

/// F-Stack's cap on `pkt_tx_delay`, microseconds.
pub const PKT_TX_DELAY_MAX_US: u64 = 100;
/// The longest `idle_sleep`, microseconds.
pub const IDLE_SLEEP_MAX_US: u64 = 1_000_000;

const S: &str = "dpdk";

const KEYS: &[&str] = &[
    "lcore_mask",
    "channel",
    "promiscuous",
    "numa_on",
    "tx_csum_offoad_skip",
    "tso",
    "vlan_strip",
    "vlan_filter",
    "idle_sleep",
    "pkt_tx_delay",
    "symmetric_rss",
    "port_list",
    "base_virtaddr",
    "file_prefix",
    "no_huge",
    "memory",
    "pci_whitelist",
    "allow",
    "vdev",
    "proc_type",
    "log_level",
];

const IGNORED: &[(&str, &str)] = &[
    (
        "nb_vdev",
        "DPDK virtual devices are configured with [dpdk] vdev=",
    ),
    ("nb_bond", "bonding is not supported"),
    ("lro", "large receive offload is not used"),
    (
        "thread_mode",
        "ustack always runs one engine thread per core in one process",
    ),
    ("mtu_enable", "set the MTU per port with [portN] mtu="),
    ("max_mtu", "set the MTU per port with [portN] mtu="),
    (
        "mbuf_mode",
        "ustack sizes packet buffers from the ports' MTUs",
    ),
    ("fstack_log_level", "F-Stack's own log"),
    ("fstack_log_file_prefix", "F-Stack's own log"),
];

pub(crate) fn build(cx: &mut Ctx<'_>, sec: &Section) -> Result<DpdkConfig, ConfigError> {
    let mut d = DpdkConfig::default();
    for e in &sec.entries {
        match e.key.as_str() {
            "lcore_mask" => d.lcore_mask = Some(cx.value(S, e, value::core_mask)?),
            "channel" => d.channel = Some(cx.value(S, e, |v| value::int_u32(v, 1, 32))?),
            "promiscuous" => d.promiscuous = cx.value(S, e, value::flag)?,
            "numa_on" => d.numa_on = cx.value(S, e, value::flag)?,
            "tx_csum_offoad_skip" => d.tx_csum_offload_skip = cx.value(S, e, value::flag)?,
            "tso" => d.tso = cx.value(S, e, value::flag)?,
            "vlan_strip" => d.vlan_strip = cx.value(S, e, value::flag)?,
            "vlan_filter" => d.vlan_filter = cx.value(S, e, super::vlan::filter_list)?,
            "idle_sleep" => {
                let us = cx.value(S, e, |v| value::int(v, 0, IDLE_SLEEP_MAX_US))?;
                d.idle_sleep = Duration::from_micros(us);
            }
            "pkt_tx_delay" => {
                let mut us = cx.value(S, e, |v| value::int(v, 0, u64::from(u32::MAX)))?;
                if us > PKT_TX_DELAY_MAX_US {
                    cx.warn(
                        e.origin,
                        format!(
                            "[dpdk] pkt_tx_delay: {us} is above {PKT_TX_DELAY_MAX_US}; \
                             using {PKT_TX_DELAY_MAX_US} as F-Stack does"
                        ),
                    );
                    us = PKT_TX_DELAY_MAX_US;
                }
                d.pkt_tx_delay = Duration::from_micros(us);
            }
            "symmetric_rss" => d.symmetric_rss = cx.value(S, e, value::flag)?,
            "port_list" => d.port_list = cx.value(S, e, |v| value::num_list_u16(v, 0))?,
            "base_virtaddr" => d.base_virtaddr = Some(cx.value(S, e, value::hex_u64)?),
            "file_prefix" => d.file_prefix = Some(cx.value(S, e, file_prefix)?),
            "no_huge" => d.no_huge = cx.value(S, e, value::flag)?,
            "memory" => d.memory_mb = Some(cx.value(S, e, |v| value::int_u32(v, 1, 1 << 24))?),
            "pci_whitelist" | "allow" => d.pci_allow.extend(cx.value(S, e, pci_list)?),
            "vdev" => d.vdev = cx.value(S, e, vdev_list)?,
            "proc_type" => d.proc_type = cx.value(S, e, proc_type)?,
            "log_level" => d.log_level = Some(cx.value(S, e, log_level)?),
            _ => cx.other_key(S, e, KEYS, IGNORED)?,
        }
    }
    Ok(d)
}

fn file_prefix(v: &str) -> Result<String, Reason> {
    let s = value::non_empty(v)?;
    if let Some(c) = s.chars().find(|c| c.is_whitespace() || *c == '/') {
        return Err(format!("contains {c:?}"));
    }
    Ok(s)
}

/// `0000:02:00.0` or `02:00.0`.
fn is_pci_address(s: &str) -> bool {
    let hex = |p: &str, n: usize| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit());
    let parts: Vec<&str> = s.split(':').collect();
    let (bus, devfn) = match parts.as_slice() {
        [dom, bus, devfn] if hex(dom, 4) => (*bus, *devfn),
        [bus, devfn] => (*bus, *devfn),
        _ => return false,
    };
    let Some((dev, func)) = devfn.split_once('.') else {
        return false;
    };
    hex(bus, 2) && hex(dev, 2) && func.len() == 1 && func.as_bytes()[0].is_ascii_digit()
}

fn pci_list(v: &str) -> Result<Vec<String>, Reason> {
    let mut out = Vec::new();
    for item in v.split(',').map(str::trim) {
        if !is_pci_address(item) {
            return Err(format!(
                "has {item:?}, which is not a PCI address (0000:02:00.0 or 02:00.0)"
            ));
        }
        out.push(item.to_string());
    }
    Ok(out)
}

fn vdev_list(v: &str) -> Result<Vec<String>, Reason> {
    let mut out = Vec::new();
    for item in value::semicolon_items(v) {
        let driver = item.split(',').next().unwrap_or("");
        if driver.is_empty()
            || !driver
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Err(format!(
                "has {item:?}, which does not start with a device name (net_tap0,iface=...)"
            ));
        }
        out.push(item.to_string());
    }
    if out.is_empty() {
        return Err("lists no device".into());
    }
    Ok(out)
}

fn proc_type(v: &str) -> Result<ProcType, Reason> {
    match v {
        "primary" => Ok(ProcType::Primary),
        "secondary" => Ok(ProcType::Secondary),
        "auto" => Ok(ProcType::Auto),
        _ => Err("must be primary, secondary or auto".into()),
    }
}

const LOG_LEVELS: &[&str] = &[
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
];

fn log_level(v: &str) -> Result<u8, Reason> {
    if let Some(i) = LOG_LEVELS.iter().position(|n| *n == v) {
        return Ok(i as u8 + 1);
    }
    value::int(v, 1, 8).map(|n| n as u8).map_err(|_| {
        "must be 1..=8 or emerg, alert, crit, err, warning, notice, info, debug".into()
    })
}

/// Writes a port list back in `0-3,5` form.
pub(crate) fn format_list(list: &[u16]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < list.len() {
        let start = list[i];
        let mut end = start;
        while i + 1 < list.len() && list[i + 1] == end + 1 {
            i += 1;
            end = list[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_addresses() {
        assert!(is_pci_address("0000:02:00.0"));
        assert!(is_pci_address("02:00.1"));
        assert!(!is_pci_address("02:00"));
        assert!(!is_pci_address("2:00.0"));
        assert!(!is_pci_address("0000:02:00.0,mprq_en=1"));
        assert_eq!(
            pci_list("02:00.0, 03:00.0").unwrap(),
            ["02:00.0", "03:00.0"]
        );
    }

    #[test]
    fn vdevs_and_levels() {
        assert_eq!(
            vdev_list("net_tap0,iface=a; net_pcap0,iface=b;").unwrap(),
            ["net_tap0,iface=a", "net_pcap0,iface=b"]
        );
        assert!(vdev_list(";").is_err());
        assert!(vdev_list("=x").is_err());
        assert_eq!(log_level("debug"), Ok(8));
        assert_eq!(log_level("4"), Ok(4));
        assert!(log_level("9").is_err());
    }

    #[test]
    fn list_format() {
        assert_eq!(format_list(&[0, 1, 2, 3, 5, 7, 8]), "0-3,5,7-8");
        assert_eq!(format_list(&[4]), "4");
        assert_eq!(format_list(&[]), "");
    }
}
