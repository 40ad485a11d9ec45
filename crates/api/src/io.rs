//! Data in and out: recvmsg and sendmsg, which every read, recv, recvfrom,
//! readv (and their write twins) come down to.  Non-blocking: EAGAIN sends
//! the caller (`calls.rs`) to drive the engine and retry.

use std::io::{IoSlice, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::RawFd;

use stack::{OobRead, SocketError, TcpState};

use crate::consts::*;
use crate::driver;
use crate::errno::{Errno, Result};
use crate::family::{self, Domain, Use};
use crate::sock_ops::parts;
use crate::socket::{self, State};
use crate::worker::{Object, Worker};

/// IP_PKTINFO of a received datagram (Linux's `struct in_pktinfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PktInfo {
    /// The interface it came in on (1 is the stack's first).
    pub ifindex: u32,
    /// The local address it was sent to (the source a reply should use).
    pub spec_dst: Ipv4Addr,
    /// The destination address in its header.
    pub addr: Ipv4Addr,
}

/// IPV6_PKTINFO of a received datagram (`struct in6_pktinfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pkt6Info {
    /// The interface it came in on (1 is the stack's first).
    pub ifindex: u32,
    /// The destination address in its header (IPv4-mapped for an IPv4
    /// datagram on a dual-stack socket).
    pub addr: Ipv6Addr,
}

/// What recvmsg returns besides the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecvMsg {
    /// Bytes copied (with MSG_TRUNC on a datagram socket: the datagram's
    /// whole length).
    pub len: usize,
    /// The sender (datagram sockets), in the socket's family.
    pub addr: Option<SocketAddr>,
    /// MSG_TRUNC when a datagram did not fit.
    pub flags: i32,
    /// With IP_PKTINFO on, for an IPv4 datagram.
    pub pktinfo: Option<PktInfo>,
    /// With IP_RECVDSTADDR on, for an IPv4 datagram: its destination.
    pub dstaddr: Option<Ipv4Addr>,
    /// With IPV6_RECVPKTINFO on (AF_INET6 sockets).
    pub pktinfo6: Option<Pkt6Info>,
}

/// What sendmsg takes besides the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SendMsg {
    /// The destination (`msg_name`); `None` on a connected socket.
    pub addr: Option<SocketAddr>,
    /// The source address: IP_PKTINFO's `ipi_spec_dst`, IP_SENDSRCADDR,
    /// or IPV6_PKTINFO's `ipi6_addr` (IPv4-mapped for an IPv4 datagram of
    /// an AF_INET6 socket).  It must be one of the stack's addresses.  An
    /// AF_INET socket ignores an IPv6 one, as Linux ignores IPv6 cmsgs
    /// there; an IPv4 one for an IPv6 datagram is ignored too.
    pub src: Option<IpAddr>,
    /// IP_PKTINFO's `ipi_ifindex` or IPV6_PKTINFO's `ipi6_ifindex` (0 or
    /// `None`: routed).
    pub ifindex: Option<u32>,
}

fn total_len(bufs: &[IoSliceMut<'_>]) -> usize {
    bufs.iter().map(|b| b.len()).sum()
}

/// Copies `data` across `bufs`.
fn scatter(data: &[u8], bufs: &mut [IoSliceMut<'_>]) {
    let mut off = 0;
    for b in bufs {
        let n = b.len().min(data.len() - off);
        b[..n].copy_from_slice(&data[off..off + n]);
        off += n;
        if off == data.len() {
            break;
        }
    }
}

impl Worker {
    pub(crate) fn recvmsg(
        &mut self,
        fd: RawFd,
        bufs: &mut [IoSliceMut<'_>],
        flags: i32,
    ) -> Result<RecvMsg> {
        let sock = self.socket(fd)?;
        // UDP has no urgent data: Linux's udp_recvmsg does not look at
        // MSG_OOB and reads as without it.
        if flags & MSG_OOB != 0 && sock.stream {
            return self.recv_urgent(fd, bufs, flags);
        }
        if sock.stream {
            self.tcp_recv(fd, bufs, flags)
        } else {
            self.udp_recv(fd, bufs, flags)
        }
    }

    fn tcp_recv(&mut self, fd: RawFd, bufs: &mut [IoSliceMut<'_>], flags: i32) -> Result<RecvMsg> {
        let sock = self.socket(fd)?;
        let h = match sock.state {
            State::Tcp { h, .. } => h,
            // Linux's tcp_recvmsg looks at RCV_SHUTDOWN before the closed
            // state: a socket that was never connected, shut for reading
            // (shutdown said ENOTCONN, and kept the flag), reads 0.
            State::Fresh | State::Bound(_) if sock.shut_rd => return Ok(RecvMsg::default()),
            _ => return Err(Errno::ENOTCONN),
        };
        let mut scratch = std::mem::take(&mut self.scratch);
        let (sock, d) = parts(self, fd)?;
        let mut total = 0usize;
        let mut result = Ok(());
        let want = total_len(bufs);
        if want == 0 {
            // Linux's tcp_recvmsg looks once even for no bytes: with
            // nothing queued, what a read would say.
            if d.stack_mut().tcp_recv_queued(h).unwrap_or(0) == 0 {
                result = nothing_queued(d.stack_mut(), h, sock.shut_rd);
            }
        } else if flags & MSG_PEEK != 0 {
            scratch.resize(want, 0);
            match d.stack_mut().tcp_peek(h, &mut scratch) {
                Ok(0) => {
                    // Nothing queued: what a read would say, without
                    // taking the data.
                    result = nothing_queued(d.stack_mut(), h, sock.shut_rd);
                }
                Ok(n) => {
                    // MSG_TRUNC: Linux's TCP counts the bytes and copies none.
                    if flags & MSG_TRUNC == 0 {
                        scatter(&scratch[..n], bufs);
                    }
                    total = n;
                }
                Err(e) => result = Err(e.into()),
            }
        } else if flags & MSG_TRUNC != 0 {
            // Linux's TCP with MSG_TRUNC: the bytes are taken and dropped,
            // the caller's buffer left as it was.
            scratch.resize(want, 0);
            let r = driver::call(d, |now, stack, sink| {
                stack.tcp_recv(now, h, &mut scratch, sink)
            });
            match r {
                Ok(n) => total = n,
                Err(e) => result = Err(Errno::from(e)),
            }
            sock.totals.consumed += total as u64;
        } else {
            for b in bufs.iter_mut() {
                if b.is_empty() {
                    continue;
                }
                // A read stops at the urgent mark once it has data.
                if total > 0 && d.stack_mut().tcp_at_mark(h) == Ok(true) {
                    break;
                }
                // The clock is read only for a window update.
                let r = match driver::call_stack(d, |stack| stack.tcp_read(h, b)) {
                    Ok((n, true)) => {
                        driver::call(d, |now, stack, sink| stack.tcp_window_update(now, h, sink))
                            .map(|()| n)
                    }
                    r => r.map(|(n, _)| n),
                };
                match r {
                    Ok(n) => {
                        total += n;
                        if n < b.len() {
                            break;
                        }
                    }
                    Err(e) => {
                        result = Err(Errno::from(e));
                        break;
                    }
                }
            }
            sock.totals.consumed += total as u64;
        }
        self.scratch = scratch;
        match result {
            Err(_) if total > 0 => {}
            Err(e) => {
                return Err(match e {
                    Errno(libc::ENOTCONN) => Errno::ENOTCONN,
                    e => e,
                })
            }
            Ok(()) => {}
        }
        Ok(RecvMsg {
            len: total,
            ..RecvMsg::default()
        })
    }

    fn udp_recv(&mut self, fd: RawFd, bufs: &mut [IoSliceMut<'_>], flags: i32) -> Result<RecvMsg> {
        let (h, peer) = match self.socket(fd)?.state {
            State::Udp { h, peer } => (h, peer),
            _ => return Err(Errno::EAGAIN),
        };
        let mut scratch = std::mem::take(&mut self.scratch);
        let want = total_len(bufs);
        scratch.resize(want, 0);
        let (sock, d) = parts(self, fd)?;
        let stack = d.stack_mut();
        // A pending ICMP error comes first, datagrams queued or not
        // (Linux's __skb_recv_udp), and only once.
        if let Some(e) = stack.udp_take_error(h)? {
            self.scratch = scratch;
            self.touch(fd);
            return Err(e.into());
        }
        let got = loop {
            let r = if flags & MSG_PEEK != 0 {
                stack.udp_peek_from(h, &mut scratch)
            } else {
                stack.udp_recv_from(h, &mut scratch)
            };
            match r {
                Ok(r) => {
                    if flags & MSG_PEEK == 0 {
                        sock.totals.consumed += 1;
                    }
                    // A connected socket takes datagrams from its peer only.
                    if peer.is_some_and(|p| p != r.meta.src) {
                        if flags & MSG_PEEK != 0 {
                            let _ = stack.udp_recv_from(h, &mut []);
                            sock.totals.consumed += 1;
                        }
                        continue;
                    }
                    break Ok(r);
                }
                // Shut for reading and empty: a call that would wait
                // returns 0 (end of file); one that would not is EAGAIN,
                // as Linux's __skb_recv_udp.
                Err(SocketError::WouldBlock)
                    if sock.shut_rd && !sock.nonblock && flags & MSG_DONTWAIT == 0 =>
                {
                    break Err(None)
                }
                Err(e) => break Err(Some(Errno::from(e))),
            }
        };
        let opts = (sock.opts.pktinfo, sock.opts.recvdstaddr);
        let pktinfo6 = sock.domain == Domain::V6 && sock.opts.recvpktinfo6;
        let domain = sock.domain;
        let out = match got {
            Ok(r) => {
                scatter(&scratch[..r.len], bufs);
                let ifindex = u32::from(r.meta.iface.0) + 1;
                let dst4 = match r.meta.dst {
                    SocketAddr::V4(a) => Some(*a.ip()),
                    SocketAddr::V6(_) => None,
                };
                let dst6 = match r.meta.dst {
                    SocketAddr::V4(a) => a.ip().to_ipv6_mapped(),
                    SocketAddr::V6(a) => *a.ip(),
                };
                let mut src = r.meta.src;
                // A link-local sender means something only with its
                // interface (RFC 4007): the scope id a reply needs.
                if let SocketAddr::V6(a) = &mut src {
                    let ip = a.ip().segments()[0];
                    if ip & 0xffc0 == 0xfe80 && a.scope_id() == 0 {
                        a.set_scope_id(ifindex);
                    }
                }
                let truncated = r.datagram_len > r.len;
                Ok(RecvMsg {
                    len: if flags & MSG_TRUNC != 0 {
                        r.datagram_len
                    } else {
                        r.len
                    },
                    addr: Some(family::present(domain, src)),
                    flags: if truncated { MSG_TRUNC } else { 0 },
                    pktinfo: dst4.filter(|_| opts.0).map(|dst| PktInfo {
                        ifindex,
                        spec_dst: dst,
                        addr: dst,
                    }),
                    dstaddr: dst4.filter(|_| opts.1),
                    pktinfo6: pktinfo6.then_some(Pkt6Info {
                        ifindex,
                        addr: dst6,
                    }),
                })
            }
            Err(None) => Ok(RecvMsg::default()),
            Err(Some(e)) => Err(e),
        };
        self.scratch = scratch;
        out
    }

    pub(crate) fn sendmsg(
        &mut self,
        fd: RawFd,
        bufs: &[IoSlice<'_>],
        flags: i32,
        msg: &SendMsg,
    ) -> Result<usize> {
        let urgent = flags & MSG_OOB != 0;
        let sock = self.socket(fd)?;
        if sock.stream {
            self.tcp_send(fd, bufs, urgent)
        } else if urgent && sock.domain == Domain::V4 {
            // udp_sendmsg: no urgent data on datagrams, refused first.
            Err(Errno::EOPNOTSUPP)
        } else {
            self.udp_send(fd, bufs, msg, urgent)
        }
    }

    /// `recv(MSG_OOB)` (Linux's `tcp_recv_urg`): the urgent octet, with
    /// MSG_OOB in the flags returned; it never waits.
    fn recv_urgent(
        &mut self,
        fd: RawFd,
        bufs: &mut [IoSliceMut<'_>],
        flags: i32,
    ) -> Result<RecvMsg> {
        let sock = self.socket(fd)?;
        if !sock.stream {
            return Err(Errno::EOPNOTSUPP);
        }
        let h = match sock.state {
            State::Tcp { h, .. } => h,
            State::Listening { .. } => return Err(Errno::ENOTCONN),
            _ => return Err(Errno::EINVAL),
        };
        let (_, d) = parts(self, fd)?;
        match d.stack_mut().tcp_recv_urgent(h, flags & MSG_PEEK != 0) {
            Ok(OobRead::Octet(c)) => {
                let mut out = RecvMsg {
                    flags: MSG_OOB,
                    ..RecvMsg::default()
                };
                match bufs.iter_mut().find(|b| !b.is_empty()) {
                    Some(b) => {
                        b[0] = c;
                        out.len = 1;
                    }
                    None => out.flags |= MSG_TRUNC,
                }
                Ok(out)
            }
            Ok(OobRead::End) => Ok(RecvMsg::default()),
            Err(e) => Err(e.into()),
        }
    }

    fn tcp_send(&mut self, fd: RawFd, bufs: &[IoSlice<'_>], urgent: bool) -> Result<usize> {
        let sock = self.socket(fd)?;
        let h = match sock.state {
            State::Tcp { h, .. } => h,
            // sk_stream_wait_connect: not connecting, not connected.
            _ => return Err(Errno::EPIPE),
        };
        let shut_wr = sock.shut_wr;
        let (sock, d) = parts(self, fd)?;
        let stack = d.stack_mut();
        if let Some(e) = stack.tcp_peek_error(h)? {
            let _ = stack.tcp_take_error(h);
            return Err(e.into());
        }
        if shut_wr {
            return Err(Errno::EPIPE);
        }
        match stack.tcp_state(h)? {
            TcpState::SynSent | TcpState::SynReceived => return Err(Errno::EAGAIN),
            TcpState::Closed => return Err(Errno::EPIPE),
            _ => {}
        }
        let mut total = 0;
        let mut result = Ok(());
        for b in bufs {
            if b.is_empty() {
                continue;
            }
            let sent = if urgent {
                driver::call(d, |now, stack, sink| stack.tcp_send_urgent(now, h, b, sink))
            } else {
                // The clock is read only when output follows (not while
                // TCP_CORK holds the data).
                match driver::call_stack(d, |stack| stack.tcp_send_queue(h, b)) {
                    Ok((n, true)) => {
                        driver::call(d, |now, stack, sink| stack.tcp_send_push(now, h, sink))
                            .map(|()| n)
                    }
                    r => r.map(|(n, _)| n),
                }
            };
            match sent {
                Ok(n) => {
                    total += n;
                    if n < b.len() {
                        break;
                    }
                }
                Err(e) => {
                    result = Err(match e {
                        SocketError::NotConnected => Errno::EPIPE,
                        e => e.into(),
                    });
                    break;
                }
            }
        }
        sock.totals.written += total as u64;
        let still = socket::writable_after_send(d.stack_mut(), h, result.is_ok());
        self.touch_after_send(fd, still);
        match result {
            Err(e) if total == 0 => Err(e),
            _ => Ok(total),
        }
    }

    /// `urgent`: MSG_OOB, which udpv6_sendmsg ignores and udp_sendmsg
    /// (IPv4, also an AF_INET6 socket's datagram to a mapped address)
    /// refuses.
    fn udp_send(
        &mut self,
        fd: RawFd,
        bufs: &[IoSlice<'_>],
        msg: &SendMsg,
        urgent: bool,
    ) -> Result<usize> {
        let sock = self.socket(fd)?;
        let peer = match sock.state {
            State::Udp { peer, .. } => peer,
            _ => None,
        };
        let dst = match (msg.addr, peer) {
            (Some(a), _) => family::remote_addr(sock.domain, sock.opts.v6only, Use::UdpSend, a)?,
            (None, Some(p)) => p,
            // Linux's inet_sendmsg gives the socket a port before this
            // is found; ustack binds at the first datagram that goes out,
            // on the engine that reaches its destination (a socket is
            // never pinned to an engine by a send that failed).
            (None, None) => return Err(Errno::EDESTADDRREQ),
        };
        if urgent && dst.is_ipv4() {
            return Err(Errno::EOPNOTSUPP);
        }
        // The address is checked first; a pending ICMP error, then a shut
        // socket, fail when the datagram is made (sock_alloc_send_skb).
        if let State::Udp { h, .. } = sock.state {
            let (_, d) = parts(self, fd)?;
            if let Some(e) = d.stack_mut().udp_take_error(h)? {
                self.touch(fd);
                return Err(e.into());
            }
        }
        let sock = self.socket(fd)?;
        if sock.shut_wr {
            return Err(Errno::EPIPE);
        }
        if matches!(dst, SocketAddr::V4(a) if a.ip().is_broadcast()) && !sock.opts.broadcast {
            return Err(Errno(libc::EACCES));
        }
        let src = source(sock.domain, msg.src, dst)?;
        family::local_for(sock.bound, dst)?;
        let domain = sock.domain;
        let ip = sock.ip_options(dst.is_ipv6());
        if !matches!(sock.state, State::Udp { .. }) {
            let engine = self.engine_for_remote(dst.ip()).ok_or(Errno::ENETUNREACH)?;
            self.udp_bind(fd, engine, domain.any(0))?;
        }
        let State::Udp { h, .. } = self.socket(fd)?.state else {
            return Err(Errno::EINVAL);
        };
        if domain == Domain::V6 {
            // One stack socket sends both families: the hop limit and
            // class of the datagram's own.
            let (_, d) = parts(self, fd)?;
            d.stack_mut().udp_set_ip_options(h, ip.0, ip.1)?;
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        let data: &[u8] = if bufs.len() == 1 {
            &bufs[0]
        } else {
            scratch.clear();
            for b in bufs {
                scratch.extend_from_slice(b);
            }
            &scratch
        };
        let (_, d) = parts(self, fd)?;
        let r = driver::call(d, |now, stack, sink| {
            stack.udp_send_to(now, h, dst, src, data, sink)
        });
        self.scratch = scratch;
        if r.is_ok() {
            self.datagram_space_freed(fd);
        }
        r.map_err(Errno::from)
    }

    /// A datagram left: Linux frees its buffer once it is delivered or
    /// dropped (sock_wfree), and sk_write_space wakes the socket's epoll
    /// watchers with EPOLLOUT, so an edge-triggered one sees EPOLLOUT
    /// again after every send.
    fn datagram_space_freed(&mut self, fd: RawFd) {
        let Ok(sock) = self.socket_mut(fd) else {
            return;
        };
        let watchers = std::mem::take(&mut sock.watchers);
        let key = (libc::EPOLLOUT | libc::EPOLLWRNORM | libc::EPOLLWRBAND) as u32;
        for &w in &watchers {
            if let Some(Object::Epoll(ep)) = self.object_mut(w) {
                ep.wake(fd, key);
            }
        }
        if let Ok(sock) = self.socket_mut(fd) {
            sock.watchers = watchers;
        }
    }
}

/// What a TCP read says when nothing is queued: the pending error (once,
/// peeking or not, as Linux's sock_error clears it), end of file (0) when
/// shut for reading or the peer has closed, else EAGAIN.
fn nothing_queued(stack: &mut stack::Stack, h: stack::SocketHandle, shut_rd: bool) -> Result<()> {
    let state = stack.tcp_state(h)?;
    match stack.tcp_take_error(h)? {
        Some(e) => Err(Errno::from(e)),
        None if shut_rd
            || matches!(
                state,
                TcpState::CloseWait
                    | TcpState::LastAck
                    | TcpState::Closing
                    | TcpState::TimeWait
                    | TcpState::Closed
            ) =>
        {
            Ok(())
        }
        None => Err(Errno::EAGAIN),
    }
}

/// The source a sendmsg asked for, for a datagram to `dst` (the stack's
/// form): IPv4-mapped is IPv4; the any address is no choice.  Linux's
/// rules: an AF_INET socket ignores IPv6 cmsgs, an IPv6 datagram ignores
/// IPv4 ones, and an IPV6_PKTINFO source for an IPv4 datagram must be
/// IPv4-mapped (EINVAL).
fn source(domain: Domain, src: Option<IpAddr>, dst: SocketAddr) -> Result<Option<IpAddr>> {
    let Some(src) = src else { return Ok(None) };
    let src = match (domain, src) {
        (Domain::V4, IpAddr::V6(_)) => return Ok(None),
        (_, s) => family::unmap_ip(s),
    };
    if src.is_unspecified() {
        return Ok(None);
    }
    match (src, dst) {
        (IpAddr::V4(_), SocketAddr::V4(_)) | (IpAddr::V6(_), SocketAddr::V6(_)) => Ok(Some(src)),
        (IpAddr::V4(_), SocketAddr::V6(_)) => Ok(None),
        (IpAddr::V6(_), SocketAddr::V4(_)) => Err(Errno::EINVAL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chosen_source_follows_the_datagrams_family() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let v4dst: SocketAddr = "10.0.0.1:53".parse().unwrap();
        let v6dst: SocketAddr = "[fd99::1]:53".parse().unwrap();
        assert_eq!(
            source(Domain::V6, Some(ip("::ffff:10.0.0.2")), v4dst),
            Ok(Some(ip("10.0.0.2")))
        );
        assert_eq!(
            source(Domain::V6, Some(ip("fd99::2")), v4dst),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            source(Domain::V6, Some(ip("fd99::2")), v6dst),
            Ok(Some(ip("fd99::2")))
        );
        assert_eq!(source(Domain::V6, Some(ip("10.0.0.2")), v6dst), Ok(None));
        assert_eq!(source(Domain::V6, Some(ip("::")), v6dst), Ok(None));
        assert_eq!(source(Domain::V4, Some(ip("fd99::2")), v4dst), Ok(None));
        assert_eq!(
            source(Domain::V4, Some(ip("10.0.0.2")), v4dst),
            Ok(Some(ip("10.0.0.2")))
        );
    }
}
