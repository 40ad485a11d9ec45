//! The benchmark's client and server, written once over [`Net`]: ustack
//! and the kernel run exactly this logic.
//!
//! The server listens on four ports from a base port `P`:
//! - TCP `P`: echo (every byte read is written back);
//! - TCP `P+1`: source (writes 64 KB chunks for as long as the connection
//!   lives, for the stream workload);
//! - TCP `P+2`: one-shot (reads one 64-byte request, answers it, closes:
//!   the short-connection workload; the server closes first, as an
//!   HTTP/1.0 server does, so TIME-WAIT stays on the server);
//! - TCP `P+3`: echo too, a second port for the idle connections, which
//!   alternate between the two (one client address holds at most one
//!   port range of connections to one server port: 100k need two);
//! - UDP `P`: echo.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::time::Duration;

use crate::net::{would_block, Family, Net, SockKey, SockMap};

/// The size of a ping-pong request and reply.
pub const MSG: usize = 64;
/// The largest read and the stream's write size.
pub const CHUNK: usize = 64 * 1024;
/// Connections in the handshake at once, at most.
const MAX_CONNECTING: usize = 256;
/// A UDP request without reply for this long is sent again.
const UDP_RESEND: Duration = Duration::from_millis(200);

/// Port offsets from the base port.
pub const ECHO: u16 = 0;
pub const SOURCE: u16 = 1;
pub const ONESHOT: u16 = 2;
pub const ECHO2: u16 = 3;

/// What the client does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// `conns` connections, each with one 64-byte request in flight; counts
    /// round trips.
    PingPong { conns: usize },
    /// Connect, one 64-byte request and reply, the server closes, we
    /// close; `concurrency` such connections at once; counts connections.
    ShortConn { concurrency: usize },
    /// One connection; the server writes, we read; counts bytes.
    Stream,
    /// `socks` sockets, each with one 64-byte datagram in flight; counts
    /// round trips.
    UdpReqResp { socks: usize },
    /// Opens `count` connections, makes one 64-byte round trip on each,
    /// then leaves them idle; counts established connections.
    IdleConns { count: usize },
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Workload::PingPong { conns } => write!(f, "pingpong:{conns}"),
            Workload::ShortConn { concurrency } => write!(f, "short:{concurrency}"),
            Workload::Stream => write!(f, "stream"),
            Workload::UdpReqResp { socks } => write!(f, "udp:{socks}"),
            Workload::IdleConns { count } => write!(f, "idle:{count}"),
        }
    }
}

impl FromStr for Workload {
    type Err = String;
    fn from_str(s: &str) -> Result<Workload, String> {
        let (kind, n) = match s.split_once(':') {
            Some((k, n)) => (
                k,
                n.parse::<usize>()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("bad count in workload {s:?}"))?,
            ),
            None => (s, 1),
        };
        Ok(match kind {
            "pingpong" => Workload::PingPong { conns: n },
            "short" => Workload::ShortConn { concurrency: n },
            "stream" => Workload::Stream,
            "udp" => Workload::UdpReqResp { socks: n },
            "idle" => Workload::IdleConns { count: n },
            _ => return Err(format!("unknown workload {s:?}")),
        })
    }
}

/// How long the client runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// Runs `warmup`, then measures over `window`.
    Time { warmup: Duration, window: Duration },
    /// Stops after this many units (for instruction counts).
    Count(u64),
    /// Idle connections: once all are up, waits `settle`, then is done.
    Settle(Duration),
}

/// What a client measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measure {
    /// Units (round trips, connections, bytes) in the window.
    pub units: u64,
    /// The window's length.
    pub elapsed: Duration,
    /// Errors seen (failed connections, resets, resent datagrams).
    pub errors: u64,
}

/// One connection or socket of the client.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// Reply bytes received so far.
    got: usize,
    /// The request is yet to be sent (the socket refused it).
    unsent: bool,
    /// Connection workloads: the handshake is not known to be over (no
    /// reply has come yet).
    connecting: bool,
    /// Short connections: the reply is whole, waiting for the server's FIN.
    awaiting_eof: bool,
    /// Idle connections: the round trip is done.
    idle: bool,
    /// UDP: when the request went out.
    sent_at: Duration,
}

/// The client: opens what the workload needs and keeps it busy.
pub struct Client<S> {
    workload: Workload,
    server: IpAddr,
    base_port: u16,
    budget: Budget,
    slots: SockMap<S, Slot>,
    ready: Vec<S>,
    buf: Vec<u8>,
    req: [u8; MSG],
    /// Connections (or sockets) still to open.
    to_open: usize,
    connecting: usize,
    /// A first reply has come: the neighbor is resolved, the server
    /// answers. Until then one socket is opened, not hundreds whose first
    /// packets would wait on ARP (and be dropped past its queue).
    first_reply: bool,
    /// Units done since the start.
    count: u64,
    errors: u64,
    start_mark: Option<(Duration, u64)>,
    result: Option<Measure>,
    last_scan: Duration,
    /// Idle connections: all are up since then.
    all_up_at: Option<Duration>,
    /// Idle connections: the server port offsets they go to, in turn (each
    /// server port gives a client address its own ephemeral ports).
    idle_ports: Vec<u16>,
}

impl<S: SockKey> Client<S> {
    pub fn new(workload: Workload, server: IpAddr, base_port: u16, budget: Budget) -> Self {
        let to_open = match workload {
            Workload::PingPong { conns } => conns,
            Workload::ShortConn { concurrency } => concurrency,
            Workload::Stream => 1,
            Workload::UdpReqResp { socks } => socks,
            Workload::IdleConns { count } => count,
        };
        Client {
            workload,
            server,
            base_port,
            budget,
            slots: SockMap::default(),
            ready: Vec::new(),
            buf: vec![0u8; CHUNK],
            req: [b'q'; MSG],
            to_open,
            connecting: 0,
            first_reply: false,
            count: 0,
            errors: 0,
            start_mark: None,
            result: None,
            last_scan: Duration::ZERO,
            all_up_at: None,
            idle_ports: vec![ECHO, ECHO2],
        }
    }

    /// Idle connections go to these server port offsets in turn (echo
    /// listeners the server opened, see [`Server::listen_echo`]).
    pub fn set_idle_ports(&mut self, offsets: Vec<u16>) {
        if !offsets.is_empty() {
            self.idle_ports = offsets;
        }
    }

    /// The measurement, once the budget is spent.
    pub fn result(&self) -> Option<Measure> {
        self.result
    }

    /// Units done so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Connections (or sockets) that failed so far, the measurement's
    /// end included.
    pub fn errors(&self) -> u64 {
        self.errors
    }

    /// Sockets open now.
    pub fn open_sockets(&self) -> usize {
        self.slots.len()
    }

    fn addr(&self, offset: u16) -> SocketAddr {
        SocketAddr::new(self.server, self.base_port + offset)
    }

    /// One pass: opens what is due, serves the ready sockets, checks the
    /// clock. Returns whether anything happened.
    pub fn step<N: Net<Sock = S>>(&mut self, net: &mut N) -> bool {
        if self.result.is_some() {
            // Done: keep the connections open and quiet.
            self.ready.clear();
            net.ready(&mut self.ready);
            return false;
        }
        let mut work = self.to_open > 0 && self.open_more(net);
        self.ready.clear();
        net.ready(&mut self.ready);
        work |= !self.ready.is_empty();
        // By index: serving needs `self` whole, and the list stays put
        // (serving never touches it).
        for i in 0..self.ready.len() {
            self.serve(net, self.ready[i]);
        }
        if let Workload::UdpReqResp { .. } = self.workload {
            self.resend_lost(net);
        }
        if let Budget::Count(n) = self.budget {
            // Counted runs need no clock until the count is reached.
            if self.count < n {
                return work;
            }
        }
        self.check_budget(net.now());
        work
    }

    fn open_more<N: Net<Sock = S>>(&mut self, net: &mut N) -> bool {
        let mut work = false;
        while self.to_open > 0 && self.connecting < MAX_CONNECTING {
            if !self.first_reply && !self.slots.is_empty() {
                break;
            }
            work = true;
            self.to_open -= 1;
            let opened = match self.workload {
                Workload::UdpReqResp { .. } => {
                    net.udp_bind(SocketAddr::new(Family::of(self.server).unspecified(), 0))
                }
                Workload::Stream => net.tcp_connect(self.addr(SOURCE)),
                Workload::ShortConn { .. } => net.tcp_connect(self.addr(ONESHOT)),
                Workload::PingPong { .. } => net.tcp_connect(self.addr(ECHO)),
                Workload::IdleConns { .. } => {
                    let port = self.idle_ports[self.to_open % self.idle_ports.len()];
                    net.tcp_connect(self.addr(port))
                }
            };
            let s = match opened {
                Ok(s) => s,
                Err(e) => {
                    self.errors += 1;
                    if self.errors < 5 {
                        eprintln!("ustack-bench: client: cannot open a socket: {e}");
                    }
                    // Try again on a later pass.
                    self.to_open += 1;
                    return work;
                }
            };
            let mut slot = Slot {
                unsent: true,
                ..Slot::default()
            };
            match self.workload {
                Workload::UdpReqResp { .. } => {}
                Workload::Stream => {
                    slot.unsent = false;
                }
                _ => {
                    slot.connecting = true;
                    self.connecting += 1;
                }
            }
            self.slots.insert(s, slot);
            if slot.unsent {
                self.send_request(net, s);
            }
        }
        work
    }

    fn send_request<N: Net<Sock = S>>(&mut self, net: &mut N, s: S) {
        let to = self.addr(ECHO);
        let Some(slot) = self.slots.get_mut(&s) else {
            return;
        };
        if !Self::send_into(net, s, &self.req, self.workload, to, slot) {
            self.fail(net, s);
        }
    }

    /// Sends the request on `s`, whose slot is `slot`; false if the
    /// connection failed.  (A function of the fields it needs, so that the
    /// caller's slot stays borrowed: one map lookup per reply.)
    fn send_into<N: Net<Sock = S>>(
        net: &mut N,
        s: S,
        req: &[u8; MSG],
        workload: Workload,
        to: SocketAddr,
        slot: &mut Slot,
    ) -> bool {
        let r = match workload {
            Workload::UdpReqResp { .. } => net.udp_send_to(s, req, to),
            _ => net.tcp_send(s, req),
        };
        match r {
            Ok(n) if n == MSG => {
                slot.unsent = false;
                if let Workload::UdpReqResp { .. } = workload {
                    // Only datagrams are sent again when no reply comes.
                    slot.sent_at = net.now();
                }
                true
            }
            // 64 bytes into an empty send buffer go whole or not at all.
            Ok(_) => false,
            Err(e) if would_block(&e) => {
                slot.unsent = true;
                true
            }
            Err(_) => false,
        }
    }

    fn serve<N: Net<Sock = S>>(&mut self, net: &mut N, s: S) {
        let Some(&Slot { mut unsent, .. }) = self.slots.get(&s) else {
            return;
        };
        if let Workload::UdpReqResp { .. } = self.workload {
            return self.serve_udp(net, s);
        }
        loop {
            match net.tcp_recv(s, &mut self.buf) {
                Ok(0) => return self.on_eof(net, s),
                Ok(n) => {
                    self.first_reply = true;
                    if self.workload == Workload::Stream {
                        self.count += n as u64;
                        continue;
                    }
                    match self.on_data(net, s, n) {
                        Some(still_unsent) => unsent = still_unsent,
                        None => return,
                    }
                    if n < self.buf.len() && !matches!(self.workload, Workload::ShortConn { .. }) {
                        // A short read drained the socket (epoll(7)); the
                        // next bytes bring a new event.  Short connections
                        // read on: the server's FIN may have come with the
                        // reply, in the same event.
                        break;
                    }
                }
                Err(e) if would_block(&e) => break,
                Err(_) => return self.fail(net, s),
            }
        }
        if unsent {
            self.send_request(net, s);
        }
    }

    /// `n` reply bytes on a request/reply connection: whether its request
    /// is still unsent, or `None` if the connection is gone.
    fn on_data<N: Net<Sock = S>>(&mut self, net: &mut N, s: S, n: usize) -> Option<bool> {
        let to = self.addr(ECHO);
        let slot = self.slots.get_mut(&s)?;
        if slot.connecting {
            slot.connecting = false;
            self.connecting -= 1;
        }
        slot.got += n;
        if slot.got < MSG {
            return Some(slot.unsent);
        }
        if slot.got > MSG || slot.awaiting_eof || slot.idle {
            // More than we asked for.
            self.fail(net, s);
            return None;
        }
        slot.got = 0;
        match self.workload {
            Workload::PingPong { .. } => {
                self.count += 1;
                if !Self::send_into(net, s, &self.req, self.workload, to, slot) {
                    self.fail(net, s);
                    return None;
                }
            }
            Workload::ShortConn { .. } => slot.awaiting_eof = true,
            Workload::IdleConns { .. } => {
                slot.idle = true;
                self.count += 1;
            }
            Workload::Stream | Workload::UdpReqResp { .. } => {}
        }
        Some(slot.unsent)
    }

    fn on_eof<N: Net<Sock = S>>(&mut self, net: &mut N, s: S) {
        let done = self.slots.get(&s).is_some_and(|sl| sl.awaiting_eof);
        if !done {
            return self.fail(net, s);
        }
        self.slots.remove(&s);
        net.tcp_close(s);
        self.count += 1;
        self.to_open += 1;
        self.open_more(net);
    }

    fn serve_udp<N: Net<Sock = S>>(&mut self, net: &mut N, s: S) {
        loop {
            match net.udp_recv_from(s, &mut self.buf) {
                Ok((n, _)) => {
                    self.first_reply = true;
                    if n == MSG {
                        self.count += 1;
                        self.send_request(net, s);
                    }
                }
                Err(e) if would_block(&e) => return,
                Err(_) => {
                    self.errors += 1;
                    return;
                }
            }
        }
    }

    /// UDP: sends again what has waited too long for a reply (a datagram
    /// dropped somewhere would otherwise silence its socket for good).
    fn resend_lost<N: Net<Sock = S>>(&mut self, net: &mut N) {
        let now = net.now();
        if now.saturating_sub(self.last_scan) < UDP_RESEND {
            return;
        }
        self.last_scan = now;
        let stale: Vec<S> = self
            .slots
            .iter()
            .filter(|(_, sl)| sl.unsent || now.saturating_sub(sl.sent_at) >= UDP_RESEND)
            .map(|(&s, _)| s)
            .collect();
        for s in stale {
            self.errors += 1;
            self.send_request(net, s);
        }
    }

    /// A connection failed: count it, close it, open another.
    fn fail<N: Net<Sock = S>>(&mut self, net: &mut N, s: S) {
        self.errors += 1;
        if let Some(slot) = self.slots.remove(&s) {
            if slot.connecting {
                self.connecting -= 1;
            }
            if self.errors <= 5 {
                eprintln!(
                    "ustack-bench: client: a connection of {} failed ({slot:?})",
                    self.workload
                );
            }
        }
        if let Workload::UdpReqResp { .. } = self.workload {
            return;
        }
        net.tcp_close(s);
        self.to_open += 1;
    }

    fn check_budget(&mut self, now: Duration) {
        match self.budget {
            Budget::Time { warmup, window } => match self.start_mark {
                None if now >= warmup => self.start_mark = Some((now, self.count)),
                Some((t0, c0)) if now.saturating_sub(t0) >= window => {
                    self.result = Some(Measure {
                        units: self.count - c0,
                        elapsed: now - t0,
                        errors: self.errors,
                    });
                }
                _ => {}
            },
            Budget::Count(n) => {
                if self.count >= n {
                    self.result = Some(Measure {
                        units: self.count,
                        elapsed: now,
                        errors: self.errors,
                    });
                }
            }
            Budget::Settle(settle) => {
                let Workload::IdleConns { count } = self.workload else {
                    return;
                };
                if self.count as usize >= count && self.all_up_at.is_none() {
                    self.all_up_at = Some(now);
                }
                if let Some(t) = self.all_up_at {
                    if now.saturating_sub(t) >= settle {
                        self.result = Some(Measure {
                            units: self.count,
                            elapsed: t,
                            errors: self.errors,
                        });
                    }
                }
            }
        }
    }
}

/// What a server socket is.
#[derive(Debug)]
enum Role {
    Listener(u16),
    Udp,
    /// Echo: bytes read and not yet written back.
    Echo(Vec<u8>),
    Source,
    /// One-shot: request bytes read so far.
    OneShot(usize),
}

/// Counters of the server.
#[derive(Debug, Default, Clone, Copy)]
pub struct ServerStats {
    pub accepted: u64,
    pub closed: u64,
    pub errors: u64,
}

/// The server: echo, source, one-shot and UDP echo (see the module doc).
pub struct Server<S> {
    roles: SockMap<S, Role>,
    ready: Vec<S>,
    buf: Vec<u8>,
    chunk: Vec<u8>,
    pub stats: ServerStats,
}

impl<S: SockKey> Server<S> {
    /// Opens the listeners and the UDP socket from `base_port`, on every
    /// address of `family`.
    pub fn new<N: Net<Sock = S>>(
        net: &mut N,
        family: Family,
        base_port: u16,
    ) -> io::Result<Server<S>> {
        let at = |port| SocketAddr::new(family.unspecified(), port);
        let mut roles = SockMap::default();
        for off in [ECHO, SOURCE, ONESHOT, ECHO2] {
            let l = net.tcp_listen(at(base_port + off))?;
            roles.insert(l, Role::Listener(off));
        }
        roles.insert(net.udp_bind(at(base_port + ECHO))?, Role::Udp);
        Ok(Server {
            roles,
            ready: Vec::new(),
            buf: vec![0u8; CHUNK],
            chunk: vec![b's'; CHUNK],
            stats: ServerStats::default(),
        })
    }

    /// Opens one more echo listener, at `base_port + offset` (for idle
    /// connections spread over many ports).
    pub fn listen_echo<N: Net<Sock = S>>(
        &mut self,
        net: &mut N,
        family: Family,
        base_port: u16,
        offset: u16,
    ) -> io::Result<()> {
        let l = net.tcp_listen(SocketAddr::new(family.unspecified(), base_port + offset))?;
        self.roles.insert(l, Role::Listener(ECHO));
        Ok(())
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        self.roles
            .values()
            .filter(|r| !matches!(r, Role::Listener(_) | Role::Udp))
            .count()
    }

    /// Serves the ready sockets; returns whether there were any.
    pub fn step<N: Net<Sock = S>>(&mut self, net: &mut N) -> bool {
        self.ready.clear();
        net.ready(&mut self.ready);
        // By index: serving needs `self` whole, and the list stays put
        // (serving never touches it).
        for i in 0..self.ready.len() {
            self.serve(net, self.ready[i]);
        }
        !self.ready.is_empty()
    }

    fn serve<N: Net<Sock = S>>(&mut self, net: &mut N, s: S) {
        match self.roles.get(&s) {
            None => {}
            Some(&Role::Listener(off)) => self.accept(net, s, off),
            Some(Role::Udp) => self.udp_echo(net, s),
            Some(Role::Echo(pending)) => {
                let pending = !pending.is_empty();
                self.echo(net, s, pending)
            }
            Some(Role::Source) => self.source(net, s),
            Some(Role::OneShot(_)) => self.oneshot(net, s),
        }
    }

    fn accept<N: Net<Sock = S>>(&mut self, net: &mut N, l: S, off: u16) {
        loop {
            match net.tcp_accept(l) {
                Ok(c) => {
                    self.stats.accepted += 1;
                    let role = match off {
                        ECHO | ECHO2 => Role::Echo(Vec::new()),
                        SOURCE => Role::Source,
                        _ => Role::OneShot(0),
                    };
                    self.roles.insert(c, role);
                    // Data may have come with the handshake, before the
                    // connection was ours to be told about.
                    self.serve(net, c);
                }
                Err(e) if would_block(&e) => return,
                Err(_) => {
                    self.stats.errors += 1;
                    return;
                }
            }
        }
    }

    fn close<N: Net<Sock = S>>(&mut self, net: &mut N, s: S, error: bool) {
        self.roles.remove(&s);
        net.tcp_close(s);
        self.stats.closed += 1;
        if error {
            self.stats.errors += 1;
        }
    }

    /// Echoes what `s` has; `pending`: bytes wait from before.
    fn echo<N: Net<Sock = S>>(&mut self, net: &mut N, s: S, mut pending: bool) {
        loop {
            // What could not be written before goes first.
            if pending {
                if let Some(Role::Echo(queued)) = self.roles.get_mut(&s) {
                    if !queued.is_empty() {
                        match net.tcp_send(s, queued) {
                            Ok(n) => {
                                queued.drain(..n);
                                if !queued.is_empty() {
                                    return;
                                }
                            }
                            Err(e) if would_block(&e) => return,
                            Err(_) => return self.close(net, s, true),
                        }
                    }
                }
                pending = false;
            }
            let n = match net.tcp_recv(s, &mut self.buf) {
                Ok(0) => return self.close(net, s, false),
                Ok(n) => n,
                Err(e) if would_block(&e) => return,
                Err(_) => return self.close(net, s, true),
            };
            let sent = match net.tcp_send(s, &self.buf[..n]) {
                Ok(k) => k,
                Err(e) if would_block(&e) => 0,
                Err(_) => return self.close(net, s, true),
            };
            if sent < n {
                if let Some(Role::Echo(pending)) = self.roles.get_mut(&s) {
                    pending.extend_from_slice(&self.buf[sent..n]);
                }
                pending = true;
            }
            if n < self.buf.len() {
                // A short read drained the socket (epoll(7)); the next bytes
                // bring a new event.  (A client's FIN that came with its
                // last request is then seen only when the server stops:
                // clients close between runs, not in them.)
                return;
            }
        }
    }

    fn source<N: Net<Sock = S>>(&mut self, net: &mut N, s: S) {
        // The client never writes; a read tells of its close.
        match net.tcp_recv(s, &mut self.buf) {
            Ok(0) => return self.close(net, s, false),
            Ok(_) => {}
            Err(e) if would_block(&e) => {}
            Err(_) => return self.close(net, s, true),
        }
        loop {
            match net.tcp_send(s, &self.chunk) {
                Ok(_) => {}
                Err(e) if would_block(&e) => return,
                Err(_) => return self.close(net, s, true),
            }
        }
    }

    fn oneshot<N: Net<Sock = S>>(&mut self, net: &mut N, s: S) {
        loop {
            match net.tcp_recv(s, &mut self.buf) {
                Ok(0) => return self.close(net, s, true),
                Ok(n) => {
                    let Some(Role::OneShot(got)) = self.roles.get_mut(&s) else {
                        return;
                    };
                    *got += n;
                    let got = *got;
                    if got >= MSG {
                        let ok = matches!(net.tcp_send(s, &self.buf[..MSG]), Ok(MSG));
                        return self.close(net, s, !ok || got > MSG);
                    }
                }
                Err(e) if would_block(&e) => return,
                Err(_) => return self.close(net, s, true),
            }
        }
    }

    fn udp_echo<N: Net<Sock = S>>(&mut self, net: &mut N, s: S) {
        loop {
            match net.udp_recv_from(s, &mut self.buf) {
                Ok((n, from)) => {
                    if net.udp_send_to(s, &self.buf[..n], from).is_err() {
                        self.stats.errors += 1;
                    }
                }
                Err(e) if would_block(&e) => return,
                Err(_) => {
                    self.stats.errors += 1;
                    return;
                }
            }
        }
    }
}
