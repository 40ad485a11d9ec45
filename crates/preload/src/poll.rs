//! poll, ppoll and select over ustack and kernel fds together: each round
//! steps the engine (on its thread), asks the socket layer about the
//! ustack fds and the kernel (with a zero timeout) about the rest, and
//! when nothing is ready sleeps on the engine's links and the kernel fds
//! together until one of them wakes or the engine has a timer due.  An
//! engine that busy-polls (`idle_sleep=0`) does not sleep: the wait spins
//! on it, and asks the kernel at each call's start and then every
//! `KERNEL_LOOK_INTERVAL`.

use std::os::fd::RawFd;
use std::os::raw::c_int;
use std::time::{Duration, Instant};

use api::Errno;
use libc::{fd_set, nfds_t, pollfd, sigset_t, timespec, timeval};
use runtime::clock::monotonic_micros;

use crate::epoll::KERNEL_LOOK_INTERVAL;
use crate::guard::{self, Inside};
use crate::{classify, place, process, real, ret, Fd};

/// A wait on another thread's engine sleeps on the engine's progress fd
/// (`api::watch_progress`) while that thread drives it, and looks again at
/// least this often (sooner when the engine may need this thread to drive
/// it: `api::ADOPT_AFTER`); without a progress fd, every millisecond.
pub(crate) const REMOTE_RECHECK: Duration = Duration::from_millis(10);
pub(crate) const REMOTE_RECHECK_BLIND: Duration = Duration::from_millis(1);

/// Sleeps for [`wait_mixed`] and the epoll wait: on the engine (this
/// thread's), or on another thread's engine's progress, and `kernel`.
pub(crate) fn sleep_mixed(
    kernel: &mut Vec<pollfd>,
    left: Option<Duration>,
    drives: bool,
    watch: Option<&api::ProgressWatch>,
) -> Result<(), Errno> {
    if drives {
        api::idle_wait(kernel, left)?;
        return Ok(());
    }
    let Some(w) = watch else {
        let cap = left.map_or(REMOTE_RECHECK_BLIND, |l| l.min(REMOTE_RECHECK_BLIND));
        api::idle_wait(kernel, Some(cap))?;
        return Ok(());
    };
    // The engine's own thread has left it (blocked elsewhere: a join, a
    // sleep): this thread drives it, and sleeps on its links and the
    // kernel fds.
    let recheck = match w.drive(kernel, left)? {
        api::Drive::Drove(_) => return Ok(()),
        api::Drive::Later(Some(d)) => d.min(REMOTE_RECHECK),
        api::Drive::Later(None) => REMOTE_RECHECK,
    };
    kernel.push(pollfd {
        fd: w.fd(),
        events: libc::POLLIN,
        revents: 0,
    });
    let cap = left.map_or(recheck, |l| l.min(recheck));
    let r = api::idle_wait(kernel, Some(cap));
    if kernel.pop().is_some_and(|p| p.revents != 0) {
        w.clear();
    }
    r.map(|_| ())
}

/// Whether the calling thread drives an engine (then every wait steps it).
pub(crate) fn drives_engine() -> bool {
    process::engine_up() && api::attached()
}

/// The program's signal mask for the length of a wait (ppoll, pselect,
/// epoll_pwait): set, then put back when dropped.  Not atomic with the
/// wait as the kernel's is: a signal unblocked by the mask and arriving
/// between the set and the wait is handled just before the wait instead
/// of ending it.
pub(crate) struct MaskGuard(Option<sigset_t>);

impl MaskGuard {
    /// # Safety
    /// `mask` is null or points to a sigset_t.
    pub(crate) unsafe fn set(mask: *const sigset_t) -> MaskGuard {
        if mask.is_null() {
            return MaskGuard(None);
        }
        // SAFETY: a zeroed sigset_t is a valid value to be overwritten.
        let mut old: sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: `mask` is a sigset_t (the caller's promise); `old` is ours.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, mask, &mut old) };
        MaskGuard(Some(old))
    }
}

impl Drop for MaskGuard {
    fn drop(&mut self) {
        if let Some(old) = self.0 {
            // SAFETY: `old` is the mask saved by `set`.
            unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
        }
    }
}

/// The bits of a poll result that are reported whether asked for or not.
const ALWAYS: i16 = libc::POLLERR | libc::POLLHUP | libc::POLLNVAL;

/// poll over `fds`, some of which are ustack's.  `timeout` None: for ever.
/// Runs inside the guard.
pub(crate) fn wait_mixed(fds: &mut [pollfd], timeout: Option<Duration>) -> Result<c_int, Errno> {
    // Sockets not placed yet are placed on ustack: they are being waited
    // on.  One that cannot be (this process has no engine: a child of a
    // DPDK process) is dead (`dead`): it reports an error and a hang-up,
    // as Linux reports a socket whose network went away (select marks it
    // readable and writable), and the call the program makes on it next
    // fails with the placement's errno.
    let mut unplaced: Vec<usize> = Vec::new();
    for (i, p) in fds.iter().enumerate() {
        if p.fd >= 0 && classify(p.fd) == Fd::Pending && place::on_ustack(p.fd).is_err() {
            unplaced.push(i);
        }
    }
    let ustack: Vec<usize> = (0..fds.len())
        .filter(|&i| fds[i].fd >= 0 && classify(fds[i].fd) == Fd::Ustack)
        .collect();
    let mut kernel: Vec<pollfd> = Vec::new();
    let mut kernel_at: Vec<usize> = Vec::new();
    for (i, p) in fds.iter().enumerate() {
        if p.fd >= 0 && classify(p.fd) != Fd::Ustack && !unplaced.contains(&i) {
            kernel.push(pollfd {
                fd: p.fd,
                events: p.events,
                revents: 0,
            });
            kernel_at.push(i);
        }
    }
    // The clock, read once a round (CLOCK_MONOTONIC in microseconds, the
    // engines' own), as the epoll wait's: for the deadline, the kernel
    // looks and the engine's turn at the start of the next round.
    let mut now = monotonic_micros();
    let deadline =
        timeout.map(|t| now.saturating_add(u64::try_from(t.as_micros()).unwrap_or(u64::MAX)));
    let drives = drives_engine();
    let watch = if drives {
        None
    } else {
        ustack.first().and_then(|&i| api::watch_progress(fds[i].fd))
    };
    // Each call's first round asks the kernel; a busy wait's later rounds
    // every KERNEL_LOOK_INTERVAL (as the epoll wait's).
    let mut look_kernel = true;
    let mut kernel_looked = now;
    // Whether the engines busy-poll, asked once per call when first idle.
    let mut busy: Option<bool> = None;
    let signals = crate::signals::delivered();
    loop {
        if drives {
            let _ = api::step_at(now);
            process::tick_stats();
        }
        let mut ready = 0;
        for p in fds.iter_mut() {
            p.revents = 0;
        }
        for &i in &unplaced {
            fds[i].revents = crate::dead::POLL_EVENTS;
            ready += 1;
        }
        for &i in &ustack {
            let p = &mut fds[i];
            p.revents = match api::readiness(p.fd) {
                Ok(mask) => (mask as i16) & (p.events | ALWAYS),
                Err(_) => libc::POLLNVAL,
            };
            if p.revents != 0 {
                ready += 1;
            }
        }
        if !kernel.is_empty() && look_kernel {
            // This round's reading (taken before its step): the next
            // look comes at most that much sooner.
            kernel_looked = now;
            // SAFETY: `kernel` is a live array of its length.
            let n = unsafe { real::poll(kernel.as_mut_ptr(), kernel.len() as nfds_t, 0) };
            if n < 0 {
                return Err(crate::last_errno());
            }
            for (k, &i) in kernel.iter().zip(&kernel_at) {
                fds[i].revents = k.revents;
                if k.revents != 0 {
                    ready += 1;
                }
            }
        }
        if ready > 0 {
            return Ok(ready);
        }
        now = monotonic_micros();
        let left = match deadline {
            None => None,
            Some(d) => {
                if now >= d {
                    return Ok(0);
                }
                Some(Duration::from_micros(d - now))
            }
        };
        // A handler ran on this thread: the kernel would have ended the
        // wait with EINTR.  Looked at before each sleep too: a handler
        // that ran while the thread was awake (stepping the engine,
        // rewriting the stats file) ended no system call.
        if crate::signals::delivered() != signals {
            return Err(Errno(libc::EINTR));
        }
        if drives && *busy.get_or_insert_with(api::engines_busy_poll) {
            // A sleep would be a zero-time poll and a wake-up read.
            look_kernel =
                now.saturating_sub(kernel_looked) >= KERNEL_LOOK_INTERVAL.as_micros() as u64;
            continue;
        }
        look_kernel = true;
        if drives {
            api::idle_wait(&mut kernel, process::until_stats(left))?;
        } else if ustack.is_empty() {
            api::idle_wait(&mut kernel, left)?;
        } else {
            sleep_mixed(&mut kernel, left, drives, watch.as_ref())?;
        }
        now = monotonic_micros();
    }
}

fn ms_timeout(ms: c_int) -> Option<Duration> {
    u64::try_from(ms).ok().map(Duration::from_millis)
}

/// Whether a poll array needs the mixed wait: it holds a ustack fd, or
/// the thread drives an engine (which must keep turning while it waits).
fn needs_mixed(fds: &[pollfd]) -> bool {
    fds.iter()
        .any(|p| p.fd >= 0 && matches!(classify(p.fd), Fd::Ustack | Fd::Pending))
        || drives_engine()
}

/// # Safety
/// `fds` is null or points to `n` pollfds.
unsafe fn poll_slice<'a>(fds: *mut pollfd, n: nfds_t) -> Result<&'a mut [pollfd], Errno> {
    let mut limit: libc::rlimit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is ours.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    if n > limit.rlim_cur {
        return Err(Errno::EINVAL);
    }
    if n == 0 {
        return Ok(&mut []);
    }
    if fds.is_null() {
        return Err(Errno(libc::EFAULT));
    }
    // SAFETY: `n` pollfds at `fds` (the caller's promise).
    Ok(unsafe { std::slice::from_raw_parts_mut(fds, n as usize) })
}

/// # Safety
/// As poll(2).
#[no_mangle]
pub unsafe extern "C" fn poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int {
    if guard::inside() {
        // SAFETY: the caller's arguments.
        return unsafe { real::poll(fds, n, timeout) };
    }
    // SAFETY: the caller's array.
    let slice = match unsafe { poll_slice(fds, n) } {
        Ok(s) => s,
        Err(e) => return ret(Err(e)),
    };
    if !needs_mixed(slice) {
        // SAFETY: the caller's arguments.
        return unsafe { real::poll(fds, n, timeout) };
    }
    let _g = Inside::enter();
    ret(wait_mixed(slice, ms_timeout(timeout)))
}

/// # Safety
/// As glibc's `__poll_chk`.
#[no_mangle]
pub unsafe extern "C" fn __poll_chk(
    fds: *mut pollfd,
    n: nfds_t,
    timeout: c_int,
    fdslen: usize,
) -> c_int {
    if fdslen / std::mem::size_of::<pollfd>() < n as usize {
        crate::io::fortify_fail();
    }
    // SAFETY: the caller's arguments.
    unsafe { poll(fds, n, timeout) }
}

/// A timespec as a duration; EINVAL when it is not one.
fn ts_timeout(t: *const timespec) -> Result<Option<Duration>, Errno> {
    if t.is_null() {
        return Ok(None);
    }
    // SAFETY: `t` points to a timespec (the caller's promise).
    let ts = unsafe { *t };
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return Err(Errno::EINVAL);
    }
    Ok(Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)))
}

/// # Safety
/// As ppoll(2).
#[no_mangle]
pub unsafe extern "C" fn ppoll(
    fds: *mut pollfd,
    n: nfds_t,
    t: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    if guard::inside() {
        // SAFETY: the caller's arguments.
        return unsafe { real::ppoll(fds, n, t, mask) };
    }
    // SAFETY: the caller's array.
    let slice = match unsafe { poll_slice(fds, n) } {
        Ok(s) => s,
        Err(e) => return ret(Err(e)),
    };
    if !needs_mixed(slice) {
        // SAFETY: the caller's arguments.
        return unsafe { real::ppoll(fds, n, t, mask) };
    }
    let timeout = match ts_timeout(t) {
        Ok(t) => t,
        Err(e) => return ret(Err(e)),
    };
    let _g = Inside::enter();
    // SAFETY: the caller's mask.
    let _m = unsafe { MaskGuard::set(mask) };
    ret(wait_mixed(slice, timeout))
}

/// # Safety
/// As glibc's `__ppoll_chk`.
#[no_mangle]
pub unsafe extern "C" fn __ppoll_chk(
    fds: *mut pollfd,
    n: nfds_t,
    t: *const timespec,
    mask: *const sigset_t,
    fdslen: usize,
) -> c_int {
    if fdslen / std::mem::size_of::<pollfd>() < n as usize {
        crate::io::fortify_fail();
    }
    // SAFETY: the caller's arguments.
    unsafe { ppoll(fds, n, t, mask) }
}

/// The fds of select's three sets as poll entries.
///
/// # Safety
/// Each set is null or points to an fd_set of at least `n` bits.
unsafe fn select_entries(n: c_int, r: *mut fd_set, w: *mut fd_set, e: *mut fd_set) -> Vec<pollfd> {
    let mut out = Vec::new();
    let has = |s: *mut fd_set, fd: RawFd| {
        // SAFETY: `s` is an fd_set of at least `n` > `fd` bits.
        !s.is_null() && unsafe { libc::FD_ISSET(fd, s) }
    };
    for fd in 0..n {
        let mut events = 0;
        if has(r, fd) {
            events |= libc::POLLIN;
        }
        if has(w, fd) {
            events |= libc::POLLOUT;
        }
        if has(e, fd) {
            events |= libc::POLLPRI;
        }
        if events != 0 {
            out.push(pollfd {
                fd,
                events,
                revents: 0,
            });
        }
    }
    out
}

/// select's answer from poll's: the sets rewritten, the count of bits.
///
/// # Safety
/// As [`select_entries`].
unsafe fn select_results(
    entries: &[pollfd],
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
) -> Result<c_int, Errno> {
    if entries.iter().any(|p| p.revents & libc::POLLNVAL != 0) {
        return Err(Errno::EBADF);
    }
    for s in [r, w, e] {
        if !s.is_null() {
            // SAFETY: an fd_set (the caller's promise).
            unsafe { libc::FD_ZERO(s) };
        }
    }
    let mut count = 0;
    for p in entries {
        // As the kernel's select: hang-up and error count as readable,
        // error as writable.
        let readable = p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0;
        let writable = p.revents & (libc::POLLOUT | libc::POLLERR) != 0;
        let except = p.revents & libc::POLLPRI != 0;
        for (want, got, set) in [
            (libc::POLLIN, readable, r),
            (libc::POLLOUT, writable, w),
            (libc::POLLPRI, except, e),
        ] {
            if p.events & want != 0 && got && !set.is_null() {
                // SAFETY: as above; `p.fd` < n.
                unsafe { libc::FD_SET(p.fd, set) };
                count += 1;
            }
        }
    }
    Ok(count)
}

/// # Safety
/// As select(2).
#[no_mangle]
pub unsafe extern "C" fn select(
    n: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    t: *mut timeval,
) -> c_int {
    // SAFETY: the caller's arguments.
    let kernel = || unsafe { real::select(n, r, w, e, t) };
    if guard::inside() || !(0..=libc::FD_SETSIZE as c_int).contains(&n) {
        return kernel();
    }
    // SAFETY: the caller's sets.
    let mut entries = unsafe { select_entries(n, r, w, e) };
    if !needs_mixed(&entries) {
        return kernel();
    }
    let timeout = if t.is_null() {
        None
    } else {
        // SAFETY: `t` points to a timeval (the caller's promise).
        let tv = unsafe { *t };
        if tv.tv_sec < 0 || !(0..1_000_000).contains(&tv.tv_usec) {
            return ret(Err(Errno::EINVAL));
        }
        Some(Duration::new(tv.tv_sec as u64, tv.tv_usec as u32 * 1000))
    };
    let _g = Inside::enter();
    let start = Instant::now();
    let r0 = wait_mixed(&mut entries, timeout);
    if let (Some(to), false) = (timeout, t.is_null()) {
        // Linux leaves the time not slept in the timeval.
        let left = to.saturating_sub(start.elapsed());
        // SAFETY: as above.
        unsafe {
            (*t).tv_sec = left.as_secs() as libc::time_t;
            (*t).tv_usec = left.subsec_micros() as libc::suseconds_t;
        }
    }
    // SAFETY: the caller's sets.
    ret(r0.and_then(|_| unsafe { select_results(&entries, r, w, e) }))
}

/// # Safety
/// As pselect(2).
#[no_mangle]
pub unsafe extern "C" fn pselect(
    n: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    t: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    // SAFETY: the caller's arguments.
    let kernel = || unsafe { real::pselect(n, r, w, e, t, mask) };
    if guard::inside() || !(0..=libc::FD_SETSIZE as c_int).contains(&n) {
        return kernel();
    }
    // SAFETY: the caller's sets.
    let mut entries = unsafe { select_entries(n, r, w, e) };
    if !needs_mixed(&entries) {
        return kernel();
    }
    let timeout = match ts_timeout(t) {
        Ok(t) => t,
        Err(e) => return ret(Err(e)),
    };
    let _g = Inside::enter();
    // SAFETY: the caller's mask.
    let _m = unsafe { MaskGuard::set(mask) };
    let r0 = wait_mixed(&mut entries, timeout);
    // SAFETY: the caller's sets.
    ret(r0.and_then(|_| unsafe { select_results(&entries, r, w, e) }))
}
