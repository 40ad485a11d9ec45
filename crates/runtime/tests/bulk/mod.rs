//! A bulk transfer between two engines' applications: `total` patterned
//! bytes sent over one connection as fast as the window lets, and read at
//! the other end (`engine.rs`, `soft_gso.rs`).

use runtime::{AppContext, Application};
use stack::SocketHandle;

/// The byte at offset `i` of the stream.
pub fn pattern(i: usize) -> u8 {
    (i * 7 % 251) as u8
}

/// Sends the stream, `chunk` bytes offered per call.
pub struct BulkSender {
    pub conn: SocketHandle,
    pub sent: usize,
    pub total: usize,
    pub chunk: usize,
}

impl BulkSender {
    pub fn new(conn: SocketHandle, total: usize, chunk: usize) -> BulkSender {
        BulkSender {
            conn,
            sent: 0,
            total,
            chunk,
        }
    }
}

impl Application for BulkSender {
    fn poll(&mut self, ctx: &mut AppContext<'_>) -> bool {
        let mut work = false;
        while self.sent < self.total {
            let end = self.total.min(self.sent + self.chunk);
            let chunk: Vec<u8> = (self.sent..end).map(pattern).collect();
            match ctx.stack.tcp_send(ctx.now, self.conn, &chunk, ctx.sink) {
                Ok(n) if n > 0 => {
                    self.sent += n;
                    work = true;
                }
                _ => break,
            }
        }
        work
    }
}

/// Accepts one connection on `listener` and reads it all into `got`.
pub struct BulkReceiver {
    pub listener: SocketHandle,
    pub conn: Option<SocketHandle>,
    pub got: Vec<u8>,
}

impl BulkReceiver {
    pub fn new(listener: SocketHandle) -> BulkReceiver {
        BulkReceiver {
            listener,
            conn: None,
            got: Vec::new(),
        }
    }
}

impl Application for BulkReceiver {
    fn poll(&mut self, ctx: &mut AppContext<'_>) -> bool {
        if self.conn.is_none() {
            self.conn = ctx.stack.tcp_accept(self.listener).ok().map(|(h, _)| h);
        }
        let Some(conn) = self.conn else {
            return false;
        };
        let mut buf = [0u8; 65_536];
        let mut work = false;
        while let Ok(n) = ctx.stack.tcp_recv(ctx.now, conn, &mut buf, ctx.sink) {
            if n == 0 {
                break;
            }
            self.got.extend_from_slice(&buf[..n]);
            work = true;
        }
        work
    }
}
