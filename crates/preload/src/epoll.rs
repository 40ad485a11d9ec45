//! epoll over ustack and kernel fds together.  The program's epoll fd is
//! a kernel epoll, which watches its kernel fds; the ustack fds it adds go
//! to an epoll of the socket layer beside it (`table::Shadow`).  A wait
//! takes ustack events into the first half of the array (more if the
//! kernel has fewer), kernel events into the rest, so neither side starves
//! the other, and when both are quiet it sleeps on the engine's links and
//! the kernel epoll at once.

use std::os::raw::c_int;
use std::time::{Duration, Instant};

use api::Errno;
use libc::{epoll_event, sigset_t};

use crate::guard::{self, Inside};
use crate::poll::{drives_engine, sleep_mixed, MaskGuard};
use crate::table::{self, Shadow};
use crate::{classify, notes, place, process, real, ret, Fd};

fn shadowed(fd: c_int) -> c_int {
    if fd >= 0 && process::settings().is_some() {
        let _g = Inside::enter();
        table::lock().add_epoll(fd, Shadow::default());
    }
    fd
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

/// The socket-layer epoll of `epfd`, made on first need.
fn ustack_side(epfd: c_int) -> Result<c_int, Errno> {
    if let Some(ep) = table::lock().get().epolls.get(&epfd).and_then(|s| s.ustack) {
        return Ok(ep);
    }
    let ep = api::epoll_create1(libc::EPOLL_CLOEXEC)?;
    let mut t = table::lock();
    match t.get().epolls.get_mut(&epfd) {
        Some(s) => {
            s.ustack = Some(ep);
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
    if guard::inside() || classify(epfd) != Fd::Epoll {
        return kernel();
    }
    let _g = Inside::enter();
    match classify(fd) {
        Fd::Pending => {
            if let Err(e) = place::on_ustack(fd) {
                return ret(Err(e));
            }
        }
        Fd::Epoll => {
            let inner_has_ustack = table::lock()
                .get()
                .epolls
                .get(&fd)
                .is_some_and(|s| s.ustack.is_some());
            if inner_has_ustack {
                notes::once(
                    "an epoll instance inside another: only its kernel fds wake the outer one",
                );
            }
            return kernel();
        }
        Fd::Kernel => return kernel(),
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
    if guard::inside() || classify(epfd) != Fd::Epoll {
        return kernel();
    }
    let _g = Inside::enter();
    let side = table::lock().get().epolls.get(&epfd).and_then(|s| s.ustack);
    let drives = drives_engine();
    if side.is_none() && !drives {
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
    ret(wait(epfd, side, events, timeout, drives))
}

fn wait(
    epfd: c_int,
    side: Option<c_int>,
    events: &mut [epoll_event],
    timeout: c_int,
    drives: bool,
) -> Result<c_int, Errno> {
    let deadline = u64::try_from(timeout)
        .ok()
        .map(|ms| Instant::now() + Duration::from_millis(ms));
    let max = events.len();
    let mut pfd = vec![libc::pollfd {
        fd: epfd,
        events: libc::POLLIN,
        revents: 0,
    }];
    let watch = match side {
        Some(ep) if !drives => api::watch_progress(ep),
        _ => None,
    };
    loop {
        if drives {
            process::tick_stats();
        }
        let mut got = 0;
        let half = max.div_ceil(2);
        if let Some(ep) = side {
            // Steps this thread's engine when nothing is ready.
            got += api::epoll_wait(ep, &mut events[..half], 0)?;
        } else if drives {
            api::step()?;
        }
        let ours = got;
        let rest = &mut events[got..];
        if !rest.is_empty() {
            // SAFETY: `rest` is writable memory for its length of events.
            let k = unsafe { real::epoll_wait(epfd, rest.as_mut_ptr(), rest.len() as c_int, 0) };
            if k < 0 {
                return Err(crate::last_errno());
            }
            got += k as usize;
        }
        if let Some(ep) = side {
            if ours == half && got < max {
                got += api::epoll_wait(ep, &mut events[got..], 0)?;
            }
        }
        if got > 0 {
            return Ok(got as c_int);
        }
        let left = match deadline {
            None => None,
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    return Ok(0);
                }
                Some(d - now)
            }
        };
        sleep_mixed(&mut pfd, left, drives, watch.as_ref())?;
    }
}
