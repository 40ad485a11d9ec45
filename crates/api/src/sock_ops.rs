//! The calls that set a socket up and tear it down: socket, bind, listen,
//! accept, connect, shutdown, close, the address queries, ioctl and fcntl.
//! Each runs on the socket's worker and never blocks: it returns EAGAIN
//! and the caller (`calls.rs`) drives the engine and retries.

use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::os::fd::RawFd;

use stack::{Duration, FrameSink, Instant, Shutdown, SocketError, SocketHandle, Stack, TcpState};

use crate::consts::*;
use crate::driver::{self, Driver};
use crate::errno::{Errno, Result};
use crate::family::{self, Binding, Domain, Use};
use crate::fdtable;
use crate::os;
use crate::socket::{Options, Phase, Socket, State};
use crate::stack_ip;
use crate::worker::{self, Object, PortHold, Worker};

/// Linux's `ip_local_port_range`: ports bind() picks for port 0.
const BIND_PORTS: core::ops::RangeInclusive<u16> = 32768..=60999;

/// Applies the options set before the connection existed (or inherited
/// from its listener) to a stack connection; `ip` is IP_TTL and IP_TOS or
/// their IPv6 twins, as the connection's family takes ([`Socket::ip_options`]).
pub(crate) fn apply_tcp_options(
    now: Instant,
    stack: &mut Stack,
    sink: &mut dyn FrameSink,
    h: SocketHandle,
    o: &Options,
    ip: (Option<u8>, u8),
) {
    if o.nodelay {
        let _ = stack.tcp_set_nodelay(now, h, true, sink);
    }
    if o.cork {
        let _ = stack.tcp_set_cork(now, h, true, sink);
    }
    if o.keepalive {
        let _ = stack.tcp_set_keepalive(now, h, true);
    }
    if o.oob_inline {
        let _ = stack.tcp_set_oob_inline(h, true);
    }
    if o.linger == Some(0) {
        let _ = stack.tcp_set_linger_zero(h, true);
    }
    if let Some(b) = o.sndbuf {
        let _ = stack.tcp_set_send_buffer(h, b / 2);
    }
    if let Some(b) = o.rcvbuf {
        let _ = stack.tcp_set_recv_buffer(h, b / 2);
    }
    let _ = stack.tcp_set_ip_options(h, ip.0, ip.1);
    let secs = |s: Option<u32>| s.map(|s| Duration::from_secs(u64::from(s)));
    let _ = stack.tcp_set_keepalive_timing(h, secs(o.keepidle), secs(o.keepintvl), o.keepcnt);
    let _ = stack.tcp_set_user_timeout(h, user_timeout(o.user_timeout));
    let _ = stack.tcp_set_syn_retries(h, o.syncnt);
    if o.mark != 0 {
        let _ = stack.tcp_set_mark(h, o.mark);
    }
}

/// TCP_USER_TIMEOUT's milliseconds as the stack takes them (0: off).
pub(crate) fn user_timeout(ms: u32) -> Option<Duration> {
    (ms > 0).then(|| Duration::from_millis(u64::from(ms)))
}

/// Whether the stack still has connection `h` (in any state but closed,
/// closing after its fd is gone and TIME-WAIT too).
/// The any address of `ip`'s family.
fn unspecified(ip: std::net::IpAddr) -> std::net::IpAddr {
    match ip {
        std::net::IpAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
        std::net::IpAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
    }
}

fn holds_port(stack: &Stack, h: SocketHandle) -> bool {
    stack.tcp_holds_port(h)
}

impl Worker {
    pub(crate) fn new_socket(&mut self, domain: i32, ty: i32, protocol: i32) -> Result<RawFd> {
        let (sock, cloexec) = self.socket_object(domain, ty, protocol)?;
        self.add_object(Object::Socket(Box::new(sock)), cloexec)
    }

    /// A new socket behind `fd`, a number the caller reserved with
    /// [`worker::reserve`]; on success the number is the socket's (its
    /// close gives it back), on failure it stays the caller's.
    pub(crate) fn new_socket_at(
        &mut self,
        fd: RawFd,
        domain: i32,
        ty: i32,
        protocol: i32,
    ) -> Result<()> {
        let (sock, _) = self.socket_object(domain, ty, protocol)?;
        if fdtable::lookup(fd).is_some() {
            return Err(Errno::EBADF);
        }
        self.install(fd, Object::Socket(Box::new(sock)));
        Ok(())
    }

    /// The socket `socket(domain, ty, protocol)` makes, and whether it
    /// asked for close-on-exec.
    fn socket_object(&mut self, domain: i32, ty: i32, protocol: i32) -> Result<(Socket, bool)> {
        let domain = Domain::of(domain)?;
        let flags = ty & (SOCK_NONBLOCK | SOCK_CLOEXEC);
        let stream = match ty & !(SOCK_NONBLOCK | SOCK_CLOEXEC) {
            SOCK_STREAM => true,
            SOCK_DGRAM => false,
            SOCK_RAW | SOCK_SEQPACKET => return Err(Errno::ESOCKTNOSUPPORT),
            _ => return Err(Errno::EINVAL),
        };
        let proto_ok = match protocol {
            0 => true,
            p if p == IPPROTO_TCP => stream,
            p if p == IPPROTO_UDP => !stream,
            _ => false,
        };
        if !proto_ok {
            return Err(Errno::EPROTONOSUPPORT);
        }
        if self.engines.is_empty() {
            return Err(Errno::ENODEV);
        }
        let sock = Socket::new(domain, stream, flags & SOCK_NONBLOCK != 0);
        Ok((sock, flags & SOCK_CLOEXEC != 0))
    }

    /// Whether binding `fd` to `addr` would collide with another TCP
    /// socket (Linux's inet_csk_bind_conflict: both SO_REUSEADDR and the
    /// other not listening, or both SO_REUSEPORT, may share).
    fn tcp_conflict(&self, engine: usize, fd: RawFd, me_at: Binding) -> bool {
        let Ok(me) = self.socket(fd) else {
            return true;
        };
        let Some(holders) = self.engines[engine].tcp_binds.get(&me_at.addr.port()) else {
            return false;
        };
        holders.iter().filter(|&&o| o != fd).any(|&o| {
            let Ok(other) = self.socket(o) else {
                return false;
            };
            let Some(other_at) = other.binding() else {
                return false;
            };
            if !other_at.overlaps(&me_at) {
                return false;
            }
            let listening = matches!(other.state, State::Listening { .. });
            let shared_addr = me.opts.reuseaddr && other.opts.reuseaddr && !listening;
            let shared_port = me.opts.reuseport && other.opts.reuseport;
            !(shared_addr || shared_port)
        })
    }

    /// Whether binding `fd` to `me_at` would collide with a connection
    /// holding the port (see [`PortHold`]): as with sockets, both
    /// SO_REUSEADDR (a connection never listens) or both SO_REUSEPORT
    /// share.  Holds of connections the stack has freed are dropped here.
    fn held_conflict(&mut self, engine: usize, fd: RawFd, me_at: Binding) -> bool {
        let Ok(me) = self.socket(fd) else {
            return true;
        };
        let (reuseaddr, reuseport) = (me.opts.reuseaddr, me.opts.reuseport);
        let slot = &mut self.engines[engine];
        let Some(holds) = slot.conn_ports.get_mut(&me_at.addr.port()) else {
            return false;
        };
        let stack = slot.driver.stack_mut();
        holds.retain(|p| holds_port(stack, p.h));
        holds.iter().any(|p| {
            p.at.overlaps(&me_at) && !((reuseaddr && p.reuseaddr) || (reuseport && p.reuseport))
        })
    }

    /// Notes that connection `hold.h` holds its port (see [`PortHold`]).
    /// The list sweeps out freed connections before it would grow, so it
    /// stays within twice the live ones.
    pub(crate) fn hold_port(&mut self, engine: usize, hold: PortHold) {
        let slot = &mut self.engines[engine];
        let holds = slot.conn_ports.entry(hold.at.addr.port()).or_default();
        if holds.len() == holds.capacity() {
            let stack = slot.driver.stack_mut();
            holds.retain(|p| holds_port(stack, p.h));
        }
        holds.push(hold);
    }

    /// The binding `fd` would have at `addr`.
    fn binding_at(&self, fd: RawFd, addr: SocketAddr) -> Result<Binding> {
        let s = self.socket(fd)?;
        let dual = s.domain == Domain::V6
            && !s.opts.v6only
            && matches!(addr, SocketAddr::V6(a) if a.ip().is_unspecified());
        Ok(Binding { addr, dual })
    }

    /// A port for bind(port 0) or an unbound listen().
    fn pick_tcp_port(&mut self, engine: usize, fd: RawFd, at: Binding) -> Result<u16> {
        let span = u32::from(BIND_PORTS.end() - BIND_PORTS.start()) + 1;
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_i32(fd);
        let start = (h.finish() % u64::from(span)) as u32;
        let ip = at.addr.ip();
        for i in 0..span {
            let port = BIND_PORTS.start() + ((start + i) % span) as u16;
            let mut b = at;
            b.addr.set_port(port);
            let stack = self.engines[engine].driver.stack_mut();
            // A dual-stack socket needs the port free in IPv4 too.
            let in_stack = stack.tcp_port_in_use(ip, port)
                || (at.dual && stack.tcp_port_in_use(Domain::V4.any(0).ip(), port));
            if !in_stack
                && !self.engines[engine].tcp_binds.contains_key(&port)
                && !self.tcp_conflict(engine, fd, b)
                && !self.held_conflict(engine, fd, b)
            {
                return Ok(port);
            }
        }
        Err(Errno::EADDRINUSE)
    }

    pub(crate) fn bind(&mut self, fd: RawFd, addr: SocketAddr) -> Result<()> {
        let sock = self.socket(fd)?;
        let (domain, stream, v6only) = (sock.domain, sock.stream, sock.opts.v6only);
        let addr = family::bind_addr(domain, stream, v6only, addr)?;
        if !matches!(sock.state, State::Fresh) {
            return Err(Errno::EINVAL);
        }
        let engine = self
            .engine_for_local(addr.ip())
            .ok_or(Errno::EADDRNOTAVAIL)?;
        // Linux (inet6_bind): a socket bound to one IPv6 address is
        // v6-only from then on, which IPV6_V6ONLY then reports.
        let specific_v6 = matches!(addr, SocketAddr::V6(a) if !a.ip().is_unspecified());
        if specific_v6 {
            self.socket_mut(fd)?.opts.v6only = true;
        }
        let r = if stream {
            self.tcp_bind(fd, engine, addr)
        } else {
            self.udp_bind(fd, engine, addr).map(|_| ())
        };
        if r.is_err() && specific_v6 {
            self.socket_mut(fd)?.opts.v6only = v6only;
        }
        r
    }

    fn tcp_bind(&mut self, fd: RawFd, engine: usize, mut addr: SocketAddr) -> Result<()> {
        let at = self.binding_at(fd, addr)?;
        if addr.port() == 0 {
            addr.set_port(self.pick_tcp_port(engine, fd, at)?);
        } else if self.tcp_conflict(engine, fd, at) || self.held_conflict(engine, fd, at) {
            return Err(Errno::EADDRINUSE);
        }
        let sock = self.socket_mut(fd)?;
        sock.engine = Some(engine);
        sock.bound = Some(addr);
        sock.state = State::Bound(addr);
        self.engines[engine]
            .tcp_binds
            .entry(addr.port())
            .or_default()
            .push(fd);
        self.touch(fd);
        Ok(())
    }

    /// Binds a UDP socket (port 0: an ephemeral one).  With SO_REUSEADDR
    /// or SO_REUSEPORT on both, a second socket on the same address
    /// shares the first one's stack socket and its queue.
    pub(crate) fn udp_bind(
        &mut self,
        fd: RawFd,
        engine: usize,
        addr: SocketAddr,
    ) -> Result<SocketHandle> {
        let (reuseaddr, reuseport, rcvbuf, v6only, ip, mark) = {
            let s = self.socket(fd)?;
            let o = &s.opts;
            let ip = s.ip_options(addr.is_ipv6());
            (o.reuseaddr, o.reuseport, o.rcvbuf, o.v6only, ip, o.mark)
        };
        let slot = &mut self.engines[engine];
        let h = match stack_ip::udp_bind(slot.driver.stack_mut(), addr, v6only) {
            Ok(h) => {
                let stack = slot.driver.stack_mut();
                if let Some(b) = rcvbuf {
                    let _ = stack.udp_set_recv_buffer(h, b / 2);
                }
                let _ = stack.udp_set_ip_options(h, ip.0, ip.1);
                let _ = stack.udp_set_mark(h, mark);
                h
            }
            Err(SocketError::AddrInUse) if addr.port() != 0 => {
                let h = *slot.udp_binds.get(&addr).ok_or(Errno::EADDRINUSE)?;
                let first = slot
                    .fds
                    .get(&h)
                    .and_then(|f| f.first().copied())
                    .ok_or(Errno::EADDRINUSE)?;
                let other = self.socket(first)?;
                let shared =
                    (reuseaddr && other.opts.reuseaddr) || (reuseport && other.opts.reuseport);
                if !shared {
                    return Err(Errno::EADDRINUSE);
                }
                h
            }
            Err(e) => return Err(e.into()),
        };
        let slot = &mut self.engines[engine];
        let local = slot.driver.stack_mut().udp_local_addr(h).unwrap_or(addr);
        slot.udp_binds.insert(local, h);
        slot.fds.entry(h).or_default().push(fd);
        let sock = self.socket_mut(fd)?;
        sock.engine = Some(engine);
        sock.bound = Some(local);
        sock.state = State::Udp { h, peer: None };
        self.touch(fd);
        Ok(h)
    }

    pub(crate) fn listen(&mut self, fd: RawFd, backlog: i32) -> Result<()> {
        let sock = self.socket(fd)?;
        if !sock.stream {
            return Err(Errno::EOPNOTSUPP);
        }
        if sock.disconnecting {
            return Err(Errno::EINVAL);
        }
        let addr = match sock.state {
            // Linux's inet_listen: a listening socket takes the new backlog.
            State::Listening { h, .. } => {
                let engine = sock.engine.ok_or(Errno::EINVAL)?;
                let backlog = usize::try_from(backlog).unwrap_or(usize::MAX);
                let stack = self.engines[engine].driver.stack_mut();
                return Ok(stack.tcp_set_backlog(h, backlog)?);
            }
            State::Tcp { .. } => return Err(Errno::EINVAL),
            State::Bound(a) => a,
            State::Fresh => {
                let any = sock.domain.any(0);
                let engine = self.engine_for_local(any.ip()).ok_or(Errno::ENODEV)?;
                self.tcp_bind(fd, engine, any)?;
                self.socket_mut(fd)?.port_from_listen = true;
                match self.socket(fd)?.state {
                    State::Bound(a) => a,
                    _ => return Err(Errno::EINVAL),
                }
            }
            State::Udp { .. } => return Err(Errno::EOPNOTSUPP),
        };
        let engine = self.socket(fd)?.engine.ok_or(Errno::EINVAL)?;
        // Linux checks the bind conflicts again (another socket may have
        // started listening on a shared port meanwhile).
        let at = self.binding_at(fd, addr)?;
        if self.tcp_conflict(engine, fd, at) || self.held_conflict(engine, fd, at) {
            return Err(Errno::EADDRINUSE);
        }
        let v6only = self.socket(fd)?.opts.v6only;
        let backlog = usize::try_from(backlog).unwrap_or(usize::MAX);
        let mark = self.socket(fd)?.opts.mark;
        let max_segment = self.socket(fd)?.opts.max_segment;
        let stack = self.engines[engine].driver.stack_mut();
        let h = match stack_ip::tcp_listen(stack, addr, backlog, v6only) {
            Ok(h) => {
                if mark != 0 {
                    stack.tcp_set_mark(h, mark)?;
                }
                stack.tcp_set_max_segment(h, max_segment)?;
                h
            }
            Err(SocketError::AddrInUse) => {
                // A SO_REUSEPORT group: the sockets share one listener and
                // its accept queue.
                self.reuseport_listener(engine, fd, addr)?
            }
            Err(e) => return Err(e.into()),
        };
        self.engines[engine].fds.entry(h).or_default().push(fd);
        let sock = self.socket_mut(fd)?;
        sock.state = State::Listening { h, local: addr };
        self.touch(fd);
        Ok(())
    }

    fn reuseport_listener(
        &self,
        engine: usize,
        fd: RawFd,
        addr: SocketAddr,
    ) -> Result<SocketHandle> {
        let me = self.socket(fd)?;
        let holders = self.engines[engine]
            .tcp_binds
            .get(&addr.port())
            .ok_or(Errno::EADDRINUSE)?;
        holders
            .iter()
            .filter_map(|&o| self.socket(o).ok())
            .find_map(|o| match o.state {
                State::Listening { h, local }
                    if local == addr
                        && o.opts.reuseport
                        && me.opts.reuseport
                        && o.domain == me.domain
                        && o.opts.v6only == me.opts.v6only =>
                {
                    Some(h)
                }
                _ => None,
            })
            .ok_or(Errno::EADDRINUSE)
    }

    pub(crate) fn accept(&mut self, fd: RawFd, flags: i32) -> Result<(RawFd, SocketAddr)> {
        if flags & !(SOCK_NONBLOCK | SOCK_CLOEXEC) != 0 {
            return Err(Errno::EINVAL);
        }
        let sock = self.socket(fd)?;
        if !sock.stream {
            return Err(Errno::EOPNOTSUPP);
        }
        let State::Listening { h, .. } = sock.state else {
            return Err(Errno::EINVAL);
        };
        let engine = sock.engine.ok_or(Errno::EINVAL)?;
        let opts = sock.opts.clone();
        let domain = sock.domain;
        let (shut_rd, shut_wr) = (sock.shut_rd, sock.shut_wr);
        let (ip4, ip6) = (sock.ip_options(false), sock.ip_options(true));
        if self.engines[engine]
            .driver
            .stack_mut()
            .tcp_accept_queue_len(h)?
            == 0
        {
            return Err(Errno::EAGAIN);
        }
        let newfd = worker::reserve(flags & SOCK_CLOEXEC != 0)?;
        let slot = &mut self.engines[engine];
        let (ch, peer) = match slot.driver.stack_mut().tcp_accept(h) {
            Ok(x) => x,
            Err(e) => {
                os::release_fd(newfd);
                return Err(e.into());
            }
        };
        let ip = if peer.is_ipv6() { ip6 } else { ip4 };
        driver::call(slot.driver.as_mut(), |now, stack, sink| {
            apply_tcp_options(now, stack, sink, ch, &opts, ip);
            // Inherited RCV_SHUTDOWN: reads end at once (no FIN goes
            // out for an inherited SEND_SHUTDOWN: Linux sends none).
            if shut_rd {
                let _ = stack.tcp_shutdown(now, ch, Shutdown::Read, sink);
            }
        });
        let local = slot.driver.stack_mut().tcp_local_addr(ch).ok();
        slot.fds.entry(ch).or_default().push(newfd);
        if let Some(addr) = local {
            let hold = PortHold {
                h: ch,
                at: Binding { addr, dual: false },
                reuseaddr: opts.reuseaddr,
                reuseport: opts.reuseport,
            };
            self.hold_port(engine, hold);
        }
        let mut child = Socket::new(domain, true, flags & SOCK_NONBLOCK != 0);
        // An accepted socket inherits its listener's options (sk_clone),
        // but not its file flags (O_NONBLOCK).
        child.opts = opts;
        // Its shutdown bits too (sk_clone copies sk_shutdown: a listener
        // shut before listen() hands out connections shut the same way).
        child.shut_rd = shut_rd;
        child.shut_wr = shut_wr;
        child.engine = Some(engine);
        child.bound = local;
        child.state = State::Tcp {
            h: ch,
            phase: Phase::Connected,
            bound: false,
        };
        self.install(newfd, Object::Socket(Box::new(child)));
        self.socket_mut(fd)?.totals.accepted += 1;
        self.touch(newfd);
        self.touch(fd);
        Ok((newfd, family::present(domain, peer)))
    }

    /// connect(): starts a TCP connection (EINPROGRESS) or reports on one
    /// started before; sets a UDP socket's peer.
    pub(crate) fn connect(&mut self, fd: RawFd, addr: SocketAddr) -> Result<()> {
        let sock = self.socket(fd)?;
        if !sock.stream {
            let addr = family::remote_addr(sock.domain, sock.opts.v6only, Use::UdpConnect, addr)?;
            return self.udp_connect(fd, addr);
        }
        let addr = family::remote_addr(sock.domain, sock.opts.v6only, Use::TcpConnect, addr)?;
        match sock.state {
            State::Listening { .. } => Err(Errno::EISCONN),
            State::Tcp {
                phase: Phase::Connected,
                ..
            } => Err(Errno::EISCONN),
            // Shut down while connecting (the attempt had failed or was
            // abandoned: a live one is Connected after shutdown): Linux's
            // socket is SS_DISCONNECTING, which connect refuses.
            _ if sock.disconnecting => Err(Errno::EINVAL),
            State::Tcp {
                phase: Phase::Connecting,
                ..
            } => match self.connect_finish(fd) {
                Err(Errno::EAGAIN) => Err(Errno::EALREADY),
                r => r,
            },
            State::Fresh | State::Bound(_) => self.tcp_connect(fd, addr),
            State::Udp { .. } => Err(Errno::EINVAL),
        }
    }

    fn tcp_connect(&mut self, fd: RawFd, addr: SocketAddr) -> Result<()> {
        let sock = self.socket(fd)?;
        let bound = match sock.state {
            State::Bound(a) => Some(a),
            _ => None,
        };
        let local = family::local_for(bound, addr)?;
        let opts = sock.opts.clone();
        let ip = sock.ip_options(addr.is_ipv6());
        let engine = match sock.engine {
            Some(e) => e,
            None => self
                .engine_for_remote(addr.ip())
                .ok_or(Errno::ENETUNREACH)?,
        };
        let slot = &mut self.engines[engine];
        let h = driver::call(slot.driver.as_mut(), |now, stack, sink| {
            let h = stack.tcp_connect_with(now, addr, local, opts.mark, opts.max_segment, sink)?;
            apply_tcp_options(now, stack, sink, h, &opts, ip);
            Ok::<_, SocketError>(h)
        })
        .map_err(|e| match e {
            SocketError::NoFreePort => Errno::EADDRNOTAVAIL,
            e => e.into(),
        })?;
        let local = slot.driver.stack_mut().tcp_local_addr(h).ok();
        slot.fds.entry(h).or_default().push(fd);
        let sock = self.socket_mut(fd)?;
        sock.engine = Some(engine);
        sock.bound = local;
        sock.state = State::Tcp {
            h,
            phase: Phase::Connecting,
            bound: bound.is_some(),
        };
        self.touch(fd);
        Err(Errno::EINPROGRESS)
    }

    /// How a connection started by connect() stands: EAGAIN while the
    /// handshake runs, `Ok` once it is established, its error once it
    /// failed (the socket can then connect again, as on Linux).
    pub(crate) fn connect_finish(&mut self, fd: RawFd) -> Result<()> {
        let sock = self.socket(fd)?;
        let State::Tcp { h, phase, bound } = sock.state else {
            return match sock.state {
                State::Udp { .. } => Ok(()),
                _ => Err(Errno::ECONNABORTED),
            };
        };
        if phase == Phase::Connected {
            return Err(Errno::EISCONN);
        }
        let engine = sock.engine.ok_or(Errno::EINVAL)?;
        let stack = self.engines[engine].driver.stack_mut();
        match stack.tcp_state(h)? {
            TcpState::SynSent | TcpState::SynReceived => Err(Errno::EAGAIN),
            TcpState::Closed => {
                let error = stack.tcp_take_error(h).ok().flatten();
                let err = error.map_or(Errno::ECONNABORTED, Errno::from);
                self.drop_connection(fd, h, engine, bound);
                Err(err)
            }
            _ => {
                if let State::Tcp { phase, .. } = &mut self.socket_mut(fd)?.state {
                    *phase = Phase::Connected;
                }
                Ok(())
            }
        }
    }

    /// Forgets a failed or aborted connection: the socket is unconnected
    /// again, keeping a port it had from bind(), its shutdown bits
    /// cleared (every way here is Linux's tcp_disconnect).
    fn drop_connection(&mut self, fd: RawFd, h: SocketHandle, engine: usize, bound: bool) {
        let slot = &mut self.engines[engine];
        driver::call(slot.driver.as_mut(), |now, stack, sink| {
            let _ = stack.tcp_abort(now, h, sink);
        });
        slot.fds.remove(&h);
        if let Ok(sock) = self.socket_mut(fd) {
            sock.shut_rd = false;
            sock.shut_wr = false;
            match (bound, sock.bound) {
                (true, Some(a)) => sock.state = State::Bound(a),
                _ => {
                    sock.state = State::Fresh;
                    // What connect's report leaves (Linux's
                    // inet_stream_connect resets the address, not the port).
                    sock.failed_name = sock
                        .bound
                        .map(|a| SocketAddr::new(unspecified(a.ip()), a.port()));
                    sock.bound = None;
                    sock.engine = None;
                }
            }
        }
        self.touch(fd);
    }

    /// Gives back the port of TCP socket `fd`, bound at `local` (it is
    /// fresh again; getsockname shows the port on the any address).
    fn unbind(&mut self, fd: RawFd, engine: usize, local: SocketAddr) {
        let binds = &mut self.engines[engine].tcp_binds;
        if let Some(v) = binds.get_mut(&local.port()) {
            v.retain(|&f| f != fd);
            if v.is_empty() {
                binds.remove(&local.port());
            }
        }
        if let Ok(sock) = self.socket_mut(fd) {
            sock.state = State::Fresh;
            sock.bound = None;
            sock.engine = None;
            sock.port_from_listen = false;
            sock.failed_name = Some(SocketAddr::new(unspecified(local.ip()), local.port()));
        }
    }

    /// Connects a UDP socket to `addr` (the stack's form of it).
    fn udp_connect(&mut self, fd: RawFd, addr: SocketAddr) -> Result<()> {
        let sock = self.socket(fd)?;
        if !matches!(sock.state, State::Udp { .. }) {
            let any = sock.domain.any(0);
            let engine = self
                .engine_for_remote(addr.ip())
                .ok_or(Errno::ENETUNREACH)?;
            self.udp_bind(fd, engine, any)?;
        }
        let sock = self.socket(fd)?;
        family::local_for(sock.bound, addr)?;
        let sock = self.socket_mut(fd)?;
        let engine = sock.engine;
        if let State::Udp { peer, h } = &mut sock.state {
            *peer = Some(addr);
            let h = *h;
            if let Some(e) = engine {
                // Its hard ICMP errors are the socket's from now on.
                self.engines[e]
                    .driver
                    .stack_mut()
                    .udp_set_peer(h, Some(addr))?;
            }
        }
        self.touch(fd);
        Ok(())
    }

    /// connect() with AF_UNSPEC: a UDP socket forgets its peer; a TCP
    /// connection is aborted and the socket can connect again.
    pub(crate) fn disconnect(&mut self, fd: RawFd) -> Result<()> {
        let sock = self.socket_mut(fd)?;
        sock.disconnecting = false;
        match sock.state {
            State::Udp { ref mut peer, h } => {
                *peer = None;
                if let Some(e) = sock.engine {
                    self.engines[e].driver.stack_mut().udp_set_peer(h, None)?;
                }
            }
            State::Tcp { h, bound, .. } => {
                let engine = sock.engine.ok_or(Errno::EINVAL)?;
                self.drop_connection(fd, h, engine, bound);
            }
            State::Listening { h, local } => {
                let engine = sock.engine.ok_or(Errno::EINVAL)?;
                sock.state = State::Bound(local);
                self.release_handle(engine, h, fd);
            }
            State::Fresh | State::Bound(_) => {}
        }
        self.touch(fd);
        Ok(())
    }

    /// Takes `fd` off a stack socket; the last one closes it.
    fn release_handle(&mut self, engine: usize, h: SocketHandle, fd: RawFd) {
        let slot = &mut self.engines[engine];
        let last = match slot.fds.get_mut(&h) {
            Some(fds) => {
                fds.retain(|&f| f != fd);
                fds.is_empty()
            }
            None => true,
        };
        if !last {
            return;
        }
        slot.fds.remove(&h);
        slot.udp_binds.retain(|_, v| *v != h);
        driver::call(slot.driver.as_mut(), |now, stack, sink| {
            if stack.udp_local_addr(h).is_ok() {
                let _ = stack.udp_close(h);
            } else {
                let _ = stack.tcp_close(now, h, sink);
            }
        });
    }

    pub(crate) fn shutdown(&mut self, fd: RawFd, how: i32) -> Result<()> {
        let (rd, wr) = match how {
            SHUT_RD => (true, false),
            SHUT_WR => (false, true),
            SHUT_RDWR => (true, true),
            _ => return Err(Errno::EINVAL),
        };
        let sock = self.socket_mut(fd)?;
        let set = |s: &mut Socket| {
            s.shut_rd |= rd;
            s.shut_wr |= wr;
        };
        let result = match sock.state {
            State::Fresh | State::Bound(_) => {
                // TCP_CLOSE: ENOTCONN, yet the bits are set (Linux wakes
                // pollers with EPOLLHUP this way).
                set(sock);
                Err(Errno::ENOTCONN)
            }
            State::Udp { peer, .. } => {
                set(sock);
                if peer.is_some() {
                    Ok(())
                } else {
                    Err(Errno::ENOTCONN)
                }
            }
            State::Listening { h, local } => {
                if rd {
                    let engine = sock.engine.ok_or(Errno::EINVAL)?;
                    sock.state = State::Bound(local);
                    // tcp_disconnect clears the socket's shutdown bits.
                    sock.shut_rd = false;
                    sock.shut_wr = false;
                    self.release_handle(engine, h, fd);
                    // tcp_disconnect: a port listen() picked goes (the
                    // address too; getsockname keeps the port).
                    if self.socket(fd)?.port_from_listen {
                        self.unbind(fd, engine, local);
                    }
                }
                Ok(())
            }
            State::Tcp { h, bound, phase } => {
                let engine = sock.engine.ok_or(Errno::EINVAL)?;
                let connecting = phase == Phase::Connecting;
                let stack = self.engines[engine].driver.stack_mut();
                match stack.tcp_state(h)? {
                    TcpState::Closed => {
                        let sock = self.socket_mut(fd)?;
                        set(sock);
                        sock.disconnecting |= connecting;
                        Err(Errno::ENOTCONN)
                    }
                    // inet_shutdown disconnects: the socket is unconnected
                    // again, its shutdown bits cleared (tcp_disconnect).
                    TcpState::SynSent => {
                        self.drop_connection(fd, h, engine, bound);
                        Ok(())
                    }
                    _ => {
                        let how = match (rd, wr) {
                            (true, false) => Shutdown::Read,
                            (false, true) => Shutdown::Write,
                            _ => Shutdown::Both,
                        };
                        let slot = &mut self.engines[engine];
                        driver::call(slot.driver.as_mut(), |now, stack, sink| {
                            stack.tcp_shutdown(now, h, how, sink)
                        })?;
                        let sock = self.socket_mut(fd)?;
                        set(sock);
                        if let State::Tcp { phase, .. } = &mut sock.state {
                            *phase = Phase::Connected;
                        }
                        Ok(())
                    }
                }
            }
        };
        // inet_shutdown ends with sk_state_change whatever it returns:
        // every waiter wakes (EPOLLHUP even on an unconnected socket).
        if let Ok(sock) = self.socket_mut(fd) {
            sock.state_changed = true;
        }
        self.touch(fd);
        result
    }

    /// close(): the socket leaves every epoll and kqueue, its stack socket
    /// closes (finishing in the background), its number goes back.
    pub(crate) fn close(&mut self, fd: RawFd) -> Result<()> {
        self.dispose(fd)?;
        self.release(fd);
        Ok(())
    }

    /// close() but for the number, which stays reserved (and in the fd
    /// table) for the caller: dup2 onto a ustack number.
    pub(crate) fn dispose(&mut self, fd: RawFd) -> Result<()> {
        match self.take(fd) {
            Some(Object::Socket(sock)) => {
                for &w in &sock.watchers {
                    match self.object_mut(w) {
                        Some(Object::Epoll(ep)) => ep.forget(fd),
                        Some(Object::Kqueue(kq)) => kq.forget(fd),
                        _ => {}
                    }
                }
                if let Some(engine) = sock.engine {
                    // A connection from a bound port keeps holding it
                    // after its fd is gone (an accepted one already does).
                    if let State::Tcp { h, bound: true, .. } = sock.state {
                        let stack = self.engines[engine].driver.stack_mut();
                        if let Ok(addr) = stack.tcp_local_addr(h) {
                            let hold = PortHold {
                                h,
                                at: Binding { addr, dual: false },
                                reuseaddr: sock.opts.reuseaddr,
                                reuseport: sock.opts.reuseport,
                            };
                            self.hold_port(engine, hold);
                        }
                    }
                    if let Some(b) = sock.bound {
                        let binds = &mut self.engines[engine].tcp_binds;
                        if let Some(v) = binds.get_mut(&b.port()) {
                            v.retain(|&f| f != fd);
                            if v.is_empty() {
                                binds.remove(&b.port());
                            }
                        }
                    }
                    if let Some(h) = sock.handle() {
                        self.release_handle(engine, h, fd);
                    }
                }
            }
            Some(Object::Epoll(ep)) => {
                for target in ep.targets() {
                    self.unwatch(target, fd);
                }
            }
            Some(Object::Kqueue(kq)) => {
                for target in kq.targets() {
                    self.unwatch(target, fd);
                }
            }
            None => return Err(Errno::EBADF),
        }
        Ok(())
    }

    /// Removes instance `watcher` from socket `fd`'s watchers.
    pub(crate) fn unwatch(&mut self, fd: RawFd, watcher: RawFd) {
        if let Ok(s) = self.socket_mut(fd) {
            s.watchers.retain(|&w| w != watcher);
        }
    }

    pub(crate) fn getsockname(&mut self, fd: RawFd) -> Result<SocketAddr> {
        let sock = self.socket(fd)?;
        let domain = sock.domain;
        let local = match sock.state {
            State::Fresh => sock.failed_name.unwrap_or(domain.any(0)),
            State::Bound(a) | State::Listening { local: a, .. } => a,
            State::Tcp { h, .. } => {
                let engine = sock.engine.ok_or(Errno::EINVAL)?;
                self.engines[engine].driver.stack_mut().tcp_local_addr(h)?
            }
            State::Udp { h, peer } => {
                let engine = sock.engine.ok_or(Errno::EINVAL)?;
                let stack = self.engines[engine].driver.stack_mut();
                let mut local = stack.udp_local_addr(h)?;
                // A connected socket reports the source its route picks
                // (in the peer's family: a dual-stack socket on [::]
                // connected to an IPv4 peer shows that IPv4 source).
                if let (true, Some(p)) = (local.ip().is_unspecified(), peer) {
                    if let Some(src) = stack_ip::source_for(stack, p.ip()) {
                        local = SocketAddr::new(src, local.port());
                    }
                }
                local
            }
        };
        Ok(family::present(domain, local))
    }

    pub(crate) fn getpeername(&mut self, fd: RawFd) -> Result<SocketAddr> {
        let sock = self.socket(fd)?;
        let domain = sock.domain;
        let peer = match sock.state {
            State::Tcp { h, .. } => {
                let engine = sock.engine.ok_or(Errno::EINVAL)?;
                let stack = self.engines[engine].driver.stack_mut();
                match stack.tcp_state(h)? {
                    TcpState::Closed | TcpState::SynSent => return Err(Errno::ENOTCONN),
                    _ => stack.tcp_peer_addr(h)?,
                }
            }
            State::Udp { peer: Some(p), .. } => p,
            _ => return Err(Errno::ENOTCONN),
        };
        Ok(family::present(domain, peer))
    }

    pub(crate) fn ioctl(&mut self, fd: RawFd, request: u64, arg: &mut i32) -> Result<()> {
        let sock = self.socket_mut(fd)?;
        if request == FIONBIO {
            sock.nonblock = *arg != 0;
            return Ok(());
        }
        let engine = sock.engine;
        let state = sock.state;
        let sock_stream = sock.stream;
        if request == SIOCATMARK {
            // Linux's tcp_ioctl answers on any TCP socket (0 without a
            // connection); UDP has no such ioctl.
            let at = match (state, engine) {
                (State::Tcp { h, .. }, Some(e)) => self.engines[e]
                    .driver
                    .stack_mut()
                    .tcp_at_mark(h)
                    .unwrap_or(false),
                _ if !sock_stream => return Err(Errno::ENOTTY),
                _ => false,
            };
            *arg = i32::from(at);
            return Ok(());
        }
        if request != FIONREAD {
            return Err(Errno::ENOTTY);
        }
        let n = match (state, engine) {
            (State::Listening { .. }, _) => return Err(Errno::EINVAL),
            (State::Tcp { h, .. }, Some(e)) => self.engines[e]
                .driver
                .stack_mut()
                .tcp_recv_queued_to_mark(h)
                .unwrap_or(0),
            (State::Udp { h, .. }, Some(e)) => self.engines[e]
                .driver
                .stack_mut()
                .udp_recv_queued(h)?
                .2
                .unwrap_or(0),
            _ => 0,
        };
        *arg = i32::try_from(n).unwrap_or(i32::MAX);
        Ok(())
    }

    pub(crate) fn fcntl(&mut self, fd: RawFd, cmd: i32, arg: i32) -> Result<i32> {
        let sock = self.socket_mut(fd)?;
        match cmd {
            F_GETFL => Ok(O_RDWR | sock.status_flags | if sock.nonblock { O_NONBLOCK } else { 0 }),
            F_SETFL => {
                // Linux: a socket cannot do O_DIRECT; O_APPEND and
                // O_NOATIME are kept (and do nothing); other flags
                // (access mode, creation flags) are ignored.
                if arg & libc::O_DIRECT != 0 {
                    return Err(Errno::EINVAL);
                }
                sock.nonblock = arg & O_NONBLOCK != 0;
                sock.status_flags = arg & KEPT_STATUS_FLAGS;
                Ok(0)
            }
            F_GETFD | F_SETFD => os::fd_flags(fd, cmd, arg),
            // The owner told of urgent data (SIGURG, see `events.rs`).
            F_SETOWN => {
                sock.owner = arg;
                // Urgent pointers that came before have been announced
                // to nobody, and are not now (as the kernel's).
                if let (State::Tcp { h, .. }, Some(e)) = (sock.state, sock.engine) {
                    let seen = self.engines[e].driver.stack_mut().tcp_urgent_notices(h);
                    if let (Ok(n), Ok(sock)) = (seen, self.socket_mut(fd)) {
                        sock.urgent_seen = n;
                    }
                }
                Ok(0)
            }
            F_GETOWN => Ok(sock.owner),
            _ => Err(Errno::EINVAL),
        }
    }
}

/// The F_SETFL flags a socket keeps besides O_NONBLOCK.
const KEPT_STATUS_FLAGS: i32 = libc::O_APPEND | libc::O_NOATIME;

/// The engine of a socket and the socket, borrowed together.
pub(crate) fn parts(w: &mut Worker, fd: RawFd) -> Result<(&mut Socket, &mut dyn Driver)> {
    let Worker {
        objects, engines, ..
    } = w;
    let sock = match objects.get_mut(usize::try_from(fd).map_err(|_| Errno::EBADF)?) {
        Some(Some(Object::Socket(s))) => s,
        Some(Some(_)) => return Err(Errno::ENOTSOCK),
        _ => return Err(Errno::EBADF),
    };
    let engine = sock.engine.ok_or(Errno::ENOTCONN)?;
    Ok((sock.as_mut(), engines[engine].driver.as_mut()))
}
