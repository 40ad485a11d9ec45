//! The library's own fds beside the socket layer's: sockets not yet placed
//! (on ustack or on the kernel: [`Pending`]) and epoll instances that can
//! hold both kinds ([`Shadow`]).  A byte per fd number, read without a lock,
//! says which table to look in, so a call on a kernel fd costs two atomic
//! loads (this and the socket layer's).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

const CHUNK: usize = 4096;
const CHUNKS: usize = 1024;

static MARKS: [OnceLock<Box<[AtomicU8]>>; CHUNKS] = [const { OnceLock::new() }; CHUNKS];

/// What the library holds behind an fd number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// Nothing: a kernel fd, or a socket layer one.
    None = 0,
    Pending = 1,
    Epoll = 2,
}

fn slot(fd: RawFd, create: bool) -> Option<&'static AtomicU8> {
    let fd = usize::try_from(fd).ok().filter(|&f| f < CHUNK * CHUNKS)?;
    let chunk = &MARKS[fd / CHUNK];
    let chunk = if create {
        chunk.get_or_init(|| (0..CHUNK).map(|_| AtomicU8::new(0)).collect())
    } else {
        chunk.get()?
    };
    Some(&chunk[fd % CHUNK])
}

#[inline]
pub fn mark(fd: RawFd) -> Mark {
    match slot(fd, false).map_or(0, |s| s.load(Ordering::Acquire)) {
        1 => Mark::Pending,
        2 => Mark::Epoll,
        _ => Mark::None,
    }
}

fn set_mark(fd: RawFd, m: Mark) {
    if let Some(s) = slot(fd, m != Mark::None) {
        s.store(m as u8, Ordering::Release);
    }
}

/// A socket the program made that is not placed yet: on ustack or on the
/// kernel is decided by the address it binds or connects to (loopback and
/// addresses ustack does not have go to the kernel), and a ustack one is
/// made on an engine only when it is used (so a process that only sets up
/// listeners and forks, as nginx's master does, never starts an engine;
/// each child makes them on its own).
#[derive(Debug, Clone)]
pub struct Pending {
    pub domain: c_int,
    /// SOCK_STREAM or SOCK_DGRAM (no flags).
    pub ty: c_int,
    pub protocol: c_int,
    pub nonblock: bool,
    /// setsockopt calls, in order: (level, name, value).
    pub opts: Vec<(c_int, c_int, Vec<u8>)>,
    /// Always of the socket's family (an AF_INET6 socket's IPv4 peers are
    /// IPv4-mapped IPv6 addresses).
    pub bound: Option<SocketAddr>,
    pub backlog: Option<c_int>,
}

impl Pending {
    /// The last value set for an int option.
    pub fn int_opt(&self, level: c_int, name: c_int) -> Option<c_int> {
        self.opts
            .iter()
            .rev()
            .find(|(l, n, _)| *l == level && *n == name)
            .and_then(|(_, _, v)| v.get(..4))
            .map(|b| c_int::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// An epoll instance: a kernel epoll (the number the program holds, which
/// watches its kernel fds) and, once a ustack fd joins, an epoll of the
/// socket layer for those.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shadow {
    pub ustack: Option<RawFd>,
}

#[derive(Default)]
pub struct Table {
    pub pending: HashMap<RawFd, Pending>,
    pub epolls: HashMap<RawFd, Shadow>,
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

pub struct Locked(MutexGuard<'static, Option<Table>>);

impl Locked {
    pub fn get(&mut self) -> &mut Table {
        self.0.get_or_insert_with(Table::default)
    }

    pub fn add_pending(&mut self, fd: RawFd, p: Pending) {
        self.get().pending.insert(fd, p);
        set_mark(fd, Mark::Pending);
    }

    pub fn take_pending(&mut self, fd: RawFd) -> Option<Pending> {
        let p = self.get().pending.remove(&fd);
        if p.is_some() {
            set_mark(fd, Mark::None);
        }
        p
    }

    pub fn add_epoll(&mut self, fd: RawFd, s: Shadow) {
        self.get().epolls.insert(fd, s);
        set_mark(fd, Mark::Epoll);
    }

    pub fn take_epoll(&mut self, fd: RawFd) -> Option<Shadow> {
        let s = self.get().epolls.remove(&fd);
        if s.is_some() {
            set_mark(fd, Mark::None);
        }
        s
    }
}

pub fn lock() -> Locked {
    Locked(TABLE.lock().unwrap_or_else(|e| e.into_inner()))
}
