//! The library's own fds beside the socket layer's: sockets not yet placed
//! (on ustack or on the kernel: [`Pending`]) and epoll instances that can
//! hold both kinds ([`Shadow`]).  A word per fd number, read without a
//! lock, says which table to look in and, for an epoll instance, what a
//! wait needs of its [`Shadow`]; so a call on a kernel fd costs two atomic
//! loads (this and the socket layer's) and a wait takes no lock.  The
//! words are written under the table's lock, beside the maps.

use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use api::IntMap;

const CHUNK: usize = 4096;
const CHUNKS: usize = 1024;

static WORDS: [OnceLock<Box<[AtomicU64]>>; CHUNKS] = [const { OnceLock::new() }; CHUNKS];

/// What the library holds behind an fd number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// Nothing: a kernel fd, or a socket layer one.
    None = 0,
    Pending = 1,
    Epoll = 2,
}

/// A word: the mark in the low byte; for an epoll instance, bit 8 is
/// `Shadow::kernel_side`, bits 9 to 31 `Shadow::forks` and the high half
/// `Shadow::ustack` plus one (0: none).
const MARK_BITS: u64 = 0xff;
const KERNEL_SIDE: u64 = 1 << 8;
const FORKS_SHIFT: u32 = 9;
const FORKS_MASK: u32 = (1 << 23) - 1;

/// Forks of this process and of the processes it came from (counted in
/// both the parent and the child): an epoll instance made before one may
/// be shared with another process.
static FORKS: AtomicU32 = AtomicU32::new(0);

/// After a fork, in the parent and in the child.
pub fn count_fork() {
    FORKS.fetch_add(1, Ordering::AcqRel);
}

fn forks_now() -> u32 {
    FORKS.load(Ordering::Acquire) & FORKS_MASK
}

fn slot(fd: RawFd, create: bool) -> Option<&'static AtomicU64> {
    let fd = usize::try_from(fd).ok().filter(|&f| f < CHUNK * CHUNKS)?;
    let chunk = &WORDS[fd / CHUNK];
    let chunk = if create {
        chunk.get_or_init(|| (0..CHUNK).map(|_| AtomicU64::new(0)).collect())
    } else {
        chunk.get()?
    };
    Some(&chunk[fd % CHUNK])
}

fn word(fd: RawFd) -> u64 {
    slot(fd, false).map_or(0, |s| s.load(Ordering::Acquire))
}

#[inline]
pub fn mark(fd: RawFd) -> Mark {
    match word(fd) & MARK_BITS {
        1 => Mark::Pending,
        2 => Mark::Epoll,
        _ => Mark::None,
    }
}

/// The shadow of epoll instance `fd`, without the lock (a wait's look).
#[inline]
pub fn shadow(fd: RawFd) -> Option<Shadow> {
    let w = word(fd);
    (w & MARK_BITS == Mark::Epoll as u64).then(|| Shadow {
        ustack: match (w >> 32) as u32 {
            0 => None,
            n => Some(n as RawFd - 1),
        },
        kernel_side: w & KERNEL_SIDE != 0,
        forks: (w >> FORKS_SHIFT) as u32 & FORKS_MASK,
    })
}

fn set_word(fd: RawFd, w: u64) {
    if let Some(s) = slot(fd, w != 0) {
        s.store(w, Ordering::Release);
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
    /// setsockopt calls, in order.
    pub opts: Vec<SetOpt>,
    /// Always of the socket's family (an AF_INET6 socket's IPv4 peers are
    /// IPv4-mapped IPv6 addresses).
    pub bound: Option<SocketAddr>,
    pub backlog: Option<c_int>,
    /// Whether its number names an errored kernel socket rather than the
    /// placeholder's duplicate (a dead socket's, `dead::epoll_ctl`).
    pub errored_file: bool,
    /// A TCP connection a child refused an engine inherited (dead: its
    /// calls answer as on a connection that failed).
    pub connection: bool,
}

/// One setsockopt call on a pending socket: (level, name) and the value's
/// bytes, kept inline when they are as short as an int option's (the
/// usual case: no allocation per option).
#[derive(Debug, Clone)]
pub struct SetOpt {
    pub level: c_int,
    pub name: c_int,
    value: OptValue,
}

#[derive(Debug, Clone)]
enum OptValue {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<[u8]>),
}

/// Values up to this long are kept inline (ints, struct linger, timevals).
const INLINE: usize = 16;

impl SetOpt {
    pub fn new(level: c_int, name: c_int, val: &[u8]) -> SetOpt {
        let value = if val.len() <= INLINE {
            let mut bytes = [0u8; INLINE];
            bytes[..val.len()].copy_from_slice(val);
            OptValue::Inline {
                len: val.len() as u8,
                bytes,
            }
        } else {
            OptValue::Heap(val.into())
        };
        SetOpt { level, name, value }
    }

    /// An int option's value.
    pub fn int(level: c_int, name: c_int, v: c_int) -> SetOpt {
        SetOpt::new(level, name, &v.to_ne_bytes())
    }

    pub fn value(&self) -> &[u8] {
        match &self.value {
            OptValue::Inline { len, bytes } => &bytes[..usize::from(*len)],
            OptValue::Heap(b) => b,
        }
    }
}

impl Pending {
    /// The last value set for an int option.
    pub fn int_opt(&self, level: c_int, name: c_int) -> Option<c_int> {
        self.opts
            .iter()
            .rev()
            .find(|o| o.level == level && o.name == name)
            .and_then(|o| o.value().get(..4))
            .map(|b| c_int::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// An epoll instance: a kernel epoll (the number the program holds, which
/// watches its kernel fds) and, once a ustack fd joins, an epoll of the
/// socket layer for those.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shadow {
    pub ustack: Option<RawFd>,
    /// Whether the kernel epoll may hold fds: one was added to it, or its
    /// file was reached under another number (a dup) or sent to another
    /// process (SCM_RIGHTS), where fds can be added unseen.  While false
    /// and no fork came after the instance was made (`forks`), a wait need
    /// not ask the kernel every time (no syscall per wait for a program
    /// whose epoll holds only ustack fds).
    pub kernel_side: bool,
    /// [`FORKS`] when the instance was made (modulo 2^23).
    pub forks: u32,
}

impl Shadow {
    /// A new instance's.
    pub fn new() -> Shadow {
        Shadow {
            ustack: None,
            kernel_side: false,
            forks: forks_now(),
        }
    }

    /// Whether the kernel epoll may hold fds (see `kernel_side`).
    pub fn may_hold_kernel_fds(&self) -> bool {
        self.kernel_side || self.forks != forks_now()
    }

    fn word(self) -> u64 {
        let ustack = self.ustack.map_or(0, |fd| fd as u32 as u64 + 1);
        let kernel_side = if self.kernel_side { KERNEL_SIDE } else { 0 };
        Mark::Epoll as u64
            | kernel_side
            | u64::from(self.forks & FORKS_MASK) << FORKS_SHIFT
            | ustack << 32
    }
}

#[derive(Default)]
pub struct Table {
    pub pending: IntMap<RawFd, Pending>,
    epolls: IntMap<RawFd, Shadow>,
}

impl Table {
    pub fn epoll(&self, fd: RawFd) -> Option<Shadow> {
        self.epolls.get(&fd).copied()
    }
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

pub struct Locked(MutexGuard<'static, Option<Table>>);

impl Locked {
    pub fn get(&mut self) -> &mut Table {
        self.0.get_or_insert_with(Table::default)
    }

    pub fn add_pending(&mut self, fd: RawFd, p: Pending) {
        self.get().pending.insert(fd, p);
        set_word(fd, Mark::Pending as u64);
    }

    pub fn take_pending(&mut self, fd: RawFd) -> Option<Pending> {
        let p = self.get().pending.remove(&fd);
        if p.is_some() {
            set_word(fd, 0);
        }
        p
    }

    /// Records epoll instance `fd` with shadow `s` (a new one, or a change
    /// to one recorded).
    pub fn set_epoll(&mut self, fd: RawFd, s: Shadow) {
        self.get().epolls.insert(fd, s);
        set_word(fd, s.word());
    }

    pub fn take_epoll(&mut self, fd: RawFd) -> Option<Shadow> {
        let s = self.get().epolls.remove(&fd);
        if s.is_some() {
            set_word(fd, 0);
        }
        s
    }

    /// Changes every epoll instance's shadow with `f` (after a fork).
    pub fn each_epoll(&mut self, mut f: impl FnMut(&mut Shadow)) {
        let t = self.get();
        for (&fd, s) in t.epolls.iter_mut() {
            f(s);
            set_word(fd, s.word());
        }
    }
}

pub fn lock() -> Locked {
    Locked(TABLE.lock().unwrap_or_else(|e| e.into_inner()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_epoll_word_reads_back_as_its_shadow() {
        let fd = 4000;
        assert_eq!(shadow(fd), None);
        for s in [
            Shadow::new(),
            Shadow {
                ustack: Some(0),
                kernel_side: false,
                forks: FORKS_MASK,
            },
            Shadow {
                ustack: Some(1_000_000),
                kernel_side: true,
                forks: 1,
            },
        ] {
            lock().set_epoll(fd, s);
            assert_eq!(mark(fd), Mark::Epoll);
            assert_eq!(shadow(fd), Some(s));
            assert_eq!(lock().get().epoll(fd), Some(s));
        }
        let s = Shadow::new();
        assert!(!s.may_hold_kernel_fds());
        count_fork();
        assert!(s.may_hold_kernel_fds(), "made before a fork");
        assert!(!Shadow::new().may_hold_kernel_fds());
        assert!(lock().take_epoll(fd).is_some());
        assert_eq!((mark(fd), shadow(fd)), (Mark::None, None));
    }

    #[test]
    fn option_values_keep_their_bytes() {
        let short = SetOpt::int(libc::SOL_SOCKET, libc::SO_REUSEADDR, 1);
        assert_eq!(short.value(), &1i32.to_ne_bytes());
        let long: Vec<u8> = (0..40).collect();
        assert_eq!(SetOpt::new(1, 2, &long).value(), &long[..]);
        assert_eq!(SetOpt::new(1, 2, &[]).value(), &[] as &[u8]);
    }
}
