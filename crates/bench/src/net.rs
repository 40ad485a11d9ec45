//! The few socket calls the benchmark's programs make, behind one trait, so
//! that the same client and server logic runs on ustack and on the kernel.
//!
//! Readiness follows the stricter of the two models, epoll's edge-triggered
//! one: [`Net::ready`] names the sockets whose state may have changed, and a
//! program reads (or writes) until the call would block before it waits for
//! the socket to be named again.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;
use std::time::Duration;

/// The IP version a benchmark runs over (`--family 4|6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Family {
    #[default]
    V4,
    V6,
}

impl Family {
    /// The unspecified address of the family: what servers bind.
    pub fn unspecified(self) -> IpAddr {
        match self {
            Family::V4 => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            Family::V6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        }
    }

    /// The family of `ip`.
    pub fn of(ip: IpAddr) -> Family {
        if ip.is_ipv6() {
            Family::V6
        } else {
            Family::V4
        }
    }

    /// The `--family` argument for it.
    pub fn arg(self) -> &'static str {
        match self {
            Family::V4 => "4",
            Family::V6 => "6",
        }
    }
}

impl FromStr for Family {
    type Err = String;

    fn from_str(s: &str) -> Result<Family, String> {
        match s {
            "4" => Ok(Family::V4),
            "6" => Ok(Family::V6),
            _ => Err(format!("--family {s}: 4 or 6")),
        }
    }
}

/// A network to run a benchmark program on.
pub trait Net {
    /// A socket: a ustack handle, or a token of a kernel socket.
    type Sock: SockKey;

    /// Time since the program started.
    fn now(&self) -> Duration;

    /// Listens on `at` (the unspecified address: every local one).
    fn tcp_listen(&mut self, at: SocketAddr) -> io::Result<Self::Sock>;
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

    /// A UDP socket on `at` (port 0: an ephemeral port).
    fn udp_bind(&mut self, at: SocketAddr) -> io::Result<Self::Sock>;
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

/// A socket's small-integer place (a file descriptor's way): unique among
/// open sockets, reused after a close.
pub trait SockKey: Copy + Eq + std::fmt::Debug {
    fn slot(self) -> usize;
}

impl SockKey for usize {
    fn slot(self) -> usize {
        self
    }
}

impl SockKey for stack::SocketHandle {
    fn slot(self) -> usize {
        stack::SocketHandle::slot(self)
    }
}

/// Per-socket state in an array indexed by the socket's slot, as a program
/// on file descriptors keeps it: one index and one compare per lookup (a
/// stale handle whose slot was reused finds nothing).
#[derive(Debug)]
pub struct SockMap<S, V> {
    entries: Vec<Option<(S, V)>>,
    len: usize,
}

impl<S, V> Default for SockMap<S, V> {
    fn default() -> Self {
        SockMap {
            entries: Vec::new(),
            len: 0,
        }
    }
}

impl<S: SockKey, V> SockMap<S, V> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub fn get(&self, s: &S) -> Option<&V> {
        match self.entries.get(s.slot()) {
            Some(Some((k, v))) if k == s => Some(v),
            _ => None,
        }
    }

    #[inline]
    pub fn get_mut(&mut self, s: &S) -> Option<&mut V> {
        match self.entries.get_mut(s.slot()) {
            Some(Some((k, v))) if k == s => Some(v),
            _ => None,
        }
    }

    /// Keeps `v` for `s`, replacing what a closed socket of the same slot
    /// left; returns the value `s` itself had.
    pub fn insert(&mut self, s: S, v: V) -> Option<V> {
        let i = s.slot();
        if i >= self.entries.len() {
            self.entries.resize_with(i + 1, || None);
        }
        match self.entries[i].replace((s, v)) {
            Some((k, old)) if k == s => Some(old),
            Some(_) => None,
            None => {
                self.len += 1;
                None
            }
        }
    }

    pub fn remove(&mut self, s: &S) -> Option<V> {
        let e = self.entries.get_mut(s.slot())?;
        match e {
            Some((k, _)) if k == s => {
                self.len -= 1;
                e.take().map(|(_, v)| v)
            }
            _ => None,
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&S, &V)> {
        self.entries.iter().flatten().map(|(k, v)| (k, v))
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }
}
