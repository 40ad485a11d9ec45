//! From a configuration to a running engine: the stack's tunables, the
//! interfaces, and the links they sit on.

use std::fmt;

use link::{
    AfPacketLink, FaultConfig, FaultLink, Link, PacketPool, PcapLink, PcapSeries, RingConfig,
    RxRingKind, ShmConfig, ShmLink, TapLink,
};
use std::net::IpAddr;

use stack::route::IpCidr;
use stack::{
    CcAlgorithm, EcnMode, IfaceId, InterfaceConfig, PolicyRule, RuleMatch, Stack, StackConfig,
    TcpConfig,
};

use crate::config::{
    Config, CongestionControl, DpdkConfig, KniConfig, LinkSpec, PortConfig, RxRingSetting,
    SourcePrefix, Sysctls,
};
use crate::engine::{Engine, EngineConfig};
use crate::ports::PortLink;

/// Why the engine could not be set up.
#[derive(Debug)]
pub enum SetupError {
    NoPorts,
    /// A port without `link=` or without an IPv4 address.
    PortIncomplete {
        port: u16,
        what: &'static str,
    },
    /// The backend is not built into this binary yet (a later issue).
    Unsupported {
        port: u16,
        link: String,
    },
    /// The backend exists but this binary was built without its cargo
    /// feature.
    MissingFeature {
        port: u16,
        link: String,
        feature: &'static str,
    },
    Open {
        port: u16,
        link: String,
        error: std::io::Error,
    },
    Stack {
        port: u16,
        error: stack::StackError,
    },
    Mtu {
        port: u16,
        asked: usize,
        link: usize,
    },
    Vlan {
        vlan: u16,
        error: stack::StackError,
    },
    /// `[pcap] enable=1` and the first capture file cannot be made.
    Capture {
        port: u16,
        path: std::path::PathBuf,
        error: std::io::Error,
    },
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetupError::NoPorts => write!(f, "the configuration has no [portN] section"),
            SetupError::PortIncomplete { port, what } => write!(f, "[port{port}]: {what}"),
            SetupError::Unsupported { port, link } => {
                write!(
                    f,
                    "[port{port}] link={link}: this backend is not available in this build"
                )
            }
            SetupError::MissingFeature {
                port,
                link,
                feature,
            } => write!(
                f,
                "[port{port}] link={link}: this build of ustack lacks the `{feature}` cargo \
                 feature (build with `cargo build --release --features {feature}`, or \
                 `--all-features`)"
            ),
            SetupError::Open { port, link, error } => {
                write!(f, "[port{port}] link={link}: cannot open: {error}")
            }
            SetupError::Stack { port, error } => write!(f, "[port{port}]: {error}"),
            SetupError::Vlan { vlan, error } => write!(f, "[vlan{vlan}]: {error}"),
            SetupError::Capture { port, path, error } => write!(
                f,
                "[pcap] enable=1: cannot capture port {port} to {}: {error}",
                path.display()
            ),
            SetupError::Mtu { port, asked, link } => {
                write!(
                    f,
                    "[port{port}] mtu={asked} is larger than the link's MTU {link}"
                )
            }
        }
    }
}

impl std::error::Error for SetupError {}

/// The stack's tunables from `[freebsd.sysctl]` and `[freebsd.boot]`.
pub fn stack_config(cfg: &Config, seed: u64) -> StackConfig {
    let s: &Sysctls = &cfg.sysctls;
    StackConfig {
        seed,
        ip_ttl: s.ip_ttl,
        ip6_hop_limit: s.ip6_hlim,
        ip6_dad_count: s.ip6_dad_count,
        ip6_accept_rtadv: s.ip6_accept_rtadv,
        ip6_redirect_accept: s.ip6_redirect_accept,
        arp_maxhold: s.arp_maxhold as usize,
        arp_max_age: s.arp_max_age,
        reass_max_packets: s.reass_max_packets as usize,
        reass_max_frags: s.reass_max_frags as usize,
        reass_timeout: s.reass_timeout,
        icmp_rate_limit: s.icmp_rate_limit,
        udp_recv_space: s.udp_recv_space as usize,
        max_sockets: cfg.boot.max_sockets as usize,
        tcp: tcp_config(s),
        ..StackConfig::default()
    }
}

/// TCP's tunables from `[freebsd.sysctl]`.
pub fn tcp_config(s: &Sysctls) -> TcpConfig {
    TcpConfig {
        msl: s.tcp_msl,
        delayed_ack: s.tcp_delayed_ack,
        fast_path: s.tcp_fast_path,
        send_space: s.tcp_send_space as usize,
        recv_space: s.tcp_recv_space as usize,
        sendbuf_max: s.tcp_sendbuf_max as usize,
        recvbuf_max: s.tcp_recvbuf_max as usize,
        cc: match s.tcp_cc {
            CongestionControl::Cubic => CcAlgorithm::Cubic,
            CongestionControl::NewReno => CcAlgorithm::NewReno,
        },
        mss_default: s.tcp_mssdflt,
        mss_default_v6: s.tcp_v6mssdflt,
        syncookies: s.tcp_syncookies,
        somaxconn: s.somaxconn as usize,
        keepidle: s.tcp_keepidle,
        keepintvl: s.tcp_keepintvl,
        keepcnt: s.tcp_keepcnt,
        sack: s.tcp_sack,
        rfc1323: s.tcp_rfc1323,
        ecn: ecn_mode(s.tcp_ecn),
        port_first: s.port_range_first,
        port_last: s.port_range_last,
        memory_budget: (s.tcp_memory_budget_mb as usize) << 20,
        ..TcpConfig::default()
    }
}

/// `net.inet.tcp.ecn.enable`'s value (0..=2, checked when parsed).
pub fn ecn_mode(v: u32) -> EcnMode {
    match v {
        0 => EcnMode::Off,
        1 => EcnMode::On,
        _ => EcnMode::AcceptOnly,
    }
}

/// The engine's timing from `[dpdk]`.
pub fn engine_config(cfg: &Config) -> EngineConfig {
    // An engine's port i is the configuration's i-th port.
    let soft_gso_ports = cfg
        .ports
        .iter()
        .enumerate()
        .filter(|(i, p)| *i < 64 && p.soft_gso())
        .fold(0u64, |m, (i, _)| m | 1 << i);
    EngineConfig {
        idle_sleep: cfg.dpdk.idle_sleep,
        pkt_tx_delay: cfg.dpdk.pkt_tx_delay,
        soft_gso_ports,
        ..EngineConfig::default()
    }
}

pub fn link_name(spec: &LinkSpec) -> String {
    match spec {
        LinkSpec::Tap(n) => format!("tap:{n}"),
        LinkSpec::AfPacket(n) => format!("af_packet:{n}"),
        LinkSpec::AfXdp(n) => format!("af_xdp:{n}"),
        LinkSpec::Dpdk => "dpdk".to_string(),
        other => other.to_string(),
    }
}

/// Packet buffers per port when `[portN] memory` does not say.
pub const DEFAULT_POOL_BUFFERS: u32 = 8192;

/// The packet pool of one port (of one engine): buffers that hold the
/// largest frame (MTU + Ethernet + a VLAN tag, rounded up; links with a large
/// MTU, a TAP can have 65535, get large buffers), `[portN] memory` of them.
pub fn port_pool(port: &PortConfig) -> PacketPool {
    let mtu = usize::from(port.mtu.unwrap_or(1500)).max(1500);
    let buf_size = (mtu + 64).next_power_of_two().max(2048);
    let count = port
        .memory
        .map_or(DEFAULT_POOL_BUFFERS, |m| m.buffers(buf_size)) as usize;
    PacketPool::with_reserve(buf_size, count, pool_reserve(count))
}

/// Buffers of a pool of `count` kept back for control frames and the
/// receive ring: a sixteenth, and at least two bursts, so that a receive
/// burst taking from the reserve (it may) still leaves a burst's worth for
/// the ARP and ICMP answers; at most half the pool.
pub fn pool_reserve(count: usize) -> usize {
    (count / 16).max(2 * link::MAX_BURST).min(count / 2)
}

/// The rings of an `af_packet` port: the defaults, with large receive as
/// `gro` says (without it, no large buffers either), transmit checksum
/// offload through the `virtio_net_hdr` unless `tx_csum_offoad_skip` (as
/// F-Stack uses a NIC's where it has one; the kernel always finishes a
/// partial checksum, in software where the device cannot), and with
/// `[dpdk] tso` segmentation offload too (not with `tx_csum_offoad_skip`,
/// which leaves every checksum to the stack): 64 TX slots of 128 KiB then,
/// and more large buffers, as super-frames leave in them too.
pub fn ring_config(dpdk: &DpdkConfig, port: &PortConfig) -> RingConfig {
    let d = RingConfig::default();
    let tso = dpdk.tso && !dpdk.tx_csum_offload_skip;
    let large_buffers = match (port.gro, tso) {
        (_, true) => d.large_buffers + 64,
        (true, false) => d.large_buffers,
        (false, false) => 0,
    };
    let rx_ring = match port.rx_ring {
        RxRingSetting::V2 => RxRingKind::V2,
        RxRingSetting::V3 => RxRingKind::V3,
    };
    RingConfig {
        rx_ring,
        gro: port.gro,
        kernel_rx_drop: port.kernel_rx_drop,
        large_buffers,
        tso,
        tx_checksum: !dpdk.tx_csum_offload_skip,
        vnet_hdr: port.vnet_hdr,
        tx_frame_count: if tso { 64 } else { d.tx_frame_count },
        ..d
    }
}

/// Says, once per port, what `[dpdk] tso=1` does there: an `af_packet`
/// port cuts TCP super-frames (the kernel's GSO, or the NIC's TSO behind
/// it), unless `tx_csum_offoad_skip` is set; other links send segments of
/// the MTU (DPDK's own note is in `dpdk.rs`).
pub fn tso_note(dpdk: &DpdkConfig, port: &PortConfig) {
    if !dpdk.tso {
        return;
    }
    let tso_link = match &port.link {
        LinkSpec::AfPacket(_) => !dpdk.tx_csum_offload_skip,
        LinkSpec::Dpdk => true,
        _ => false,
    };
    if tso_link && port.gso == Some(true) {
        eprintln!(
            "ustack: [port{}] gso=1 with [dpdk] tso=1: the link cuts TCP super-frames itself; \
             software GSO acts only where it cannot (behind [fault], or a DPDK port without \
             TSO)",
            port.id
        );
    }
    match &port.link {
        LinkSpec::AfPacket(_) if dpdk.tx_csum_offload_skip => eprintln!(
            "ustack: [dpdk] tso=1 with tx_csum_offoad_skip=1: port {} (af_packet) sends \
             segments of the MTU, checksums made by the stack",
            port.id
        ),
        LinkSpec::AfPacket(_) | LinkSpec::Dpdk => {}
        other => eprintln!(
            "ustack: [dpdk] tso=1: port {} ({}) has no segmentation offload; it sends \
             segments of the MTU",
            port.id,
            link_name(other)
        ),
    }
}

/// Opens the link of one port (`dpdk`: the `[dpdk]` section, for
/// `link=dpdk`).
pub fn open_link(dpdk: &DpdkConfig, port: &PortConfig) -> Result<PortLink, SetupError> {
    tso_note(dpdk, port);
    let name = link_name(&port.link);
    if port.link == LinkSpec::Dpdk {
        // DPDK brings its own buffers (mbufs): no pool here.
        return open_dpdk(dpdk, port, name);
    }
    let open_err = |error| SetupError::Open {
        port: port.id,
        link: name.clone(),
        error,
    };
    match &port.link {
        LinkSpec::Tap(ifname) => {
            let mut tap = TapLink::open(ifname, port_pool(port)).map_err(open_err)?;
            if let Some(mac) = port.mac {
                tap.set_mac(mac);
            }
            Ok(PortLink::Tap(tap))
        }
        LinkSpec::AfPacket(ifname) => {
            AfPacketLink::open(ifname, port_pool(port), &ring_config(dpdk, port))
                .map(PortLink::AfPacket)
                .map_err(open_err)
        }
        // Without the exception path (it takes the engines' way: cores.rs).
        LinkSpec::AfXdp(ifname) => crate::xdp::open_queues(
            ifname,
            port,
            &KniConfig::default(),
            1,
            !dpdk.tx_csum_offload_skip,
        )
        .map(|mut q| PortLink::AfXdp(Box::new(q.remove(0))))
        .map_err(open_err),
        LinkSpec::ShmCreate(path) => {
            let mtu = usize::from(port.mtu.unwrap_or(SHM_DEFAULT_MTU));
            let mut l = ShmLink::create(path, &ShmConfig::new(mtu, SHM_SLOTS)).map_err(open_err)?;
            if let Some(mac) = port.mac {
                l.set_mac(mac);
            }
            Ok(PortLink::Shm(l))
        }
        LinkSpec::ShmAttach(path) => {
            let mut l =
                ShmLink::open_wait(path, std::time::Duration::from_secs(10)).map_err(open_err)?;
            // Both ends are attached: nobody else needs the name.
            let _ = l.unlink();
            if let Some(mac) = port.mac {
                l.set_mac(mac);
            }
            Ok(PortLink::Shm(l))
        }
        LinkSpec::Dpdk => Err(SetupError::Unsupported {
            port: port.id,
            link: name,
        }),
    }
}

/// `link=shm_create:` when the port gives no `mtu=`: ustack-bench's link
/// MTU (16384, its slots in turn staying within a last-level cache).
pub const SHM_DEFAULT_MTU: u16 = 16384;
/// Frames per direction of a `shm_create:` link (ustack-bench's).
pub const SHM_SLOTS: usize = 1024;

#[cfg(feature = "dpdk")]
fn open_dpdk(dpdk: &DpdkConfig, port: &PortConfig, name: String) -> Result<PortLink, SetupError> {
    crate::dpdk::open(dpdk, port)
        .map(PortLink::Dpdk)
        .map_err(|error| SetupError::Open {
            port: port.id,
            link: name,
            error,
        })
}

#[cfg(not(feature = "dpdk"))]
fn open_dpdk(_: &DpdkConfig, port: &PortConfig, name: String) -> Result<PortLink, SetupError> {
    Err(SetupError::MissingFeature {
        port: port.id,
        link: name,
        feature: "dpdk",
    })
}

/// The interface the stack puts on a port's link.
pub fn interface_config(
    port: &PortConfig,
    link: &dyn LinkInfoSource,
) -> Result<InterfaceConfig, SetupError> {
    let ip = port.ipv4.as_ref().ok_or(SetupError::PortIncomplete {
        port: port.id,
        what: "no addr= (IPv4 address)",
    })?;
    let mtu = port_mtu(port, link)?;
    Ok(InterfaceConfig {
        name: port_name(port),
        mac: link.mac(),
        mtu,
        addr: ip.addr,
        prefix_len: ip.prefix_len,
        broadcast: Some(ip.broadcast),
        gateway: ip.gateway,
        extra_addrs: port.vip_addrs.clone(),
    })
}

/// The IPv6 side of `port` (`addr6`, `vip_addr6`, `gateway6`), if it has
/// one.
pub fn ipv6_config(port: &PortConfig) -> Option<stack::Ipv6Config> {
    let v6 = port.ipv6.as_ref()?;
    let mut addrs = vec![(v6.addr, v6.prefix_len)];
    addrs.extend(port.vip_addrs6.iter().map(|&a| (a, port.vip_prefix_len)));
    Some(stack::Ipv6Config {
        addrs,
        gateway: v6.gateway,
    })
}

/// Adds `port`'s interface to `stack`, with IPv6 when the port has it.
pub fn add_port_interface(
    stack: &mut Stack,
    port: &PortConfig,
    iface: &InterfaceConfig,
) -> Result<(), SetupError> {
    let err = |error| SetupError::Stack {
        port: port.id,
        error,
    };
    let id = stack.add_interface(iface).map_err(err)?;
    if let Some(v6) = ipv6_config(port) {
        // Duplicate address detection starts at the engine's first poll.
        stack
            .enable_ipv6(stack::Instant::ZERO, id, &v6)
            .map_err(err)?;
    }
    Ok(())
}

/// Adds the stack's interfaces: one per port, in order (interface i is
/// port i; a port that carries VLANs gets one without addresses), then
/// the VLAN interfaces, then a FIB for each interface with `ipfw_pr` (the
/// first FIB 1, the next 2 ..., ports before VLANs) holding its connected
/// routes and gateways, with a rule (priority 100) per prefix sending
/// packets from it there.
pub fn add_interfaces<L: LinkInfoSource>(
    stack: &mut Stack,
    cfg: &Config,
    links: &[L],
) -> Result<(), SetupError> {
    for (i, (port, link)) in cfg.ports.iter().zip(links).enumerate() {
        if cfg.vlans.iter().any(|v| v.portid == port.id) {
            let mtu = port_mtu(port, link)?;
            let id = stack
                .add_port(&port_name(port), link.mac(), mtu)
                .map_err(|error| SetupError::Stack {
                    port: port.id,
                    error,
                })?;
            debug_assert_eq!(usize::from(id.0), i);
        } else {
            let iface = interface_config(port, link)?;
            add_port_interface(stack, port, &iface)?;
        }
    }
    let mut next_fib = 1u16;
    for (i, port) in cfg.ports.iter().enumerate() {
        if port.ipfw_pr.is_empty() {
            continue;
        }
        let err = |error| SetupError::Stack {
            port: port.id,
            error,
        };
        source_policy(stack, IfaceId(i as u16), next_fib, &port.ipfw_pr).map_err(err)?;
        next_fib += 1;
    }
    for v in &cfg.vlans {
        let err = |error| SetupError::Vlan { vlan: v.id, error };
        let Some(at) = cfg.ports.iter().position(|p| p.id == v.portid) else {
            return Err(err(stack::StackError::NoSuchInterface));
        };
        let port_id = IfaceId(at as u16);
        let (mac, mtu) = match stack.interface(port_id) {
            Some(p) => (p.mac, p.mtu),
            None => return Err(err(stack::StackError::NoSuchInterface)),
        };
        let Some(ip) = v.ipv4 else {
            return Err(SetupError::PortIncomplete {
                port: v.portid,
                what: "a [vlanN] without addr=",
            });
        };
        let ic = InterfaceConfig {
            name: v.if_name(&cfg.ports[at]),
            mac,
            mtu,
            addr: ip.addr,
            prefix_len: ip.prefix_len,
            broadcast: Some(ip.broadcast),
            gateway: ip.gateway,
            extra_addrs: v.vip_addrs.clone(),
        };
        let id = stack.add_vlan(port_id, v.id, &ic).map_err(err)?;
        if let Some(v6) = v.ipv6 {
            let mut addrs = vec![(v6.addr, v6.prefix_len)];
            addrs.extend(v.vip_addrs6.iter().map(|&a| (a, v.vip_prefix_len)));
            let c = stack::Ipv6Config {
                addrs,
                gateway: v6.gateway,
            };
            stack
                .enable_ipv6(stack::Instant::ZERO, id, &c)
                .map_err(err)?;
        }
        if !v.ipfw_pr.is_empty() {
            source_policy(stack, id, next_fib, &v.ipfw_pr).map_err(err)?;
            next_fib += 1;
        }
    }
    Ok(())
}

/// Gives interface `id` FIB `fib` and sends packets from `prefixes`
/// there (F-Stack's `ipfw_pr`: `ipfw add 100 setfib N ip from P to any
/// out`).
fn source_policy(
    stack: &mut Stack,
    id: IfaceId,
    fib: u16,
    prefixes: &[SourcePrefix],
) -> Result<(), stack::StackError> {
    stack.set_interface_fib(id, fib)?;
    for p in prefixes {
        let dest = IpCidr::new(IpAddr::V4(p.addr), p.prefix_len)
            .map_err(|e| stack::StackError::BadPrefixLen(e.0))?;
        stack.add_rule(PolicyRule {
            priority: IPFW_PR_RULE,
            matches: RuleMatch::Source(dest),
            fib,
        })?;
    }
    Ok(())
}

/// The priority (ipfw rule number) of the rules `ipfw_pr` makes.
pub const IPFW_PR_RULE: u32 = 100;

fn port_name(port: &PortConfig) -> String {
    if port.if_name.is_empty() {
        format!("port{}", port.id)
    } else {
        port.if_name.clone()
    }
}

/// The port's MTU: `mtu=`, at most the link's, else the link's.
fn port_mtu(port: &PortConfig, link: &dyn LinkInfoSource) -> Result<usize, SetupError> {
    let link_mtu = link.mtu();
    match port.mtu {
        Some(m) if usize::from(m) > link_mtu => Err(SetupError::Mtu {
            port: port.id,
            asked: usize::from(m),
            link: link_mtu,
        }),
        Some(m) => Ok(usize::from(m)),
        None => Ok(link_mtu),
    }
}

/// What [`interface_config`] needs to know of a link.
pub trait LinkInfoSource {
    fn mtu(&self) -> usize;
    fn mac(&self) -> [u8; 6];
}

impl<L: Link> LinkInfoSource for L {
    fn mtu(&self) -> usize {
        self.info().mtu
    }
    fn mac(&self) -> [u8; 6] {
        self.info().mac
    }
}

/// The fault injector's impairments of each direction from `[fault]`:
/// the same on receive and transmit, but for `tx_delay_us`.
#[derive(Debug, Clone)]
pub struct FaultDirections {
    pub rx: FaultConfig,
    pub tx: FaultConfig,
}

impl FaultDirections {
    /// Wraps `link` in the injector.
    pub fn wrap(&self, link: PortLink) -> PortLink {
        PortLink::Faulty(Box::new(FaultLink::with_directions(
            link,
            self.rx.clone(),
            self.tx.clone(),
        )))
    }
}

pub fn fault_config(cfg: &Config) -> Option<FaultDirections> {
    cfg.fault.as_ref().map(|f| {
        let rx = FaultConfig {
            loss: f.loss,
            duplicate: f.duplicate,
            reorder: f.reorder,
            corrupt: f.corrupt,
            delay_us: f.delay_us,
            jitter_us: f.jitter_us,
            seed: f.seed,
        };
        let tx = FaultConfig {
            delay_us: f.delay_us.saturating_add(f.tx_delay_us),
            ..rx.clone()
        };
        FaultDirections { rx, tx }
    })
}

/// The capture of port `port` of engine `engine` when `[pcap] enable=1`:
/// files `savepath/cap-PID-eENGINE-portPORT-N.pcap` of at most `savelen`
/// bytes each, frames cut to `snaplen`.
pub fn pcap_series(
    cfg: &Config,
    engine: usize,
    port: u16,
) -> Result<Option<PcapSeries>, SetupError> {
    let p = &cfg.pcap;
    if !p.enable {
        return Ok(None);
    }
    let prefix = p
        .savepath
        .join(format!("cap-{}-e{engine}-port{port}", std::process::id()));
    let err = |error| SetupError::Capture {
        port,
        path: prefix.clone(),
        error,
    };
    std::fs::create_dir_all(&p.savepath).map_err(err)?;
    let series = PcapSeries::create(&prefix, p.snaplen, p.savelen).map_err(err)?;
    eprintln!(
        "ustack: [pcap] capturing every frame of port {port} (engine {engine}) to {}",
        series.current_path().display()
    );
    Ok(Some(series))
}

/// `link` behind its capture, when there is one.
pub fn captured(link: PortLink, series: Option<PcapSeries>) -> PortLink {
    match series {
        Some(s) => PortLink::Captured(Box::new(PcapLink::new(link, s))),
        None => link,
    }
}

/// Builds the engine a configuration describes: every port opened, port 0
/// behind the fault injector when `[fault]` is present.
pub fn build_engine(cfg: &Config, seed: u64) -> Result<Engine<PortLink>, SetupError> {
    build_engine_steered(cfg, seed, None)
}

/// [`build_engine`] for engine `steering.engine` of `steering.engines`
/// sharing the ports with engines in other processes: outgoing
/// connections take source ports whose replies hash back to it.
pub fn build_engine_steered(
    cfg: &Config,
    seed: u64,
    steering: Option<stack::steer::FlowSteering>,
) -> Result<Engine<PortLink>, SetupError> {
    if cfg.ports.is_empty() {
        return Err(SetupError::NoPorts);
    }
    let mut sc = stack_config(cfg, seed);
    // This process's place among those sharing the ports, if any.
    let member = steering
        .as_ref()
        .filter(|s| s.engines > 1)
        .map(|s| (usize::from(s.engine), usize::from(s.engines)));
    if steering.is_some() {
        sc.tcp.steering = steering;
    }
    let mut stack = Stack::new(sc);
    let mut links = Vec::new();
    for (i, port) in cfg.ports.iter().enumerate() {
        let opened = match (&port.link, member) {
            // One process of several on the port: its own AF_XDP queue.
            (LinkSpec::AfXdp(ifname), Some((engine, engines))) => crate::xdp::open_member(
                ifname,
                port,
                engine,
                engines,
                !cfg.dpdk.tx_csum_offload_skip,
            )
            .map(|l| PortLink::AfXdp(Box::new(l)))
            .map_err(|error| SetupError::Open {
                port: port.id,
                link: link_name(&port.link),
                error,
            })?,
            _ => open_link(&cfg.dpdk, port)?,
        };
        let mut link = captured(opened, pcap_series(cfg, 0, port.id)?);
        if i == 0 {
            if let Some(fd) = fault_config(cfg) {
                link = fd.wrap(link);
            }
        }
        links.push(link);
    }
    add_interfaces(&mut stack, cfg, &links)?;
    let mut engine = Engine::new(stack, links, engine_config(cfg));
    if let Some(spec) = crate::control::ControlSpec::from_config(cfg, 0) {
        crate::control::attach(&mut engine, &spec, crate::cores::engine_snapshot);
    }
    Ok(engine)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_reserve_outlasts_a_receive_burst() {
        assert_eq!(pool_reserve(8192), 512);
        assert_eq!(pool_reserve(256), 64, "two bursts");
        assert_eq!(pool_reserve(64), 32, "half the pool at most");
    }

    #[test]
    fn tx_delay_us_delays_transmit_only() {
        let text = "[port0]\nlink=tap:t0\naddr=10.99.1.2\nnetmask=255.255.255.0\n\
                    [fault]\ndelay_us=100\ntx_delay_us=5000\nloss=0.5\n";
        let cfg = Config::parse(text, "t.ini").unwrap();
        let fd = fault_config(&cfg).unwrap();
        assert_eq!(fd.rx.delay_us, 100);
        assert_eq!(fd.tx.delay_us, 5100);
        assert_eq!(
            (fd.rx.loss, fd.tx.loss),
            (0.5, 0.5),
            "the rest acts both ways"
        );
    }

    #[test]
    fn sysctls_reach_the_stack() {
        let text = "[port0]\nlink=tap:t0\naddr=10.99.1.2\nnetmask=255.255.255.0\n\
                    [freebsd.sysctl]\nnet.inet.ip.ttl=32\nnet.inet.tcp.cc.algorithm=newreno\n\
                    net.inet.tcp.msl=5000\nnet.inet.tcp.sack.enable=0\nkern.ipc.somaxconn=128\n\
                    net.link.ether.inet.maxhold=4\nnet.inet.icmp.icmplim=10\n";
        let cfg = Config::parse(text, "t.ini").unwrap();
        let s = stack_config(&cfg, 7);
        assert_eq!(s.seed, 7);
        assert_eq!(s.ip_ttl, 32);
        assert_eq!(s.arp_maxhold, 4);
        assert_eq!(s.icmp_rate_limit, 10);
        assert_eq!(s.tcp.cc, CcAlgorithm::NewReno);
        assert_eq!(s.tcp.msl, std::time::Duration::from_secs(5));
        assert!(!s.tcp.sack);
        assert_eq!(s.tcp.somaxconn, 128);
    }

    struct Idle;

    impl crate::engine::Application for Idle {
        fn poll(&mut self, _: &mut crate::engine::AppContext<'_>) -> bool {
            false
        }
    }

    /// `link=shm_create:` and `shm_attach:` join two engines: each end's
    /// gratuitous ARP reaches the other.
    #[test]
    fn shm_link_joins_two_engines() {
        let path =
            std::env::temp_dir().join(format!("ustack-setup-shm-{}.link", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let ini = |kind: &str, addr: &str| {
            format!(
                "[dpdk]\nidle_sleep=0\n[port0]\nlink={kind}:{}\naddr={addr}/24\nmtu=1500\n",
                path.display()
            )
        };
        let a = Config::parse(&ini("shm_create", "10.99.40.1"), "a.ini").unwrap();
        let b = Config::parse(&ini("shm_attach", "10.99.40.2"), "b.ini").unwrap();
        let mut ea = build_engine(&a, 1).expect("the creating end");
        let mut eb = build_engine(&b, 2).expect("the attaching end");
        assert_eq!(ea.ports().next().map(PortLink::kind), Some("shm"));
        assert_eq!(ea.ports().next().map(|l| l.info().mtu), Some(1500));
        ea.announce();
        eb.announce();
        for _ in 0..10 {
            ea.turn(&mut Idle);
            eb.turn(&mut Idle);
        }
        assert!(ea.link_stats()[0].rx_frames >= 1, "{:?}", ea.link_stats());
        assert!(eb.link_stats()[0].rx_frames >= 1, "{:?}", eb.link_stats());
        assert!(!path.exists(), "the attaching end unlinks the file");
        // A relative path is refused when the configuration is read.
        let err = Config::parse(
            "[port0]\nlink=shm_attach:x.link\naddr=10.99.40.2/24\n",
            "c.ini",
        );
        assert!(err.is_err());
    }

    #[cfg(not(feature = "dpdk"))]
    #[test]
    fn dpdk_link_without_the_feature_says_so() {
        let cfg = Config::parse(
            "[dpdk]\nno_huge=1\nvdev=net_null0\n[port0]\nlink=dpdk\naddr=10.99.1.2/24\n",
            "t.ini",
        )
        .unwrap();
        let err = build_engine(&cfg, 1).err().expect("no DPDK in this build");
        assert!(matches!(
            err,
            SetupError::MissingFeature {
                port: 0,
                feature: "dpdk",
                ..
            }
        ));
        assert_eq!(
            err.to_string(),
            "[port0] link=dpdk: this build of ustack lacks the `dpdk` cargo feature (build \
             with `cargo build --release --features dpdk`, or `--all-features`)"
        );
    }

    #[test]
    fn engine_timing_from_dpdk_section() {
        let cfg = Config::parse(
            "[dpdk]\nidle_sleep=50\npkt_tx_delay=20\n[port0]\nlink=tap:t0\naddr=10.99.1.2/24\n",
            "t.ini",
        )
        .unwrap();
        let e = engine_config(&cfg);
        assert_eq!(e.idle_sleep, std::time::Duration::from_micros(50));
        assert_eq!(e.pkt_tx_delay, std::time::Duration::from_micros(20));
    }

    struct FakeLink;

    impl LinkInfoSource for FakeLink {
        fn mtu(&self) -> usize {
            1500
        }
        fn mac(&self) -> [u8; 6] {
            [2, 0, 0, 0, 0, 9]
        }
    }

    #[test]
    fn vlans_fibs_and_rules_from_the_config() {
        let cfg = Config::parse(
            "[dpdk]\nvlan_filter=10,20\n\
             [port0]\nlink=af_packet:v0\naddr=10.99.1.2/24\n\
             [port1]\nlink=af_packet:v1\naddr=10.99.2.2/24\ngateway=10.99.2.1\n\
             ipfw_pr=10.99.102.0 255.255.255.0\n\
             [vlan20]\nportid=0\naddr=10.99.20.2/24\ngateway=10.99.20.1\n\
             vip_addr=10.99.120.10\nipfw_pr=10.99.120.10 255.255.255.255\n\
             addr6=fd99:20::2/64\ngateway6=fd99:20::1\n\
             [vlan10]\nportid=0\naddr=10.99.10.2/24\ngateway=10.99.10.1\n",
            "t.ini",
        )
        .unwrap();
        let mut stack = Stack::new(StackConfig::default());
        add_interfaces(&mut stack, &cfg, &[FakeLink, FakeLink]).unwrap();
        let ifs = stack.interfaces();
        assert_eq!(ifs.len(), 4);
        // Port 0 carries the VLANs and has no address; port 1 keeps its.
        assert!(ifs[0].bare() && ifs[0].addr().is_none());
        assert_eq!(ifs[1].addr(), Some(std::net::Ipv4Addr::new(10, 99, 2, 2)));
        assert_eq!(ifs[2].name, "ustack0.10");
        assert_eq!(
            ifs[2].vlan,
            Some(stack::Vlan {
                port: IfaceId(0),
                vid: 10
            })
        );
        assert_eq!(ifs[3].name, "ustack0.20");
        assert!(ifs[3].has_addr(std::net::Ipv4Addr::new(10, 99, 120, 10)));
        assert!(ifs[3].ipv6.is_some());
        assert_eq!((ifs[1].fib, ifs[2].fib, ifs[3].fib), (1, 0, 2));
        // FIB 2 holds VLAN 20's subnets and gateways, both families.
        let fib2: Vec<String> = stack
            .fib(2)
            .unwrap()
            .iter()
            .map(|r| format!("{} {:?} {}", r.dest, r.gateway, r.iface))
            .collect();
        assert!(
            fib2.contains(&"10.99.20.0/24 None if3".to_string()),
            "{fib2:?}"
        );
        assert!(
            fib2.contains(&"0.0.0.0/0 Some(10.99.20.1) if3".to_string()),
            "{fib2:?}"
        );
        assert!(
            fib2.contains(&"::/0 Some(fd99:20::1) if3".to_string()),
            "{fib2:?}"
        );
        let rules: Vec<String> = stack.rules().iter().map(|r| r.to_string()).collect();
        assert_eq!(
            rules,
            [
                "100 setfib 1 from 10.99.102.0/24",
                "100 setfib 2 from 10.99.120.10/32"
            ]
        );
        let vip = std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 99, 120, 10));
        assert_eq!(stack.fib_of_source(vip, 0), 2);
    }
}
