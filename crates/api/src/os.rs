//! The few kernel calls the socket layer makes: reserving an fd number
//! for each ustack object, and raising SIGPIPE as the kernel does.

use std::os::fd::RawFd;

use crate::errno::{Errno, Result};

/// Takes an fd number from the kernel (an eventfd), so a ustack socket's
/// number never collides with a kernel fd and the program can mix both.
pub(crate) fn reserve_fd(cloexec: bool) -> Result<RawFd> {
    let flags = libc::EFD_NONBLOCK | if cloexec { libc::EFD_CLOEXEC } else { 0 };
    // SAFETY: eventfd takes no pointers; it returns a new fd or -1.
    let fd = unsafe { libc::eventfd(0, flags) };
    if fd < 0 {
        return Err(Errno::last_os_error());
    }
    Ok(fd)
}

/// Gives a reserved number back to the kernel.
pub(crate) fn release_fd(fd: RawFd) {
    // SAFETY: `fd` is an eventfd this module reserved and the fd table no
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
pub(crate) fn raise_sigpipe() {
    // SAFETY: pthread_self names the calling thread; pthread_kill with a
    // valid signal number has no memory effects.
    unsafe {
        libc::pthread_kill(libc::pthread_self(), libc::SIGPIPE);
    }
}
