//! The echo service (RFC 862) over TCP: every byte a client sends comes
//! back.  When the client shuts its write side, what is still pending is
//! sent, then the connection is closed.
//!
//! Backpressure: a connection reads only as much as its send buffer can
//! take; should `tcp_send` still take less, the rest is kept (at most one
//! read's worth) and the connection is not read again until it is sent.

use core::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::collections::HashMap;

use runtime::{AppContext, Application};
use stack::{SocketError, SocketHandle, Stack};

use crate::ready::ReadySet;

/// The largest read, and so the most a connection ever holds.
const CHUNK: usize = 64 * 1024;
/// Bytes moved per connection per turn before the others get their turn.
const TURN_BUDGET: usize = 256 * 1024;
/// Connections accepted per turn at most.
const ACCEPT_BUDGET: usize = 256;

#[derive(Debug, Default)]
struct Conn {
    /// Read and not yet sent (only after `tcp_send` took less than offered).
    pending: Vec<u8>,
    /// The client shut its write side.
    eof: bool,
}

/// Counters of the TCP echo service.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TcpEchoStats {
    pub accepted: u64,
    pub closed: u64,
    /// Connections that ended with an error (reset, timeout).
    pub errors: u64,
    pub bytes: u64,
}

pub struct TcpEchoApp {
    listener: SocketHandle,
    conns: HashMap<SocketHandle, Conn>,
    ready: ReadySet,
    buf: Vec<u8>,
    pub stats: TcpEchoStats,
}

enum Step {
    /// Waits for the stack (data, room, or EOF).
    Idle,
    /// Used its budget: look again next turn.
    Again,
    /// The connection is closed and forgotten.
    Gone,
}

impl TcpEchoApp {
    /// Listens on `port` of every address, IPv4 and IPv6.
    pub fn new(stack: &mut Stack, port: u16) -> Result<TcpEchoApp, SocketError> {
        TcpEchoApp::bind(
            stack,
            SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
        )
    }

    /// Listens on `local` (`[::]:p` takes IPv4 too: a dual-stack listener).
    pub fn bind(stack: &mut Stack, local: SocketAddr) -> Result<TcpEchoApp, SocketError> {
        let listener = stack.tcp_listen(local, 1024)?;
        Ok(TcpEchoApp {
            listener,
            conns: HashMap::new(),
            ready: ReadySet::new(),
            buf: vec![0u8; CHUNK],
            stats: TcpEchoStats::default(),
        })
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    fn accept(&mut self, ctx: &mut AppContext<'_>) -> bool {
        let mut work = false;
        for _ in 0..ACCEPT_BUDGET {
            match ctx.stack.tcp_accept(self.listener) {
                Ok((h, _)) => {
                    work = true;
                    self.stats.accepted += 1;
                    let _ = ctx.stack.tcp_set_nodelay(ctx.now, h, true, ctx.sink);
                    self.conns.insert(h, Conn::default());
                    // Data may have come with the handshake: its readiness
                    // event went by before the connection was ours.
                    self.service(ctx, h);
                }
                Err(_) => return work,
            }
        }
        self.ready.again(self.listener);
        work
    }

    fn service(&mut self, ctx: &mut AppContext<'_>, h: SocketHandle) {
        let Some(mut conn) = self.conns.remove(&h) else {
            return;
        };
        match echo(ctx, h, &mut conn, &mut self.buf, &mut self.stats) {
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
}

/// Moves what it can of one connection.
fn echo(
    ctx: &mut AppContext<'_>,
    h: SocketHandle,
    conn: &mut Conn,
    buf: &mut [u8],
    stats: &mut TcpEchoStats,
) -> Step {
    let mut moved = 0;
    loop {
        // What could not be sent before goes first.
        while !conn.pending.is_empty() {
            match ctx.stack.tcp_send(ctx.now, h, &conn.pending, ctx.sink) {
                Ok(n) => {
                    conn.pending.drain(..n);
                    stats.bytes += n as u64;
                    moved += n;
                }
                Err(SocketError::WouldBlock) => return Step::Idle,
                Err(_) => return fail(ctx, h, stats),
            }
        }
        if conn.eof {
            let _ = ctx.stack.tcp_close(ctx.now, h, ctx.sink);
            stats.closed += 1;
            return Step::Gone;
        }
        if moved >= TURN_BUDGET {
            return Step::Again;
        }
        // Read no more than the send buffer can take now.
        let room = match ctx.stack.tcp_send_space(h) {
            Ok(r) => r.min(buf.len()),
            Err(_) => return fail(ctx, h, stats),
        };
        if room == 0 {
            // Nothing read is kept: the next ACK makes the socket ready.
            // A peer that closed must still be noticed, though.
            match ctx.stack.tcp_readiness(h) {
                Ok(r) if r.error => return fail(ctx, h, stats),
                Ok(_) => return Step::Idle,
                Err(_) => return fail(ctx, h, stats),
            }
        }
        match ctx.stack.tcp_recv(ctx.now, h, &mut buf[..room], ctx.sink) {
            Ok(0) => conn.eof = true,
            Ok(n) => match ctx.stack.tcp_send(ctx.now, h, &buf[..n], ctx.sink) {
                Ok(sent) => {
                    stats.bytes += sent as u64;
                    moved += sent;
                    conn.pending.extend_from_slice(&buf[sent..n]);
                }
                Err(SocketError::WouldBlock) => conn.pending.extend_from_slice(&buf[..n]),
                Err(_) => return fail(ctx, h, stats),
            },
            Err(SocketError::WouldBlock) => return Step::Idle,
            Err(_) => return fail(ctx, h, stats),
        }
    }
}

/// The connection failed (reset, timed out, closed under us): free it.
fn fail(ctx: &mut AppContext<'_>, h: SocketHandle, stats: &mut TcpEchoStats) -> Step {
    stats.errors += 1;
    let _ = ctx.stack.tcp_abort(ctx.now, h, ctx.sink);
    Step::Gone
}

impl Application for TcpEchoApp {
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
        work
    }
}
