//! Placing a pending socket: on an engine of this process (the socket
//! layer), or on the kernel under the same number.

use std::net::SocketAddr;
use std::os::fd::RawFd;

use api::Errno;
use capi::addr::Call;
use libc::{sockaddr, socklen_t};

use crate::guard::Inside;
use crate::notes;
use crate::process;
use crate::real;
use crate::table::{self, Pending};

/// The address a `call` on pending socket `fd` was given, checked as
/// Linux checks it for a socket of that family and kind (the socket
/// layer's own rules, `capi::addr`).  `Ok(None)`: AF_UNSPEC where it
/// means no address (connect: dissolve; an AF_INET6 socket's send).
///
/// # Safety
/// `addr` is null or points to `len` readable bytes.
pub unsafe fn pending_addr(
    fd: RawFd,
    addr: *const sockaddr,
    len: socklen_t,
    call: Call,
) -> Result<Option<SocketAddr>, Errno> {
    let kind = inside(|| {
        table::lock()
            .get()
            .pending
            .get(&fd)
            .map(|p| (p.domain, p.ty == libc::SOCK_STREAM))
    });
    let (domain, stream) = kind.ok_or(Errno::EBADF)?;
    // SAFETY: the caller's promise, passed on.
    unsafe { capi::addr::read_for(domain, stream, addr, len, call) }
}

/// The C form of `a`, as bytes for bind.
fn sockaddr_bytes(a: &SocketAddr) -> Vec<u8> {
    match a {
        SocketAddr::V4(a) => capi::addr::as_bytes(&capi::addr::to_c4(a)).to_vec(),
        SocketAddr::V6(a) => capi::addr::as_bytes(&capi::addr::to_c6(a)).to_vec(),
    }
}

/// Places pending socket `fd` on this process's engine (starting it on
/// the calling thread if there is none): the socket layer's socket under
/// the same number, with the options, address and listen state recorded.
/// Must be called inside the guard.
pub fn on_ustack(fd: RawFd) -> Result<(), Errno> {
    let placed_meanwhile = || {
        if api::is_ustack_fd(fd) {
            Ok(())
        } else {
            Err(Errno::EBADF)
        }
    };
    if !table::lock().get().pending.contains_key(&fd) {
        // Placed meanwhile by another thread.
        return placed_meanwhile();
    }
    // An engine that starts now places the pending listeners (this one
    // too, if it is one) before it joins its ports' group.
    process::ensure_engine()?;
    let Some(p) = table::lock().take_pending(fd) else {
        return placed_meanwhile();
    };
    on_engine(fd, p)
}

/// Every pending listener of this process (those it inherited across a
/// fork, and any it set up before it had an engine), placed on the
/// engine that has just started, before that engine joins its ports'
/// group: from the moment the group's hash can give this process a new
/// connection, the listener that takes it is there (after fork, a SYN to
/// a listener the children hold is never refused, as on Linux).  Must be
/// called inside the guard, on the engine's thread.
pub fn listeners_on_new_engine() {
    let mut fds: Vec<RawFd> = table::lock()
        .get()
        .pending
        .iter()
        .filter(|(_, p)| p.backlog.is_some())
        .map(|(&fd, _)| fd)
        .collect();
    fds.sort_unstable();
    for fd in fds {
        let Some(p) = table::lock().take_pending(fd) else {
            continue;
        };
        if let Err(e) = on_engine(fd, p) {
            notes::once(format!(
                "a listener (fd {fd}) could not be set up on the engine as it started: {e}"
            ));
        }
    }
}

/// Makes pending socket `p` under number `fd` on the engine this process
/// has: on an error before the socket exists, the record is put back.
fn on_engine(fd: RawFd, p: Pending) -> Result<(), Errno> {
    let ty = p.ty | if p.nonblock { libc::SOCK_NONBLOCK } else { 0 };
    if let Err(e) = api::socket_at(fd, p.domain, ty, p.protocol) {
        table::lock().add_pending(fd, p);
        return Err(e);
    }
    for o in &p.opts {
        if let Err(e) = api::setsockopt(fd, o.level, o.name, o.value()) {
            notes::once(format!(
                "{} is not supported by ustack ({e}); ignored",
                notes::option_name(o.level, o.name)
            ));
        }
    }
    if let Some(a) = p.bound {
        api::bind(fd, &a)?;
    }
    if let Some(b) = p.backlog {
        api::listen(fd, b)?;
    }
    Ok(())
}

/// Places pending socket `fd` on the kernel: a kernel socket of its kind
/// with the options, address and listen state recorded, under the same
/// number (close-on-exec kept).  Must be called inside the guard.
pub fn on_kernel(fd: RawFd) -> Result<(), Errno> {
    let Some(p) = table::lock().take_pending(fd) else {
        return Ok(());
    };
    let r = kernel_socket(fd, &p);
    if r.is_err() {
        table::lock().add_pending(fd, p);
    }
    r
}

fn kernel_socket(fd: RawFd, p: &Pending) -> Result<(), Errno> {
    let ty = p.ty | if p.nonblock { libc::SOCK_NONBLOCK } else { 0 };
    // SAFETY: socket takes no pointers.
    let k = unsafe { real::socket(p.domain, ty | libc::SOCK_CLOEXEC, p.protocol) };
    if k < 0 {
        return Err(crate::last_errno());
    }
    let r = (|| {
        for o in &p.opts {
            let val = o.value();
            // SAFETY: `val` is a live buffer of its length.
            let r = unsafe {
                real::setsockopt(
                    k,
                    o.level,
                    o.name,
                    val.as_ptr().cast(),
                    val.len() as socklen_t,
                )
            };
            if r < 0 {
                return Err(crate::last_errno());
            }
        }
        if let Some(a) = p.bound {
            let sa = sockaddr_bytes(&a);
            // SAFETY: `sa` is a live sockaddr_in or sockaddr_in6 of the
            // length given.
            let r = unsafe { real::bind(k, sa.as_ptr().cast(), sa.len() as socklen_t) };
            if r < 0 {
                return Err(crate::last_errno());
            }
        }
        if let Some(b) = p.backlog {
            // SAFETY: no pointers.
            if unsafe { real::listen(k, b) } < 0 {
                return Err(crate::last_errno());
            }
        }
        // SAFETY: F_GETFD takes no argument.
        let fdflags = unsafe { real::fcntl(fd, libc::F_GETFD, 0) };
        let cloexec = if fdflags > 0 && fdflags & libc::FD_CLOEXEC != 0 {
            libc::O_CLOEXEC
        } else {
            0
        };
        // The number now names the kernel socket; the placeholder's
        // duplicate it held is closed by dup3 atomically.
        // SAFETY: both are open fds of this process.
        if unsafe { real::dup3(k, fd, cloexec) } < 0 {
            return Err(crate::last_errno());
        }
        Ok(())
    })();
    // SAFETY: `k` is ours; `fd` holds the socket now (or the error stands).
    unsafe { real::close(k) };
    r
}

/// Runs `f` inside the guard, for the calls of this library that reach
/// the socket layer or the kernel on the program's behalf.
pub fn inside<R>(f: impl FnOnce() -> R) -> R {
    let _g = Inside::enter();
    f()
}

/// Places a pending socket by what it is used for next: `dst` (a connect
/// or send destination) decides between ustack and the kernel; without
/// one, ustack.
pub fn for_use(fd: RawFd, dst: Option<SocketAddr>) -> Result<(), Errno> {
    match dst {
        Some(d) if !process::settings().is_some_and(|s| s.routes_here(d.ip())) => on_kernel(fd),
        _ => on_ustack(fd),
    }
}
