//! The few socket calls the benchmark's programs make, behind one trait, so
//! that the same client and server logic runs on ustack and on the kernel.
//!
//! Readiness follows the stricter of the two models, epoll's edge-triggered
//! one: [`Net::ready`] names the sockets whose state may have changed, and a
//! program reads (or writes) until the call would block before it waits for
//! the socket to be named again.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// A network to run a benchmark program on.
pub trait Net {
    /// A socket: a ustack handle, or a token of a kernel socket.
    type Sock: Copy + Eq + Hash + std::fmt::Debug;

    /// Time since the program started.
    fn now(&self) -> Duration;

    /// Listens on `port` of every local address.
    fn tcp_listen(&mut self, port: u16) -> io::Result<Self::Sock>;
    /// Takes a connection from the listener; `WouldBlock` when none waits.
    /// The connection has `TCP_NODELAY` on.
    fn tcp_accept(&mut self, listener: Self::Sock) -> io::Result<Self::Sock>;
    /// Starts connecting (non-blocking; `TCP_NODELAY` on). Data sent before
    /// the handshake ends may be refused with `WouldBlock`.
    fn tcp_connect(&mut self, to: SocketAddr) -> io::Result<Self::Sock>;
    fn tcp_send(&mut self, s: Self::Sock, data: &[u8]) -> io::Result<usize>;
    /// `Ok(0)` is the end of the stream.
    fn tcp_recv(&mut self, s: Self::Sock, buf: &mut [u8]) -> io::Result<usize>;
    /// Closes the socket; the handle is dead afterwards.
    fn tcp_close(&mut self, s: Self::Sock);

    /// A UDP socket on `port` (0: an ephemeral port) of every address.
    fn udp_bind(&mut self, port: u16) -> io::Result<Self::Sock>;
    fn udp_send_to(&mut self, s: Self::Sock, data: &[u8], to: SocketAddr) -> io::Result<usize>;
    fn udp_recv_from(&mut self, s: Self::Sock, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)>;

    /// Appends the sockets whose readiness may have changed.
    fn ready(&mut self, out: &mut Vec<Self::Sock>);
}

/// Whether an error only says "not now".
pub fn would_block(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::NotConnected
    )
}

/// A small, fast, non-keyed hasher for maps keyed by our own handles
/// (FxHash's multiply-rotate): the benchmark's maps see no hostile keys.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by sockets.
pub type SockMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;
