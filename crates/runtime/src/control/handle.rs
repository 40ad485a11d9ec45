//! Requests answered from an engine: read its tables and counters, and
//! apply changes to its stack.

use std::net::IpAddr;

use link::Link;
use stack::admin::{AdminError, Tunable};
use stack::ipv6::addr::AddrState;
use stack::policy::{PolicyError, PolicyRule, RuleMatch, MAX_FIBS};
use stack::route::{IpCidr, Route, RouteError, RouteTable};
use stack::socket::listing::{SocketKind, TimerKind};
use stack::{CcAlgorithm, IfaceId, Instant, Stack, StackError};

use crate::config::{CongestionControl, KniAction, Sysctls};

use super::capture::{CapturedFrame, LiveCapture, MAX_QUEUED_FRAMES, MAX_SNAPLEN, READER_TIMEOUT};
use super::filter::Filter;
use super::proto::{
    format_mac, parse_mac, AddrInfo, ControlError, ErrorKind, Family, Fib, Identity,
    InterfaceChange, InterfaceInfo, NeighborInfo, Reply, Request, RouteInfo, RouteSpec, RuleSpec,
    SocketInfo, SysctlInfo, TcpDetails,
};
use super::proto::{hex_encode, FrameRecord, KniInfo, VlanOf};
use super::ControlContext;
use crate::engine::Engine;

fn err(kind: ErrorKind, message: impl Into<String>) -> ControlError {
    ControlError::new(kind, message)
}

/// Answers `req` for `engine`, whose control state is `ctl`.
pub(crate) fn handle<L: Link>(
    engine: &mut Engine<L>,
    ctl: &mut ControlContext<'_, L>,
    req: Request,
) -> Result<Reply, ControlError> {
    match req {
        Request::Identify => Ok(Reply::Identity(Identity {
            pid: std::process::id(),
            proc_id: ctl.proc_id,
            engine: ctl.engine,
            ports: engine.ports().count() as u32,
            uptime_us: ctl.started.elapsed().as_micros() as u64,
        })),
        Request::Stats => {
            let mut counters = (ctl.counters)(engine);
            ctl.control_counters
                .visit(|name, v| counters.push((name.to_string(), v)));
            Ok(Reply::Stats { counters })
        }
        Request::Interfaces => Ok(Reply::Interfaces {
            interfaces: interfaces(engine),
        }),
        Request::InterfaceSet { iface, change } => {
            let r = interface_set(engine, &iface, change);
            // An AF_XDP port's program learns the address set at once.
            engine.sync_served_addresses();
            r
        }
        Request::VlanCreate {
            name,
            port,
            vid,
            addr,
            prefix_len,
            gateway,
            mtu,
            addr6,
            prefix_len6,
            gateway6,
        } => vlan_create(
            engine,
            VlanAsked {
                name,
                port,
                vid,
                addr,
                prefix_len,
                gateway,
                mtu,
                addr6,
                prefix_len6,
                gateway6,
            },
        ),
        Request::Routes { fib } => {
            let n = fib_number(&engine.stack, fib)?;
            let table = engine
                .stack
                .fib(n)
                .ok_or_else(|| no_fib(&engine.stack, fib))?;
            Ok(Reply::Routes {
                fib,
                routes: routes(&engine.stack, table),
            })
        }
        Request::RouteAdd { fib, route } => {
            let n = fib_number(&engine.stack, fib)?;
            let r = route_of(&engine.stack, &route)?;
            engine.stack.add_route(n, r).map_err(stack_err(&r.dest))?;
            Ok(Reply::Done {
                message: format!("added route to {} in fib {n}", r.dest),
            })
        }
        Request::RouteChange { fib, route } => {
            let n = fib_number(&engine.stack, fib)?;
            let r = route_of(&engine.stack, &route)?;
            engine
                .stack
                .change_route(n, r)
                .map_err(stack_err(&r.dest))?;
            Ok(Reply::Done {
                message: format!("changed route to {} in fib {n}", r.dest),
            })
        }
        Request::RouteDelete { fib, dest } => {
            let n = fib_number(&engine.stack, fib)?;
            let dest = parse_cidr(&dest)?;
            engine
                .stack
                .remove_route(n, dest)
                .map_err(stack_err(&dest))?;
            Ok(Reply::Done {
                message: format!("deleted route to {dest} in fib {n}"),
            })
        }
        Request::Rules => Ok(Reply::Rules {
            rules: engine
                .stack
                .rules()
                .iter()
                .map(|r| rule_spec(&engine.stack, r))
                .collect(),
            fibs: u32::from(engine.stack.fib_count()),
        }),
        Request::RuleAdd { rule } => {
            let r = policy_rule(&engine.stack, &rule)?;
            engine.stack.add_rule(r).map_err(rule_err(&r))?;
            Ok(Reply::Done {
                message: format!("added rule {}", describe_rule(&rule)),
            })
        }
        Request::RuleDelete { rule } => {
            let r = policy_rule(&engine.stack, &rule)?;
            engine.stack.remove_rule(&r).map_err(rule_err(&r))?;
            Ok(Reply::Done {
                message: format!("deleted rule {}", describe_rule(&rule)),
            })
        }
        Request::Neighbors => Ok(Reply::Neighbors {
            neighbors: neighbors(&engine.stack, engine.now()),
        }),
        Request::NeighborAdd { ip, mac, iface } => {
            let mac = parse_mac(&mac).ok_or_else(|| {
                err(
                    ErrorKind::Invalid,
                    format!("{mac:?} is not a link address (aa:bb:cc:dd:ee:ff)"),
                )
            })?;
            let id = neighbor_iface(&engine.stack, ip, iface.as_deref())?;
            engine
                .with_context(|cx| {
                    cx.stack
                        .add_permanent_neighbor(cx.now, id, ip, mac, cx.sink)
                })
                .map_err(admin_err)?;
            Ok(Reply::Done {
                message: format!("{ip} is at {} (permanent)", format_mac(mac)),
            })
        }
        Request::NeighborDelete { ip, iface } => {
            let ids: Vec<IfaceId> = match iface.as_deref() {
                Some(name) => vec![iface_by_name(&engine.stack, name)?],
                None => engine.stack.interfaces().iter().map(|i| i.id).collect(),
            };
            let removed = ids
                .into_iter()
                .filter(|&id| engine.stack.remove_neighbor(id, ip))
                .count();
            if removed == 0 {
                return Err(err(ErrorKind::NotFound, format!("no neighbour {ip}")));
            }
            Ok(Reply::Done {
                message: format!("deleted {ip}"),
            })
        }
        Request::NeighborFlush { family } => {
            let n = engine.stack.flush_neighbors(family == Family::Inet6);
            Ok(Reply::Done {
                message: format!("flushed {n} neighbour(s)"),
            })
        }
        Request::Sockets => Ok(Reply::Sockets {
            sockets: sockets(&engine.stack, engine.now()),
        }),
        Request::SysctlGet { name } => sysctl_get(ctl, name.as_deref()),
        Request::SysctlSet { name, value } => sysctl_set(engine, ctl, &name, &value),
        Request::Kni => Ok(Reply::Kni(kni_info(engine))),
        Request::KniSetAction { action } => {
            let a = match action.as_str() {
                "default" => KniAction::Default,
                "alltokni" => KniAction::AllToKni,
                "alltoff" => KniAction::AllToFf,
                _ => {
                    return Err(err(
                        ErrorKind::Invalid,
                        format!("kni action {action:?}: must be default, alltokni or alltoff"),
                    ))
                }
            };
            let Some(f) = engine.dispatcher_mut().and_then(|d| d.kni_filter_mut()) else {
                return Err(err(
                    ErrorKind::Unsupported,
                    "this engine has no exception path ([kni] enable=1 when it starts)",
                ));
            };
            f.set_action(a);
            let (tcp, udp) = f.ports();
            let listed = |set: &crate::steer::PortSet| -> Vec<u16> {
                (0..=u16::MAX).filter(|&p| set.contains(p)).collect()
            };
            let (tcp, udp) = (listed(tcp), listed(udp));
            let mode = crate::xdp::kernel_ports(a, f.accepts());
            // A port whose XDP program sends [kni]'s traffic to the kernel
            // follows the new action too.
            engine.serve_kernel_ports(mode, &tcp, &udp);
            Ok(Reply::Done {
                message: format!("kni action {action}"),
            })
        }
        Request::CaptureStart {
            iface,
            filter,
            snaplen,
        } => capture_start(engine, &iface, &filter, snaplen),
        Request::CaptureRead { port, id } => {
            let now = std::time::Instant::now();
            let c = own_capture(engine, port, id)?;
            Ok(captured(c.take(now), c))
        }
        Request::CaptureStop { port, id } => {
            own_capture(engine, port, id)?;
            let mut c = engine
                .stop_capture(port as usize)
                .ok_or_else(|| no_capture(port, id))?;
            let mut frames = Vec::new();
            loop {
                let batch = c.take(std::time::Instant::now());
                if batch.is_empty() || frames.len() >= MAX_QUEUED_FRAMES {
                    break;
                }
                frames.extend(batch);
            }
            Ok(captured(frames, &c))
        }
    }
}

fn kni_info<L: Link>(engine: &Engine<L>) -> KniInfo {
    let d = engine.dispatcher();
    let Some(f) = d.and_then(|d| d.kni_filter()) else {
        return KniInfo {
            enabled: false,
            method: String::new(),
            action: String::new(),
            tcp_ports: String::new(),
            udp_ports: String::new(),
            tap_ports: Vec::new(),
            counters: Vec::new(),
        };
    };
    let mut counters = Vec::new();
    if let Some(d) = d {
        d.counters().visit(|name, v| {
            if name.starts_with("kni_") {
                counters.push((name.to_string(), v));
            }
        });
    }
    let (tcp, udp) = f.ports();
    KniInfo {
        enabled: true,
        method: if f.accepts() { "accept" } else { "reject" }.to_string(),
        action: match f.action() {
            KniAction::Default => "default",
            KniAction::AllToKni => "alltokni",
            KniAction::AllToFf => "alltoff",
        }
        .to_string(),
        tcp_ports: tcp.describe(),
        udp_ports: udp.describe(),
        tap_ports: d
            .map(|d| d.kni_ports().map(|p| p as u32).collect())
            .unwrap_or_default(),
        counters,
    }
}

/// Starts a capture of the port `iface` names (a VLAN interface: its
/// port, the VLAN's frames).
fn capture_start<L: Link>(
    engine: &mut Engine<L>,
    iface: &str,
    filter: &str,
    snaplen: u32,
) -> Result<Reply, ControlError> {
    let ports = engine.ports().count();
    let (port, vlan) = match iface.parse::<usize>() {
        Ok(n) if n < ports => (n, None),
        Ok(n) => {
            return Err(err(
                ErrorKind::NotFound,
                format!(
                    "no port {n}: this engine has ports 0..{}",
                    ports.saturating_sub(1)
                ),
            ))
        }
        Err(_) => {
            let id = iface_by_name(&engine.stack, iface)?;
            match engine.stack.interface(id).and_then(|i| i.vlan) {
                Some(v) => (usize::from(v.port.0), Some(v.vid)),
                None => (usize::from(id.0), None),
            }
        }
    };
    let mut text = filter.trim().to_string();
    if let Some(vid) = vlan {
        text = if text.is_empty() {
            format!("vlan {vid}")
        } else {
            format!("vlan {vid} and ({text})")
        };
    }
    let parsed = Filter::parse(&text)
        .map_err(|e| err(ErrorKind::Invalid, format!("filter {filter:?}: {e}")))?;
    let snaplen = if snaplen == 0 { MAX_SNAPLEN } else { snaplen };
    let id = next_capture_id();
    let capture = LiveCapture::new(id, parsed, snaplen, std::time::Instant::now());
    engine.start_capture(port, capture).map_err(|_| {
        err(
            ErrorKind::Exists,
            format!(
                "port {port} is being captured already (by another `ustack pcap`; a capture \
                 ends with its reader)"
            ),
        )
    })?;
    Ok(Reply::CaptureStarted {
        port: port as u32,
        id,
        filter: text,
    })
}

/// A number no other capture of this process had.
fn next_capture_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn no_capture(port: u32, id: u64) -> ControlError {
    err(
        ErrorKind::NotFound,
        format!(
            "no capture {id} on port {port} (it ended, or was not read for {} s)",
            READER_TIMEOUT.as_secs()
        ),
    )
}

/// Port `port`'s capture, when it is `id`.
fn own_capture<L: Link>(
    engine: &mut Engine<L>,
    port: u32,
    id: u64,
) -> Result<&mut LiveCapture, ControlError> {
    engine
        .capture_mut(port as usize)
        .filter(|c| c.id == id)
        .ok_or_else(|| no_capture(port, id))
}

fn captured(frames: Vec<CapturedFrame>, c: &LiveCapture) -> Reply {
    Reply::Captured {
        frames: frames
            .into_iter()
            .map(|f| FrameRecord {
                ts_us: f.ts.as_micros() as u64,
                len: f.orig_len,
                outgoing: f.outgoing,
                data: hex_encode(&f.data),
            })
            .collect(),
        matched: c.matched,
        dropped: c.dropped,
        queued: c.queued() as u64,
    }
}

/// The stack's number of FIB `fib` (FIBs are 0..`MAX_FIBS`).
fn fib_number(stack: &Stack, fib: Fib) -> Result<u16, ControlError> {
    u16::try_from(fib)
        .ok()
        .filter(|&n| n < MAX_FIBS)
        .ok_or_else(|| no_fib(stack, fib))
}

fn no_fib(stack: &Stack, fib: Fib) -> ControlError {
    err(
        ErrorKind::NotFound,
        format!(
            "no fib {fib}: this engine has fibs 0..{} (a route or a rule to fib N below {MAX_FIBS} \
             makes it)",
            stack.fib_count() - 1
        ),
    )
}

fn route_err(dest: &IpCidr) -> impl Fn(RouteError) -> ControlError + '_ {
    move |e| {
        let kind = match e {
            RouteError::Exists => ErrorKind::Exists,
            RouteError::NotFound => ErrorKind::NotFound,
            RouteError::Full | RouteError::FamilyMismatch => ErrorKind::Invalid,
        };
        err(kind, format!("{dest}: {e}"))
    }
}

fn stack_err(dest: &IpCidr) -> impl Fn(StackError) -> ControlError + '_ {
    move |e| match e {
        StackError::Route(r) => route_err(dest)(r),
        StackError::NoSuchInterface => err(ErrorKind::NotFound, format!("{dest}: {e}")),
        _ => err(ErrorKind::Invalid, format!("{dest}: {e}")),
    }
}

fn rule_err(rule: &PolicyRule) -> impl Fn(StackError) -> ControlError + '_ {
    move |e| {
        let kind = match e {
            StackError::Policy(PolicyError::RuleExists) => ErrorKind::Exists,
            StackError::Policy(PolicyError::NoSuchRule) | StackError::NoSuchInterface => {
                ErrorKind::NotFound
            }
            _ => ErrorKind::Invalid,
        };
        err(kind, format!("rule {rule}: {e}"))
    }
}

/// The stack's rule of `spec`: exactly one of a source prefix, an
/// interface and a mark.
fn policy_rule(stack: &Stack, spec: &RuleSpec) -> Result<PolicyRule, ControlError> {
    let matches = match (&spec.from, &spec.iface, spec.mark) {
        (Some(p), None, None) => RuleMatch::Source(parse_cidr(p)?),
        (None, Some(name), None) => RuleMatch::Interface(iface_by_name(stack, name)?),
        (None, None, Some(m)) => RuleMatch::Mark(m),
        _ => {
            return Err(err(
                ErrorKind::Invalid,
                "a rule matches a source prefix (from), an interface's addresses (iface) \
                 or a socket mark (mark), one of the three",
            ))
        }
    };
    let fib = u16::try_from(spec.fib)
        .ok()
        .filter(|&n| n < MAX_FIBS)
        .ok_or_else(|| {
            err(
                ErrorKind::Invalid,
                format!("fib {} is not one of 0..{}", spec.fib, MAX_FIBS - 1),
            )
        })?;
    Ok(PolicyRule {
        priority: spec.priority,
        matches,
        fib,
    })
}

fn rule_spec(stack: &Stack, r: &PolicyRule) -> RuleSpec {
    let (from, iface, mark) = match r.matches {
        RuleMatch::Source(p) => (Some(p.to_string()), None, None),
        RuleMatch::Interface(i) => (None, Some(iface_name(stack, i)), None),
        RuleMatch::Mark(m) => (None, None, Some(m)),
    };
    RuleSpec {
        priority: r.priority,
        from,
        iface,
        mark,
        fib: u32::from(r.fib),
    }
}

/// `100 setfib 1 from 10.99.70.0/24` (ipfw's words).
pub(crate) fn describe_rule(r: &RuleSpec) -> String {
    let what = match (&r.from, &r.iface, r.mark) {
        (Some(p), _, _) => format!("from {p}"),
        (None, Some(i), _) => format!("from {i}'s addresses"),
        (None, None, Some(m)) => format!("mark {m}"),
        (None, None, None) => "from any".to_string(),
    };
    format!("{} setfib {} {what}", r.priority, r.fib)
}

/// `10.0.0.0/8`, `fd00::/64`, `default`, `default6`, or an address (a host
/// route).
pub(crate) fn parse_cidr(s: &str) -> Result<IpCidr, ControlError> {
    let bad = |why: &str| err(ErrorKind::Invalid, format!("{s:?} is not a prefix: {why}"));
    match s {
        "default" => return Ok(IpCidr::default_route(false)),
        "default6" => return Ok(IpCidr::default_route(true)),
        _ => {}
    }
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => {
            let a: IpAddr = a.parse().map_err(|_| bad("not an address"))?;
            let l: u8 = l.parse().map_err(|_| bad("not a prefix length"))?;
            (a, l)
        }
        None => {
            let a: IpAddr = s.parse().map_err(|_| bad("not an address"))?;
            (a, if a.is_ipv4() { 32 } else { 128 })
        }
    };
    IpCidr::new(addr, len).map_err(|e| bad(&e.to_string()))
}

fn iface_by_name(stack: &Stack, name: &str) -> Result<IfaceId, ControlError> {
    stack
        .interfaces()
        .iter()
        .find(|i| i.name == name && !i.gone())
        .map(|i| i.id)
        .ok_or_else(|| err(ErrorKind::NotFound, format!("no interface {name}")))
}

/// The interface whose link holds `ip`.
fn iface_on_link(stack: &Stack, ip: IpAddr) -> Option<IfaceId> {
    stack
        .interfaces()
        .iter()
        .find(|i| match ip {
            IpAddr::V4(a) => i.on_link(a),
            IpAddr::V6(a) => i.ipv6.as_ref().is_some_and(|v6| v6.on_link(a)),
        })
        .map(|i| i.id)
}

fn route_of(stack: &Stack, spec: &RouteSpec) -> Result<Route, ControlError> {
    let dest = parse_cidr(&spec.dest)?;
    if let Some(gw) = spec.gateway {
        if gw.is_ipv4() != dest.addr().is_ipv4() {
            return Err(err(
                ErrorKind::Invalid,
                format!("gateway {gw} is not of {dest}'s address family"),
            ));
        }
    }
    let iface = match (&spec.iface, spec.gateway) {
        (Some(name), _) => iface_by_name(stack, name)?,
        (None, Some(gw)) => iface_on_link(stack, gw).ok_or_else(|| {
            err(
                ErrorKind::Invalid,
                format!("gateway {gw} is on no interface's link (name the interface)"),
            )
        })?,
        (None, None) => iface_on_link(stack, dest.addr()).ok_or_else(|| {
            err(
                ErrorKind::Invalid,
                format!("{dest} is on no interface's link: give a gateway or an interface"),
            )
        })?,
    };
    if let Some(gw) = spec.gateway {
        if iface_on_link(stack, gw) != Some(iface) {
            return Err(err(
                ErrorKind::Invalid,
                format!("gateway {gw} is not on the link of the route's interface"),
            ));
        }
    }
    Ok(Route {
        dest,
        gateway: spec.gateway,
        iface,
    })
}

fn iface_name(stack: &Stack, id: IfaceId) -> String {
    stack
        .interface(id)
        .map_or_else(|| id.to_string(), |i| i.name.clone())
}

fn routes(stack: &Stack, table: &RouteTable) -> Vec<RouteInfo> {
    table
        .iter()
        .map(|r| {
            let host = r.dest.prefix_len() == if r.dest.addr().is_ipv4() { 32 } else { 128 };
            let mut flags = String::from("U");
            if r.gateway.is_some() {
                flags.push('G');
            }
            if host {
                flags.push('H');
            }
            flags.push('S');
            RouteInfo {
                dest: if r.dest.prefix_len() == 0 {
                    "default".to_string()
                } else {
                    r.dest.to_string()
                },
                gateway: r.gateway,
                iface: iface_name(stack, r.iface),
                flags,
            }
        })
        .collect()
}

fn interfaces<L: Link>(engine: &Engine<L>) -> Vec<InterfaceInfo> {
    let stack = &engine.stack;
    let links: Vec<&L> = engine.ports().collect();
    stack
        .interfaces()
        .iter()
        .filter(|i| !i.gone())
        .map(|i| {
            let port = i.vlan.map_or(i.id, |v| v.port);
            // A VLAN interface is up when it and its port are.
            let up = engine.port_up(usize::from(port.0)) && stack.vlan_up(i.id) != Some(false);
            let mut flags = if up { vec!["UP"] } else { Vec::new() };
            flags.extend(["BROADCAST", "RUNNING", "MULTICAST"]);
            if i.tx_checksum_offload {
                flags.push("TXCSUM");
            }
            if i.rx_ip_checksum_offload {
                flags.push("RXCSUM");
            }
            let inet6 = i
                .ipv6
                .iter()
                .flat_map(|v6| v6.addrs.iter())
                .map(|a| AddrInfo {
                    addr: IpAddr::V6(a.addr),
                    prefix_len: a.prefix_len,
                    state: match a.state {
                        AddrState::Preferred => "preferred",
                        AddrState::Tentative { .. } => "tentative",
                        AddrState::Duplicate => "duplicate",
                    }
                    .to_string(),
                })
                .collect();
            let counters = links
                .get(usize::from(i.id.0))
                .map(|l| crate::stats::link_counters(&l.stats()))
                .unwrap_or_default();
            InterfaceInfo {
                index: u32::from(i.id.0),
                name: i.name.clone(),
                mac: format_mac(i.mac),
                mtu: i.mtu,
                up,
                flags: flags.into_iter().map(String::from).collect(),
                // A port that only carries VLAN interfaces has none.
                inet: i
                    .addr()
                    .map(|a| AddrInfo {
                        addr: IpAddr::V4(a),
                        prefix_len: i.prefix_len,
                        state: String::new(),
                    })
                    .into_iter()
                    .collect(),
                broadcast: i.broadcast.to_string(),
                vips: i.addrs().iter().skip(1).map(|a| a.to_string()).collect(),
                inet6,
                gateway: i.gateway.map(|g| g.to_string()),
                gateway6: i
                    .ipv6
                    .as_ref()
                    .and_then(|v6| v6.gateway.or(v6.learned_router.map(|(r, _)| r)))
                    .map(|g| g.to_string()),
                counters,
                vlan: i.vlan.map(|v| VlanOf {
                    vid: v.vid,
                    port: iface_name(stack, v.port),
                }),
            }
        })
        .collect()
}

fn millis_until(now: Instant, at: Instant) -> u64 {
    at.total_millis().saturating_sub(now.total_millis())
}

fn neighbors(stack: &Stack, now: Instant) -> Vec<NeighborInfo> {
    stack
        .neighbors()
        .entries()
        .map(|(iface, ip, mac, expires)| NeighborInfo {
            ip,
            mac: mac.map(format_mac),
            iface: iface_name(stack, iface),
            state: match (mac, expires) {
                _ if stack.neighbors().is_permanent(iface, ip) => "permanent",
                (None, _) => "incomplete",
                (Some(_), Some(at)) if at > now => "reachable",
                (Some(_), Some(_)) => "stale",
                (Some(_), None) => "probe",
            }
            .to_string(),
            expires_ms: expires.map(|at| millis_until(now, at)),
        })
        .collect()
}

fn sockets(stack: &Stack, now: Instant) -> Vec<SocketInfo> {
    stack
        .socket_summaries()
        .into_iter()
        .map(|s| {
            let v6 = s.local.is_ipv6();
            let proto = match (s.kind, v6) {
                (SocketKind::Udp, false) => "udp",
                (SocketKind::Udp, true) => "udp6",
                (_, false) => "tcp",
                (_, true) => "tcp6",
            };
            SocketInfo {
                proto: proto.to_string(),
                state: s.state.map(|st| st.to_string()).unwrap_or_default(),
                local: s.local.to_string(),
                remote: s.remote.map(|r| r.to_string()),
                recv_q: s.recv_queued as u64,
                send_q: s.send_queued as u64,
                timer: s.timer.map(|(k, at)| {
                    let name = match k {
                        TimerKind::Retransmit => "on",
                        TimerKind::DelayedAck => "delack",
                        TimerKind::Persist => "persist",
                        TimerKind::Keepalive => "keepalive",
                        TimerKind::Close => "timewait",
                    };
                    (name.to_string(), millis_until(now, at))
                }),
                info: s.info.map(|i| TcpDetails {
                    rto_ms: i.rto.as_millis() as u64,
                    rtt_us: i.srtt.as_micros() as u64,
                    rttvar_us: i.rttvar.as_micros() as u64,
                    snd_mss: i.snd_mss,
                    rcv_mss: i.rcv_mss,
                    cwnd: i.cwnd,
                    ssthresh: i.ssthresh,
                    snd_wnd: i.snd_wnd,
                    rcv_wnd: i.rcv_wnd,
                    retrans: i.total_retrans,
                    bytes_acked: i.bytes_acked,
                    bytes_received: i.bytes_received,
                }),
                orphan: s.orphan,
            }
        })
        .collect()
}

fn sysctl_get<L: Link>(
    ctl: &ControlContext<'_, L>,
    name: Option<&str>,
) -> Result<Reply, ControlError> {
    let info = |n: &str| {
        ctl.sysctls.get(n).map(|value| SysctlInfo {
            name: n.to_string(),
            value,
            live: tunable(ctl.sysctls, n).is_some(),
        })
    };
    let sysctls = match name {
        Some(n) => vec![info(n).ok_or_else(|| err(ErrorKind::NotFound, format!("no sysctl {n}")))?],
        None => crate::config::Sysctls::NAMES
            .iter()
            .filter_map(|n| info(n))
            .collect(),
    };
    Ok(Reply::Sysctls { sysctls })
}

fn admin_err(e: AdminError) -> ControlError {
    let kind = match e {
        AdminError::NoSuchInterface | AdminError::NotFound => ErrorKind::NotFound,
        AdminError::Exists => ErrorKind::Exists,
        _ => ErrorKind::Invalid,
    };
    err(kind, e.to_string())
}

/// The interface of a neighbour: the one named, or the one whose link
/// holds `ip`.
fn neighbor_iface(stack: &Stack, ip: IpAddr, name: Option<&str>) -> Result<IfaceId, ControlError> {
    match name {
        Some(n) => iface_by_name(stack, n),
        None => iface_on_link(stack, ip).ok_or_else(|| {
            err(
                ErrorKind::Invalid,
                format!("{ip} is on no interface's link (name the interface)"),
            )
        }),
    }
}

/// What `ustack ifconfig NAME create ...` asked for.
struct VlanAsked {
    name: String,
    port: String,
    vid: u16,
    addr: std::net::Ipv4Addr,
    prefix_len: u8,
    gateway: Option<std::net::Ipv4Addr>,
    mtu: Option<usize>,
    addr6: Option<std::net::Ipv6Addr>,
    prefix_len6: Option<u8>,
    gateway6: Option<std::net::Ipv6Addr>,
}

/// Makes a VLAN interface live, with IPv6 when asked.
fn vlan_create<L: Link>(engine: &mut Engine<L>, v: VlanAsked) -> Result<Reply, ControlError> {
    let VlanAsked {
        name, port, vid, ..
    } = &v;
    if iface_by_name(&engine.stack, name).is_ok() {
        return Err(err(ErrorKind::Exists, format!("{name} exists")));
    }
    let port_id = iface_by_name(&engine.stack, port)?;
    let Some(p) = engine.stack.interface(port_id) else {
        return Err(err(ErrorKind::NotFound, format!("no interface {port}")));
    };
    if p.vlan.is_some() {
        return Err(err(
            ErrorKind::Invalid,
            format!("{port} is a VLAN interface: a VLAN rides on a port"),
        ));
    }
    if v.gateway6.is_some() && v.addr6.is_none() {
        return Err(err(
            ErrorKind::Invalid,
            format!("{name}: an IPv6 gateway needs an IPv6 address (inet6)"),
        ));
    }
    let prefix_len6 = v.prefix_len6.unwrap_or(64);
    if prefix_len6 > 128 {
        return Err(err(
            ErrorKind::Invalid,
            format!("{name}: /{prefix_len6} is not an IPv6 prefix length"),
        ));
    }
    let mtu = v.mtu.unwrap_or(p.mtu);
    if v.addr6.is_some() && mtu < 1280 {
        return Err(err(
            ErrorKind::Invalid,
            format!("{name}: IPv6 needs an MTU of 1280 or more, not {mtu}"),
        ));
    }
    let cfg = stack::InterfaceConfig {
        name: name.clone(),
        mac: p.mac,
        mtu,
        addr: v.addr,
        prefix_len: v.prefix_len,
        broadcast: None,
        gateway: v.gateway,
        extra_addrs: Vec::new(),
    };
    let id = engine.stack.add_vlan(port_id, *vid, &cfg).map_err(|e| {
        let kind = match e {
            StackError::VlanExists(_) | StackError::Route(RouteError::Exists) => ErrorKind::Exists,
            _ => ErrorKind::Invalid,
        };
        err(kind, format!("{name}: {e}"))
    })?;
    let mut said = format!(
        "{name}: vlan {vid} on {port}, inet {}/{}",
        v.addr, v.prefix_len
    );
    if let Some(a6) = v.addr6 {
        let c = stack::Ipv6Config {
            addrs: vec![(a6, prefix_len6)],
            gateway: v.gateway6,
        };
        let now = engine.now();
        if let Err(e) = engine.stack.enable_ipv6(now, id, &c) {
            // Not half made: the interface goes again.
            let _ = engine.stack.destroy_vlan(id);
            return Err(err(ErrorKind::Invalid, format!("{name}: inet6 {a6}: {e}")));
        }
        said.push_str(&format!(
            ", inet6 {a6}/{prefix_len6} (tentative until duplicate address detection ends)"
        ));
    }
    // Peers learn the new address's owner at once.
    engine.with_context(|cx| cx.stack.announce(cx.sink));
    Ok(Reply::Done { message: said })
}

fn interface_set<L: Link>(
    engine: &mut Engine<L>,
    name: &str,
    change: InterfaceChange,
) -> Result<Reply, ControlError> {
    let id = iface_by_name(&engine.stack, name)?;
    let message = match change {
        InterfaceChange::AddAddr {
            addr: IpAddr::V4(a),
            prefix_len,
        } => {
            let own = engine.stack.interface(id).map_or(32, |i| i.prefix_len);
            if prefix_len.is_some_and(|p| p != 32 && p != own) {
                return Err(err(
                    ErrorKind::Invalid,
                    format!(
                        "an IPv4 alias is on the interface's subnet (/{own}) or a /32 VIP: \
                         /{} cannot be honoured",
                        prefix_len.unwrap_or_default()
                    ),
                ));
            }
            engine.stack.add_ipv4_addr(id, a).map_err(admin_err)?;
            // Peers learn the new address's owner at once.
            engine.with_context(|cx| cx.stack.announce(cx.sink));
            format!("{name}: added {a}")
        }
        InterfaceChange::AddAddr {
            addr: IpAddr::V6(a),
            prefix_len,
        } => {
            let len = prefix_len.unwrap_or(64);
            let now = engine.now();
            let has_v6 = engine.stack.interface(id).is_some_and(|i| i.ipv6.is_some());
            if has_v6 {
                engine
                    .stack
                    .add_ipv6_addr(now, id, a, len)
                    .map_err(admin_err)?;
            } else {
                // The interface's first IPv6 address turns IPv6 on for it
                // (its link-local address with it), as on FreeBSD.
                if len > 128 {
                    return Err(err(
                        ErrorKind::Invalid,
                        format!("/{len} is not an IPv6 prefix length"),
                    ));
                }
                let c = stack::Ipv6Config {
                    addrs: vec![(a, len)],
                    gateway: None,
                };
                engine
                    .stack
                    .enable_ipv6(now, id, &c)
                    .map_err(|e| err(ErrorKind::Invalid, format!("{name}: inet6 {a}: {e}")))?;
            }
            format!("{name}: added {a}/{len} (tentative until duplicate address detection ends)")
        }
        InterfaceChange::RemoveAddr {
            addr: IpAddr::V4(a),
        } => {
            engine.stack.remove_ipv4_addr(id, a).map_err(admin_err)?;
            format!("{name}: removed {a}")
        }
        InterfaceChange::RemoveAddr {
            addr: IpAddr::V6(a),
        } => {
            engine.stack.remove_ipv6_addr(id, a).map_err(admin_err)?;
            format!("{name}: removed {a}")
        }
        InterfaceChange::Mtu { mtu } => {
            let max = engine
                .ports()
                .nth(usize::from(id.0))
                .map_or(0, |l| l.info().mtu);
            engine.stack.set_mtu(id, mtu, max).map_err(admin_err)?;
            format!("{name}: mtu {mtu}")
        }
        InterfaceChange::Destroy => {
            let Some(v) = engine.stack.interface(id).and_then(|i| i.vlan) else {
                return Err(err(
                    ErrorKind::Unsupported,
                    format!("{name} is a port: only a VLAN interface is destroyed live"),
                ));
            };
            engine
                .stack
                .destroy_vlan(id)
                .map_err(|e| err(ErrorKind::Invalid, format!("{name}: {e}")))?;
            format!(
                "{name}: destroyed (vlan {} of {}: its addresses, routes, rules and neighbours \
                 are gone; its tag is dropped as unknown)",
                v.vid,
                iface_name(&engine.stack, v.port)
            )
        }
        InterfaceChange::Up { up } => {
            if engine.stack.interface(id).is_some_and(|i| i.vlan.is_some()) {
                engine
                    .stack
                    .set_vlan_up(id, up)
                    .map_err(|e| err(ErrorKind::Invalid, format!("{name}: {e}")))?;
                if up {
                    engine.with_context(|cx| cx.stack.announce(cx.sink));
                    return Ok(Reply::Done {
                        message: format!("{name}: up"),
                    });
                }
                return Ok(Reply::Done {
                    message: format!(
                        "{name}: down (its frames are dropped and counted both ways until up; \
                         its port and other VLANs carry on)"
                    ),
                });
            }
            if !engine.set_port_up(usize::from(id.0), up) {
                return Err(err(
                    ErrorKind::NotFound,
                    format!("{name} has no port of this engine"),
                ));
            }
            if up {
                // Peers learn again where the addresses are.
                engine.with_context(|cx| cx.stack.announce(cx.sink));
                format!("{name}: up")
            } else {
                format!("{name}: down (its frames are dropped and counted both ways until up)")
            }
        }
    };
    Ok(Reply::Done { message })
}

/// The live tunable sysctl `name` is, with its value in `s`; `None` for a
/// key only the configuration sets.
fn tunable(s: &Sysctls, name: &str) -> Option<Tunable> {
    Some(match name {
        "net.inet.ip.ttl" => Tunable::IpTtl(s.ip_ttl),
        "net.inet6.ip6.hlim" => Tunable::Ip6HopLimit(s.ip6_hlim),
        "net.inet.icmp.icmplim" => Tunable::IcmpRateLimit(s.icmp_rate_limit),
        "net.inet.tcp.msl" => Tunable::TcpMsl(s.tcp_msl),
        "net.inet.tcp.delayed_ack" => Tunable::TcpDelayedAck(s.tcp_delayed_ack),
        "net.inet.tcp.sendspace" => Tunable::TcpSendSpace(s.tcp_send_space as usize),
        "net.inet.tcp.recvspace" => Tunable::TcpRecvSpace(s.tcp_recv_space as usize),
        "net.inet.tcp.sendbuf_max" => Tunable::TcpSendbufMax(s.tcp_sendbuf_max as usize),
        "net.inet.tcp.recvbuf_max" => Tunable::TcpRecvbufMax(s.tcp_recvbuf_max as usize),
        "net.inet.tcp.cc.algorithm" => Tunable::TcpCc(match s.tcp_cc {
            CongestionControl::Cubic => CcAlgorithm::Cubic,
            CongestionControl::NewReno => CcAlgorithm::NewReno,
        }),
        "kern.ipc.somaxconn" => Tunable::Somaxconn(s.somaxconn as usize),
        "net.inet.tcp.syncookies" => Tunable::TcpSyncookies(s.tcp_syncookies),
        "net.inet.tcp.keepidle" => Tunable::TcpKeepIdle(s.tcp_keepidle),
        "net.inet.tcp.keepintvl" => Tunable::TcpKeepIntvl(s.tcp_keepintvl),
        "net.inet.tcp.keepcnt" => Tunable::TcpKeepCnt(s.tcp_keepcnt),
        "net.inet.tcp.ecn.enable" => Tunable::TcpEcn(crate::setup::ecn_mode(s.tcp_ecn)),
        "net.link.ether.inet.max_age" => Tunable::ArpMaxAge(s.arp_max_age),
        "net.link.ether.inet.maxhold" => Tunable::ArpMaxHold(s.arp_maxhold as usize),
        _ => return None,
    })
}

fn sysctl_set<L: Link>(
    engine: &mut Engine<L>,
    ctl: &mut ControlContext<'_, L>,
    name: &str,
    value: &str,
) -> Result<Reply, ControlError> {
    let mut next = ctl.sysctls.clone();
    match next.set(name, value) {
        Ok(true) => {}
        Ok(false) => return Err(err(ErrorKind::NotFound, format!("no sysctl {name}"))),
        Err(why) => return Err(err(ErrorKind::Invalid, format!("{name}: {value:?} {why}"))),
    }
    let Some(t) = tunable(&next, name) else {
        return Err(err(
            ErrorKind::ConfigOnly,
            format!(
                "{name} is read when the engine starts: set it in [freebsd.sysctl] of the \
                 configuration"
            ),
        ));
    };
    if let Err((_, _, why)) = next.check() {
        return Err(err(ErrorKind::Invalid, why));
    }
    engine.stack.set_tunable(t);
    *ctl.sysctls = next;
    Ok(Reply::Done {
        message: format!("{name}: {}", ctl.sysctls.get(name).unwrap_or_default()),
    })
}
