//! A small HTTP/1.1 server on ustack (RFC 9110, RFC 9112).
//!
//! - `GET /` (or `/index.html`): the 600-byte index page.
//! - `GET /bytes/N`: N bytes of the [`body`](crate::http::body) pattern,
//!   generated as they are sent (N up to [`ServerConfig::max_bytes`]).
//! - `HEAD` of both; 404 for other paths, 405 for the other standard
//!   methods, 501 for unknown ones, 400 for malformed requests, 414/431
//!   for heads over the limit, 413 for request bodies over it.
//!
//! Connections are persistent by default in HTTP/1.1 and closed after the
//! response in HTTP/1.0 unless asked otherwise; `Connection: close` is
//! honoured; pipelined requests are answered in order.  Every response
//! has a Content-Length.
//!
//! Memory per connection is bounded: the unparsed input (at most
//! [`IN_MAX`]) and the response head or small body not yet taken by TCP.
//! A connection is not read while its response is being sent, so a client
//! that pipelines faster than it reads waits in TCP's window.

use core::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::collections::HashMap;
use std::fmt::Write as _;

use runtime::{AppContext, Application};
use stack::{Duration, Instant, Shutdown, SocketError, SocketHandle, Stack};

use crate::http::body::{fill_pattern, index_page};
use crate::http::date::DateCache;
use crate::http::parse::{parse_request, Limits, Method, Parse, Request, Version};
use crate::http::status::Status;
use crate::ready::ReadySet;

/// Unparsed input a connection may hold.
pub const IN_MAX: usize = 16 * 1024;
/// Responses are batched (pipelining) until this much waits for TCP.
const OUT_SOFT: usize = 16 * 1024;
/// Bytes moved per connection per turn before the others get their turn.
const TURN_BUDGET: usize = 256 * 1024;
const ACCEPT_BUDGET: usize = 256;
/// How long a closing connection's input is still read and thrown away
/// (so that our close is not a reset that destroys the response in
/// flight, RFC 9112 9.6).
const LINGER: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The address listened on: `::` (the default) is every address,
    /// IPv4 ones too (a dual-stack listener); `0.0.0.0` every IPv4 one.
    pub addr: IpAddr,
    pub port: u16,
    pub limits: Limits,
    /// The largest N of `/bytes/N`.
    pub max_bytes: u64,
    /// A connection that moves no byte for this long is closed.
    pub idle_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            addr: IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            port: 80,
            limits: Limits::default(),
            max_bytes: 1 << 40,
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// Counters of the server.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ServerStats {
    pub accepted: u64,
    pub requests: u64,
    pub responses_2xx: u64,
    pub responses_4xx: u64,
    pub responses_5xx: u64,
    pub body_bytes: u64,
    /// Connections closed by us or by the client in order.
    pub closed: u64,
    /// Connections that ended with an error (reset, timeout).
    pub errors: u64,
    pub idle_timeouts: u64,
}

impl std::fmt::Display for ServerStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "accepted={} requests={} 2xx={} 4xx={} 5xx={} body_bytes={} closed={} errors={} idle_timeouts={}",
            self.accepted,
            self.requests,
            self.responses_2xx,
            self.responses_4xx,
            self.responses_5xx,
            self.body_bytes,
            self.closed,
            self.errors,
            self.idle_timeouts
        )
    }
}

#[derive(Debug)]
struct Conn {
    /// Received bytes not parsed yet.
    input: Vec<u8>,
    /// Request body bytes still to throw away.
    skip: u64,
    /// Response bytes not yet taken by TCP, from `out_pos`.
    out: Vec<u8>,
    out_pos: usize,
    /// A pattern body being sent: next offset, end.
    body: Option<(u64, u64)>,
    /// Close once the responses queued are sent.
    close_after: bool,
    /// The client shut its write side.
    eof: bool,
    /// Our side is shut; reading (and dropping) until the client's FIN.
    lingering: Option<Instant>,
    last_active: Instant,
}

impl Conn {
    fn new(now: Instant) -> Self {
        Conn {
            input: Vec::new(),
            skip: 0,
            out: Vec::new(),
            out_pos: 0,
            body: None,
            close_after: false,
            eof: false,
            lingering: None,
            last_active: now,
        }
    }

    fn out_pending(&self) -> usize {
        self.out.len() - self.out_pos
    }
}

enum Step {
    Idle,
    Again,
    Gone,
}

/// Why sending stopped.
enum Sent {
    Done,
    Blocked,
    Budget,
    Failed,
}

pub struct HttpServer {
    cfg: ServerConfig,
    listener: SocketHandle,
    conns: HashMap<SocketHandle, Conn>,
    ready: ReadySet,
    index: Vec<u8>,
    scratch: Vec<u8>,
    date: DateCache,
    next_sweep: Instant,
    pub stats: ServerStats,
}

impl HttpServer {
    pub fn new(stack: &mut Stack, cfg: ServerConfig) -> Result<HttpServer, SocketError> {
        let listener = stack.tcp_listen(SocketAddr::new(cfg.addr, cfg.port), 4096)?;
        Ok(HttpServer {
            cfg,
            listener,
            conns: HashMap::new(),
            ready: ReadySet::new(),
            index: index_page(),
            scratch: vec![0u8; 64 * 1024],
            date: DateCache::default(),
            next_sweep: Instant::ZERO,
            stats: ServerStats::default(),
        })
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    fn accept(&mut self, ctx: &mut AppContext<'_>) {
        for _ in 0..ACCEPT_BUDGET {
            let Ok((h, _)) = ctx.stack.tcp_accept(self.listener) else {
                return;
            };
            self.stats.accepted += 1;
            let _ = ctx.stack.tcp_set_nodelay(ctx.now, h, true, ctx.sink);
            self.conns.insert(h, Conn::new(ctx.now));
            // The request may have come before the accept.
            self.service(ctx, h);
        }
        self.ready.again(self.listener);
    }

    fn service(&mut self, ctx: &mut AppContext<'_>, h: SocketHandle) {
        let Some(mut conn) = self.conns.remove(&h) else {
            return;
        };
        match self.drive(ctx, h, &mut conn) {
            Step::Idle => {
                self.conns.insert(h, conn);
            }
            Step::Again => {
                self.conns.insert(h, conn);
                self.ready.again(h);
            }
            Step::Gone => {}
        }
    }

    /// Moves one connection as far as it goes now.
    fn drive(&mut self, ctx: &mut AppContext<'_>, h: SocketHandle, conn: &mut Conn) -> Step {
        let mut budget = TURN_BUDGET;
        loop {
            if conn.lingering.is_some() {
                return self.linger(ctx, h, conn);
            }
            let need_input = self.produce(conn);
            match self.send(ctx, h, conn, &mut budget) {
                Sent::Done => {}
                Sent::Blocked => return Step::Idle,
                Sent::Budget => return Step::Again,
                Sent::Failed => return self.fail(ctx, h),
            }
            if !need_input {
                if conn.close_after {
                    if let Some(step) = self.begin_close(ctx, h, conn) {
                        return step;
                    }
                }
                // Room for more responses now: parse on.
                continue;
            }
            if conn.eof {
                // A partial request at EOF is dropped with the connection.
                conn.close_after = true;
                if let Some(step) = self.begin_close(ctx, h, conn) {
                    return step;
                }
                continue;
            }
            if budget == 0 {
                return Step::Again;
            }
            let room = (IN_MAX - conn.input.len()).min(self.scratch.len());
            match ctx
                .stack
                .tcp_recv(ctx.now, h, &mut self.scratch[..room], ctx.sink)
            {
                Ok(0) => conn.eof = true,
                Ok(n) => {
                    conn.input.extend_from_slice(&self.scratch[..n]);
                    conn.last_active = ctx.now;
                    budget = budget.saturating_sub(n);
                }
                Err(SocketError::WouldBlock) => return Step::Idle,
                Err(_) => return self.fail(ctx, h),
            }
        }
    }

    /// Parses what it can and queues the responses.  Returns whether it
    /// stopped for want of input (rather than for room, a body being sent,
    /// or a close).
    fn produce(&mut self, conn: &mut Conn) -> bool {
        loop {
            if conn.body.is_some() || conn.close_after || conn.out_pending() >= OUT_SOFT {
                return false;
            }
            if conn.skip > 0 {
                let k = conn.skip.min(conn.input.len() as u64) as usize;
                conn.input.drain(..k);
                conn.skip -= k as u64;
                if conn.skip > 0 {
                    return true;
                }
            }
            match parse_request(&conn.input, &self.cfg.limits) {
                Parse::Incomplete => return true,
                Parse::Done { request, head_len } => {
                    conn.input.drain(..head_len);
                    conn.skip = request.content_length;
                    self.stats.requests += 1;
                    self.respond(conn, &request);
                }
                Parse::Error { status, why } => {
                    self.stats.requests += 1;
                    conn.input.clear();
                    conn.close_after = true;
                    let text = format!("{} {}: {why}\n", status.code(), status.reason());
                    self.queue(conn, status, text.as_bytes(), "text/plain", false, "", true);
                }
            }
        }
    }

    /// Queues the response to a request.
    fn respond(&mut self, conn: &mut Conn, req: &Request) {
        if !req.keep_alive {
            conn.close_after = true;
        }
        let head_only = req.method == Method::Head;
        let ka10 = req.version == Version::Http10 && req.keep_alive;
        let extra = if ka10 {
            "Connection: keep-alive\r\n"
        } else {
            ""
        };
        match &req.method {
            Method::Get | Method::Head => {}
            Method::Other { standard, .. } => {
                let (status, extra) = if *standard {
                    (Status::MethodNotAllowed, "Allow: GET, HEAD\r\n")
                } else {
                    (Status::NotImplemented, "")
                };
                let text = format!("{} {}\n", status.code(), status.reason());
                self.queue(
                    conn,
                    status,
                    text.as_bytes(),
                    "text/plain",
                    false,
                    extra,
                    false,
                );
                return;
            }
        }
        let path = req.path();
        if path == "/" || path == "/index.html" {
            let page = std::mem::take(&mut self.index);
            self.queue(
                conn,
                Status::Ok,
                &page,
                "text/html",
                head_only,
                extra,
                false,
            );
            self.index = page;
            return;
        }
        if let Some(n) = path.strip_prefix("/bytes/") {
            let len = (!n.is_empty() && n.len() <= 19 && n.bytes().all(|b| b.is_ascii_digit()))
                .then(|| n.parse::<u64>().ok())
                .flatten();
            match len {
                Some(len) if len <= self.cfg.max_bytes => {
                    self.head(conn, Status::Ok, len, "application/octet-stream", extra);
                    if !head_only && len > 0 {
                        conn.body = Some((0, len));
                    }
                    return;
                }
                Some(_) => {
                    let text = format!("400 Bad Request: N is at most {}\n", self.cfg.max_bytes);
                    self.queue(
                        conn,
                        Status::BadRequest,
                        text.as_bytes(),
                        "text/plain",
                        head_only,
                        extra,
                        false,
                    );
                    return;
                }
                None => {}
            }
        }
        self.queue(
            conn,
            Status::NotFound,
            b"404 Not Found\n",
            "text/plain",
            head_only,
            extra,
            false,
        );
    }

    /// Queues a response with a small body.
    #[allow(clippy::too_many_arguments)]
    fn queue(
        &mut self,
        conn: &mut Conn,
        status: Status,
        body: &[u8],
        ctype: &str,
        head_only: bool,
        extra: &str,
        closing: bool,
    ) {
        if closing {
            conn.close_after = true;
        }
        self.head(conn, status, body.len() as u64, ctype, extra);
        if !head_only {
            conn.out.extend_from_slice(body);
            self.stats.body_bytes += body.len() as u64;
        }
    }

    fn head(&mut self, conn: &mut Conn, status: Status, len: u64, ctype: &str, extra: &str) {
        match status.code() {
            200..=299 => self.stats.responses_2xx += 1,
            400..=499 => self.stats.responses_4xx += 1,
            _ => self.stats.responses_5xx += 1,
        }
        let mut head = String::with_capacity(160);
        let _ = write!(
            head,
            "HTTP/1.1 {} {}\r\nServer: ustack\r\nDate: {}\r\nContent-Type: {ctype}\r\nContent-Length: {len}\r\n{extra}{}\r\n",
            status.code(),
            status.reason(),
            self.date.now(),
            if conn.close_after { "Connection: close\r\n" } else { "" },
        );
        if conn.out_pos == conn.out.len() {
            conn.out.clear();
            conn.out_pos = 0;
        }
        conn.out.extend_from_slice(head.as_bytes());
    }

    /// Gives TCP the queued bytes, then the body.
    fn send(
        &mut self,
        ctx: &mut AppContext<'_>,
        h: SocketHandle,
        conn: &mut Conn,
        budget: &mut usize,
    ) -> Sent {
        while conn.out_pending() > 0 {
            match ctx
                .stack
                .tcp_send(ctx.now, h, &conn.out[conn.out_pos..], ctx.sink)
            {
                Ok(n) => {
                    conn.out_pos += n;
                    conn.last_active = ctx.now;
                    *budget = budget.saturating_sub(n);
                }
                Err(SocketError::WouldBlock) => return Sent::Blocked,
                Err(_) => return Sent::Failed,
            }
        }
        conn.out.clear();
        conn.out_pos = 0;
        while let Some((offset, end)) = conn.body {
            if *budget == 0 {
                return Sent::Budget;
            }
            let space = match ctx.stack.tcp_send_space(h) {
                Ok(0) => return Sent::Blocked,
                Ok(s) => s,
                Err(_) => return Sent::Failed,
            };
            let n = (end - offset)
                .min(space as u64)
                .min(self.scratch.len() as u64)
                .min(*budget as u64) as usize;
            fill_pattern(offset, &mut self.scratch[..n]);
            match ctx.stack.tcp_send(ctx.now, h, &self.scratch[..n], ctx.sink) {
                Ok(k) => {
                    conn.last_active = ctx.now;
                    *budget = budget.saturating_sub(k);
                    self.stats.body_bytes += k as u64;
                    let next = offset + k as u64;
                    conn.body = (next < end).then_some((next, end));
                }
                Err(SocketError::WouldBlock) => return Sent::Blocked,
                Err(_) => return Sent::Failed,
            }
        }
        Sent::Done
    }

    /// Everything queued is with TCP: close (after the client's FIN, or
    /// shut our side and linger).  `None`: go on driving.
    fn begin_close(
        &mut self,
        ctx: &mut AppContext<'_>,
        h: SocketHandle,
        conn: &mut Conn,
    ) -> Option<Step> {
        if conn.eof {
            self.stats.closed += 1;
            let _ = ctx.stack.tcp_close(ctx.now, h, ctx.sink);
            return Some(Step::Gone);
        }
        if ctx
            .stack
            .tcp_shutdown(ctx.now, h, Shutdown::Write, ctx.sink)
            .is_err()
        {
            return Some(self.fail(ctx, h));
        }
        conn.lingering = Some(ctx.now);
        None
    }

    /// Reads and drops input until the client's FIN.
    fn linger(&mut self, ctx: &mut AppContext<'_>, h: SocketHandle, conn: &mut Conn) -> Step {
        for _ in 0..16 {
            match ctx.stack.tcp_recv(ctx.now, h, &mut self.scratch, ctx.sink) {
                Ok(0) => {
                    self.stats.closed += 1;
                    let _ = ctx.stack.tcp_close(ctx.now, h, ctx.sink);
                    return Step::Gone;
                }
                Ok(_) => conn.last_active = ctx.now,
                Err(SocketError::WouldBlock) => return Step::Idle,
                Err(_) => return self.fail(ctx, h),
            }
        }
        Step::Again
    }

    fn fail(&mut self, ctx: &mut AppContext<'_>, h: SocketHandle) -> Step {
        self.stats.errors += 1;
        let _ = ctx.stack.tcp_abort(ctx.now, h, ctx.sink);
        Step::Gone
    }

    /// Closes connections that stopped moving (once a second).
    fn sweep(&mut self, ctx: &mut AppContext<'_>) {
        let now = ctx.now;
        let idle = self.cfg.idle_timeout;
        let stale: Vec<SocketHandle> = self
            .conns
            .iter()
            .filter(|(_, c)| match c.lingering {
                Some(since) => now.saturating_since(since) >= LINGER,
                None => now.saturating_since(c.last_active) >= idle,
            })
            .map(|(&h, _)| h)
            .collect();
        for h in stale {
            let Some(c) = self.conns.remove(&h) else {
                continue;
            };
            self.stats.idle_timeouts += 1;
            let quiet = c.lingering.is_none()
                && c.input.is_empty()
                && c.out_pending() == 0
                && c.body.is_none();
            if quiet {
                // An idle keep-alive connection: a normal close.
                self.stats.closed += 1;
                let _ = ctx.stack.tcp_close(ctx.now, h, ctx.sink);
            } else {
                let _ = ctx.stack.tcp_abort(ctx.now, h, ctx.sink);
            }
        }
    }
}

impl Application for HttpServer {
    fn poll(&mut self, ctx: &mut AppContext<'_>) -> bool {
        let batch = self.ready.take(ctx.stack);
        let work = !batch.is_empty();
        for &h in &batch {
            if h == self.listener {
                self.accept(ctx);
            } else {
                self.service(ctx, h);
            }
        }
        self.ready.give_back(batch);
        if ctx.now >= self.next_sweep {
            self.next_sweep = ctx.now + Duration::from_secs(1);
            self.sweep(ctx);
        }
        work
    }
}
