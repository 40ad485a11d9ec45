//! Sockets whose network went away.  In a process whose engine cannot
//! start (a child forked from a process serving a `link=dpdk` port, whose
//! EAL cannot start again there; or an engine that failed to start), the
//! sockets not placed yet (`table::Pending`: the listeners and bound UDP
//! sockets a child inherited, and any made since) can never be.  They
//! behave as Linux's sockets do once their network is gone: the error
//! they hold is ENETDOWN, the data calls (accept, read, write and their
//! forms) fail with it, a wait reports them at once with EPOLLERR |
//! EPOLLHUP (poll: POLLERR | POLLHUP; select: readable and writable, so
//! the program makes the call that fails), and the calls that do not move
//! data work as on any socket: epoll_ctl, getsockname, getsockopt
//! (SO_ERROR: ENETDOWN), setsockopt, fcntl, FIONBIO, dup, listen, close;
//! shutdown and connect as on a socket whose connection failed.
//!
//! For epoll the kernel does the reporting: the first time such a socket
//! joins an epoll instance its number is made to name a kernel socket
//! that holds an error and is shut both ways (an AF_UNIX stream whose peer
//! closed with data unread: `errored_socket`), which the kernel epoll then
//! watches for EPOLLERR | EPOLLHUP alone, with the program's flags
//! (edge-triggered, one-shot) and data kept.  The library never reads or
//! asks that socket anything (the calls on the number stay the
//! library's), so its error stays.

use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::os::raw::{c_int, c_ulong, c_void};

use api::Errno;
use libc::{epoll_event, socklen_t};

use crate::guard::Inside;
use crate::{classify, process, real, table, Fd};

/// The error a dead socket holds.
pub const ERROR: Errno = Errno(libc::ENETDOWN);

/// What a poll or select reports for a dead socket, asked or not.
pub const POLL_EVENTS: i16 = libc::POLLERR | libc::POLLHUP;

/// Whether `fd` is a dead socket: not placed, in a process whose engine
/// cannot start.
pub fn is_dead(fd: RawFd) -> bool {
    classify(fd) == Fd::Pending && process::engine_failed()
}

/// The epoll_ctl flags kept from the program's event (the readiness bits
/// are dropped: only EPOLLERR | EPOLLHUP are reported, which epoll always
/// watches).
const EPOLL_FLAGS: u32 =
    (libc::EPOLLET | libc::EPOLLONESHOT | libc::EPOLLEXCLUSIVE | libc::EPOLLWAKEUP) as u32;

/// epoll_ctl for dead socket `fd` on the kernel epoll `epfd`: as the
/// kernel's for any socket (EEXIST, ENOENT, EINVAL as it decides).
///
/// # Safety
/// `ev` is null or points to an epoll_event (the caller's).
pub unsafe fn epoll_ctl(epfd: c_int, op: c_int, fd: RawFd, ev: *mut epoll_event) -> c_int {
    if op == libc::EPOLL_CTL_ADD {
        let prepared = {
            let _g = Inside::enter();
            errored_number(fd)
        };
        if let Err(e) = prepared {
            return crate::ret(Err(e));
        }
    }
    let mut mine;
    let ev = if ev.is_null() || op == libc::EPOLL_CTL_DEL {
        ev
    } else {
        // SAFETY: `ev` points to an epoll_event (the caller's promise).
        mine = unsafe { ev.read_unaligned() };
        mine.events &= EPOLL_FLAGS;
        &mut mine
    };
    // SAFETY: `ev` is null or a live event.
    let r = unsafe { real::epoll_ctl(epfd, op, fd, ev) };
    if r == 0 && op == libc::EPOLL_CTL_ADD {
        crate::epoll::kernel_side_used(epfd);
    }
    r
}

/// Makes number `fd` name an errored kernel socket, once (recorded in its
/// pending record); its close-on-exec flag stays.  Inside the guard.
pub fn errored_number(fd: RawFd) -> Result<(), Errno> {
    let mut t = table::lock();
    let p = t.get().pending.get_mut(&fd).ok_or(Errno::EBADF)?;
    if p.errored_file {
        return Ok(());
    }
    let s = errored_socket()?;
    // SAFETY: F_GETFD takes no argument.
    let fdflags = unsafe { real::fcntl(fd, libc::F_GETFD, 0) };
    let cloexec = if fdflags > 0 && fdflags & libc::FD_CLOEXEC != 0 {
        libc::O_CLOEXEC
    } else {
        0
    };
    // SAFETY: both are open fds of this process; the number's old file
    // (a duplicate of the placeholder) is closed by dup3 atomically.
    let r = unsafe { real::dup3(s, fd, cloexec) };
    let e = crate::last_errno();
    // SAFETY: `s` is ours.
    unsafe { real::close(s) };
    if r < 0 {
        return Err(e);
    }
    p.errored_file = true;
    Ok(())
}

/// A kernel socket whose poll says EPOLLERR | EPOLLHUP for as long as no
/// one reads it or asks its SO_ERROR: one end of an AF_UNIX stream pair
/// whose other end was closed with a byte unread (the kernel gives the
/// remaining end ECONNRESET and shuts it both ways).
fn errored_socket() -> Result<RawFd, Errno> {
    let mut pair = [-1; 2];
    // SAFETY: `pair` is two writable ints.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            pair.as_mut_ptr(),
        )
    } < 0
    {
        return Err(crate::last_errno());
    }
    let [keep, gone] = pair;
    // SAFETY: one byte from a static buffer, on our socket.
    let sent = unsafe { real::write(keep, b"x".as_ptr().cast(), 1) };
    let e = crate::last_errno();
    // SAFETY: `gone` is ours; it closes with the byte unread.
    unsafe { real::close(gone) };
    if sent != 1 {
        // SAFETY: `keep` is ours.
        unsafe { real::close(keep) };
        return Err(e);
    }
    Ok(keep)
}

/// What a dead socket is, for the calls whose answer depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Listener,
    /// A connection it inherited (it failed: Linux's TCP is closed then).
    Connection,
    /// Any other stream socket (not connected) or a datagram socket.
    Other,
}

fn kind(fd: RawFd) -> Result<Kind, Errno> {
    let _g = Inside::enter();
    let mut t = table::lock();
    let p = t.get().pending.get(&fd).ok_or(Errno::EBADF)?;
    Ok(if p.backlog.is_some() {
        Kind::Listener
    } else if p.connection {
        Kind::Connection
    } else {
        Kind::Other
    })
}

/// shutdown on a dead socket: a listener stops listening (0, as Linux's
/// for one); anything else has no connection (ENOTCONN: a failed one is
/// closed).
pub fn shutdown(fd: RawFd, how: c_int) -> Result<c_int, Errno> {
    if !(libc::SHUT_RD..=libc::SHUT_RDWR).contains(&how) {
        return Err(Errno::EINVAL);
    }
    match kind(fd)? {
        Kind::Listener => Ok(0),
        Kind::Connection | Kind::Other => Err(Errno::ENOTCONN),
    }
}

/// connect on a dead socket to `dst`: a listener or a connection is in
/// use already (EISCONN, as Linux says for either); otherwise a
/// destination on ustack's network has no route left (ENETUNREACH).
/// `None`: a destination the kernel routes (loopback, the host's), where
/// the socket goes on as any pending socket does (`place::for_use`).
pub fn connect(fd: RawFd, dst: SocketAddr) -> Option<Result<c_int, Errno>> {
    match kind(fd) {
        Err(e) => Some(Err(e)),
        Ok(Kind::Listener | Kind::Connection) => Some(Err(Errno(libc::EISCONN))),
        Ok(_) if process::settings().is_some_and(|s| s.routes_here(dst.ip())) => {
            Some(Err(Errno(libc::ENETUNREACH)))
        }
        Ok(_) => None,
    }
}

/// ioctl on a dead socket, FIONBIO aside (a pending socket's): the bytes
/// waiting (FIONREAD) or unsent (TIOCOUTQ) are none, EINVAL on a listener
/// as Linux's TCP says; other requests are not a socket's (ENOTTY).
///
/// # Safety
/// `arg` is the request's argument as the caller gave it.
pub unsafe fn ioctl(fd: RawFd, request: c_ulong, arg: usize) -> Result<c_int, Errno> {
    let listener = kind(fd)? == Kind::Listener;
    match request {
        libc::FIONREAD | libc::TIOCOUTQ => {
            if listener {
                return Err(Errno::EINVAL);
            }
            if arg == 0 {
                return Err(Errno(libc::EFAULT));
            }
            // SAFETY: these requests' argument points to an int.
            unsafe { (arg as *mut c_int).write_unaligned(0) };
            Ok(0)
        }
        _ => Err(Errno(libc::ENOTTY)),
    }
}

/// getsockopt(SO_ERROR) on a dead socket: the error it holds, which stays
/// (its network does not come back).
///
/// # Safety
/// `val` and `len` as getsockopt's.
pub unsafe fn so_error(val: *mut c_void, len: *mut socklen_t) -> Result<c_int, Errno> {
    if val.is_null() || len.is_null() {
        return Err(Errno(libc::EFAULT));
    }
    // SAFETY: `len` points to a socklen_t and `val` to `*len` bytes (the
    // caller's promise).
    unsafe {
        if (len.read_unaligned() as c_int) < 0 {
            return Err(Errno::EINVAL);
        }
        let n = (len.read_unaligned() as usize).min(4);
        std::ptr::copy_nonoverlapping(ERROR.0.to_ne_bytes().as_ptr(), val.cast::<u8>(), n);
        len.write_unaligned(n as socklen_t);
    }
    Ok(0)
}

/// dup, dup2, dup3 and F_DUPFD of dead socket `fd`: the kernel's duplicate
/// of the number, which is dead too (a copy of its record).  `target` as
/// `sockets::dup_ustack`'s, whose caller has let go of what it named.
pub fn dup(fd: RawFd, target: Option<RawFd>, cloexec: bool, min: c_int) -> Result<c_int, Errno> {
    let _g = Inside::enter();
    let record = table::lock()
        .get()
        .pending
        .get(&fd)
        .cloned()
        .ok_or(Errno::EBADF)?;
    // SAFETY: no pointers.
    let new = unsafe {
        match target {
            Some(new) => real::dup3(fd, new, if cloexec { libc::O_CLOEXEC } else { 0 }),
            None => real::fcntl(
                fd,
                if cloexec {
                    libc::F_DUPFD_CLOEXEC
                } else {
                    libc::F_DUPFD
                },
                min as usize,
            ),
        }
    };
    if new < 0 {
        return Err(crate::last_errno());
    }
    table::lock().add_pending(new, record);
    Ok(new)
}
