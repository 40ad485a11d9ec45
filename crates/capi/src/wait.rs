//! F-Stack's waits over several fds: `ff_poll`, `ff_select` (both over
//! `api::poll`) and `ff_kevent_do_each` (kevent with a callback per
//! event).  Inside `ff_run`'s loop none blocks, as F-Stack's.

use std::os::raw::{c_int, c_ulong, c_void};
use std::time::Duration;

use api::{Errno, KEvent};
use libc::{pollfd, timespec, timeval};

use crate::events::{self, CKevent};
use crate::fstack::in_loop;
use crate::{ret_int, EFAULT};

/// `ff_poll(fds, nfds, timeout)`: poll(2) over ustack fds (see
/// `api::poll`: POLLNVAL for a number that is not ustack's); never blocks
/// inside `ff_run`'s loop.  Errors: EINVAL (`nfds` above RLIMIT_NOFILE),
/// EFAULT (`fds` NULL with `nfds` positive).
///
/// # Safety
/// `fds` is null or points to `nfds` readable and writable pollfds.
#[no_mangle]
pub unsafe extern "C" fn ff_poll(fds: *mut pollfd, nfds: libc::nfds_t, timeout: c_int) -> c_int {
    let r = (|| {
        if nfds > api::fd_limit() as libc::nfds_t {
            return Err(Errno::EINVAL);
        }
        let fds: &mut [pollfd] = if nfds == 0 {
            &mut []
        } else if fds.is_null() {
            return Err(EFAULT);
        } else {
            // SAFETY: `nfds` pollfds nobody else uses during the call (the
            // caller's promise); the count is bounded above.
            unsafe { std::slice::from_raw_parts_mut(fds, nfds as usize) }
        };
        let timeout = if in_loop() { 0 } else { timeout };
        api::poll(fds, timeout).map(|n| n as c_int)
    })();
    ret_int(r)
}

/// Bits of one `fd_set` word (the C library's `__fd_mask`, a long).
const WORD_BITS: usize = c_ulong::BITS as usize;

/// An `fd_set` as words: glibc's layout (`__fd_mask fds_bits[]`, bit
/// `fd % 64` of word `fd / 64`), which is also FreeBSD's on 64-bit
/// machines.
struct FdSet {
    at: *mut c_ulong,
    words: Vec<c_ulong>,
}

impl FdSet {
    /// The first `nfds` bits of the set at `set` (None: no set).
    ///
    /// # Safety
    /// `set` is null or points to a readable and writable fd_set of at
    /// least `nfds` bits.
    unsafe fn read(set: *mut libc::fd_set, nfds: usize) -> Option<FdSet> {
        if set.is_null() {
            return None;
        }
        let at = set.cast::<c_ulong>();
        let words = (0..nfds.div_ceil(WORD_BITS))
            // SAFETY: word `i` lies within the first `nfds` bits (rounded
            // up to a word, as the C library allocates them).
            .map(|i| unsafe { at.add(i).read_unaligned() })
            .collect();
        Some(FdSet { at, words })
    }

    fn has(&self, fd: usize) -> bool {
        self.words[fd / WORD_BITS] & (1 << (fd % WORD_BITS)) != 0
    }

    /// Writes back the fds of `ready`, the others cleared.
    ///
    /// # Safety
    /// As for [`FdSet::read`].
    unsafe fn write(&self, ready: &[usize]) {
        let mut words = vec![0 as c_ulong; self.words.len()];
        for &fd in ready {
            words[fd / WORD_BITS] |= 1 << (fd % WORD_BITS);
        }
        for (i, w) in words.into_iter().enumerate() {
            // SAFETY: the words `read` read.
            unsafe { self.at.add(i).write_unaligned(w) };
        }
    }
}

/// What makes an fd ready for each of select's sets (Linux's POLLIN_SET,
/// POLLOUT_SET, POLLEX_SET).
const READ_SET: i16 =
    libc::POLLIN | libc::POLLRDNORM | libc::POLLRDBAND | libc::POLLHUP | libc::POLLERR;
const WRITE_SET: i16 = libc::POLLOUT | libc::POLLWRNORM | libc::POLLWRBAND | libc::POLLERR;
const EXCEPT_SET: i16 = libc::POLLPRI;

/// select's timeout in milliseconds for poll (-1: none), rounded up.
///
/// # Safety
/// `tv` is null or a readable timeval.
unsafe fn select_timeout(tv: *const timeval) -> api::Result<c_int> {
    if tv.is_null() {
        return Ok(-1);
    }
    // SAFETY: a readable timeval (the caller's promise).
    let t = unsafe { tv.read_unaligned() };
    if t.tv_sec < 0 || !(0..1_000_000).contains(&t.tv_usec) {
        return Err(Errno::EINVAL);
    }
    let d = Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    let ms = d.as_micros().div_ceil(1000);
    Ok(ms.min(c_int::MAX as u128) as c_int)
}

/// `ff_select(nfds, readfds, writefds, exceptfds, timeout)`: select(2)
/// over ustack fds below `nfds`, as poll: ready to read on POLLIN, HUP or
/// ERR, to write on POLLOUT or ERR, exceptional on POLLPRI.  The sets are
/// rewritten with the ready fds; the result is how many bits are set in
/// all.  `timeout` is left as it was (FreeBSD's select does); NULL waits
/// for ever; inside `ff_run`'s loop it never blocks.  Errors: EBADF (a
/// number in a set that is not a ustack fd), EINVAL (`nfds` negative, a
/// timeout out of range), EFAULT.
///
/// # Safety
/// Each set is null or a readable and writable fd_set of at least `nfds`
/// bits; `timeout` is null or readable.
#[no_mangle]
pub unsafe extern "C" fn ff_select(
    nfds: c_int,
    readfds: *mut libc::fd_set,
    writefds: *mut libc::fd_set,
    exceptfds: *mut libc::fd_set,
    timeout: *mut timeval,
) -> c_int {
    let r = (|| {
        let nfds = usize::try_from(nfds).map_err(|_| Errno::EINVAL)?;
        // Linux looks at the numbers the process could have, no further.
        let nfds = nfds.min(api::fd_limit() as usize);
        // SAFETY: passed on from the caller.
        let timeout = unsafe { select_timeout(timeout) }?;
        // SAFETY: passed on from the caller (three sets of `nfds` bits).
        let sets = unsafe {
            [
                FdSet::read(readfds, nfds),
                FdSet::read(writefds, nfds),
                FdSet::read(exceptfds, nfds),
            ]
        };
        let masks = [libc::POLLIN, libc::POLLOUT, libc::POLLPRI];
        let mut fds = Vec::new();
        for fd in 0..nfds {
            let events = sets
                .iter()
                .zip(masks)
                .filter(|(s, _)| s.as_ref().is_some_and(|s| s.has(fd)))
                .fold(0, |e, (_, m)| e | m);
            if events != 0 {
                fds.push(libc::pollfd {
                    fd: fd as c_int,
                    events,
                    revents: 0,
                });
            }
        }
        let timeout = if in_loop() { 0 } else { timeout };
        api::poll(&mut fds, timeout)?;
        if fds.iter().any(|p| p.revents & libc::POLLNVAL != 0) {
            return Err(Errno::EBADF);
        }
        let mut count = 0;
        for (set, (mask, wanted)) in sets.iter().zip([
            (libc::POLLIN, READ_SET),
            (libc::POLLOUT, WRITE_SET),
            (libc::POLLPRI, EXCEPT_SET),
        ]) {
            let Some(set) = set else { continue };
            let ready: Vec<usize> = fds
                .iter()
                .filter(|p| p.events & mask != 0 && p.revents & wanted != 0)
                .map(|p| p.fd as usize)
                .collect();
            count += ready.len();
            // SAFETY: the caller's set, read above.
            unsafe { set.write(&ready) };
        }
        Ok(count as c_int)
    })();
    ret_int(r)
}

/// F-Stack's per-event callback: `cursor` starts at the caller's
/// `eventlist`; the callback stores the event as it likes and moves it.
pub type DoEachFn = unsafe extern "C" fn(cursor: *mut *mut c_void, event: *mut CKevent);

/// `ff_kevent_do_each(kq, changes, nchanges, eventlist, nevents, timeout,
/// do_each)`: kevent, each event handed to `do_each(&cursor, &event)`
/// with `cursor` starting at `eventlist` (which only the callback looks
/// at); `do_each` NULL: `eventlist` is a kevent array, as `ff_kevent`'s.
/// Never blocks inside `ff_run`'s loop.  Returns the number of events, or
/// -1 with errno as `ff_kevent`.
///
/// # Safety
/// `changes` is null or points to `nchanges` readable kevents; with
/// `do_each`, it may be called with `eventlist` as the cursor; without,
/// `eventlist` is null or points to `nevents` writable kevents;
/// `timeout` is null or readable.
#[no_mangle]
pub unsafe extern "C" fn ff_kevent_do_each(
    kq: c_int,
    changes: *const CKevent,
    nchanges: c_int,
    eventlist: *mut c_void,
    nevents: c_int,
    timeout: *const timespec,
    do_each: Option<DoEachFn>,
) -> c_int {
    let t = if in_loop() {
        Ok(Some(Duration::ZERO))
    } else {
        // SAFETY: passed on from the caller.
        unsafe { events::kevent_timeout(timeout) }
    };
    let t = match t {
        Ok(t) => t,
        Err(e) => return ret_int(Err(e)),
    };
    let Some(f) = do_each else {
        // SAFETY: passed on from the caller.
        return unsafe { events::kevent(kq, changes, nchanges, eventlist.cast(), nevents, t) };
    };
    let each = |out: &[KEvent]| {
        let mut cursor = eventlist;
        for k in out {
            let mut ev = CKevent::from(k);
            // SAFETY: the application's callback with its own cursor and an
            // event that lives through the call.
            unsafe { f(&mut cursor, &mut ev) };
        }
        out.len() as c_int
    };
    // SAFETY: passed on from the caller.
    let r = unsafe { events::kevent_collect(kq, changes, nchanges, nevents, t, each) };
    ret_int(r)
}
