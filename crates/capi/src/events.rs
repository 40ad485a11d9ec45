//! epoll (Linux's semantics) and kqueue (FreeBSD's) over the socket layer.

use std::cell::Cell;
use std::os::raw::{c_int, c_void};
use std::time::Duration;

use api::{epoll_event, Errno, KEvent, Result};

use crate::{ret_int, ret_unit, EFAULT};

/// `struct ustack_kevent` of ustack.h, which is also `struct kevent` of
/// the F-Stack headers: FreeBSD's layout as F-Stack declares it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CKevent {
    pub ident: usize,
    pub filter: i16,
    pub flags: u16,
    pub fflags: u32,
    pub data: isize,
    pub udata: *mut c_void,
}

impl From<&CKevent> for KEvent {
    fn from(k: &CKevent) -> KEvent {
        KEvent {
            ident: k.ident,
            filter: k.filter,
            flags: k.flags,
            fflags: k.fflags,
            data: k.data as i64,
            udata: k.udata as usize,
        }
    }
}

impl From<&KEvent> for CKevent {
    fn from(k: &KEvent) -> CKevent {
        CKevent {
            ident: k.ident,
            filter: k.filter,
            flags: k.flags,
            fflags: k.fflags,
            data: k.data as isize,
            udata: k.udata as *mut c_void,
        }
    }
}

#[no_mangle]
pub extern "C" fn ustack_epoll_create(size: c_int) -> c_int {
    ret_int(api::epoll_create(size))
}

#[no_mangle]
pub extern "C" fn ustack_epoll_create1(flags: c_int) -> c_int {
    ret_int(api::epoll_create1(flags))
}

/// # Safety
/// `event` is null or points to a readable `struct epoll_event`.
#[no_mangle]
pub unsafe extern "C" fn ustack_epoll_ctl(
    epfd: c_int,
    op: c_int,
    fd: c_int,
    event: *mut epoll_event,
) -> c_int {
    let ev = if event.is_null() {
        None
    } else {
        // SAFETY: a readable epoll_event (the caller's promise); the
        // struct is packed on x86-64, so it is read unaligned.
        Some(unsafe { event.read_unaligned() })
    };
    ret_unit(api::epoll_ctl(epfd, op, fd, ev.as_ref()))
}

/// # Safety
/// `events` is null or points to `maxevents` writable epoll_events.
#[no_mangle]
pub unsafe extern "C" fn ustack_epoll_wait(
    epfd: c_int,
    events: *mut epoll_event,
    maxevents: c_int,
    timeout: c_int,
) -> c_int {
    // SAFETY: passed on from the caller.
    unsafe { epoll_wait(epfd, events, maxevents, timeout) }
}

/// # Safety
/// As [`ustack_epoll_wait`].
pub(crate) unsafe fn epoll_wait(
    epfd: c_int,
    events: *mut epoll_event,
    maxevents: c_int,
    timeout: c_int,
) -> c_int {
    let r = (|| {
        if maxevents <= 0 {
            return Err(Errno::EINVAL);
        }
        if events.is_null() {
            return Err(EFAULT);
        }
        // SAFETY: `maxevents` writable epoll_events nobody else uses (the
        // caller's promise); epoll_event's alignment is 1 where it is
        // packed and its natural one elsewhere, which the caller's array
        // has.
        let out = unsafe { std::slice::from_raw_parts_mut(events, maxevents as usize) };
        api::epoll_wait(epfd, out, timeout).map(|n| n as c_int)
    })();
    ret_int(r)
}

#[no_mangle]
pub extern "C" fn ustack_kqueue() -> c_int {
    ret_int(api::kqueue())
}

/// The timeout of kevent: `None` waits for ever.
///
/// # Safety
/// `ts` is null or points to a readable timespec.
pub(crate) unsafe fn kevent_timeout(ts: *const libc::timespec) -> Result<Option<Duration>> {
    if ts.is_null() {
        return Ok(None);
    }
    // SAFETY: a readable timespec (the caller's promise).
    let t = unsafe { ts.read_unaligned() };
    if t.tv_sec < 0 || !(0..1_000_000_000).contains(&t.tv_nsec) {
        return Err(Errno::EINVAL);
    }
    Ok(Some(Duration::new(t.tv_sec as u64, t.tv_nsec as u32)))
}

/// kevent with the timeout already decided.
///
/// # Safety
/// `changes` is null or points to `nchanges` readable kevents; `events` is
/// null or points to `nevents` writable ones.
pub(crate) unsafe fn kevent(
    kq: c_int,
    changes: *const CKevent,
    nchanges: c_int,
    events: *mut CKevent,
    nevents: c_int,
    timeout: Option<Duration>,
) -> c_int {
    let r = (|| {
        if nevents > 0 && events.is_null() {
            return Err(EFAULT);
        }
        let write_out = |out: &[KEvent]| {
            for (i, k) in out.iter().enumerate() {
                // SAFETY: `i` < out.len() <= nevents writable kevents (the
                // caller's promise).
                unsafe { events.add(i).write(CKevent::from(k)) };
            }
            out.len() as c_int
        };
        // SAFETY: passed on from the caller.
        unsafe { kevent_collect(kq, changes, nchanges, nevents, timeout, write_out) }
    })();
    ret_int(r)
}

/// Events one kevent call reports at most, whatever `nevents` says.
const MAX_KEVENTS_PER_CALL: usize = 1 << 16;

/// The longest list a thread keeps between calls (160 KB); a caller
/// asking for more pays for its list each call, as before.
const MAX_KEPT_KEVENTS: usize = 4096;

thread_local! {
    /// The list one kevent call collects into, kept between calls: a
    /// fresh one per call allocated and zeroed `nevents` events (20 KB for
    /// 512), some 850 instructions per call of a serving loop.
    static KEVENT_SCRATCH: Cell<Vec<KEvent>> = const { Cell::new(Vec::new()) };
}

/// kevent's work without the event list: applies `nchanges` changes,
/// collects up to `nevents` events (at most [`MAX_KEVENTS_PER_CALL`]) and
/// hands them to `each`.
///
/// # Safety
/// `changes` is null or points to `nchanges` readable kevents.
pub(crate) unsafe fn kevent_collect<R>(
    kq: c_int,
    changes: *const CKevent,
    nchanges: c_int,
    nevents: c_int,
    timeout: Option<Duration>,
    each: impl FnOnce(&[KEvent]) -> R,
) -> Result<R> {
    if nchanges < 0 || nevents < 0 {
        return Err(Errno::EINVAL);
    }
    let changes: Vec<KEvent> = if nchanges == 0 {
        Vec::new()
    } else if changes.is_null() {
        return Err(EFAULT);
    } else {
        // SAFETY: `nchanges` readable kevents (the caller's promise).
        unsafe { std::slice::from_raw_parts(changes, nchanges as usize) }
            .iter()
            .map(KEvent::from)
            .collect()
    };
    // The caller's count sizes nothing of ours beyond what one call
    // reports: kevent may return fewer events than asked, and the rest
    // come with the next call (INT_MAX would otherwise abort the process).
    let want = (nevents as usize).min(MAX_KEVENTS_PER_CALL);
    // Taken out while in use: a kevent inside a do_each callback of
    // another finds it empty and collects into a list of its own.
    let mut list = KEVENT_SCRATCH.try_with(Cell::take).unwrap_or_default();
    if list.len() < want {
        list.resize(want, KEvent::default());
    }
    // Only the first `n` are read back: what `api::kevent` wrote.
    let r = api::kevent(kq, &changes, &mut list[..want], timeout).map(|n| each(&list[..n]));
    if list.len() <= MAX_KEPT_KEVENTS {
        let _ = KEVENT_SCRATCH.try_with(|s| s.set(list));
    }
    r
}

/// # Safety
/// As kevent(2): `changes` points to `nchanges` readable kevents, `events`
/// to `nevents` writable ones, `timeout` is null or readable.
#[no_mangle]
pub unsafe extern "C" fn ustack_kevent(
    kq: c_int,
    changes: *const CKevent,
    nchanges: c_int,
    events: *mut CKevent,
    nevents: c_int,
    timeout: *const libc::timespec,
) -> c_int {
    // SAFETY: passed on from the caller.
    match unsafe { kevent_timeout(timeout) } {
        // SAFETY: passed on from the caller.
        Ok(t) => unsafe { kevent(kq, changes, nchanges, events, nevents, t) },
        Err(e) => ret_int(Err(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_event_count_allocates_nothing_of_its_size() {
        let mut one = [CKevent {
            ident: 0,
            filter: 0,
            flags: 0,
            fflags: 0,
            data: 0,
            udata: std::ptr::null_mut(),
        }];
        // A bad kqueue with INT_MAX events: the error, not an abort.
        // SAFETY: no changes; `one` is writable (the count lies, as the
        // test means it to, and nothing is written for a bad kqueue).
        let r = unsafe {
            ustack_kevent(
                -1,
                std::ptr::null(),
                0,
                one.as_mut_ptr(),
                c_int::MAX,
                std::ptr::null(),
            )
        };
        assert_eq!(r, -1);
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EBADF)
        );
    }
}
