//! The applications on the simulated hosts: endpoints that stream seeded
//! bytes and check what they receive, listeners that accept, and the
//! schedule of connects and aborts.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::net::SocketAddr;

use stack::{Duration, Instant, Shutdown, SocketError, SocketHandle, TcpState};

use crate::net::{App, Net};

/// Bytes `8 * w .. 8 * w + 8` of stream `key`.
fn stream_word(key: u64, w: u64) -> [u8; 8] {
    let mut z = (key ^ w.wrapping_mul(0x9E37_79B9_7F4A_7C15)).wrapping_add(w);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)).to_le_bytes()
}

/// Bytes `offset..offset + buf.len()` of stream `key`: any part of a
/// stream can be made or checked alone.
fn fill_stream(key: u64, offset: u64, buf: &mut [u8]) {
    let mut i = 0;
    while i < buf.len() {
        let at = offset + i as u64;
        let word = stream_word(key, at / 8);
        let from = (at % 8) as usize;
        let n = (8 - from).min(buf.len() - i);
        buf[i..i + n].copy_from_slice(&word[from..from + n]);
        i += n;
    }
}

/// What an endpoint does once it has queued all its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterSend {
    /// shutdown(SHUT_WR), then read to the end, then close.
    Shutdown,
    /// close() at once, with the data still queued: the stack must still
    /// deliver it and the FIN.
    Close,
    /// Nothing: close once the peer's stream ends (a client that lets
    /// the server close first).
    Wait,
}

/// How an endpoint resets its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbortHow {
    /// `tcp_abort`.
    Abort,
    /// SO_LINGER with a zero timeout, then close.
    LingerZero,
    /// Close with received data unread (RFC 2525 2.17), if there is any.
    CloseUnread,
}

/// How an endpoint is expected to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Every byte both ways, EOF, close.
    Clean,
    /// The connection attempt is refused (RST to the SYN).
    Refused,
    /// The peer aborts: a prefix of the data, then ECONNRESET.
    Reset,
}

/// One side of a connection.
pub struct Endpoint {
    pub name: String,
    pub host: usize,
    pub sock: Option<SocketHandle>,
    pub local: Option<SocketAddr>,
    /// The other side's endpoint, if this is a connection between two.
    pub peer: Option<usize>,

    pub tx_key: u64,
    /// Bytes to send; `u64::MAX` is endless.
    pub tx_total: u64,
    pub tx_sent: u64,
    /// Request/response: message ends (cumulative); the next message goes
    /// once the echo of the previous one is back.
    pub tx_gates: Vec<u64>,
    pub after_send: AfterSend,
    /// Start sending only after the peer's EOF (half-close, response).
    pub send_after_eof: bool,
    /// Start sending only after the whole request arrived (a server that
    /// answers, then closes first).
    pub send_after_rx: bool,
    pub shut_wr: bool,
    /// Everything was sent (and shut down, unless `AfterSend::Wait`).
    pub tx_finished: bool,
    pub nodelay: bool,
    /// SO_KEEPALIVE (finds a peer that is gone).
    pub keepalive: bool,
    /// A connection a late duplicate made again after it ended.
    pub ghost: bool,

    pub rx_key: u64,
    pub rx_total: u64,
    pub rx_got: u64,
    pub rx_eof: bool,
    /// Send back everything read (an echo server).
    pub echo: bool,
    echo_pending: VecDeque<u8>,
    /// A slow reader: at most this many bytes, then a pause.
    pub read_budget: Option<(u64, Duration)>,
    budget_left: u64,
    pub wake: Option<Instant>,

    pub expect: Expect,
    /// Errors that may end the connection instead (the run checks why).
    pub tolerate: Vec<SocketError>,
    /// The peer reaches TIME_WAIT's counterpart: after our FIN was
    /// acknowledged the EOF must find us in TIME_WAIT.
    pub expect_time_wait: bool,
    pub time_wait_at: Option<Instant>,
    pub error: Option<SocketError>,
    pub established_at: Option<Instant>,
    /// Abort this long after the connection is established, or once this
    /// many bytes went both ways, whichever comes first.
    pub abort_after: Option<(Duration, u64)>,
    pub abort_how: AbortHow,
    abort_at: Option<Instant>,
    pub aborted: bool,
    pub closed: bool,
    /// A log of the endpoint's milestones, for the report.
    pub log: Vec<String>,
}

impl Endpoint {
    pub fn new(name: impl Into<String>, host: usize) -> Self {
        Endpoint {
            name: name.into(),
            host,
            sock: None,
            local: None,
            peer: None,
            tx_key: 0,
            tx_total: 0,
            tx_sent: 0,
            tx_gates: Vec::new(),
            after_send: AfterSend::Shutdown,
            send_after_eof: false,
            send_after_rx: false,
            shut_wr: false,
            tx_finished: false,
            nodelay: false,
            keepalive: false,
            ghost: false,
            rx_key: 0,
            rx_total: 0,
            rx_got: 0,
            rx_eof: false,
            echo: false,
            echo_pending: VecDeque::new(),
            read_budget: None,
            budget_left: 0,
            wake: None,
            expect: Expect::Clean,
            tolerate: Vec::new(),
            expect_time_wait: false,
            time_wait_at: None,
            error: None,
            established_at: None,
            abort_after: None,
            abort_how: AbortHow::Abort,
            abort_at: None,
            aborted: false,
            closed: false,
            log: Vec::new(),
        }
    }

    fn logf(&mut self, now: Instant, what: String) {
        self.log.push(format!("{now} {what}"));
    }

    fn tx_limit(&self) -> u64 {
        if self.echo {
            return 0;
        }
        match self.tx_gates.iter().find(|&&g| g > self.rx_got) {
            Some(&g) if !self.tx_gates.is_empty() => g.min(self.tx_total),
            _ => self.tx_total,
        }
    }

    /// The application may send now.
    fn may_send(&self) -> bool {
        (!self.send_after_eof || self.rx_eof)
            && (!self.send_after_rx || self.rx_got >= self.rx_total)
    }

    fn tx_done(&self) -> bool {
        if self.echo {
            self.rx_eof && self.echo_pending.is_empty()
        } else {
            self.tx_sent >= self.tx_total
        }
    }

    /// An error from a socket call: expected or a failure.
    fn on_error(&mut self, net: &mut Net, e: SocketError, call: &str) -> Result<(), String> {
        let ok = matches!(
            (self.expect, e),
            (Expect::Reset, SocketError::ConnectionReset)
                | (Expect::Refused, SocketError::ConnectionRefused)
        ) || self.tolerate.contains(&e);
        if !ok {
            return Err(format!(
                "{}: {call} failed: {e:?} (expected {:?})",
                self.name, self.expect
            ));
        }
        self.logf(net.now, format!("{call}: {e:?}"));
        self.error = Some(e);
        if let Some(s) = self.sock {
            net.close(self.host, s)
                .map_err(|e| format!("{}: close after error: {e:?}", self.name))?;
        }
        self.closed = true;
        Ok(())
    }

    /// Does all the endpoint can do now.  Returns whether it did anything.
    pub fn pump(&mut self, net: &mut Net) -> Result<bool, String> {
        let Some(s) = self.sock else { return Ok(false) };
        if self.closed {
            return Ok(false);
        }
        let mut did = false;
        if self.established_at.is_none() {
            did = self.check_connected(net, s)?;
            if self.established_at.is_none() || self.closed {
                return Ok(did);
            }
        }
        if self.abort_due(net.now) {
            self.reset(net, s)?;
            return Ok(true);
        }
        loop {
            let mut progress = self.read(net, s)?;
            if !self.closed {
                progress |= self.write(net, s)?;
            }
            if !self.closed {
                progress |= self.finish(net, s)?;
            }
            if !progress || self.closed {
                return Ok(did || progress);
            }
            did = true;
        }
    }

    /// Before the handshake completed: has it, or has it failed?
    fn check_connected(&mut self, net: &mut Net, s: SocketHandle) -> Result<bool, String> {
        let h = self.host;
        match net.state(h, s) {
            Ok(TcpState::SynSent | TcpState::SynReceived) => Ok(false),
            Ok(TcpState::Closed) => {
                let e = net.take_error(h, s).unwrap_or(SocketError::NotConnected);
                self.on_error(net, e, "connect")?;
                Ok(true)
            }
            Ok(st) => {
                if self.expect == Expect::Refused {
                    return Err(format!("{}: connected ({st}), expected refusal", self.name));
                }
                self.established_at = Some(net.now);
                self.logf(net.now, format!("established ({st})"));
                if self.nodelay {
                    net.set_nodelay(h, s);
                }
                if self.keepalive {
                    net.set_keepalive(h, s);
                }
                self.abort_at = self.abort_after.map(|(d, _)| net.now + d);
                Ok(true)
            }
            Err(e) => Err(format!("{}: state: {e:?}", self.name)),
        }
    }

    /// Ends the connection with a reset, the way `abort_how` says.
    fn reset(&mut self, net: &mut Net, s: SocketHandle) -> Result<(), String> {
        let h = self.host;
        let unread = net.stack(h).tcp_recv_queued(s).unwrap_or(0);
        let how = match self.abort_how {
            AbortHow::CloseUnread if unread == 0 => AbortHow::Abort,
            how => how,
        };
        self.logf(
            net.now,
            format!(
                "{how:?} (sent {}, got {}, {unread} unread)",
                self.tx_sent, self.rx_got
            ),
        );
        let r = match how {
            AbortHow::Abort => net.abort(h, s),
            AbortHow::LingerZero => net.set_linger_zero(h, s).and_then(|()| net.close(h, s)),
            AbortHow::CloseUnread => net.close(h, s),
        };
        r.map_err(|e| format!("{}: {how:?}: {e:?}", self.name))?;
        if net.stack(h).tcp_state(s).is_ok() {
            return Err(format!("{}: the socket outlived {how:?}", self.name));
        }
        self.aborted = true;
        self.closed = true;
        Ok(())
    }

    fn abort_due(&self, now: Instant) -> bool {
        match (self.abort_at, self.abort_after) {
            (Some(at), Some((_, bytes))) => now >= at || self.tx_sent + self.rx_got >= bytes,
            _ => false,
        }
    }

    /// Reads what there is, unless paused or holding too much to echo.
    fn read(&mut self, net: &mut Net, s: SocketHandle) -> Result<bool, String> {
        let mut buf = [0u8; 16384];
        let mut progress = false;
        while !self.rx_eof && self.echo_pending.len() < 65536 {
            let mut want = buf.len();
            if let Some((_, pause)) = self.read_budget {
                if self.budget_left == 0 {
                    if self.wake.is_none_or(|w| w <= net.now) {
                        self.wake = Some(net.now + pause);
                    }
                    break;
                }
                want = want.min(self.budget_left as usize);
            }
            match net.recv(self.host, s, &mut buf[..want]) {
                Ok(0) => {
                    self.on_eof(net, s)?;
                    progress = true;
                }
                Ok(n) => {
                    self.on_data(&buf[..n])?;
                    progress = true;
                }
                Err(SocketError::WouldBlock) => break,
                Err(e) => {
                    self.on_error(net, e, "recv")?;
                    return Ok(true);
                }
            }
        }
        Ok(progress)
    }

    /// Checks received bytes against the stream.
    fn on_data(&mut self, data: &[u8]) -> Result<(), String> {
        let n = data.len() as u64;
        if self.rx_got + n > self.rx_total {
            return Err(format!(
                "{}: {} bytes more than the {} expected",
                self.name,
                self.rx_got + n - self.rx_total,
                self.rx_total
            ));
        }
        let mut expect = [0u8; 16384];
        let expect = &mut expect[..data.len()];
        fill_stream(self.rx_key, self.rx_got, expect);
        if let Some(at) = (0..data.len()).find(|&i| data[i] != expect[i]) {
            return Err(format!(
                "{}: byte {} of the stream is {:#04x}, expected {:#04x}",
                self.name,
                self.rx_got + at as u64,
                data[at],
                expect[at]
            ));
        }
        self.rx_got += n;
        if self.read_budget.is_some() {
            self.budget_left -= n;
        }
        if self.echo {
            self.echo_pending.extend(data);
        }
        Ok(())
    }

    /// The end of the peer's stream: all of it came, and the state agrees.
    fn on_eof(&mut self, net: &mut Net, s: SocketHandle) -> Result<(), String> {
        self.rx_eof = true;
        let st = net
            .state(self.host, s)
            .map_err(|e| format!("{}: {e:?}", self.name))?;
        self.logf(net.now, format!("EOF after {} bytes ({st})", self.rx_got));
        if self.rx_got != self.rx_total && self.rx_total != u64::MAX {
            return Err(format!(
                "{}: EOF after {} of {} bytes",
                self.name, self.rx_got, self.rx_total
            ));
        }
        if self.expect == Expect::Reset {
            return Err(format!("{}: EOF, expected a reset", self.name));
        }
        let slow = self.read_budget.is_some();
        let ok = if !self.shut_wr {
            st == TcpState::CloseWait
        } else if self.expect_time_wait {
            // A slow reader may find TIME_WAIT over before it reads the end.
            st == TcpState::TimeWait || (st == TcpState::Closed && slow)
        } else {
            // Both sides shut down: either may have been first.  A paused
            // reader may shut down before it reads the FIN that is waiting.
            matches!(
                st,
                TcpState::TimeWait | TcpState::Closing | TcpState::Closed
            ) || (st == TcpState::LastAck && slow)
        };
        if !ok {
            return Err(format!(
                "{}: in {st} at EOF (write side shut: {})",
                self.name, self.shut_wr
            ));
        }
        if st == TcpState::TimeWait {
            self.time_wait_at = Some(net.now);
        }
        Ok(())
    }

    /// Sends what the send buffer takes: the stream, or what to echo.
    fn write(&mut self, net: &mut Net, s: SocketHandle) -> Result<bool, String> {
        let mut buf = [0u8; 16384];
        let mut progress = false;
        let may_send = self.may_send();
        while may_send && !self.tx_finished {
            let n = if self.echo {
                let (a, _) = self.echo_pending.as_slices();
                let n = a.len().min(buf.len());
                buf[..n].copy_from_slice(&a[..n]);
                n
            } else {
                let limit = self.tx_limit();
                let space = net.stack(self.host).tcp_send_space(s).unwrap_or(0);
                let n = (limit.saturating_sub(self.tx_sent) as usize)
                    .min(buf.len())
                    .min(space.max(1));
                fill_stream(self.tx_key, self.tx_sent, &mut buf[..n]);
                n
            };
            if n == 0 {
                break;
            }
            match net.send(self.host, s, &buf[..n]) {
                Ok(0) => return Err(format!("{}: send took nothing", self.name)),
                Ok(n) => {
                    progress = true;
                    if self.echo {
                        self.echo_pending.drain(..n);
                    } else {
                        self.tx_sent += n as u64;
                    }
                }
                Err(SocketError::WouldBlock) => break,
                Err(e) => {
                    self.on_error(net, e, "send")?;
                    return Ok(true);
                }
            }
        }
        Ok(progress)
    }

    /// Shuts down or closes once everything is sent (and received).
    fn finish(&mut self, net: &mut Net, s: SocketHandle) -> Result<bool, String> {
        let h = self.host;
        let may_send = self.may_send();
        if may_send && !self.tx_finished && self.tx_done() {
            self.tx_finished = true;
            self.shut_wr = self.after_send != AfterSend::Wait;
            match self.after_send {
                AfterSend::Shutdown => {
                    self.logf(net.now, "shutdown(write)".into());
                    net.shutdown(h, s, Shutdown::Write)
                        .map_err(|e| format!("{}: shutdown: {e:?}", self.name))?;
                }
                AfterSend::Close => {
                    self.logf(net.now, "close with data queued".into());
                    net.close(h, s)
                        .map_err(|e| format!("{}: close: {e:?}", self.name))?;
                    self.closed = true;
                }
                AfterSend::Wait => {}
            }
            return Ok(true);
        }
        if self.tx_finished && self.rx_eof {
            self.logf(net.now, "close".into());
            net.close(h, s)
                .map_err(|e| format!("{}: close: {e:?}", self.name))?;
            self.closed = true;
            return Ok(true);
        }
        Ok(false)
    }

    /// A slow reader: `bytes` at a time, then a pause of `pause`.
    pub fn set_read_budget(&mut self, bytes: u64, pause: Duration) {
        self.read_budget = Some((bytes.max(1), pause));
        self.budget_left = bytes.max(1);
    }

    fn next_wake(&self) -> Option<Instant> {
        if self.closed {
            return None;
        }
        [self.wake, self.abort_at].into_iter().flatten().min()
    }

    /// Its wake-up time came: refill the read budget, maybe abort.
    fn on_wake(&mut self, now: Instant) -> bool {
        let mut woke = self.abort_at.is_some_and(|t| t <= now) && !self.closed;
        if self.wake.is_some_and(|w| w <= now) {
            self.wake = None;
            if let Some((b, _)) = self.read_budget {
                self.budget_left = b;
            }
            woke = true;
        }
        woke
    }

    pub fn describe(&self, net: &Net) -> String {
        let mut s = format!(
            "{} (host {}): sent {}/{} got {}/{} eof {} shut_wr {} closed {} error {:?}",
            self.name,
            if self.host == 0 { 'a' } else { 'b' },
            self.tx_sent,
            if self.tx_total == u64::MAX {
                "inf".to_string()
            } else {
                self.tx_total.to_string()
            },
            self.rx_got,
            if self.rx_total == u64::MAX {
                "inf".to_string()
            } else {
                self.rx_total.to_string()
            },
            self.rx_eof,
            self.shut_wr,
            self.closed,
            self.error,
        );
        if let Some((b, p)) = self.read_budget {
            let _ = write!(s, " slow reader {b} B per {p:?}");
        }
        if let Some(sock) = self.sock {
            if let Ok(i) = net.info(self.host, sock) {
                let _ = write!(
                    s,
                    "\n      {:?} cwnd {} ssthresh {} snd_wnd {} rcv_wnd {} unacked {} sacked {} rto {:?} srtt {:?} retrans {} (total {})",
                    i.state.unwrap_or_default(),
                    i.cwnd,
                    i.ssthresh,
                    i.snd_wnd,
                    i.rcv_wnd,
                    i.unacked,
                    i.sacked,
                    i.rto,
                    i.srtt,
                    i.retransmits,
                    i.total_retrans
                );
            }
        }
        for l in self.log.iter().rev().take(6).rev() {
            let _ = write!(s, "\n      {l}");
        }
        s
    }
}

/// A listening socket and how fast its application accepts.
pub struct Listener {
    pub host: usize,
    pub port: u16,
    pub backlog: usize,
    pub sock: Option<SocketHandle>,
    /// Accept at most one connection per this long (a busy server).
    pub accept_every: Option<Duration>,
    next_accept: Instant,
}

impl Listener {
    pub fn new(host: usize, port: u16, backlog: usize) -> Self {
        Listener {
            host,
            port,
            backlog,
            sock: None,
            accept_every: None,
            next_accept: Instant::ZERO,
        }
    }
}

/// A connect to make: endpoint `ep` of host `ep.host` to `remote` at `at`;
/// `server` is the endpoint the accepting side gives the connection.
pub struct Connect {
    pub at: Instant,
    pub ep: usize,
    pub remote: SocketAddr,
    /// A fixed local address (simultaneous open), else an ephemeral port.
    pub local: Option<SocketAddr>,
    /// Connect only once this endpoint has finished (one after another).
    pub after: Option<usize>,
    pub server: Option<usize>,
    pub done: bool,
}

/// The whole application of a scenario.
#[derive(Default)]
pub struct Flows {
    pub eps: Vec<Endpoint>,
    pub listeners: Vec<Listener>,
    pub connects: Vec<Connect>,
    /// Sockets open on each host before the flows (the listeners).
    pub baseline: [usize; 2],
    /// The time each host got back to its baseline.
    pub quiet_at: [Option<Instant>; 2],
}

impl Flows {
    pub fn add(&mut self, ep: Endpoint) -> usize {
        self.eps.push(ep);
        self.eps.len() - 1
    }

    /// Opens the listeners; call once the network exists.
    pub fn start(&mut self, net: &mut Net) {
        for l in &mut self.listeners {
            l.sock = Some(net.listen(l.host, l.port, l.backlog));
        }
        for h in 0..2 {
            self.baseline[h] = net.stack(h).socket_count();
        }
    }

    /// Endpoint `i` has nothing left to do: closed, or never accepted a
    /// connection its peer aborted (the stack drops it alone).
    pub fn finished(&self, i: usize) -> bool {
        let e = &self.eps[i];
        e.closed
            || (e.sock.is_none()
                && e.peer
                    .is_some_and(|p| self.eps[p].aborted || self.eps[p].error.is_some()))
    }

    fn endpoint_of(&self, host: usize, sock: SocketHandle) -> Option<usize> {
        self.eps
            .iter()
            .position(|e| e.host == host && e.sock == Some(sock) && !e.closed)
    }
}

impl App for Flows {
    fn step(&mut self, net: &mut Net) -> Result<bool, String> {
        let mut did = false;
        let now = net.now;
        for i in 0..self.connects.len() {
            let c = &self.connects[i];
            if c.done || c.at > now || c.after.is_some_and(|a| !self.finished(a)) {
                continue;
            }
            let (ep, remote, local) = (c.ep, c.remote, c.local);
            did = true;
            let host = self.eps[ep].host;
            let s = match net.connect(host, remote, local) {
                Ok(s) => s,
                Err(SocketError::AddrInUse) if local.is_some() => {
                    // The last connection from this port is not gone yet.
                    self.connects[i].at = now + Duration::from_millis(100);
                    continue;
                }
                Err(e) => return Err(format!("{}: connect: {e:?}", self.eps[ep].name)),
            };
            self.connects[i].done = true;
            let local = net.stack(host).tcp_local_addr(s).ok();
            let e = &mut self.eps[ep];
            e.sock = Some(s);
            e.local = local;
            e.logf(now, format!("connect from {local:?} to {remote}"));
            e.pump(net)?;
        }
        for h in 0..2 {
            for sock in net.ready(h) {
                if let Some(li) = self
                    .listeners
                    .iter()
                    .position(|l| l.host == h && l.sock == Some(sock))
                {
                    did |= self.accept(net, li)?;
                } else if let Some(i) = self.endpoint_of(h, sock) {
                    did |= self.eps[i].pump(net)?;
                }
            }
        }
        for li in 0..self.listeners.len() {
            if self.listeners[li].accept_every.is_some() && self.listeners[li].next_accept <= now {
                did |= self.accept(net, li)?;
            }
        }
        for i in 0..self.eps.len() {
            if self.eps[i].on_wake(now) {
                did = true;
                self.eps[i].pump(net)?;
            }
        }
        for h in 0..2 {
            if self.quiet_at[h].is_none()
                && (0..self.eps.len()).all(|i| self.eps[i].host != h || self.finished(i))
                && net.stack(h).socket_count() == self.baseline[h]
            {
                self.quiet_at[h] = Some(now);
            }
        }
        Ok(did)
    }

    fn done(&self, _net: &Net) -> bool {
        (0..self.eps.len()).all(|i| self.finished(i))
            && self.connects.iter().all(|c| c.done)
            && self.quiet_at.iter().all(Option::is_some)
    }

    fn next_wake(&self, now: Instant) -> Option<Instant> {
        let connects = self.connects.iter().filter(|c| !c.done).map(|c| c.at);
        let wakes = self.eps.iter().filter_map(Endpoint::next_wake);
        let accepts = self
            .listeners
            .iter()
            .filter(|l| l.accept_every.is_some())
            .map(|l| l.next_accept);
        connects
            .chain(wakes)
            .chain(accepts)
            .filter(|&t| t > now)
            .min()
    }
}

impl Flows {
    fn accept(&mut self, net: &mut Net, li: usize) -> Result<bool, String> {
        let now = net.now;
        let l = &self.listeners[li];
        let (host, port, lsock) = (l.host, l.port, l.sock.expect("listening"));
        if l.accept_every.is_some() && l.next_accept > now {
            return Ok(false);
        }
        let mut did = false;
        loop {
            let (s, peer) = match net.hosts[host].stack.tcp_accept(lsock) {
                Ok(x) => x,
                Err(SocketError::WouldBlock) => break,
                Err(e) => return Err(format!("accept on port {port}: {e:?}")),
            };
            did = true;
            // The first connection from this address (ports are used again
            // one connection after another) the server has not taken yet.
            let servers: Vec<usize> = self
                .connects
                .iter()
                .filter(|c| self.eps[c.ep].local == Some(peer))
                .filter_map(|c| c.server)
                .collect();
            let server = servers
                .iter()
                .copied()
                .find(|&s| self.eps[s].sock.is_none())
                .or(servers.last().copied())
                .ok_or_else(|| format!("accepted a connection from unknown {peer}"))?;
            let server = if self.eps[server].sock.is_none() {
                server
            } else if self.eps[server].closed {
                // A late duplicate of the handshake makes the connection
                // again after the server closed it: an old SYN whose
                // SYN-ACK the client's TIME-WAIT happens to ACK, or an ACK
                // that a SYN cookie stands for.  It is half open; the
                // client's stack resets it, or keep-alive finds it out.
                let first = &self.eps[server];
                let mut g = Endpoint::new(format!("{}.ghost", first.name), host);
                // It may get the client's data again, from the start.
                g.rx_key = first.rx_key;
                g.rx_total = first.rx_total;
                g.send_after_eof = true;
                g.keepalive = true;
                g.ghost = true;
                g.tolerate = vec![SocketError::ConnectionReset, SocketError::TimedOut];
                self.add(g)
            } else {
                return Err(format!(
                    "{}: accepted twice (from {peer})",
                    self.eps[server].name
                ));
            };
            let e = &mut self.eps[server];
            e.sock = Some(s);
            e.logf(now, format!("accepted from {peer}"));
            e.pump(net)?;
            if let Some(every) = self.listeners[li].accept_every {
                self.listeners[li].next_accept = now + every;
                break;
            }
        }
        Ok(did)
    }

    pub fn describe(&self, net: &Net) -> String {
        let mut s = String::new();
        for e in &self.eps {
            let _ = writeln!(s, "    {}", e.describe(net));
        }
        for h in 0..2 {
            let _ = writeln!(
                s,
                "    host {}: {} sockets open (baseline {}), quiet at {:?}",
                if h == 0 { 'a' } else { 'b' },
                net.stack(h).socket_count(),
                self.baseline[h],
                self.quiet_at[h].map(|t| t.to_string())
            );
        }
        s
    }
}
