//! An HTTP/1.1 GET on ustack: connects (active open), sends the request
//! with `Connection: close`, reads the response head, then the body by
//! Content-Length, chunks, or until the server closes, and hands it to a
//! writer.  The application finishes when the body is complete or on the
//! first failure; [`HttpGet::outcome`] says which.

use core::net::SocketAddr;
use std::io::Write;

use runtime::{AppContext, Application};
use stack::{Duration, Instant, SocketError, SocketHandle, TcpState};

use crate::http::chunked::ChunkedDecoder;
use crate::http::response::{parse_response, Framing, ParsedResponse, ResponseHead};
use crate::http::url::Url;

/// The largest response head accepted.
const MAX_HEAD: usize = 64 * 1024;

/// Where the body goes; opened once the status is known to be 2xx.
pub type OpenOutput = Box<dyn FnMut() -> std::io::Result<Box<dyn Write>>>;

/// A finished transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub status: u16,
    pub reason: String,
    pub bytes: u64,
    pub elapsed: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Start,
    Request,
    Head,
    Body,
}

pub struct HttpGet {
    url: Url,
    /// No progress for this long is a failure.
    timeout: Duration,
    open_output: OpenOutput,
    output: Option<Box<dyn Write>>,
    phase: Phase,
    sock: Option<SocketHandle>,
    request: Vec<u8>,
    sent: usize,
    input: Vec<u8>,
    head: Option<ResponseHead>,
    chunked: ChunkedDecoder,
    received: u64,
    buf: Vec<u8>,
    started: Instant,
    last_progress: Instant,
    outcome: Option<Result<Fetched, String>>,
}

impl HttpGet {
    pub fn new(url: Url, timeout: Duration, open_output: OpenOutput) -> Self {
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: ustack-get/{}\r\nAccept: */*\r\nConnection: close\r\n\r\n",
            url.target,
            url.host,
            env!("CARGO_PKG_VERSION")
        )
        .into_bytes();
        HttpGet {
            url,
            timeout,
            open_output,
            output: None,
            phase: Phase::Start,
            sock: None,
            request,
            sent: 0,
            input: Vec::new(),
            head: None,
            chunked: ChunkedDecoder::new(),
            received: 0,
            buf: vec![0u8; 64 * 1024],
            started: Instant::ZERO,
            last_progress: Instant::ZERO,
            outcome: None,
        }
    }

    /// The result, once finished.
    pub fn outcome(&self) -> Option<&Result<Fetched, String>> {
        self.outcome.as_ref()
    }

    fn peer(&self) -> SocketAddr {
        self.url.addr
    }

    fn fail(&mut self, ctx: &mut AppContext<'_>, why: String) {
        if let Some(h) = self.sock.take() {
            let _ = ctx.stack.tcp_abort(ctx.now, h, ctx.sink);
        }
        self.output = None;
        self.outcome = Some(Err(why));
    }

    fn socket_error(&self, e: SocketError) -> String {
        let peer = self.peer();
        match e {
            SocketError::ConnectionRefused => format!("connection to {peer} refused"),
            SocketError::ConnectionReset => format!("connection reset by {peer}"),
            SocketError::TimedOut => format!("connection to {peer} timed out"),
            e => format!("{peer}: {e}"),
        }
    }

    fn succeed(&mut self, ctx: &mut AppContext<'_>) {
        if let Some(mut out) = self.output.take() {
            if let Err(e) = out.flush() {
                return self.fail(ctx, format!("cannot write the body: {e}"));
            }
        }
        if let Some(h) = self.sock.take() {
            let _ = ctx.stack.tcp_close(ctx.now, h, ctx.sink);
        }
        let head = self.head.as_ref().expect("a head before the body");
        self.outcome = Some(Ok(Fetched {
            status: head.status,
            reason: head.reason.clone(),
            bytes: self.received,
            elapsed: ctx.now.saturating_since(self.started),
        }));
    }

    /// Writes body bytes.
    fn deliver(
        output: &mut Option<Box<dyn Write>>,
        received: &mut u64,
        data: &[u8],
    ) -> Result<(), String> {
        *received += data.len() as u64;
        match output {
            Some(out) => out
                .write_all(data)
                .map_err(|e| format!("cannot write the body: {e}")),
            None => Ok(()),
        }
    }

    /// Takes received bytes; returns whether the response is complete.
    fn take(&mut self, ctx: &mut AppContext<'_>, data: &[u8]) -> Result<bool, String> {
        let mut data = data;
        let staged: Vec<u8>;
        if self.phase == Phase::Head {
            self.input.extend_from_slice(data);
            loop {
                match parse_response(&self.input, MAX_HEAD, false) {
                    ParsedResponse::Incomplete => return Ok(false),
                    ParsedResponse::Error(e) => return Err(format!("bad response: {e}")),
                    ParsedResponse::Done(head) => {
                        self.input.drain(..head.head_len);
                        if (100..200).contains(&head.status) {
                            if head.status == 101 {
                                return Err("unexpected 101 Switching Protocols".into());
                            }
                            continue; // interim response (RFC 9110 15.2)
                        }
                        if !(200..300).contains(&head.status) {
                            return Err(format!(
                                "the server answered {} {}",
                                head.status, head.reason
                            ));
                        }
                        self.output = Some(
                            (self.open_output)()
                                .map_err(|e| format!("cannot open the output: {e}"))?,
                        );
                        self.head = Some(head);
                        self.phase = Phase::Body;
                        self.last_progress = ctx.now;
                        staged = std::mem::take(&mut self.input);
                        data = &staged;
                        break;
                    }
                }
            }
        }
        let framing = self.head.as_ref().map_or(Framing::Empty, |h| h.framing);
        match framing {
            Framing::Empty => Ok(true),
            Framing::Length(n) => {
                let k = (n - self.received).min(data.len() as u64) as usize;
                Self::deliver(&mut self.output, &mut self.received, &data[..k])?;
                Ok(self.received == n)
            }
            Framing::Chunked => {
                let (output, received) = (&mut self.output, &mut self.received);
                self.chunked
                    .decode(data, &mut |b| Self::deliver(output, received, b))
                    .map_err(|e| format!("bad chunked body: {e}"))?;
                Ok(self.chunked.is_done())
            }
            Framing::UntilClose => {
                Self::deliver(&mut self.output, &mut self.received, data)?;
                Ok(false)
            }
        }
    }

    /// The server closed: complete or short?
    fn at_eof(&mut self, ctx: &mut AppContext<'_>) {
        let why = match (self.phase, self.head.as_ref().map(|h| h.framing)) {
            (Phase::Body, Some(Framing::UntilClose)) => return self.succeed(ctx),
            (Phase::Body, Some(Framing::Length(n))) => {
                format!(
                    "short body: {} of {n} bytes before the connection closed",
                    self.received
                )
            }
            (Phase::Body, _) => format!(
                "the connection closed inside the chunked body (after {} bytes)",
                self.received
            ),
            _ => "the connection closed before a response".to_string(),
        };
        self.fail(ctx, why);
    }

    fn step(&mut self, ctx: &mut AppContext<'_>) -> bool {
        let Some(h) = self.sock else {
            return false;
        };
        match self.phase {
            Phase::Start => false,
            Phase::Request => {
                match ctx
                    .stack
                    .tcp_send(ctx.now, h, &self.request[self.sent..], ctx.sink)
                {
                    Ok(n) => {
                        self.sent += n;
                        if self.sent == self.request.len() {
                            self.phase = Phase::Head;
                        }
                        true
                    }
                    Err(SocketError::WouldBlock) => false,
                    Err(e) => {
                        let why = self.socket_error(e);
                        self.fail(ctx, why);
                        true
                    }
                }
            }
            Phase::Head | Phase::Body => {
                let mut buf = std::mem::take(&mut self.buf);
                let r = ctx.stack.tcp_recv(ctx.now, h, &mut buf, ctx.sink);
                let work = match r {
                    Ok(0) => {
                        self.at_eof(ctx);
                        true
                    }
                    Ok(n) => {
                        self.last_progress = ctx.now;
                        match self.take(ctx, &buf[..n]) {
                            Ok(true) => self.succeed(ctx),
                            Ok(false) => {}
                            Err(why) => self.fail(ctx, why),
                        }
                        true
                    }
                    Err(SocketError::WouldBlock) => false,
                    Err(e) => {
                        let why = self.socket_error(e);
                        self.fail(ctx, why);
                        true
                    }
                };
                self.buf = buf;
                work
            }
        }
    }
}

impl Application for HttpGet {
    fn poll(&mut self, ctx: &mut AppContext<'_>) -> bool {
        if self.outcome.is_some() {
            return false;
        }
        if self.phase == Phase::Start {
            self.started = ctx.now;
            self.last_progress = ctx.now;
            match ctx
                .stack
                .tcp_connect(ctx.now, self.url.addr, None, ctx.sink)
            {
                Ok(h) => {
                    self.sock = Some(h);
                    self.phase = Phase::Request;
                }
                Err(e) => {
                    let why = format!("cannot connect to {}: {e}", self.peer());
                    self.fail(ctx, why);
                    return true;
                }
            }
        }
        let mut work = false;
        for _ in 0..64 {
            if self.outcome.is_some() || !self.step(ctx) {
                break;
            }
            work = true;
        }
        if self.outcome.is_none() && ctx.now.saturating_since(self.last_progress) >= self.timeout {
            let connecting = self
                .sock
                .and_then(|h| ctx.stack.tcp_state(h).ok())
                .is_some_and(|s| s == TcpState::SynSent);
            let secs = self.timeout.as_secs_f64();
            let why = if connecting {
                format!("timed out after {secs} s connecting to {}", self.peer())
            } else if self.phase == Phase::Body {
                format!(
                    "timed out: no data for {secs} s after {} bytes of the body",
                    self.received
                )
            } else {
                format!(
                    "timed out: no response from {} within {secs} s",
                    self.peer()
                )
            };
            self.fail(ctx, why);
            work = true;
        }
        work
    }

    fn finished(&self) -> bool {
        self.outcome.is_some()
    }
}
