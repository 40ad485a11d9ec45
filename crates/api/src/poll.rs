//! Readiness without an epoll instance, and sleeping on the engines and
//! other fds at once: what a poll or select over ustack and kernel fds
//! together is built from (the LD_PRELOAD library, `ff_poll`), and
//! [`poll`] over ustack fds.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use runtime::IdlePlan;

use crate::calls::Owner;
use crate::errno::{Errno, Result};
use crate::fdtable;
use crate::worker::{self, Object, Worker};

/// What socket `fd` is ready for now, as epoll bits (EPOLLIN, EPOLLOUT,
/// EPOLLERR, EPOLLHUP, EPOLLRDHUP, EPOLLPRI: the same values as poll's).
/// EINVAL for an epoll or kqueue instance.
pub fn readiness(fd: RawFd) -> Result<u32> {
    Owner::of(fd)?.exec(|w| {
        w.socket(w.key(fd)).map_err(|_| Errno::EINVAL)?;
        Ok(w.status_of(w.key(fd)).map_or(0, |st| st.mask))
    })?
}

const POLLNVAL: u32 = libc::POLLNVAL as u32;
/// What poll reports whether asked or not.
const ALWAYS: u32 = (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) as u32;

/// poll(2) over ustack fds, with Linux's semantics: each entry's
/// `revents` is set to what its fd is ready for among `events`, plus
/// POLLERR and POLLHUP whenever they hold; POLLNVAL for a number that is
/// not a ustack fd (a kernel fd included: this call sees ustack fds only;
/// [`idle_wait`] is how a caller waits on both); an entry with a negative
/// fd is skipped (`revents` 0).  A socket reports what Linux's poll
/// would; an epoll or kqueue instance reports POLLIN when a wait on it
/// would return events.  The poll bits are epoll's (EPOLLIN == POLLIN,
/// EPOLLRDHUP == POLLRDHUP, ...).
///
/// Returns how many entries have a nonzero `revents`.  `timeout_ms` 0
/// never blocks (as `epoll_wait`, it runs one step of this thread's
/// engines when nothing was ready), negative waits for ever; while it
/// waits it drives this thread's engines (or waits for the progress of
/// the thread whose engines hold the sockets), as [`epoll_wait`] does.
/// Errors: those of a worker that went away (EBADF); EINTR is not
/// reported (a wait here is not a kernel sleep a signal interrupts).
///
/// [`epoll_wait`]: crate::epoll_wait
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> Result<usize> {
    let deadline = u64::try_from(timeout_ms)
        .ok()
        .map(|ms| Instant::now() + Duration::from_millis(ms));
    let mut stepped = false;
    loop {
        let (n, remote) = poll_once(fds)?;
        if n > 0 {
            return Ok(n);
        }
        let local = worker::current_id() != 0;
        if timeout_ms == 0 {
            if stepped || !local {
                return Ok(0);
            }
            worker::with_current(|w| w.step())?;
            stepped = true;
            continue;
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Ok(0);
        }
        match (local, remote) {
            (true, _) => Owner::Local.wait(0, deadline),
            (false, Some((owner, seen))) => owner.wait(seen, deadline),
            (false, None) => {
                // Nothing to drive and nothing to watch: sleep out the
                // timeout, as Linux's poll over no valid fd does.
                let nap = Duration::from_millis(10);
                std::thread::sleep(deadline.map_or(nap, |d| (d - now).min(nap)));
            }
        }
    }
}

/// One look at every entry: sets `revents`, returns how many are set and
/// a worker of another thread holding some of the fds (with its progress
/// before the look), to wait on.
fn poll_once(fds: &mut [libc::pollfd]) -> Result<(usize, Option<(Owner, u64)>)> {
    let mut by_worker: HashMap<u32, Vec<(usize, RawFd)>> = HashMap::new();
    for (i, p) in fds.iter_mut().enumerate() {
        p.revents = 0;
        if p.fd < 0 {
            continue;
        }
        match fdtable::lookup(p.fd) {
            Some(e) => by_worker.entry(e.worker).or_default().push((i, p.fd)),
            None => p.revents = POLLNVAL as i16,
        }
    }
    let mut remote = None;
    for (id, entries) in by_worker {
        let owner = if id == worker::current_id() {
            Owner::Local
        } else {
            match worker::shared(id) {
                Some(s) => Owner::Remote(s),
                None => {
                    for &(i, _) in &entries {
                        fds[i].revents = POLLNVAL as i16;
                    }
                    continue;
                }
            }
        };
        let seen = owner.progress();
        let masks = owner.exec(move |w| {
            entries
                .into_iter()
                .map(|(i, fd)| (i, w.poll_mask(fd)))
                .collect::<Vec<_>>()
        })?;
        for (i, mask) in masks {
            let want = fds[i].events as u16 as u32 | ALWAYS;
            fds[i].revents = (mask & want) as u16 as i16;
        }
        if matches!(owner, Owner::Remote(_)) && remote.is_none() {
            remote = Some((owner, seen));
        }
    }
    Ok((fds.iter().filter(|p| p.revents != 0).count(), remote))
}

impl Worker {
    /// What number `fd` is ready for now, as poll bits.
    fn poll_mask(&mut self, fd: RawFd) -> u32 {
        let key = self.key(fd);
        match self.object(key) {
            Some(Object::Socket(_)) => self.status_of(key).map_or(0, |st| st.mask),
            Some(Object::Epoll(_)) | Some(Object::Kqueue(_)) => {
                self.pump();
                let Some(obj) = self.take(key) else {
                    return POLLNVAL;
                };
                let ready = match &obj {
                    Object::Epoll(ep) => ep.has_ready(self),
                    Object::Kqueue(kq) => kq.has_ready(self),
                    Object::Socket(_) => false,
                };
                self.put(key, obj);
                if ready {
                    (libc::POLLIN | libc::POLLRDNORM) as u32
                } else {
                    0
                }
            }
            None => POLLNVAL,
        }
    }
}

/// Sleeps as this thread's idle engines would (until a frame arrives or a
/// timer is due, or another thread posts a call to this worker; engines
/// whose links have no fd nap instead, see `runtime::IdlePlan`) or until one of `extra` is ready (its `revents` set, as
/// poll sets them) or `timeout` passes, whichever comes first.  Returns
/// how many of `extra` are ready.  A thread without engines just polls
/// `extra` for `timeout` (`None`: for ever).
pub fn idle_wait(extra: &mut [libc::pollfd], timeout: Option<Duration>) -> Result<usize> {
    match worker::with_current(|w| sleep(w, extra, timeout)) {
        Ok(r) => r,
        Err(Errno::EBADF) => poll_fds(extra, timeout, None),
        Err(e) => Err(e),
    }
}

/// Whether an [`idle_wait`] on this thread would not sleep at all: its
/// engines busy-poll (`idle_sleep=0`, or frames wait to be sent).  A
/// caller spinning on its own looks then skips the call, and the zero-time
/// poll and the wake-up read it would make.
pub fn engines_busy_poll() -> bool {
    worker::with_current(|w| {
        !w.engines.is_empty()
            && w.engines
                .iter()
                .all(|e| e.driver.idle_plan().timeout == Some(Duration::ZERO))
    })
    .unwrap_or(false)
}

/// [`idle_wait`] on worker `w`.
pub(crate) fn sleep(
    w: &mut Worker,
    extra: &mut [libc::pollfd],
    timeout: Option<Duration>,
) -> Result<usize> {
    let mut limit = timeout;
    let mut fds = Vec::new();
    for e in &w.engines {
        let p = e.driver.idle_plan();
        // `None`: the engine's fds alone can end its sleep.
        let t = if p.pollable {
            p.timeout
        } else {
            Some(p.timeout.map_or(IdlePlan::NAP, |t| t.min(IdlePlan::NAP)))
        };
        if let Some(t) = t {
            limit = Some(limit.map_or(t, |l| l.min(t)));
        }
        fds.extend_from_slice(&p.fds);
    }
    // No time to wait and nothing of the caller's to look at: the engines
    // busy-poll (`idle_sleep=0`), and a zero-time poll of their fds would
    // be a system call whose answer nobody reads (the next step looks at
    // the links and the posted jobs itself).
    if limit == Some(Duration::ZERO) && extra.is_empty() {
        return Ok(0);
    }
    let shared = w.shared.clone();
    if shared.jobs_wake >= 0 {
        fds.push(shared.jobs_wake);
    }
    // Asleep from here: a job posted now writes the eventfd; one posted
    // before is seen just below.
    shared
        .sleeping
        .store(true, std::sync::atomic::Ordering::SeqCst);
    if shared.has_jobs()
        || shared
            .owner_waiting
            .load(std::sync::atomic::Ordering::SeqCst)
    {
        limit = Some(Duration::ZERO);
    }
    let r = poll_fds(extra, limit, Some(&fds));
    shared
        .sleeping
        .store(false, std::sync::atomic::Ordering::SeqCst);
    shared.drain_jobs_wake();
    if !w.engines.is_empty() && limit != Some(Duration::ZERO) {
        for e in &mut w.engines {
            e.driver.note_idle_sleep();
        }
    }
    r
}

/// poll over `extra` and, for POLLIN, `wake`; `revents` copied back into
/// `extra`; how many of `extra` are ready.
fn poll_fds(
    extra: &mut [libc::pollfd],
    limit: Option<Duration>,
    wake: Option<&[RawFd]>,
) -> Result<usize> {
    let wake = wake.unwrap_or(&[]);
    let mut all: Vec<libc::pollfd> = Vec::with_capacity(extra.len() + wake.len());
    all.extend_from_slice(extra);
    all.extend(wake.iter().map(|&fd| libc::pollfd {
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
    let mut ready = 0;
    for (e, a) in extra.iter_mut().zip(&all) {
        e.revents = a.revents;
        if a.revents != 0 {
            ready += 1;
        }
    }
    Ok(ready)
}
