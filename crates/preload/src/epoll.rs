//! epoll over ustack and kernel fds together.  The program's epoll fd is
//! a kernel epoll, which watches its kernel fds; the ustack fds it adds go
//! to an epoll of the socket layer beside it (`table::Shadow`).  A wait
//! takes ustack events into the first half of the array (more if the
//! kernel has fewer), kernel events into the rest, so neither side starves
//! the other, and when both are quiet it sleeps on the engine's links and
//! the kernel epoll at once.  While no kernel fd was added to an instance
//! (`Shadow::kernel_side`), a wait asks the kernel only every
//! [`KERNEL_LOOK_EVERY`]th time and after each sleep, instead of a syscall
//! per wait.  With kernel fds, a busy wait asks the kernel at most every
//! [`KERNEL_LOOK_INTERVAL`] (see [`KernelLooks`]).

use std::cell::Cell;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use runtime::clock::monotonic_micros;

use api::Errno;
use libc::{epoll_event, sigset_t};

use crate::guard::{self, Inside};
use crate::poll::{drives_engine, sleep_mixed, MaskGuard};
use crate::table::{self, Shadow};
use crate::{classify, notes, place, process, real, ret, Fd};

fn shadowed(fd: c_int) -> c_int {
    if fd >= 0 && process::settings().is_some() {
        let _g = Inside::enter();
        table::lock().set_epoll(fd, Shadow::new());
    }
    fd
}

/// Records that epoll instance `epfd`'s kernel side may hold fds (see
/// `Shadow::kernel_side`).
pub(crate) fn kernel_side_used(epfd: c_int) {
    if table::shadow(epfd).is_some_and(|s| s.kernel_side) {
        return;
    }
    let _g = Inside::enter();
    let mut t = table::lock();
    if let Some(mut s) = t.get().epoll(epfd) {
        s.kernel_side = true;
        t.set_epoll(epfd, s);
    }
}

/// # Safety
/// As epoll_create(2).
#[no_mangle]
pub unsafe extern "C" fn epoll_create(size: c_int) -> c_int {
    // SAFETY: no pointers.
    let fd = unsafe { real::epoll_create(size) };
    if guard::inside() {
        return fd;
    }
    shadowed(fd)
}

/// # Safety
/// As epoll_create1(2).
#[no_mangle]
pub unsafe extern "C" fn epoll_create1(flags: c_int) -> c_int {
    // SAFETY: no pointers.
    let fd = unsafe { real::epoll_create1(flags) };
    if guard::inside() {
        return fd;
    }
    shadowed(fd)
}

/// Before `fd` gets another number or goes to another process (dup,
/// SCM_RIGHTS): if it is an epoll instance, fds may join its kernel side
/// through the other one, unseen.
pub(crate) fn shared_number(fd: c_int) {
    if table::mark(fd) == table::Mark::Epoll {
        kernel_side_used(fd);
    }
}

/// Before `msg` is sent on a kernel socket: the epoll instances among the
/// fds it passes (SCM_RIGHTS) are [`shared_number`]s.
///
/// # Safety
/// `msg` is null or points to a msghdr whose control buffer is
/// `msg_controllen` readable bytes.
pub(crate) unsafe fn passing_fds(msg: *const libc::msghdr) {
    // SAFETY: the caller's promise.
    if msg.is_null() || unsafe { (*msg).msg_controllen == 0 || (*msg).msg_control.is_null() } {
        return;
    }
    // SAFETY: the caller's promise; CMSG_FIRSTHDR and CMSG_NXTHDR stay
    // within the control buffer and return null past it.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c);
                let header = data as usize - c as usize;
                let n =
                    ((*c).cmsg_len as usize).saturating_sub(header) / std::mem::size_of::<c_int>();
                for i in 0..n {
                    let fd = data.cast::<c_int>().add(i).read_unaligned();
                    shared_number(fd);
                }
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
}

/// The socket-layer epoll of `epfd`, made on first need.
fn ustack_side(epfd: c_int) -> Result<c_int, Errno> {
    if let Some(ep) = table::shadow(epfd).and_then(|s| s.ustack) {
        return Ok(ep);
    }
    let ep = api::epoll_create1(libc::EPOLL_CLOEXEC)?;
    let mut t = table::lock();
    match t.get().epoll(epfd) {
        Some(mut s) => {
            s.ustack = Some(ep);
            t.set_epoll(epfd, s);
            Ok(ep)
        }
        None => {
            drop(t);
            let _ = api::close(ep);
            Err(Errno::EBADF)
        }
    }
}

/// # Safety
/// As epoll_ctl(2).
#[no_mangle]
pub unsafe extern "C" fn epoll_ctl(
    epfd: c_int,
    op: c_int,
    fd: c_int,
    ev: *mut epoll_event,
) -> c_int {
    // SAFETY: the caller's arguments.
    let kernel = || unsafe { real::epoll_ctl(epfd, op, fd, ev) };
    if classify(epfd) != Fd::Epoll {
        return kernel();
    }
    let Some(_g) = Inside::outside() else {
        return kernel();
    };
    // A kernel fd joining the kernel epoll.
    let add_kernel = || {
        let r = kernel();
        if r == 0 && op == libc::EPOLL_CTL_ADD {
            kernel_side_used(epfd);
        }
        r
    };
    match classify(fd) {
        Fd::Pending => {
            if let Err(e) = place::on_ustack(fd) {
                if crate::dead::is_dead(fd) {
                    // SAFETY: the caller's event.
                    return unsafe { crate::dead::epoll_ctl(epfd, op, fd, ev) };
                }
                return ret(Err(e));
            }
        }
        Fd::Epoll => {
            if table::shadow(fd).is_some_and(|s| s.ustack.is_some()) {
                notes::once(
                    "an epoll instance inside another: only its kernel fds wake the outer one",
                );
            }
            return add_kernel();
        }
        Fd::Kernel => return add_kernel(),
        Fd::Ustack => {}
    }
    let ep = match ustack_side(epfd) {
        Ok(ep) => ep,
        Err(e) => return ret(Err(e)),
    };
    // SAFETY: the caller's event.
    unsafe { capi::ustack_epoll_ctl(ep, op, fd, ev) }
}

/// # Safety
/// As epoll_wait(2).
#[no_mangle]
pub unsafe extern "C" fn epoll_wait(
    epfd: c_int,
    ev: *mut epoll_event,
    n: c_int,
    timeout: c_int,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe { epoll_pwait(epfd, ev, n, timeout, std::ptr::null()) }
}

/// # Safety
/// As epoll_pwait(2).
#[no_mangle]
pub unsafe extern "C" fn epoll_pwait(
    epfd: c_int,
    ev: *mut epoll_event,
    n: c_int,
    timeout: c_int,
    mask: *const sigset_t,
) -> c_int {
    // SAFETY: the caller's arguments.
    let kernel = || unsafe { real::epoll_pwait(epfd, ev, n, timeout, mask) };
    let Some(shadow) = table::shadow(epfd) else {
        return kernel();
    };
    let Some(g) = Inside::outside() else {
        return kernel();
    };
    let drives = drives_engine();
    if shadow.ustack.is_none() && !drives {
        drop(g);
        return kernel();
    }
    if n <= 0 || n as usize > i32::MAX as usize / std::mem::size_of::<epoll_event>() {
        return ret(Err(Errno::EINVAL));
    }
    if ev.is_null() {
        return ret(Err(Errno(libc::EFAULT)));
    }
    // SAFETY: `n` writable events at `ev` (the caller's promise).
    let events = unsafe { std::slice::from_raw_parts_mut(ev, n as usize) };
    // SAFETY: the caller's mask.
    let _m = unsafe { MaskGuard::set(mask) };
    ret(wait(epfd, shadow, events, timeout, drives))
}

/// While an instance's kernel side is known empty, a wait asks the kernel
/// this often anyway (and after every sleep): an fd added out of sight
/// (from a process that got the instance by a way the library does not
/// see) is served late, never lost.
const KERNEL_LOOK_EVERY: u32 = 64;

/// Waits that skipped the kernel side, counted over every instance.
static KERNEL_SKIPPED: AtomicU32 = AtomicU32::new(0);

/// How long a busy wait on an instance holding kernel fds may go without
/// asking the kernel: the most a kernel event waits while ustack events
/// keep coming (the kernel's `epoll_wait(.., 0)` per wait was a syscall
/// per request for nginx, whose channel to its master is such an fd).
pub(crate) const KERNEL_LOOK_INTERVAL: Duration = Duration::from_micros(50);

/// This thread's last look at a kernel epoll: which, when, and whether it
/// found events (then the next wait looks again at once, so that
/// level-triggered fds left ready are reported on every wait, as the
/// kernel would).
#[derive(Clone, Copy)]
struct LastLook {
    epfd: c_int,
    /// A reading of `monotonic_micros`.
    at: u64,
    found: bool,
}

thread_local! {
    static LAST_LOOK: Cell<Option<LastLook>> = const { Cell::new(None) };
}

/// When a wait on an instance holding kernel fds asks the kernel.  Always:
/// after a sleep (its poll saw the epoll fd), when the last look found
/// events, when the ustack side had nothing for a wait that returns now
/// (`timeout` 0: the answer must be the kernel's of this moment), and
/// [`KERNEL_LOOK_INTERVAL`] after the last look; otherwise (ustack events
/// to return, or a busy wait spinning) the kernel is not asked.
struct KernelLooks;

impl KernelLooks {
    /// `now`: a reading of `monotonic_micros`.
    fn due(epfd: c_int, now: u64) -> bool {
        match LAST_LOOK.get() {
            Some(l) if l.epfd == epfd && !l.found => {
                now.saturating_sub(l.at) >= KERNEL_LOOK_INTERVAL.as_micros() as u64
            }
            _ => true,
        }
    }

    fn looked(epfd: c_int, at: u64, found: bool) {
        LAST_LOOK.set(Some(LastLook { epfd, at, found }));
    }
}

fn wait(
    epfd: c_int,
    shadow: Shadow,
    events: &mut [epoll_event],
    timeout: c_int,
    drives: bool,
) -> Result<c_int, Errno> {
    let side = shadow.ustack;
    // The clock, read once a round (CLOCK_MONOTONIC in microseconds, the
    // engines' own): for the deadline, the kernel looks, and the engine's
    // turn that follows in the same round, which takes this reading
    // instead of a second one (`api::epoll_wait_now_at`).
    let mut now = monotonic_micros();
    // A zero timeout returns after one look.
    let deadline = u64::try_from(timeout)
        .ok()
        .filter(|&ms| ms > 0)
        .map(|ms| now.saturating_add(ms.saturating_mul(1000)));
    let max = events.len();
    // Made for the first sleep.
    let mut pfd: Vec<libc::pollfd> = Vec::new();
    let watch = match side {
        Some(ep) if !drives => api::watch_progress(ep),
        _ => None,
    };
    let kernel_fds = shadow.may_hold_kernel_fds();
    // Without kernel fds: every KERNEL_LOOK_EVERYth wait.  With them: by
    // `KernelLooks`, decided once the ustack side has answered.
    let counted_look = || {
        !kernel_fds
            && KERNEL_SKIPPED
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(KERNEL_LOOK_EVERY)
    };
    let mut look_now = counted_look();
    let mut slept = false;
    // Whether the engines busy-poll, asked once per call when first idle.
    let mut busy: Option<bool> = None;
    let signals = crate::signals::delivered();
    loop {
        if drives {
            if slept {
                process::tick_stats();
            } else {
                process::tick_stats_busy();
            }
        }
        let mut got = 0;
        let half = max.div_ceil(2);
        if let Some(ep) = side {
            // Steps this thread's engine when nothing is ready.
            got += api::epoll_wait_now_at(ep, &mut events[..half], now)?;
        } else if drives {
            api::step_at(now)?;
        }
        let ours = got;
        let rest = &mut events[got..];
        let ask_kernel = look_now
            || (kernel_fds
                && (slept || (ours == 0 && timeout == 0) || KernelLooks::due(epfd, now)));
        if !rest.is_empty() && ask_kernel {
            // SAFETY: `rest` is writable memory for its length of events.
            let k = unsafe { real::epoll_wait(epfd, rest.as_mut_ptr(), rest.len() as c_int, 0) };
            if k < 0 {
                return Err(crate::last_errno());
            }
            if k > 0 && !shadow.kernel_side {
                // Fds the library did not see join: from now on the
                // kernel is asked every time.
                kernel_side_used(epfd);
            }
            if kernel_fds {
                KernelLooks::looked(epfd, now, k > 0);
            }
            got += k as usize;
        }
        if let Some(ep) = side {
            if ours == half && got < max {
                got += api::epoll_wait(ep, &mut events[got..], 0)?;
            }
        }
        if got > 0 || timeout == 0 {
            return Ok(got as c_int);
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
            // A sleep would be a zero-time poll: the next round looks at
            // the engine, and at the kernel when due.
            look_now = counted_look();
            continue;
        }
        if pfd.is_empty() {
            pfd.push(libc::pollfd {
                fd: epfd,
                events: libc::POLLIN,
                revents: 0,
            });
        }
        let left = if drives {
            process::until_stats(left)
        } else {
            left
        };
        sleep_mixed(&mut pfd, left, drives, watch.as_ref())?;
        now = monotonic_micros();
        look_now = true;
        slept = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_is_asked_again_after_the_interval_or_after_events() {
        let t0 = monotonic_micros();
        let interval = KERNEL_LOOK_INTERVAL.as_micros() as u64;
        // No look yet on this thread: due.
        assert!(KernelLooks::due(7, t0));
        KernelLooks::looked(7, t0, false);
        // Just looked, nothing found: not due for this instance ...
        assert!(!KernelLooks::due(7, t0));
        assert!(!KernelLooks::due(7, t0 + interval / 2));
        // ... due for another one, and once the interval has passed.
        assert!(KernelLooks::due(8, t0));
        assert!(KernelLooks::due(7, t0 + interval));
        // A look that found events: the next wait looks again at once
        // (level-triggered fds left ready).
        KernelLooks::looked(7, t0, true);
        assert!(KernelLooks::due(7, t0));
    }
}
