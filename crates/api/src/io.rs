//! Data in and out: recvmsg and sendmsg, which every read, recv, recvfrom,
//! readv (and their write twins) come down to.  Non-blocking: EAGAIN sends
//! the caller (`calls.rs`) to drive the engine and retry.

use std::io::{IoSlice, IoSliceMut};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::RawFd;

use stack::{SocketError, TcpState};

use crate::consts::*;
use crate::driver;
use crate::errno::{Errno, Result};
use crate::sock_ops::{parts, v4};
use crate::socket::State;
use crate::worker::Worker;

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

/// What recvmsg returns besides the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecvMsg {
    /// Bytes copied (with MSG_TRUNC on a datagram socket: the datagram's
    /// whole length).
    pub len: usize,
    /// The sender (datagram sockets).
    pub addr: Option<SocketAddrV4>,
    /// MSG_TRUNC when a datagram did not fit.
    pub flags: i32,
    /// With IP_PKTINFO on.
    pub pktinfo: Option<PktInfo>,
    /// With IP_RECVDSTADDR on: the datagram's destination address.
    pub dstaddr: Option<Ipv4Addr>,
}

/// What sendmsg takes besides the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SendMsg {
    /// The destination (`msg_name`); `None` on a connected socket.
    pub addr: Option<SocketAddrV4>,
    /// The source address: IP_PKTINFO's `ipi_spec_dst`, or
    /// IP_SENDSRCADDR.  It must be one of the stack's addresses.
    pub src: Option<Ipv4Addr>,
    /// IP_PKTINFO's `ipi_ifindex` (0 or `None`: routed).
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
        if sock.stream {
            self.tcp_recv(fd, bufs, flags)
        } else {
            self.udp_recv(fd, bufs, flags)
        }
    }

    fn tcp_recv(&mut self, fd: RawFd, bufs: &mut [IoSliceMut<'_>], flags: i32) -> Result<RecvMsg> {
        let h = match self.socket(fd)?.state {
            State::Tcp { h, .. } => h,
            _ => return Err(Errno::ENOTCONN),
        };
        let mut scratch = std::mem::take(&mut self.scratch);
        let (sock, d) = parts(self, fd)?;
        let mut total = 0usize;
        let mut result = Ok(());
        if flags & MSG_PEEK != 0 {
            let want = total_len(bufs);
            scratch.resize(want, 0);
            match d.stack_mut().tcp_peek(h, &mut scratch) {
                Ok(0) if want > 0 => {
                    // Nothing queued: what a read would say (EOF, error,
                    // EAGAIN), without taking the data.
                    let stack = d.stack_mut();
                    let state = stack.tcp_state(h)?;
                    result = match stack.tcp_peek_error(h)? {
                        Some(e) => Err(Errno::from(e)),
                        None if sock.shut_rd
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
                    };
                }
                Ok(n) => {
                    scatter(&scratch[..n], bufs);
                    total = n;
                }
                Err(e) => result = Err(e.into()),
            }
        } else {
            for b in bufs.iter_mut() {
                if b.is_empty() {
                    continue;
                }
                let r = driver::call(d, |now, stack, sink| stack.tcp_recv(now, h, b, sink));
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
                    if peer.is_some_and(|p| SocketAddr::V4(p) != r.meta.src) {
                        if flags & MSG_PEEK != 0 {
                            let _ = stack.udp_recv_from(h, &mut []);
                            sock.totals.consumed += 1;
                        }
                        continue;
                    }
                    break Ok(r);
                }
                Err(SocketError::WouldBlock) if sock.shut_rd => break Err(None),
                Err(e) => break Err(Some(Errno::from(e))),
            }
        };
        let opts = (sock.opts.pktinfo, sock.opts.recvdstaddr);
        let out = match got {
            Ok(r) => {
                scatter(&scratch[..r.len], bufs);
                let dst = match r.meta.dst {
                    SocketAddr::V4(a) => *a.ip(),
                    SocketAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
                };
                let truncated = r.datagram_len > r.len;
                Ok(RecvMsg {
                    len: if flags & MSG_TRUNC != 0 {
                        r.datagram_len
                    } else {
                        r.len
                    },
                    addr: Some(v4(r.meta.src)),
                    flags: if truncated { MSG_TRUNC } else { 0 },
                    pktinfo: opts.0.then_some(PktInfo {
                        ifindex: u32::from(r.meta.iface.0) + 1,
                        spec_dst: dst,
                        addr: dst,
                    }),
                    dstaddr: opts.1.then_some(dst),
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
        msg: &SendMsg,
    ) -> Result<usize> {
        if self.socket(fd)?.stream {
            self.tcp_send(fd, bufs)
        } else {
            self.udp_send(fd, bufs, msg)
        }
    }

    fn tcp_send(&mut self, fd: RawFd, bufs: &[IoSlice<'_>]) -> Result<usize> {
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
            match driver::call(d, |now, stack, sink| stack.tcp_send(now, h, b, sink)) {
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
        // The stack's ready list does not name a socket for the
        // application's own send: its readiness (EPOLLOUT gone with a
        // full buffer, for an edge to come when space frees) is looked at
        // here.
        self.touch(fd);
        match result {
            Err(e) if total == 0 => Err(e),
            _ => Ok(total),
        }
    }

    fn udp_send(&mut self, fd: RawFd, bufs: &[IoSlice<'_>], msg: &SendMsg) -> Result<usize> {
        let sock = self.socket(fd)?;
        let peer = match sock.state {
            State::Udp { peer, .. } => peer,
            _ => None,
        };
        if sock.shut_wr {
            return Err(Errno::EPIPE);
        }
        let dst = msg.addr.or(peer).ok_or(Errno::EDESTADDRREQ)?;
        if dst.ip().is_broadcast() && !sock.opts.broadcast {
            return Err(Errno(libc::EACCES));
        }
        if !matches!(sock.state, State::Udp { .. }) {
            let engine = self
                .engine_for_remote(*dst.ip())
                .ok_or(Errno::ENETUNREACH)?;
            self.udp_bind(fd, engine, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))?;
        }
        let State::Udp { h, .. } = self.socket(fd)?.state else {
            return Err(Errno::EINVAL);
        };
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
        let src = msg.src.filter(|ip| !ip.is_unspecified());
        let r = driver::call(d, |now, stack, sink| {
            stack.udp_send_to(
                now,
                h,
                SocketAddr::V4(dst),
                src.map(std::net::IpAddr::V4),
                data,
                sink,
            )
        });
        self.scratch = scratch;
        r.map_err(Errno::from)
    }
}
