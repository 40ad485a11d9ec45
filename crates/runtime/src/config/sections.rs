//! `[pcap]`, `[kni]` and ustack's own `[fault]`.

use std::path::PathBuf;
use std::time::Duration;

use super::ini::Section;
use super::types::{KniAction, KniMethod};
use super::value::{self, Reason, IFNAME_MAX};
use super::{ConfigError, Ctx};

/// `[pcap]`: capture of every packet an engine receives and sends, one file
/// series per engine. Costly: for debugging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcapConfig {
    /// `enable` (default 0).
    pub enable: bool,
    /// `snaplen`: bytes kept of each packet (1..=65535, default 96).
    pub snaplen: u32,
    /// `savelen`: bytes per file before the next file is started
    /// (64K..=1T, default 16M; K/M/G suffixes allowed).
    pub savelen: u64,
    /// `savepath`: directory of the files (default `.`).
    pub savepath: PathBuf,
}

impl Default for PcapConfig {
    fn default() -> Self {
        PcapConfig {
            enable: false,
            snaplen: 96,
            savelen: 16 << 20,
            savepath: PathBuf::from("."),
        }
    }
}

pub(crate) fn build_pcap(cx: &mut Ctx<'_>, sec: &Section) -> Result<PcapConfig, ConfigError> {
    const S: &str = "pcap";
    const KEYS: &[&str] = &["enable", "snaplen", "savelen", "savepath"];
    const IGNORED: &[(&str, &str)] = &[(
        "timestamp_precision",
        "ustack chooses the timestamp precision of its captures",
    )];
    let mut p = PcapConfig::default();
    for e in &sec.entries {
        match e.key.as_str() {
            "enable" => p.enable = cx.value(S, e, value::flag)?,
            "snaplen" => p.snaplen = cx.value(S, e, |v| value::int_u32(v, 1, 65535))?,
            "savelen" => p.savelen = cx.value(S, e, |v| value::bytes(v, 64 << 10, 1 << 40))?,
            "savepath" => p.savepath = PathBuf::from(cx.value(S, e, value::non_empty)?),
            _ => cx.other_key(S, e, KEYS, IGNORED)?,
        }
    }
    Ok(p)
}

/// `[kni]`: which packets go to the kernel (through an exception interface)
/// instead of ustack. Typed now; used by a later ustack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KniConfig {
    /// `enable` (default 0).
    pub enable: bool,
    /// `method`: reject (default) or accept; required when enabled.
    pub method: KniMethod,
    /// `tcp_port`: TCP ports the method applies to (`80,443`, `8000-8010`).
    pub tcp_ports: Vec<u16>,
    /// `udp_port`: UDP ports the method applies to.
    pub udp_ports: Vec<u16>,
    /// `kni_action`: default, alltokni or alltoff.
    pub kni_action: KniAction,
    /// `ifname`: prefix of the kernel-side interfaces; port N's is
    /// `{ifname}{N}` (default `ustack-kni`: `ustack-kni0`...; F-Stack's was
    /// `veth`, a name that reads like a veth pair's end).
    pub ifname: String,
    /// `console_packets_ratelimit`, `general_packets_ratelimit`,
    /// `kernel_packets_ratelimit`: packets per second to the kernel at most,
    /// per class (0, the default: no limit).
    pub console_packets_ratelimit: u32,
    pub general_packets_ratelimit: u32,
    pub kernel_packets_ratelimit: u32,
}

impl Default for KniConfig {
    fn default() -> Self {
        KniConfig {
            enable: false,
            method: KniMethod::Reject,
            tcp_ports: Vec::new(),
            udp_ports: Vec::new(),
            kni_action: KniAction::Default,
            ifname: "ustack-kni".to_string(),
            console_packets_ratelimit: 0,
            general_packets_ratelimit: 0,
            kernel_packets_ratelimit: 0,
        }
    }
}

fn kni_method(v: &str) -> Result<KniMethod, Reason> {
    match v.to_ascii_lowercase().as_str() {
        "reject" => Ok(KniMethod::Reject),
        "accept" => Ok(KniMethod::Accept),
        _ => Err("must be reject or accept".into()),
    }
}

fn kni_action(v: &str) -> Result<KniAction, Reason> {
    match v.to_ascii_lowercase().as_str() {
        "default" => Ok(KniAction::Default),
        "alltokni" => Ok(KniAction::AllToKni),
        "alltoff" => Ok(KniAction::AllToFf),
        _ => Err("must be default, alltokni or alltoff".into()),
    }
}

/// The longest `ifname` prefix: room for a 5-digit port number.
const KNI_IFNAME_MAX: usize = IFNAME_MAX - 5;

fn kni_ifname(v: &str) -> Result<String, Reason> {
    let s = value::ifname(v)?;
    if s.len() > KNI_IFNAME_MAX {
        return Err(format!(
            "is longer than {KNI_IFNAME_MAX} bytes (the port number is appended)"
        ));
    }
    Ok(s)
}

pub(crate) fn build_kni(cx: &mut Ctx<'_>, sec: &Section) -> Result<KniConfig, ConfigError> {
    const S: &str = "kni";
    const KEYS: &[&str] = &[
        "enable",
        "method",
        "tcp_port",
        "udp_port",
        "kni_action",
        "ifname",
        "console_packets_ratelimit",
        "general_packets_ratelimit",
        "kernel_packets_ratelimit",
    ];
    let rate = |v: &str| value::int_u32(v, 0, 100_000_000);
    let mut k = KniConfig::default();
    for e in &sec.entries {
        match e.key.as_str() {
            "enable" => k.enable = cx.value(S, e, value::flag)?,
            "method" => k.method = cx.value(S, e, kni_method)?,
            "tcp_port" => k.tcp_ports = cx.value(S, e, |v| value::num_list_u16(v, 1))?,
            "udp_port" => k.udp_ports = cx.value(S, e, |v| value::num_list_u16(v, 1))?,
            "kni_action" => k.kni_action = cx.value(S, e, kni_action)?,
            "ifname" => k.ifname = cx.value(S, e, kni_ifname)?,
            "console_packets_ratelimit" => k.console_packets_ratelimit = cx.value(S, e, rate)?,
            "general_packets_ratelimit" => k.general_packets_ratelimit = cx.value(S, e, rate)?,
            "kernel_packets_ratelimit" => k.kernel_packets_ratelimit = cx.value(S, e, rate)?,
            _ => cx.other_key(S, e, KEYS, &[])?,
        }
    }
    Ok(k)
}

pub(crate) fn check_kni(cx: &Ctx<'_>, sec: &Section, k: &KniConfig) -> Result<(), ConfigError> {
    if k.enable && sec.entry("method").is_none() {
        let origin = sec.entry("enable").map_or(sec.origin, |e| e.origin);
        return Err(cx.error(
            origin,
            "[kni] method= (reject or accept) is required when enable=1",
        ));
    }
    Ok(())
}

/// `[fault]` (ustack's own): faults injected on every port's link, for
/// tests and demonstrations. The engine maps it onto the link's fault layer.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultConfigSpec {
    /// `loss`: probability a frame is dropped (0..=1).
    pub loss: f64,
    /// `duplicate`: probability a frame is sent twice (0..=1).
    pub duplicate: f64,
    /// `reorder`: probability a frame is held back behind the next (0..=1).
    pub reorder: f64,
    /// `corrupt`: probability a frame has a byte flipped (0..=1).
    pub corrupt: f64,
    /// `delay_us`: added delay, microseconds (0..=10000000).
    pub delay_us: u64,
    /// `jitter_us`: random extra delay up to this, microseconds
    /// (0..=10000000).
    pub jitter_us: u64,
    /// `tx_delay_us`: delay added on transmit only, on top of `delay_us`,
    /// microseconds (0..=10000000): frames the engine sent stay held (and
    /// their packet buffers taken) that long.
    pub tx_delay_us: u64,
    /// `seed`: seed of the fault generator (default [`FAULT_DEFAULT_SEED`]),
    /// so a run replays.
    pub seed: u64,
}

/// The `[fault] seed` when none is written.
pub const FAULT_DEFAULT_SEED: u64 = 0x7573_7461_636b_5eed;

impl Default for FaultConfigSpec {
    fn default() -> Self {
        FaultConfigSpec {
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            corrupt: 0.0,
            delay_us: 0,
            jitter_us: 0,
            tx_delay_us: 0,
            seed: FAULT_DEFAULT_SEED,
        }
    }
}

pub(crate) fn build_fault(cx: &mut Ctx<'_>, sec: &Section) -> Result<FaultConfigSpec, ConfigError> {
    const S: &str = "fault";
    const KEYS: &[&str] = &[
        "loss",
        "duplicate",
        "reorder",
        "corrupt",
        "delay_us",
        "jitter_us",
        "tx_delay_us",
        "seed",
    ];
    const MAX_DELAY_US: u64 = 10_000_000;
    let mut f = FaultConfigSpec::default();
    for e in &sec.entries {
        match e.key.as_str() {
            "loss" => f.loss = cx.value(S, e, value::probability)?,
            "duplicate" => f.duplicate = cx.value(S, e, value::probability)?,
            "reorder" => f.reorder = cx.value(S, e, value::probability)?,
            "corrupt" => f.corrupt = cx.value(S, e, value::probability)?,
            "delay_us" => f.delay_us = cx.value(S, e, |v| value::int(v, 0, MAX_DELAY_US))?,
            "jitter_us" => f.jitter_us = cx.value(S, e, |v| value::int(v, 0, MAX_DELAY_US))?,
            "tx_delay_us" => f.tx_delay_us = cx.value(S, e, |v| value::int(v, 0, MAX_DELAY_US))?,
            "seed" => f.seed = cx.value(S, e, |v| value::int(v, 0, u64::MAX))?,
            _ => cx.other_key(S, e, KEYS, &[])?,
        }
    }
    Ok(f)
}

/// `[preload]`: how `ustack run` (the LD_PRELOAD library) drives a
/// process's engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreloadConfig {
    /// `mode`: `rtc` (default) or `rtw`.
    pub mode: PreloadMode,
    /// `exit_linger` (milliseconds): how long an exiting process keeps its
    /// engine turning while connections it closed still deliver data or a
    /// FIN (the kernel carries such connections on after the process;
    /// ustack's go with it).  Those left when it passes are reset.
    pub exit_linger: Duration,
}

impl Default for PreloadConfig {
    fn default() -> Self {
        PreloadConfig {
            mode: PreloadMode::default(),
            exit_linger: Duration::from_secs(5),
        }
    }
}

/// Who drives a process's engine under `ustack run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PreloadMode {
    /// Run to completion: the program's thread that first needs the
    /// network drives the engine whenever it waits in a socket, epoll,
    /// poll or select call (one core per instance).
    #[default]
    Rtc,
    /// Run to wait: the engine runs on a thread of its own (give it a core
    /// and `idle_sleep=0`); the program's threads post their calls to it.
    Rtw,
}

fn preload_mode(v: &str) -> Result<PreloadMode, Reason> {
    match v.to_ascii_lowercase().as_str() {
        "rtc" => Ok(PreloadMode::Rtc),
        "rtw" => Ok(PreloadMode::Rtw),
        _ => Err("must be rtc (run to completion) or rtw (run to wait)".into()),
    }
}

pub(crate) fn build_preload(cx: &mut Ctx<'_>, sec: &Section) -> Result<PreloadConfig, ConfigError> {
    const S: &str = "preload";
    const KEYS: &[&str] = &["mode", "exit_linger"];
    let mut p = PreloadConfig::default();
    for e in &sec.entries {
        match e.key.as_str() {
            "mode" => p.mode = cx.value(S, e, preload_mode)?,
            "exit_linger" => {
                p.exit_linger = cx.value(S, e, |v| {
                    value::int(v, 0, 600_000).map(Duration::from_millis)
                })?
            }
            _ => cx.other_key(S, e, KEYS, &[])?,
        }
    }
    Ok(p)
}

/// `[control]`: the control socket of each engine, through which the
/// `ustack` command reads and changes it (`crate::control`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlConfig {
    /// `enable` (default 1).
    pub enable: bool,
    /// `dir`: the run directory; sockets go in `dir/<file_prefix>/`
    /// (default `/run/ustack`).
    pub dir: PathBuf,
}

impl Default for ControlConfig {
    fn default() -> Self {
        ControlConfig {
            enable: true,
            dir: PathBuf::from(crate::control::DEFAULT_RUN_DIR),
        }
    }
}

pub(crate) fn build_control(cx: &mut Ctx<'_>, sec: &Section) -> Result<ControlConfig, ConfigError> {
    const S: &str = "control";
    const KEYS: &[&str] = &["enable", "dir"];
    let mut c = ControlConfig::default();
    for e in &sec.entries {
        match e.key.as_str() {
            "enable" => c.enable = cx.value(S, e, value::flag)?,
            "dir" => c.dir = PathBuf::from(cx.value(S, e, value::non_empty)?),
            _ => cx.other_key(S, e, KEYS, &[])?,
        }
    }
    Ok(c)
}

/// `[metrics]`: a Prometheus text endpoint (off by default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricsConfig {
    /// `listen`: `ADDR:PORT` of a kernel TCP socket serving `GET /metrics`.
    pub listen: Option<std::net::SocketAddr>,
}

pub(crate) fn build_metrics(cx: &mut Ctx<'_>, sec: &Section) -> Result<MetricsConfig, ConfigError> {
    const S: &str = "metrics";
    const KEYS: &[&str] = &["listen"];
    let mut m = MetricsConfig::default();
    for e in &sec.entries {
        match e.key.as_str() {
            "listen" => {
                m.listen = Some(cx.value(S, e, |v| {
                    v.parse::<std::net::SocketAddr>()
                        .map_err(|_| "is not ADDR:PORT (e.g. 127.0.0.1:9100, [::1]:9100)".into())
                })?)
            }
            _ => cx.other_key(S, e, KEYS, &[])?,
        }
    }
    Ok(m)
}
