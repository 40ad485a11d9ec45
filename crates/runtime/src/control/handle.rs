//! Requests answered from an engine: read its tables and counters, and
//! apply changes to its stack.

use std::net::IpAddr;

use link::Link;
use stack::ipv6::addr::AddrState;
use stack::route::{IpCidr, Route, RouteError};
use stack::socket::listing::{SocketKind, TimerKind};
use stack::{IfaceId, Instant, Stack};

use super::proto::{
    format_mac, AddrInfo, ControlError, ErrorKind, Fib, Identity, InterfaceInfo, NeighborInfo,
    Reply, Request, RouteInfo, RouteSpec, SocketInfo, SysctlInfo, TcpDetails,
};
use super::ControlContext;
use crate::engine::Engine;

fn err(kind: ErrorKind, message: impl Into<String>) -> ControlError {
    ControlError::new(kind, message)
}

/// Answers `req` for `engine`, whose control state is `ctl`.
pub(crate) fn handle<L: Link>(
    engine: &mut Engine<L>,
    ctl: &ControlContext<'_, L>,
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
        Request::InterfaceSet { .. } => Err(err(
            ErrorKind::Unsupported,
            "changing an interface is not supported by this engine yet",
        )),
        Request::Routes { fib } => {
            main_fib(fib)?;
            Ok(Reply::Routes {
                fib,
                routes: routes(&engine.stack),
            })
        }
        Request::RouteAdd { fib, route } => {
            main_fib(fib)?;
            let r = route_of(&engine.stack, &route)?;
            engine
                .stack
                .routes_mut()
                .add(r)
                .map_err(route_err(&r.dest))?;
            Ok(Reply::Done {
                message: format!("added route to {}", r.dest),
            })
        }
        Request::RouteChange { fib, route } => {
            main_fib(fib)?;
            let r = route_of(&engine.stack, &route)?;
            let table = engine.stack.routes_mut();
            let old = table.remove(r.dest).map_err(route_err(&r.dest))?;
            if let Err(e) = table.add(r) {
                // Put back what was there: a change never loses a route.
                let _ = table.add(old);
                return Err(route_err(&r.dest)(e));
            }
            Ok(Reply::Done {
                message: format!("changed route to {}", r.dest),
            })
        }
        Request::RouteDelete { fib, dest } => {
            main_fib(fib)?;
            let dest = parse_cidr(&dest)?;
            engine
                .stack
                .routes_mut()
                .remove(dest)
                .map_err(route_err(&dest))?;
            Ok(Reply::Done {
                message: format!("deleted route to {dest}"),
            })
        }
        Request::Neighbors => Ok(Reply::Neighbors {
            neighbors: neighbors(&engine.stack, engine.now()),
        }),
        Request::NeighborAdd { .. }
        | Request::NeighborDelete { .. }
        | Request::NeighborFlush { .. } => Err(err(
            ErrorKind::Unsupported,
            "changing neighbours is not supported by this engine yet",
        )),
        Request::Sockets => Ok(Reply::Sockets {
            sockets: sockets(&engine.stack, engine.now()),
        }),
        Request::SysctlGet { name } => sysctl_get(ctl, name.as_deref()),
        Request::SysctlSet { name, .. } => {
            if ctl.sysctls.get(&name).is_none() {
                return Err(err(ErrorKind::NotFound, format!("no sysctl {name}")));
            }
            Err(err(
                ErrorKind::ConfigOnly,
                format!(
                    "{name} is read when the engine starts: set it in [freebsd.sysctl] of the \
                     configuration"
                ),
            ))
        }
    }
}

fn main_fib(fib: Fib) -> Result<(), ControlError> {
    if fib == 0 {
        Ok(())
    } else {
        Err(err(
            ErrorKind::NotFound,
            format!("no routing table {fib}: this engine has one (fib 0)"),
        ))
    }
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
        .find(|i| i.name == name)
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

fn routes(stack: &Stack) -> Vec<RouteInfo> {
    stack
        .routes()
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
        .map(|i| {
            let mut flags = vec!["UP", "BROADCAST", "RUNNING", "MULTICAST"];
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
                up: true,
                flags: flags.into_iter().map(String::from).collect(),
                inet: vec![AddrInfo {
                    addr: IpAddr::V4(i.addr()),
                    prefix_len: i.prefix_len,
                    state: String::new(),
                }],
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
            live: false,
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
