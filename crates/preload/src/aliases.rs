//! The C library's other names for the calls this library takes over:
//! the `__` forms glibc exports as public symbols (`__read`, `__write`,
//! `__send`, `__connect`, `__close`, `__dup2`, `__fcntl`, `__poll`,
//! `__select`; a program or library that calls one reaches the C
//! library's definition, not the interposed call of the plain name), and
//! `epoll_pwait2` (glibc 2.35), epoll_pwait with a timespec.  The
//! fortified `__*_chk` forms are beside their calls (io.rs, poll.rs);
//! `__fdelt_chk` (FD_SET's check) only checks a number against
//! FD_SETSIZE, and ustack sockets' numbers are the kernel's, so the C
//! library's serves.  glibc exports no time64 form of recvmmsg on 64-bit
//! targets.

use std::os::raw::{c_int, c_void};

use libc::{epoll_event, fd_set, nfds_t, pollfd, sigset_t, sockaddr, socklen_t, timespec, timeval};

use crate::{guard, real, ret, table};

/// # Safety
/// As read(2).
#[no_mangle]
pub unsafe extern "C" fn __read(fd: c_int, buf: *mut c_void, n: usize) -> isize {
    // SAFETY: the caller's arguments.
    unsafe { crate::io::read(fd, buf, n) }
}

/// # Safety
/// As write(2).
#[no_mangle]
pub unsafe extern "C" fn __write(fd: c_int, buf: *const c_void, n: usize) -> isize {
    // SAFETY: the caller's arguments.
    unsafe { crate::io::write(fd, buf, n) }
}

/// # Safety
/// As send(2).
#[no_mangle]
pub unsafe extern "C" fn __send(fd: c_int, buf: *const c_void, n: usize, flags: c_int) -> isize {
    // SAFETY: the caller's arguments.
    unsafe { crate::io::send(fd, buf, n, flags) }
}

/// # Safety
/// As connect(2).
#[no_mangle]
pub unsafe extern "C" fn __connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe { crate::sockets::connect(fd, addr, len) }
}

/// # Safety
/// As close(2).
#[no_mangle]
pub unsafe extern "C" fn __close(fd: c_int) -> c_int {
    // SAFETY: no pointers.
    unsafe { crate::sockets::close(fd) }
}

/// # Safety
/// As dup2(2).
#[no_mangle]
pub unsafe extern "C" fn __dup2(fd: c_int, new: c_int) -> c_int {
    // SAFETY: no pointers.
    unsafe { crate::sockets::dup2(fd, new) }
}

/// # Safety
/// As fcntl(2); `arg` is the variadic argument as a word.
#[no_mangle]
pub unsafe extern "C" fn __fcntl(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe { crate::sockets::fcntl(fd, cmd, arg) }
}

/// # Safety
/// As poll(2).
#[no_mangle]
pub unsafe extern "C" fn __poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe { crate::poll::poll(fds, n, timeout) }
}

/// # Safety
/// As select(2).
#[no_mangle]
pub unsafe extern "C" fn __select(
    n: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    t: *mut timeval,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe { crate::poll::select(n, r, w, e, t) }
}

/// As epoll_pwait2(2): epoll_pwait with a timespec (null: for ever).  An
/// instance that may hold ustack sockets waits as epoll_pwait does, its
/// timeout rounded up to whole milliseconds; a kernel one is the
/// kernel's, to the nanosecond.
///
/// # Safety
/// As epoll_pwait2(2).
#[no_mangle]
pub unsafe extern "C" fn epoll_pwait2(
    epfd: c_int,
    ev: *mut epoll_event,
    n: c_int,
    t: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    if guard::inside() || table::shadow(epfd).is_none() {
        // SAFETY: the caller's arguments.
        return unsafe { real::epoll_pwait2(epfd, ev, n, t, mask) };
    }
    let ms = if t.is_null() {
        -1
    } else {
        // SAFETY: `t` points to a timespec (the caller's promise).
        let ts = unsafe { t.read_unaligned() };
        match timespec_ms(ts) {
            Some(ms) => ms,
            None => return ret(Err(api::Errno::EINVAL)),
        }
    };
    // SAFETY: the caller's arguments.
    unsafe { crate::epoll::epoll_pwait(epfd, ev, n, ms, mask) }
}

/// A timeout as epoll_wait's milliseconds, rounded up (a wait never ends
/// early), at most `c_int::MAX`; `None` if it is not a valid timespec.
fn timespec_ms(ts: timespec) -> Option<c_int> {
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return None;
    }
    let ms = (ts.tv_sec as u64)
        .saturating_mul(1000)
        .saturating_add((ts.tv_nsec as u64).div_ceil(1_000_000));
    Some(ms.min(c_int::MAX as u64) as c_int)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(sec: i64, nsec: i64) -> timespec {
        timespec {
            tv_sec: sec,
            tv_nsec: nsec,
        }
    }

    #[test]
    fn timeouts_round_up_to_milliseconds() {
        assert_eq!(timespec_ms(ts(0, 0)), Some(0));
        assert_eq!(timespec_ms(ts(0, 1)), Some(1));
        assert_eq!(timespec_ms(ts(0, 1_000_000)), Some(1));
        assert_eq!(timespec_ms(ts(2, 1_000_001)), Some(2002));
        assert_eq!(timespec_ms(ts(i64::MAX, 0)), Some(c_int::MAX));
        assert_eq!(timespec_ms(ts(-1, 0)), None);
        assert_eq!(timespec_ms(ts(0, 1_000_000_000)), None);
        assert_eq!(timespec_ms(ts(0, -1)), None);
    }
}
