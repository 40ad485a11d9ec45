//! The few kernel calls the socket layer makes: reserving an fd number
//! for each ustack object (a duplicate of one placeholder socket), and raising SIGPIPE as the kernel does.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, Ordering};

use crate::errno::{Errno, Result};

/// The one kernel object every reserved number refers to: an unbound
/// AF_UNIX stream socket (so `fstat` on a ustack fd says "socket", and a
/// stray kernel call on it fails as on an unconnected socket).  -1: not
/// made yet.
static PLACEHOLDER: AtomicI32 = AtomicI32::new(-1);

fn placeholder() -> Result<RawFd> {
    let fd = PLACEHOLDER.load(Ordering::Acquire);
    if fd >= 0 {
        return Ok(fd);
    }
    // SAFETY: socket takes no pointers; it returns a new fd or -1.
    let new = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if new < 0 {
        return Err(Errno::last_os_error());
    }
    match PLACEHOLDER.compare_exchange(-1, new, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => Ok(new),
        Err(other) => {
            // Another thread made one first: keep theirs.
            // SAFETY: `new` is ours alone and named nowhere else.
            unsafe { libc::close(new) };
            Ok(other)
        }
    }
}

/// Takes an fd number from the kernel, so a ustack object's number never
/// collides with a kernel fd and the program can mix both.  The number
/// is a duplicate of one placeholder socket: it costs a slot in the fd
/// table, not a kernel object of its own.
pub(crate) fn reserve_fd(cloexec: bool) -> Result<RawFd> {
    reserve_fd_from(0, cloexec)
}

/// [`reserve_fd`] at `min` or above (fcntl's F_DUPFD): the lowest free
/// number there.
pub(crate) fn reserve_fd_from(min: RawFd, cloexec: bool) -> Result<RawFd> {
    let cmd = if cloexec {
        libc::F_DUPFD_CLOEXEC
    } else {
        libc::F_DUPFD
    };
    // SAFETY: F_DUPFD takes an int argument (the lowest number), no memory.
    let fd = unsafe { libc::fcntl(placeholder()?, cmd, min) };
    if fd < 0 {
        return Err(Errno::last_os_error());
    }
    Ok(fd)
}

/// The placeholder's number, if it exists: a program that closes or
/// replaces that number (a daemon closing every fd) must first have the
/// placeholder moved with [`move_placeholder`].
pub fn placeholder_fd() -> Option<RawFd> {
    Some(PLACEHOLDER.load(Ordering::Acquire)).filter(|&fd| fd >= 0)
}

/// Moves the placeholder to another number and closes the old one, so the
/// old number is free for the program.
pub fn move_placeholder() -> Result<()> {
    let Some(old) = placeholder_fd() else {
        return Ok(());
    };
    // SAFETY: F_DUPFD_CLOEXEC takes an int argument, no memory.
    let new = unsafe { libc::fcntl(old, libc::F_DUPFD_CLOEXEC, 0) };
    if new < 0 {
        return Err(Errno::last_os_error());
    }
    if PLACEHOLDER
        .compare_exchange(old, new, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
    {
        // SAFETY: `old` was the placeholder, which only this module uses.
        unsafe { libc::close(old) };
    } else {
        // SAFETY: `new` is ours alone.
        unsafe { libc::close(new) };
    }
    Ok(())
}

/// Gives a reserved number back to the kernel.
pub(crate) fn release_fd(fd: RawFd) {
    // SAFETY: `fd` is a number this module reserved and the fd table no
    // longer names; closing it touches nothing else.
    unsafe { libc::close(fd) };
}

/// Whether `fd` is open in the kernel (for ENOTSOCK versus EBADF).
pub(crate) fn kernel_fd_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD reads the fd's flags; no memory is passed.
    fd >= 0 && unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0
}

/// The kernel's F_GETFD / F_SETFD on the reserved fd (close-on-exec
/// belongs to the number, which the kernel holds).
pub(crate) fn fd_flags(fd: RawFd, cmd: i32, arg: i32) -> Result<i32> {
    // SAFETY: F_GETFD/F_SETFD take an int argument, no memory.
    let r = unsafe { libc::fcntl(fd, cmd, arg) };
    if r < 0 {
        return Err(Errno::last_os_error());
    }
    Ok(r)
}

/// Sends SIGPIPE to the calling thread, as the kernel does for a write
/// to a closed connection without MSG_NOSIGNAL.
/// Sends SIGURG to `owner` (F_SETOWN's: a process, or a process group
/// when negative), as the kernel's `sk_send_sigurg`.
pub(crate) fn send_sigurg(owner: i32) {
    // SAFETY: kill with a signal number has no memory effects; a process
    // that is gone gives ESRCH, which (as the kernel) nobody hears of.
    unsafe {
        libc::kill(owner, libc::SIGURG);
    }
}

pub(crate) fn raise_sigpipe() {
    // SAFETY: pthread_self names the calling thread; pthread_kill with a
    // valid signal number has no memory effects.
    unsafe {
        libc::pthread_kill(libc::pthread_self(), libc::SIGPIPE);
    }
}
