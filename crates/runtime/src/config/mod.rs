//! ustack's configuration: F-Stack's `config.ini`, typed and validated.
//!
//! ```text
//! let mut cfg = Config::from_file("config.ini")?;
//! cfg.apply_override("port0.addr", "10.99.1.2")?;   // --set port0.addr=10.99.1.2
//! for w in &cfg.warnings { eprintln!("warning: {w}"); }
//! ```
//!
//! The file is F-Stack's format (see `config/example.ini` for every key and
//! what it means in ustack). Three kinds of key:
//!
//! - keys ustack uses: typed and validated; a bad value is an error naming
//!   the file, the line, the section, the key and the value;
//! - keys F-Stack has and ustack does not use: accepted, one [`ConfigWarning`]
//!   each, saying why;
//! - anything else: an error (a typo must not pass silently) — except in
//!   `[freebsd.boot]` and `[freebsd.sysctl]`, where FreeBSD has thousands of
//!   names: an unknown name there is a warning.
//!
//! Sections: `[dpdk]`, `[portN]`, `[pcap]`, `[kni]`, `[freebsd.boot]`,
//! `[freebsd.sysctl]`, and ustack's own `[fault]`, `[preload]`,
//! `[control]` and `[metrics]`. F-Stack's `[vdevN]`,
//! `[bondN]`, `[vlanN]`, `[rss_check]` and `[stack]` are accepted with a
//! warning that ustack does not support them.

mod addrs;
mod dpdk;
mod freebsd;
mod ini;
mod port;
mod sections;
mod types;
mod value;
mod vlan;

#[cfg(test)]
mod tests;

use std::fmt;
use std::path::Path;

use ini::{Document, Entry, Origin, Section};

pub use addrs::SourcePrefix;
pub use dpdk::DpdkConfig;
pub use freebsd::{BootParams, SysctlEntry, Sysctls};
pub use port::{Ipv4Config, Ipv6Config, PortConfig};
pub use sections::{
    ControlConfig, FaultConfigSpec, KniConfig, MetricsConfig, PcapConfig, PreloadConfig,
    PreloadMode, FAULT_DEFAULT_SEED,
};
pub use types::{
    CongestionControl, CoreSet, KniAction, KniMethod, LinkSpec, PoolSize, ProcType, RxRingSetting,
    XdpBindSetting, XdpModeSetting, XdpProgramSetting,
};
pub use vlan::VlanConfig;

/// The `file` of errors and warnings about command-line overrides.
pub const OVERRIDE_ORIGIN: &str = "--set";

/// A configuration that cannot be used: a syntax error, an invalid value, an
/// unknown key, or keys that contradict each other.
///
/// Displays as `file:line: reason`, e.g.
/// `config.ini:12: [port0] addr: "10.99.1.300" is not an IPv4 address`.
/// For a command-line override `file` is [`OVERRIDE_ORIGIN`] and `line` is
/// `None` (`--set: [port0] addr: ...`); for a file that cannot be read,
/// `line` is `None` too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{}: {}", self.file, l, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Something accepted but not used, e.g.
/// `config.ini:5: [dpdk] nb_vdev is ignored by ustack (DPDK virtual devices are configured with [dpdk] vdev=)`.
/// Same shape and display as [`ConfigError`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    pub file: String,
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{}: {}", self.file, l, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

/// A whole, validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The file name used in messages (as given to `from_file`/`parse`).
    pub file: String,
    /// `[dpdk]`: cores, ports, offloads, the engine loop's timing.
    pub dpdk: DpdkConfig,
    /// `[portN]`, ascending by id; exactly the ports of `dpdk.port_list`.
    pub ports: Vec<PortConfig>,
    /// `[vlanN]`, ascending by id; each in `dpdk.vlan_filter`, on a port
    /// of `ports` (whose own addresses are then cleared, as F-Stack
    /// ignores them, with a warning).
    pub vlans: Vec<VlanConfig>,
    /// `[pcap]`.
    pub pcap: PcapConfig,
    /// `[kni]` (defaults, disabled, when the section is absent).
    pub kni: KniConfig,
    /// `[preload]`: how `ustack run` drives a process's engine.
    pub preload: PreloadConfig,
    /// `[fault]`, when present: fault injection on every port's link.
    pub fault: Option<FaultConfigSpec>,
    /// `[control]`: the engines' control sockets.
    pub control: ControlConfig,
    /// `[metrics]`: the Prometheus endpoint.
    pub metrics: MetricsConfig,
    /// `[freebsd.boot]` as written, in file order.
    pub freebsd_boot: Vec<SysctlEntry>,
    /// `[freebsd.sysctl]` as written, in file order.
    pub freebsd_sysctl: Vec<SysctlEntry>,
    /// The `[freebsd.boot]` tunables ustack uses, typed.
    pub boot: BootParams,
    /// The `[freebsd.sysctl]` values ustack uses, typed (defaults for those
    /// not written).
    pub sysctls: Sysctls,
    /// Everything accepted but ignored, in file order.
    pub warnings: Vec<ConfigWarning>,
    source: Document,
}

impl Default for Config {
    /// The configuration of an empty file: no ports, every default.
    fn default() -> Self {
        match build("<default>", Document::default()) {
            Ok(c) => c,
            Err(e) => unreachable!("the empty configuration is valid: {e}"),
        }
    }
}

impl Config {
    /// Reads and parses a file; messages name it as `path` was written.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Config, ConfigError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: name.clone(),
            line: None,
            message: format!("cannot read the configuration: {e}"),
        })?;
        Config::parse(&text, &name)
    }

    /// Parses the text of a file named `file_name` (used in messages only).
    pub fn parse(text: &str, file_name: &str) -> Result<Config, ConfigError> {
        let doc = Document::parse(text).map_err(|e| ConfigError {
            file: file_name.to_string(),
            line: Some(e.line),
            message: e.reason,
        })?;
        build(file_name, doc)
    }

    /// Overrides one key, as the command line's `--set section.key=value`:
    /// `apply_override("port0.addr", "10.99.1.2")`,
    /// `apply_override("freebsd.sysctl.net.inet.ip.ttl", "32")`.
    ///
    /// The key is set (or added, with its section if need be) and the whole
    /// configuration is validated again, with the same messages as for the
    /// file; errors and warnings about the override itself are located at
    /// [`OVERRIDE_ORIGIN`]. On error `self` is unchanged.
    pub fn apply_override(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let (section, name) = split_override_key(key).ok_or_else(|| ConfigError {
            file: OVERRIDE_ORIGIN.to_string(),
            line: None,
            message: format!(
                "{key:?} is not section.key (e.g. port0.addr, freebsd.sysctl.net.inet.ip.ttl)"
            ),
        })?;
        let mut doc = self.source.clone();
        doc.set_override(section, name, value.trim());
        *self = build(&self.file, doc)?;
        Ok(())
    }

    /// [`Config::apply_override`] from one `section.key=value` argument.
    pub fn apply_set(&mut self, arg: &str) -> Result<(), ConfigError> {
        let (key, value) = arg.split_once('=').ok_or_else(|| ConfigError {
            file: OVERRIDE_ORIGIN.to_string(),
            line: None,
            message: format!("{arg:?} is not section.key=value (e.g. port0.addr=10.99.1.2)"),
        })?;
        self.apply_override(key.trim(), value)
    }

    /// The port with id `id`.
    pub fn port(&self, id: u16) -> Option<&PortConfig> {
        self.ports.iter().find(|p| p.id == id)
    }
}

/// Splits `section.key`; the FreeBSD sections have dots in their names.
fn split_override_key(key: &str) -> Option<(&str, &str)> {
    let key = key.trim();
    let (section, name) = ["freebsd.boot.", "freebsd.sysctl."]
        .iter()
        .find_map(|p| key.strip_prefix(p).map(|rest| (&p[..p.len() - 1], rest)))
        .or_else(|| key.split_once('.'))?;
    let ok = |s: &str| !s.is_empty() && !s.contains(|c: char| c.is_whitespace() || c == '=');
    (ok(section) && ok(name) && !section.contains(['[', ']'])).then_some((section, name))
}

/// Sections of F-Stack that ustack accepts and ignores (prefix, why).
const UNSUPPORTED_SECTIONS: &[(&str, &str)] = &[
    (
        "vdev",
        "container vhost-user devices are configured with [dpdk] vdev=",
    ),
    ("bond", "bonding is not supported"),
    (
        "rss_check",
        "ustack computes the port's RSS itself (DPDK: the key and indirection table it \
         programs or reads back) and picks source ports whose replies reach the opening engine",
    ),
    ("stack", "kernel coexistence is F-Stack's"),
];

const SECTIONS: &[&str] = &[
    "dpdk",
    "pcap",
    "kni",
    "preload",
    "fault",
    "control",
    "metrics",
    "freebsd.boot",
    "freebsd.sysctl",
    "port0",
];

/// The number of an `[portN]`-style section name, if it is one.
fn numbered<'a>(name: &'a str, prefix: &str) -> Option<&'a str> {
    let digits = name.strip_prefix(prefix)?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some(digits)
}

fn build(file: &str, doc: Document) -> Result<Config, ConfigError> {
    let mut cx = Ctx {
        file,
        warnings: Vec::new(),
    };
    let mut dpdk = DpdkConfig::default();
    let mut dpdk_section: Option<&Section> = None;
    let mut ports: Vec<(PortConfig, &Section)> = Vec::new();
    let mut vlans: Vec<(VlanConfig, &Section)> = Vec::new();
    let mut pcap = PcapConfig::default();
    let mut kni = KniConfig::default();
    let mut kni_section: Option<&Section> = None;
    let mut fault = None;
    let mut preload = PreloadConfig::default();
    let mut control = ControlConfig::default();
    let mut metrics = MetricsConfig::default();
    let mut freebsd_boot = Vec::new();
    let mut freebsd_sysctl = Vec::new();
    let mut boot = BootParams::default();
    let mut sysctls = Sysctls::default();
    let mut sysctl_section: Option<&Section> = None;

    for sec in &doc.sections {
        let name = sec.name.as_str();
        match name {
            "dpdk" => {
                dpdk = dpdk::build(&mut cx, sec)?;
                dpdk_section = Some(sec);
            }
            "pcap" => pcap = sections::build_pcap(&mut cx, sec)?,
            "kni" => {
                kni = sections::build_kni(&mut cx, sec)?;
                kni_section = Some(sec);
            }
            "fault" => fault = Some(sections::build_fault(&mut cx, sec)?),
            "preload" => preload = sections::build_preload(&mut cx, sec)?,
            "control" => control = sections::build_control(&mut cx, sec)?,
            "metrics" => metrics = sections::build_metrics(&mut cx, sec)?,
            "freebsd.boot" => {
                freebsd_boot = freebsd::entries(sec);
                boot = freebsd::build_boot(&mut cx, sec)?;
            }
            "freebsd.sysctl" => {
                freebsd_sysctl = freebsd::entries(sec);
                sysctls = freebsd::build_sysctl(&mut cx, sec)?;
                sysctl_section = Some(sec);
            }
            _ => {
                if let Some(digits) = numbered(name, "port") {
                    let id = match digits.parse::<u16>() {
                        Ok(id) if digits == id.to_string() => id,
                        Ok(_) => {
                            return Err(cx.error(
                                sec.origin,
                                format!("[{name}]: write the port number without leading zeros"),
                            ))
                        }
                        Err(_) => {
                            return Err(cx.error(
                                sec.origin,
                                format!("[{name}]: port number is out of range (0..=65535)"),
                            ))
                        }
                    };
                    ports.push((port::build(&mut cx, sec, id)?, sec));
                } else if let Some(digits) = numbered(name, "vlan") {
                    let id = match digits.parse::<u16>() {
                        Ok(id)
                            if digits == id.to_string()
                                && (1..=vlan::MAX_VLAN_ID).contains(&id) =>
                        {
                            id
                        }
                        _ => {
                            return Err(cx.error(
                                sec.origin,
                                format!(
                                    "[{name}]: the VLAN id is 1..={} without leading zeros",
                                    vlan::MAX_VLAN_ID
                                ),
                            ))
                        }
                    };
                    if vlans.iter().any(|(v, _)| v.id == id) {
                        return Err(cx.error(sec.origin, format!("[{name}] appears twice")));
                    }
                    vlans.push((vlan::build(&mut cx, sec, id)?, sec));
                } else if let Some((_, why)) = UNSUPPORTED_SECTIONS.iter().find(|(p, _)| {
                    name == *p || (matches!(*p, "vdev" | "bond") && numbered(name, p).is_some())
                }) {
                    cx.warn(
                        sec.origin,
                        format!("[{name}] is not supported by ustack and is ignored ({why})"),
                    );
                } else {
                    let hint = value::suggest(name, SECTIONS.iter().copied())
                        .map(|s| {
                            if s == "port0" {
                                " (did you mean [portN]?)".to_string()
                            } else {
                                format!(" (did you mean [{s}]?)")
                            }
                        })
                        .unwrap_or_default();
                    return Err(cx.error(sec.origin, format!("unknown section [{name}]{hint}")));
                }
            }
        }
    }

    // Ports against [dpdk]: port_list and lcore_mask.
    ports.sort_by_key(|(p, _)| p.id);
    let port_list_origin = dpdk_section
        .and_then(|s| s.entry("port_list"))
        .map(|e| e.origin);
    match port_list_origin {
        Some(origin) => {
            for (p, sec) in &ports {
                if !dpdk.port_list.contains(&p.id) {
                    return Err(cx.error(
                        sec.origin,
                        format!(
                            "[port{}] is not in [dpdk] port_list ({})",
                            p.id,
                            dpdk::format_list(&dpdk.port_list)
                        ),
                    ));
                }
            }
            if let Some(missing) = dpdk
                .port_list
                .iter()
                .find(|id| !ports.iter().any(|(p, _)| p.id == **id))
            {
                return Err(cx.error(
                    origin,
                    format!("[dpdk] port_list: port {missing} has no [port{missing}] section"),
                ));
            }
        }
        None => dpdk.port_list = ports.iter().map(|(p, _)| p.id).collect(),
    }
    for (p, sec) in &ports {
        let Some(list) = &p.lcore_list else { continue };
        let origin = sec.entry("lcore_list").map_or(sec.origin, |e| e.origin);
        match &dpdk.lcore_mask {
            None => {
                return Err(cx.error(
                    origin,
                    format!("[port{}] lcore_list needs [dpdk] lcore_mask", p.id),
                ))
            }
            Some(mask) => {
                if let Some(c) = list.iter().find(|&&c| !mask.contains(c)) {
                    return Err(cx.error(
                        origin,
                        format!(
                            "[port{}] lcore_list: core {c} is not in [dpdk] lcore_mask ({mask})",
                            p.id
                        ),
                    ));
                }
            }
        }
    }
    port::check_distinct(&mut cx, &ports)?;
    vlans.sort_by_key(|(v, _)| v.id);
    vlan::check(&mut cx, &dpdk.vlan_filter, dpdk_section, &vlans, &ports)?;
    for (p, sec) in &mut ports {
        if vlans.iter().any(|(v, _)| v.portid == p.id) {
            clear_port_addresses(&mut cx, p, sec);
        } else {
            port::check_has_address(&cx, p, sec)?;
        }
    }
    if metrics.listen.is_some() && !control.enable {
        let origin = doc
            .sections
            .iter()
            .find(|s| s.name == "metrics")
            .and_then(|s| s.entry("listen"))
            .map(|e| e.origin);
        if let Some(origin) = origin {
            return Err(cx.error(
                origin,
                "[metrics] listen needs the control sockets ([control] enable=1): the endpoint \
                 reads the engines through them"
                    .to_string(),
            ));
        }
    }
    if let Some(sec) = kni_section {
        sections::check_kni(&cx, sec, &kni)?;
    }
    if let Some(sec) = sysctl_section {
        freebsd::check_sysctls(&cx, sec, &sysctls)?;
    }

    let ports = ports.into_iter().map(|(p, _)| p).collect();
    let vlans = vlans.into_iter().map(|(v, _)| v).collect();
    let mut warnings = cx.warnings;
    warnings.sort_by_key(|w| w.line.unwrap_or(usize::MAX));
    Ok(Config {
        file: file.to_string(),
        dpdk,
        ports,
        vlans,
        pcap,
        kni,
        fault,
        control,
        metrics,
        preload,
        freebsd_boot,
        freebsd_sysctl,
        boot,
        sysctls,
        warnings,
        source: doc,
    })
}

/// A port that carries VLAN interfaces has no addresses of its own (F-Stack
/// ignores them then): they are dropped, with a warning naming the keys.
fn clear_port_addresses(cx: &mut Ctx<'_>, p: &mut PortConfig, sec: &Section) {
    let keys: Vec<&str> = sec
        .entries
        .iter()
        .map(|e| e.key.as_str())
        .filter(|k| addrs::KEYS.contains(k))
        .collect();
    if keys.is_empty() {
        return;
    }
    cx.warn(
        sec.origin,
        format!(
            "[port{}] ignores {}: VLAN interfaces ride on this port and carry the addresses, \
             as in F-Stack (untagged frames on it are dropped)",
            p.id,
            keys.join(", ")
        ),
    );
    p.ipv4 = None;
    p.ipv6 = None;
    p.vip_addrs.clear();
    p.vip_addrs6.clear();
    p.ipfw_pr.clear();
}

impl Section {
    pub(crate) fn entry(&self, key: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.key == key)
    }
}

/// What the section builders share: where messages point, and the warnings.
pub(crate) struct Ctx<'a> {
    file: &'a str,
    warnings: Vec<ConfigWarning>,
}

impl Ctx<'_> {
    fn locate(&self, origin: Origin) -> (String, Option<usize>) {
        match origin {
            Origin::Line(l) => (self.file.to_string(), Some(l)),
            Origin::Override => (OVERRIDE_ORIGIN.to_string(), None),
        }
    }

    /// An error at `origin`.
    pub(crate) fn error(&self, origin: Origin, message: impl Into<String>) -> ConfigError {
        let (file, line) = self.locate(origin);
        ConfigError {
            file,
            line,
            message: message.into(),
        }
    }

    /// A warning at `origin`.
    pub(crate) fn warn(&mut self, origin: Origin, message: impl Into<String>) {
        let (file, line) = self.locate(origin);
        self.warnings.push(ConfigWarning {
            file,
            line,
            message: message.into(),
        });
    }

    /// `[section] key: "value" reason`.
    pub(crate) fn invalid(&self, section: &str, e: &Entry, reason: &str) -> ConfigError {
        self.error(
            e.origin,
            format!("[{section}] {}: {:?} {reason}", e.key, e.value),
        )
    }

    /// Parses the entry's value with `f`, or the [`Ctx::invalid`] error.
    pub(crate) fn value<T>(
        &self,
        section: &str,
        e: &Entry,
        f: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<T, ConfigError> {
        f(&e.value).map_err(|r| self.invalid(section, e, &r))
    }

    /// `[section] key is ignored by ustack (why)`.
    pub(crate) fn ignored(&mut self, section: &str, e: &Entry, why: &str) {
        self.warn(
            e.origin,
            format!("[{section}] {} is ignored by ustack ({why})", e.key),
        );
    }

    /// A key that is neither ustack's nor F-Stack's: an error, with the
    /// closest known key as a hint.
    pub(crate) fn unknown_key(
        &self,
        section: &str,
        e: &Entry,
        known: &[&str],
        ignored: &[(&str, &str)],
    ) -> ConfigError {
        let hint = value::suggest(
            &e.key,
            known.iter().copied().chain(ignored.iter().map(|(k, _)| *k)),
        )
        .map(|s| format!(" (did you mean {s}?)"))
        .unwrap_or_default();
        self.error(
            e.origin,
            format!("[{section}] {} is not a known key{hint}", e.key),
        )
    }

    /// Handles a key the section builder did not match: a warning if F-Stack
    /// has it, else an error.
    pub(crate) fn other_key(
        &mut self,
        section: &str,
        e: &Entry,
        known: &[&str],
        ignored: &[(&str, &str)],
    ) -> Result<(), ConfigError> {
        match ignored.iter().find(|(k, _)| *k == e.key) {
            Some((_, why)) => {
                self.ignored(section, e, why);
                Ok(())
            }
            None => Err(self.unknown_key(section, e, known, ignored)),
        }
    }
}
