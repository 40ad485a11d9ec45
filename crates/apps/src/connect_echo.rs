//! A TCP echo client that opens connections from an engine: each sends a
//! message of its own, shuts its write side, reads the echo to EOF and
//! checks it. With one engine per core every engine runs one, and each
//! connection completes only if its replies come back to the engine that
//! opened it (the source port is chosen for that, `stack::steer`).

use core::net::SocketAddr;
use std::collections::HashMap;

use runtime::{AppContext, Application};
use stack::{Instant, Shutdown, SocketError, SocketHandle};

use crate::ready::ReadySet;

/// Connections open at once at most.
const IN_FLIGHT: usize = 32;

struct Conn {
    want: Vec<u8>,
    got: Vec<u8>,
    sent: usize,
}

/// Counters of the client.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ConnectStats {
    /// Connections whose echo came back whole.
    pub ok: u64,
    /// Connections that failed (refused, reset, timed out, wrong echo).
    pub failed: u64,
}

pub struct ConnectEcho {
    remote: SocketAddr,
    total: usize,
    started: usize,
    size: usize,
    tag: u64,
    conns: HashMap<SocketHandle, Conn>,
    ready: ReadySet,
    buf: Vec<u8>,
    pub stats: ConnectStats,
    /// The first failure, to report.
    pub first_error: Option<String>,
}

impl ConnectEcho {
    /// `total` connections to `remote`, each echoing `size` bytes tagged by
    /// `tag` (the engine) and its number.
    pub fn new(remote: SocketAddr, total: usize, size: usize, tag: u64) -> Self {
        ConnectEcho {
            remote,
            total,
            started: 0,
            size: size.max(16),
            tag,
            conns: HashMap::new(),
            ready: ReadySet::new(),
            buf: vec![0; 64 * 1024],
            stats: ConnectStats::default(),
            first_error: None,
        }
    }

    /// Whether every connection was made and echoed (not stopped early by
    /// a signal).
    pub fn finished_ok(&self) -> bool {
        self.stats.ok == self.total as u64
    }

    fn message(&self, n: usize) -> Vec<u8> {
        let head = format!("engine {} conn {n} ", self.tag);
        head.bytes()
            .chain((0..).map(|i| b'a' + (i % 26) as u8))
            .take(self.size)
            .collect()
    }

    fn fail(&mut self, ctx: &mut AppContext<'_>, h: SocketHandle, why: String) {
        self.conns.remove(&h);
        let _ = ctx.stack.tcp_abort(ctx.now, h, ctx.sink);
        self.stats.failed += 1;
        self.first_error.get_or_insert(why);
    }

    fn service(&mut self, ctx: &mut AppContext<'_>, h: SocketHandle, now: Instant) {
        let Some(mut c) = self.conns.remove(&h) else {
            return;
        };
        loop {
            let r = match ctx.stack.tcp_readiness(h) {
                Ok(r) => r,
                Err(e) => return self.fail(ctx, h, format!("readiness: {e:?}")),
            };
            if r.error {
                let e = ctx.stack.tcp_take_error(h);
                return self.fail(ctx, h, format!("connection error: {e:?}"));
            }
            if r.writable && c.sent < c.want.len() {
                match ctx.stack.tcp_send(now, h, &c.want[c.sent..], ctx.sink) {
                    Ok(n) => c.sent += n,
                    Err(SocketError::WouldBlock) => {}
                    Err(e) => return self.fail(ctx, h, format!("send: {e:?}")),
                }
                if c.sent == c.want.len() {
                    let _ = ctx.stack.tcp_shutdown(now, h, Shutdown::Write, ctx.sink);
                }
            }
            if !r.readable {
                self.conns.insert(h, c);
                return;
            }
            match ctx.stack.tcp_recv(now, h, &mut self.buf, ctx.sink) {
                Ok(0) => {
                    let _ = ctx.stack.tcp_close(now, h, ctx.sink);
                    if c.got == c.want {
                        self.stats.ok += 1;
                    } else {
                        self.stats.failed += 1;
                        self.first_error.get_or_insert(format!(
                            "echo of {} bytes, {} back",
                            c.want.len(),
                            c.got.len()
                        ));
                    }
                    return;
                }
                Ok(n) => c.got.extend_from_slice(&self.buf[..n]),
                Err(SocketError::WouldBlock) => {
                    self.conns.insert(h, c);
                    return;
                }
                Err(e) => return self.fail(ctx, h, format!("recv: {e:?}")),
            }
        }
    }
}

impl Application for ConnectEcho {
    fn poll(&mut self, ctx: &mut AppContext<'_>) -> bool {
        let mut work = false;
        while self.started < self.total && self.conns.len() < IN_FLIGHT {
            let want = self.message(self.started);
            self.started += 1;
            work = true;
            match ctx.stack.tcp_connect(ctx.now, self.remote, None, ctx.sink) {
                Ok(h) => {
                    self.conns.insert(
                        h,
                        Conn {
                            want,
                            got: Vec::new(),
                            sent: 0,
                        },
                    );
                    self.ready.again(h);
                }
                Err(e) => {
                    self.stats.failed += 1;
                    self.first_error.get_or_insert(format!("connect: {e:?}"));
                }
            }
        }
        let batch = self.ready.take(ctx.stack);
        work |= !batch.is_empty();
        let now = ctx.now;
        for &h in &batch {
            self.service(ctx, h, now);
        }
        self.ready.give_back(batch);
        work
    }

    fn finished(&self) -> bool {
        self.stats.ok + self.stats.failed >= self.total as u64
    }
}
