//! Readiness without an epoll instance, and sleeping on the engines and
//! other fds at once: what a poll or select over ustack and kernel fds
//! together is built from (the LD_PRELOAD library, `ff_poll`).

use std::os::fd::RawFd;
use std::time::Duration;

use runtime::IdlePlan;

use crate::calls::Owner;
use crate::errno::{Errno, Result};
use crate::worker;

/// What socket `fd` is ready for now, as epoll bits (EPOLLIN, EPOLLOUT,
/// EPOLLERR, EPOLLHUP, EPOLLRDHUP, EPOLLPRI: the same values as poll's).
/// EINVAL for an epoll or kqueue instance.
pub fn readiness(fd: RawFd) -> Result<u32> {
    Owner::of(fd)?.exec(|w| {
        w.socket(fd).map_err(|_| Errno::EINVAL)?;
        Ok(w.status_of(fd).map_or(0, |st| st.mask))
    })?
}

/// Sleeps as this thread's idle engines would (until a frame arrives, a
/// timer is due or `idle_sleep` passes) or until one of `extra` is ready
/// (its `revents` set, as poll sets them) or `timeout` passes, whichever
/// comes first.  Returns how many of `extra` are ready.  A thread without
/// engines just polls `extra` for `timeout` (`None`: for ever).
pub fn idle_wait(extra: &mut [libc::pollfd], timeout: Option<Duration>) -> Result<usize> {
    let plans = match worker::with_current(|w| {
        w.engines
            .iter()
            .map(|e| e.driver.idle_plan())
            .collect::<Vec<IdlePlan>>()
    }) {
        Ok(p) => p,
        Err(Errno::EBADF) => Vec::new(),
        Err(e) => return Err(e),
    };
    let mut limit = timeout;
    let mut fds = Vec::new();
    for p in &plans {
        let t = if p.pollable {
            p.timeout
        } else {
            p.timeout.min(IdlePlan::NAP)
        };
        limit = Some(limit.map_or(t, |l| l.min(t)));
        fds.extend_from_slice(&p.fds);
    }
    let mut all: Vec<libc::pollfd> = Vec::with_capacity(extra.len() + fds.len());
    all.extend_from_slice(extra);
    all.extend(fds.iter().map(|&fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }));
    let ts = limit.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
    });
    let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const _);
    // SAFETY: `all` is a valid array of `all.len()` pollfds, exclusively
    // borrowed for the call; `tsp` is null or points at `ts`, which
    // outlives the call; a null signal mask leaves the mask unchanged.
    let n = unsafe {
        libc::ppoll(
            all.as_mut_ptr(),
            all.len() as libc::nfds_t,
            tsp,
            std::ptr::null(),
        )
    };
    if n < 0 {
        // EINTR too: a signal handler ran, and the program's wait must
        // say so (nginx learns of a reload this way).
        return Err(Errno::last_os_error());
    }
    if !plans.is_empty() {
        let _ = worker::with_current(|w| {
            for e in &mut w.engines {
                e.driver.note_idle_sleep();
            }
        });
    }
    let mut ready = 0;
    for (e, a) in extra.iter_mut().zip(&all) {
        e.revents = a.revents;
        if a.revents != 0 {
            ready += 1;
        }
    }
    Ok(ready)
}
