//! `libustack_preload.so`: unmodified programs on ustack.  `ustack run`
//! starts a program with this library preloaded; the library defines the
//! C library's socket, I/O and event functions, so the program's calls
//! reach it first:
//!
//! - AF_INET stream and datagram sockets are ustack's, and AF_INET6 ones
//!   when a port of the configuration has an IPv6 address, unless they
//!   bind to or connect to an address ustack does not have (loopback, the
//!   host's own, IPv6 link-local ones, which need a scope id): then they
//!   become kernel sockets under the same number, with the options set so
//!   far.  An IPv4-mapped IPv6 address is decided as its IPv4 address.
//!   Everything else (files, pipes, Unix sockets, eventfd, timerfd, other
//!   families) is the kernel's, untouched.
//! - One fd namespace: a ustack socket's number is a kernel fd number held
//!   for it (a duplicate of one placeholder socket, see `api::reserve_fd`),
//!   so the program's fds never collide.
//! - Mixed waits: an epoll instance is a kernel epoll for the kernel fds
//!   and, beside it, a socket-layer epoll for the ustack ones; poll and
//!   select split their arrays the same way.  A wait steps the engine,
//!   looks at both sides, and sleeps on the engine's links and the kernel
//!   fds together, so neither side starves and an idle wait uses no CPU.
//! - Run to completion: the first thread that needs the network starts the
//!   process's engine and drives it whenever it waits; other threads'
//!   calls run in place when it is not inside the library, else are
//!   posted to it (the socket layer's run to wait).  When that thread
//!   stays away (a main thread that started worker threads and joins
//!   them: wrk), the threads waiting in the library drive the engine
//!   instead (the socket layer's adoption).  With several cores in
//!   `lcore_mask`, another thread that starts using the network gets an
//!   engine of its own on a free core: its own member of the port's
//!   fanout group, its outgoing connections' source ports chosen so that
//!   their replies reach it (`process::ensure_engine`).
//! - A socket that is only set up (bound, listening) waits to be placed on
//!   an engine until it is used, so a process that forks workers after
//!   opening its listeners (nginx, NSD) never runs an engine itself: each
//!   child places the listeners it inherited on its own engine.
//!
//! Inside the library (the socket layer, links, the standard library) the
//! same functions go straight to the C library (`guard`).

#![deny(unsafe_op_in_unsafe_fn)]

// The C ABI crate (its library is `ustack`): its calls already turn C
// arguments into socket-layer calls and errors into errno.
extern crate ustack as capi;

mod aliases;
mod dead;
mod epoll;
mod exec;
mod guard;
mod io;
mod notes;
mod place;
mod poll;
mod privileges;
pub mod process;
mod real;
mod signals;
mod sockets;
mod table;

use std::os::fd::RawFd;
use std::os::raw::c_int;

use api::Errno;

/// What stands behind an fd number, for the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fd {
    /// A socket-layer socket.
    Ustack,
    /// A socket not placed yet (`table::Pending`).
    Pending,
    /// An epoll instance that may hold ustack fds (`table::Shadow`).
    Epoll,
    /// The kernel's.
    Kernel,
}

#[inline]
pub(crate) fn classify(fd: RawFd) -> Fd {
    if api::is_ustack_fd(fd) {
        return Fd::Ustack;
    }
    match table::mark(fd) {
        table::Mark::Pending => Fd::Pending,
        table::Mark::Epoll => Fd::Epoll,
        table::Mark::None => Fd::Kernel,
    }
}

/// Sets the calling thread's errno.
pub(crate) fn set_errno(e: Errno) {
    // SAFETY: `__errno_location` is the calling thread's errno slot.
    unsafe { *libc::__errno_location() = e.0 };
}

/// -1 with errno, or the value.
pub(crate) fn ret(r: Result<c_int, Errno>) -> c_int {
    r.unwrap_or_else(|e| {
        set_errno(e);
        -1
    })
}

pub(crate) fn ret_size(r: Result<isize, Errno>) -> isize {
    r.unwrap_or_else(|e| {
        set_errno(e);
        -1
    })
}

/// The errno a call just left (after a capi or real call returned -1).
pub(crate) fn last_errno() -> Errno {
    // SAFETY: as in `set_errno`.
    Errno(unsafe { *libc::__errno_location() })
}

/// Registers the fork handler when the library is loaded.
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

extern "C" fn init() {
    {
        let _g = guard::Inside::enter();
        process::read_environment();
    }
    // SAFETY: registers plain functions for the three sides of fork.
    unsafe {
        libc::pthread_atfork(
            Some(process::before_fork),
            Some(process::parent_after_fork),
            Some(process::child_after_fork),
        )
    };
}
