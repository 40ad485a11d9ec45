//! getsockopt and setsockopt, with Linux's option values, sizes, limits
//! and errors (an option of another protocol's level is ENOPROTOOPT, a
//! short value EINVAL, a short result buffer gets the value truncated).

use std::os::fd::RawFd;
use std::time::Duration;

use stack::{TcpInfo, TcpState};

use crate::consts::*;
use crate::driver;
use crate::errno::{Errno, Result};
use crate::family::Domain;
use crate::sock_ops::user_timeout;
use crate::socket::{Socket, State};
use crate::worker::Worker;

/// Linux's `net.core.rmem_max` / `wmem_max` defaults: the most SO_RCVBUF
/// and SO_SNDBUF take.
const BUF_MAX: usize = 212_992;
/// Linux's SOCK_MIN_RCVBUF and SOCK_MIN_SNDBUF (x86-64).
const MIN_RCVBUF: usize = 2304;
const MIN_SNDBUF: usize = 4608;
/// Linux's TCP_MSS_DEFAULT: what TCP_MAXSEG reports before a handshake
/// set the MSS, with no value of the socket's own.
const MSS_DEFAULT: i32 = 536;
/// TCP_MAXSEG takes 0 (the path's) or TCP_MIN_MSS..=MAX_TCP_WINDOW.
const MAXSEG_RANGE: std::ops::RangeInclusive<i32> = 88..=32767;
/// Bytes of Linux's `struct tcp_info` that ustack fills (up to tcpi_snd_wnd).
pub const TCP_INFO_LEN: usize = 232;

fn int_arg(val: &[u8]) -> Result<i32> {
    let b: [u8; 4] = val
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .ok_or(Errno::EINVAL)?;
    Ok(i32::from_ne_bytes(b))
}

/// IP options take an int, or a single byte (ip_setsockopt).
fn ip_int_arg(val: &[u8]) -> Result<i32> {
    match val.len() {
        0 => Err(Errno::EINVAL),
        1..=3 => Ok(i32::from(val[0])),
        _ => int_arg(val),
    }
}

fn timeval_arg(val: &[u8]) -> Result<Option<Duration>> {
    if val.len() < 16 {
        return Err(Errno::EINVAL);
    }
    let sec = i64::from_ne_bytes(val[..8].try_into().map_err(|_| Errno::EINVAL)?);
    let usec = i64::from_ne_bytes(val[8..16].try_into().map_err(|_| Errno::EINVAL)?);
    if !(0..1_000_000).contains(&usec) {
        return Err(Errno::EDOM);
    }
    if sec < 0 {
        return Ok(Some(Duration::ZERO));
    }
    if sec == 0 && usec == 0 {
        return Ok(None);
    }
    Ok(Some(
        Duration::from_secs(sec as u64) + Duration::from_micros(usec as u64),
    ))
}

/// Copies `bytes` into `out`, truncated to its length (as Linux does).
fn put(out: &mut [u8], bytes: &[u8]) -> usize {
    let n = out.len().min(bytes.len());
    out[..n].copy_from_slice(&bytes[..n]);
    n
}

/// An IP option's int as `do_ip_getsockopt` gives it: into a buffer
/// shorter than an int, a value that fits a byte goes as that one byte.
fn put_ip_int(out: &mut [u8], v: i32) -> usize {
    match u8::try_from(v) {
        Ok(b) if !out.is_empty() && out.len() < 4 => put(out, &[b]),
        _ => put(out, &v.to_ne_bytes()),
    }
}

fn linux_tcp_state(s: Option<TcpState>) -> u8 {
    match s {
        Some(TcpState::Established) => 1,
        Some(TcpState::SynSent) => 2,
        Some(TcpState::SynReceived) => 3,
        Some(TcpState::FinWait1) => 4,
        Some(TcpState::FinWait2) => 5,
        Some(TcpState::TimeWait) => 6,
        Some(TcpState::Closed) | None => 7,
        Some(TcpState::CloseWait) => 8,
        Some(TcpState::LastAck) => 9,
        Some(TcpState::Listen) => 10,
        Some(TcpState::Closing) => 11,
    }
}

/// Linux's `struct tcp_info` (the fields ustack has; the others zero).
pub(crate) fn encode_tcp_info(i: &TcpInfo) -> [u8; TCP_INFO_LEN] {
    let mut b = [0u8; TCP_INFO_LEN];
    let mut put32 = |off: usize, v: u32| b[off..off + 4].copy_from_slice(&v.to_ne_bytes());
    put32(8, i.rto.as_micros() as u32);
    put32(16, i.snd_mss);
    put32(20, i.rcv_mss);
    put32(24, i.unacked);
    put32(28, i.sacked);
    put32(32, i.lost);
    put32(68, i.srtt.as_micros() as u32);
    put32(72, i.rttvar.as_micros() as u32);
    put32(76, i.ssthresh);
    put32(80, i.cwnd);
    put32(84, i.rcv_mss);
    put32(100, i.total_retrans.min(u64::from(u32::MAX)) as u32);
    put32(228, i.snd_wnd);
    let mut put64 = |off: usize, v: u64| b[off..off + 8].copy_from_slice(&v.to_ne_bytes());
    put64(120, i.bytes_acked);
    put64(128, i.bytes_received);
    b[0] = linux_tcp_state(i.state);
    b[2] = i.retransmits.min(255) as u8;
    let mut options = 0u8;
    if i.timestamps {
        options |= 1;
    }
    if i.sack {
        options |= 2;
    }
    if i.snd_wscale > 0 || i.rcv_wscale > 0 {
        options |= 4;
    }
    b[5] = options;
    b[6] = (i.snd_wscale & 0xf) | (i.rcv_wscale << 4);
    b
}

fn is_tcp_conn(s: &Socket) -> Option<stack::SocketHandle> {
    match s.state {
        State::Tcp { h, .. } => Some(h),
        _ => None,
    }
}

impl Worker {
    pub(crate) fn setsockopt(
        &mut self,
        fd: RawFd,
        level: i32,
        name: i32,
        val: &[u8],
    ) -> Result<()> {
        let sock = self.socket(fd)?;
        let stream = sock.stream;
        let v6 = sock.domain == Domain::V6;
        let has_port = sock.bound.is_some();
        let conn = is_tcp_conn(sock);
        let engine = sock.engine;
        match (level, name) {
            (SOL_SOCKET, SO_LINGER) => {
                if val.len() < 8 {
                    return Err(Errno::EINVAL);
                }
                let on = int_arg(&val[..4])? != 0;
                let secs = int_arg(&val[4..8])?.max(0);
                self.socket_mut(fd)?.opts.linger = on.then_some(secs);
                if let (Some(h), Some(e)) = (conn, engine) {
                    let stack = self.engines[e].driver.stack_mut();
                    let _ = stack.tcp_set_linger_zero(h, on && secs == 0);
                }
            }
            (SOL_SOCKET, SO_MARK) => {
                // Linux: any 32-bit value (it asks for CAP_NET_ADMIN, which
                // a process owning its stack has).
                let mark = int_arg(val)? as u32;
                self.socket_mut(fd)?.opts.mark = mark;
                self.apply_mark(fd)?;
            }
            (SOL_SOCKET, SO_RCVTIMEO) => self.socket_mut(fd)?.opts.rcvtimeo = timeval_arg(val)?,
            (SOL_SOCKET, SO_SNDTIMEO) => self.socket_mut(fd)?.opts.sndtimeo = timeval_arg(val)?,
            (SOL_SOCKET, n) => {
                let v = int_arg(val)?;
                let on = v != 0;
                let o = &mut self.socket_mut(fd)?.opts;
                match n {
                    SO_REUSEADDR => o.reuseaddr = on,
                    SO_REUSEPORT => o.reuseport = on,
                    SO_BROADCAST => o.broadcast = on,
                    SO_OOBINLINE => {
                        o.oob_inline = on;
                        if let (Some(h), Some(e)) = (conn, engine) {
                            let stack = self.engines[e].driver.stack_mut();
                            stack.tcp_set_oob_inline(h, on)?;
                        }
                    }
                    SO_KEEPALIVE => {
                        o.keepalive = on;
                        if let (Some(h), Some(e)) = (conn, engine) {
                            let d = self.engines[e].driver.as_mut();
                            driver::call(d, |now, stack, _| stack.tcp_set_keepalive(now, h, on))?;
                        }
                    }
                    SO_RCVBUF | SO_SNDBUF => {
                        let asked = (v as u32 as usize).min(BUF_MAX);
                        let min = if n == SO_RCVBUF {
                            MIN_RCVBUF
                        } else {
                            MIN_SNDBUF
                        };
                        let size = (asked * 2).max(min);
                        if n == SO_RCVBUF {
                            o.rcvbuf = Some(size);
                        } else {
                            o.sndbuf = Some(size);
                        }
                        let Some(e) = engine else { return Ok(()) };
                        let state = self.socket(fd)?.state;
                        let stack = self.engines[e].driver.stack_mut();
                        match (state, n) {
                            (State::Tcp { h, .. }, SO_RCVBUF) => {
                                stack.tcp_set_recv_buffer(h, size / 2)?
                            }
                            (State::Tcp { h, .. }, _) => stack.tcp_set_send_buffer(h, size / 2)?,
                            (State::Udp { h, .. }, SO_RCVBUF) => {
                                stack.udp_set_recv_buffer(h, size / 2)?
                            }
                            _ => {}
                        }
                    }
                    _ => return Err(Errno::ENOPROTOOPT),
                }
            }
            (IPPROTO_TCP, n) if stream => {
                let v = int_arg(val)?;
                let o = &mut self.socket_mut(fd)?.opts;
                match n {
                    TCP_NODELAY => {
                        o.nodelay = v != 0;
                        if let (Some(h), Some(e)) = (conn, engine) {
                            let d = self.engines[e].driver.as_mut();
                            driver::call(d, |now, stack, sink| {
                                stack.tcp_set_nodelay(now, h, v != 0, sink)
                            })?;
                        }
                    }
                    TCP_CORK => {
                        o.cork = v != 0;
                        if let (Some(h), Some(e)) = (conn, engine) {
                            let d = self.engines[e].driver.as_mut();
                            if v != 0 {
                                // Corking only holds what comes next: no
                                // clock, nothing to send (nginx corks and
                                // uncorks every response).
                                d.stack_mut().tcp_cork(h)?;
                            } else {
                                // Sends what waited; the send buffer's
                                // room, so readiness, stays as it was.
                                driver::call(d, |now, stack, sink| {
                                    stack.tcp_set_cork(now, h, false, sink)
                                })?;
                            }
                        }
                    }
                    TCP_KEEPIDLE | TCP_KEEPINTVL => {
                        if !(1..=32767).contains(&v) {
                            return Err(Errno::EINVAL);
                        }
                        if n == TCP_KEEPIDLE {
                            o.keepidle = Some(v as u32);
                        } else {
                            o.keepintvl = Some(v as u32);
                        }
                    }
                    TCP_KEEPCNT => {
                        if !(1..=127).contains(&v) {
                            return Err(Errno::EINVAL);
                        }
                        o.keepcnt = Some(v as u32);
                    }
                    // Linux: milliseconds, 0 off, negative EINVAL.
                    TCP_USER_TIMEOUT => {
                        if v < 0 {
                            return Err(Errno::EINVAL);
                        }
                        o.user_timeout = v as u32;
                        if let (Some(h), Some(e)) = (conn, engine) {
                            let stack = self.engines[e].driver.stack_mut();
                            stack.tcp_set_user_timeout(h, user_timeout(v as u32))?;
                        }
                    }
                    // Linux's user_mss: read at the handshake, so a
                    // connection under way keeps the MSS it has.
                    TCP_MAXSEG => {
                        if v != 0 && !MAXSEG_RANGE.contains(&v) {
                            return Err(Errno::EINVAL);
                        }
                        let mss = (v != 0).then_some(v as u16);
                        o.max_segment = mss;
                        let listener = match self.socket(fd)?.state {
                            State::Listening { h, .. } => Some(h),
                            _ => None,
                        };
                        if let (Some(h), Some(e)) = (listener, engine) {
                            let stack = self.engines[e].driver.stack_mut();
                            stack.tcp_set_max_segment(h, mss)?;
                        }
                    }
                    // Linux: 1..=127 (MAX_TCP_SYNCNT).
                    TCP_SYNCNT => {
                        if !(1..=127).contains(&v) {
                            return Err(Errno::EINVAL);
                        }
                        o.syncnt = Some(v as u32);
                        if let (Some(h), Some(e)) = (conn, engine) {
                            let stack = self.engines[e].driver.stack_mut();
                            stack.tcp_set_syn_retries(h, Some(v as u32))?;
                        }
                    }
                    _ => return Err(Errno::ENOPROTOOPT),
                }
                // Only the keepalive options change the timing (nginx sets
                // TCP_CORK twice per response: no stack call for those).
                if !matches!(n, TCP_KEEPIDLE | TCP_KEEPINTVL | TCP_KEEPCNT) {
                    return Ok(());
                }
                let o = &self.socket(fd)?.opts;
                let secs = |s: Option<u32>| s.map(|s| Duration::from_secs(u64::from(s)));
                let (idle, intvl, cnt) = (secs(o.keepidle), secs(o.keepintvl), o.keepcnt);
                if let (Some(h), Some(e)) = (conn, engine) {
                    let stack = self.engines[e].driver.stack_mut();
                    stack.tcp_set_keepalive_timing(h, idle, intvl, cnt)?;
                }
            }
            (IPPROTO_IP, n) => {
                let v = ip_int_arg(val)?;
                let o = &mut self.socket_mut(fd)?.opts;
                match n {
                    IP_TTL => {
                        o.ttl = match v {
                            -1 => None,
                            1..=255 => Some(v as u8),
                            _ => return Err(Errno::EINVAL),
                        }
                    }
                    IP_TOS => {
                        // TCP keeps the ECN bits to itself.
                        let v = if stream { (v & !3) | (o.tos & 3) } else { v };
                        o.tos = i32::from(v as u8);
                    }
                    IP_PKTINFO => o.pktinfo = v != 0,
                    IP_RECVDSTADDR => o.recvdstaddr = v != 0,
                    _ => return Err(Errno::ENOPROTOOPT),
                }
                self.apply_ip_options(fd)?;
            }
            (IPPROTO_IPV6, n) if v6 => {
                if !matches!(
                    n,
                    IPV6_V6ONLY | IPV6_RECVPKTINFO | IPV6_TCLASS | IPV6_UNICAST_HOPS
                ) {
                    return Err(Errno::ENOPROTOOPT);
                }
                let v = int_arg(val)?;
                let o = &mut self.socket_mut(fd)?.opts;
                match n {
                    IPV6_V6ONLY => {
                        // Linux: only before the socket has a port.
                        if has_port {
                            return Err(Errno::EINVAL);
                        }
                        o.v6only = v != 0;
                    }
                    IPV6_RECVPKTINFO => o.recvpktinfo6 = v != 0,
                    IPV6_TCLASS => {
                        // RFC 3542 6.5: -1 is the default class, 0.
                        let v = match v {
                            -1 => 0,
                            0..=255 => v,
                            _ => return Err(Errno::EINVAL),
                        };
                        // TCP keeps the ECN bits to itself, as with IP_TOS.
                        o.tclass = if stream { (v & !3) | (o.tclass & 3) } else { v };
                    }
                    _ => {
                        o.hops = match v {
                            -1 => None,
                            0..=255 => Some(v as u8),
                            _ => return Err(Errno::EINVAL),
                        }
                    }
                }
                self.apply_ip_options(fd)?;
            }
            _ => return Err(Errno::ENOPROTOOPT),
        }
        Ok(())
    }

    /// Gives the stack socket the IP options of its family: IP_TTL and
    /// IP_TOS for IPv4, IPV6_UNICAST_HOPS and IPV6_TCLASS for IPv6.  (An
    /// AF_INET6 UDP socket, which may send both, sets them again for each
    /// datagram whose family differs.)
    fn apply_ip_options(&mut self, fd: RawFd) -> Result<()> {
        let sock = self.socket(fd)?;
        let Some(e) = sock.engine else { return Ok(()) };
        let (state, bound) = (sock.state, sock.bound);
        let (ip4, ip6) = (sock.ip_options(false), sock.ip_options(true));
        let stack = self.engines[e].driver.stack_mut();
        match state {
            State::Tcp { h, .. } => {
                let v6 = stack.tcp_peer_addr(h).is_ok_and(|a| a.is_ipv6());
                let (ttl, tos) = if v6 { ip6 } else { ip4 };
                stack.tcp_set_ip_options(h, ttl, tos)?;
            }
            State::Udp { h, peer } => {
                let v6 = peer.or(bound).is_some_and(|a| a.is_ipv6());
                let (ttl, tos) = if v6 { ip6 } else { ip4 };
                stack.udp_set_ip_options(h, ttl, tos)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Gives the stack socket, if there is one yet, the socket's SO_MARK
    /// (one made later gets it where it is made).
    pub(crate) fn apply_mark(&mut self, fd: RawFd) -> Result<()> {
        let sock = self.socket(fd)?;
        let Some(e) = sock.engine else { return Ok(()) };
        let (state, mark) = (sock.state, sock.opts.mark);
        let stack = self.engines[e].driver.stack_mut();
        match state {
            State::Tcp { h, .. } | State::Listening { h, .. } => stack.tcp_set_mark(h, mark)?,
            State::Udp { h, .. } => stack.udp_set_mark(h, mark)?,
            State::Fresh | State::Bound(_) => {}
        }
        Ok(())
    }

    pub(crate) fn getsockopt(
        &mut self,
        fd: RawFd,
        level: i32,
        name: i32,
        out: &mut [u8],
    ) -> Result<usize> {
        let sock = self.socket(fd)?;
        let stream = sock.stream;
        let domain = sock.domain;
        let engine = sock.engine;
        let state = sock.state;
        let o = sock.opts.clone();
        let (tcp_cfg, ip_ttl, hop_limit, udp_space) = match self.engines.first_mut() {
            Some(e) => {
                let c = e.driver.stack_mut().config();
                (c.tcp.clone(), c.ip_ttl, c.ip6_hop_limit, c.udp_recv_space)
            }
            None => return Err(Errno::ENODEV),
        };
        let int = |v: i32, out: &mut [u8]| Ok(put(out, &v.to_ne_bytes()));
        match (level, name) {
            (SOL_SOCKET, SO_TYPE) => int(if stream { SOCK_STREAM } else { SOCK_DGRAM }, out),
            (SOL_SOCKET, SO_DOMAIN) => int(domain.af(), out),
            (SOL_SOCKET, SO_PROTOCOL) => int(if stream { IPPROTO_TCP } else { IPPROTO_UDP }, out),
            (SOL_SOCKET, SO_ACCEPTCONN) => {
                int(matches!(state, State::Listening { .. }) as i32, out)
            }
            (SOL_SOCKET, SO_REUSEADDR) => int(o.reuseaddr as i32, out),
            (SOL_SOCKET, SO_REUSEPORT) => int(o.reuseport as i32, out),
            (SOL_SOCKET, SO_BROADCAST) => int(o.broadcast as i32, out),
            (SOL_SOCKET, SO_OOBINLINE) => int(o.oob_inline as i32, out),
            (SOL_SOCKET, SO_MARK) => int(o.mark as i32, out),
            (SOL_SOCKET, SO_KEEPALIVE) => int(o.keepalive as i32, out),
            (SOL_SOCKET, SO_RCVBUF) => {
                let default = if stream {
                    tcp_cfg.recv_space
                } else {
                    udp_space
                } * 2;
                int(
                    o.rcvbuf.unwrap_or(default).min(i32::MAX as usize) as i32,
                    out,
                )
            }
            (SOL_SOCKET, SO_SNDBUF) => {
                let default = if stream {
                    tcp_cfg.send_space * 2
                } else {
                    BUF_MAX
                };
                int(
                    o.sndbuf.unwrap_or(default).min(i32::MAX as usize) as i32,
                    out,
                )
            }
            (SOL_SOCKET, SO_LINGER) => {
                let mut b = [0u8; 8];
                b[..4].copy_from_slice(&(o.linger.is_some() as i32).to_ne_bytes());
                b[4..].copy_from_slice(&o.linger.unwrap_or(0).to_ne_bytes());
                Ok(put(out, &b))
            }
            (SOL_SOCKET, SO_RCVTIMEO) | (SOL_SOCKET, SO_SNDTIMEO) => {
                let t = if name == SO_RCVTIMEO {
                    o.rcvtimeo
                } else {
                    o.sndtimeo
                };
                let t = t.unwrap_or(Duration::ZERO);
                let mut b = [0u8; 16];
                b[..8].copy_from_slice(&(t.as_secs() as i64).to_ne_bytes());
                b[8..].copy_from_slice(&i64::from(t.subsec_micros()).to_ne_bytes());
                Ok(put(out, &b))
            }
            (SOL_SOCKET, SO_ERROR) => {
                let err = match (state, engine) {
                    (State::Tcp { h, .. }, Some(e)) => self.engines[e]
                        .driver
                        .stack_mut()
                        .tcp_take_error(h)
                        .ok()
                        .flatten()
                        .map_or(0, |e| e.errno()),
                    (State::Udp { h, .. }, Some(e)) => self.engines[e]
                        .driver
                        .stack_mut()
                        .udp_take_error(h)
                        .ok()
                        .flatten()
                        .map_or(0, |e| e.errno()),
                    _ => 0,
                };
                int(err, out)
            }
            (SOL_SOCKET, _) => Err(Errno::ENOPROTOOPT),
            (IPPROTO_TCP, n) if stream => match n {
                TCP_NODELAY => int(o.nodelay as i32, out),
                TCP_CORK => int(o.cork as i32, out),
                TCP_KEEPIDLE => int(
                    o.keepidle.unwrap_or(tcp_cfg.keepidle.as_secs() as u32) as i32,
                    out,
                ),
                TCP_KEEPINTVL => int(
                    o.keepintvl.unwrap_or(tcp_cfg.keepintvl.as_secs() as u32) as i32,
                    out,
                ),
                TCP_KEEPCNT => int(o.keepcnt.unwrap_or(tcp_cfg.keepcnt) as i32, out),
                TCP_USER_TIMEOUT => int(o.user_timeout as i32, out),
                TCP_SYNCNT => int(o.syncnt.unwrap_or(tcp_cfg.syn_retries) as i32, out),
                // Linux: the socket's own value while closed or listening,
                // else the MSS the connection sends (536 before any).
                TCP_MAXSEG => {
                    let own = o.max_segment.map(i32::from);
                    let conn = match (state, engine) {
                        (State::Tcp { h, .. }, Some(e)) => {
                            let stack = self.engines[e].driver.stack_mut();
                            let closed = stack.tcp_state(h).map_or(true, |s| s == TcpState::Closed);
                            let mss = stack.tcp_info(h).map(|i| i.snd_mss as i32).ok();
                            if closed && own.is_some() {
                                None
                            } else {
                                mss
                            }
                        }
                        _ => None,
                    };
                    int(conn.or(own).unwrap_or(MSS_DEFAULT), out)
                }
                TCP_INFO => {
                    let info = match (state, engine) {
                        (State::Tcp { h, .. }, Some(e)) => {
                            self.engines[e].driver.stack_mut().tcp_info(h)?
                        }
                        (State::Listening { .. }, _) => TcpInfo {
                            state: Some(TcpState::Listen),
                            ..TcpInfo::default()
                        },
                        _ => TcpInfo::default(),
                    };
                    Ok(put(out, &encode_tcp_info(&info)))
                }
                _ => Err(Errno::ENOPROTOOPT),
            },
            (IPPROTO_IP, n) => match n {
                IP_TTL => Ok(put_ip_int(out, i32::from(o.ttl.unwrap_or(ip_ttl)))),
                IP_TOS => Ok(put_ip_int(out, o.tos)),
                IP_PKTINFO => Ok(put_ip_int(out, o.pktinfo as i32)),
                IP_RECVDSTADDR => Ok(put_ip_int(out, o.recvdstaddr as i32)),
                _ => Err(Errno::ENOPROTOOPT),
            },
            (IPPROTO_IPV6, n) if domain == Domain::V6 => match n {
                IPV6_V6ONLY => int(o.v6only as i32, out),
                IPV6_RECVPKTINFO => int(o.recvpktinfo6 as i32, out),
                IPV6_TCLASS => int(o.tclass, out),
                IPV6_UNICAST_HOPS => int(i32::from(o.hops.unwrap_or(hop_limit)), out),
                _ => Err(Errno::ENOPROTOOPT),
            },
            // ipv6_getsockopt: a level it does not know.
            _ if domain == Domain::V6 => Err(Errno::ENOPROTOOPT),
            // ip_getsockopt: a level it does not know.
            _ => Err(Errno::EOPNOTSUPP),
        }
    }
}
