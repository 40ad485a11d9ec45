//! Signals that end a wait.  The kernel ends a blocking `epoll_wait`,
//! `poll` or `select` with EINTR when a handler ran during it, whatever
//! SA_RESTART says; programs rely on that (a handler sets a flag, the wait
//! returns, the loop sees the flag).  A wait whose engine busy-polls
//! (`idle_sleep=0`) spins in user space, where a handler runs without
//! ending any system call, so the library must see deliveries itself.
//!
//! The program's handlers are installed behind [`relay`], which counts a
//! delivery on the thread it ran on (the thread whose wait the kernel
//! would have ended) and calls the program's handler as the kernel would
//! have.  `sigaction` and `signal` report the program's own handlers back,
//! never the relay.

use std::cell::Cell;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::real;

/// Signal numbers 1..NSIG (Linux's 64 signals).
const NSIG: usize = 65;

/// The program's handler for each signal, while the relay stands in for it.
static HANDLERS: [AtomicUsize; NSIG] = [const { AtomicUsize::new(0) }; NSIG];
/// Whether that handler takes three arguments (SA_SIGINFO).
static SIGINFO: [AtomicBool; NSIG] = [const { AtomicBool::new(false) }; NSIG];

thread_local! {
    /// Handlers run on this thread (no lazy initialisation and no
    /// destructor: safe to touch from a signal handler).
    static DELIVERED: Cell<u64> = const { Cell::new(0) };
}

/// Handlers run on this thread so far: a wait notes it first and ends
/// with EINTR when it has moved.
pub(crate) fn delivered() -> u64 {
    DELIVERED.with(Cell::get)
}

type Handler3 = extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void);
type Handler1 = extern "C" fn(c_int);

extern "C" fn relay(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    DELIVERED.with(|d| d.set(d.get().wrapping_add(1)));
    let Some(i) = index(sig) else { return };
    let h = HANDLERS[i].load(Ordering::Acquire);
    if h == 0 || h == libc::SIG_IGN || h == libc::SIG_DFL {
        return;
    }
    if SIGINFO[i].load(Ordering::Acquire) {
        // SAFETY: `h` is the program's handler for this signal, installed
        // with SA_SIGINFO, so of this type.
        let f: Handler3 = unsafe { std::mem::transmute::<usize, Handler3>(h) };
        f(sig, info, ctx);
    } else {
        // SAFETY: `h` is the program's handler, installed without
        // SA_SIGINFO, so of this type.
        let f: Handler1 = unsafe { std::mem::transmute::<usize, Handler1>(h) };
        f(sig);
    }
}

fn index(sig: c_int) -> Option<usize> {
    usize::try_from(sig).ok().filter(|&i| i > 0 && i < NSIG)
}

fn relay_address() -> usize {
    relay as Handler3 as usize
}

/// As sigaction(2): a handler the program installs runs behind the relay.
///
/// # Safety
/// As the C function's: `act` and `old` are null or point to a
/// `struct sigaction`.
#[no_mangle]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    let Some(i) = index(sig) else {
        // SAFETY: passed on as given.
        return unsafe { real::sigaction(sig, act, old) };
    };
    let before = (
        HANDLERS[i].load(Ordering::Acquire),
        SIGINFO[i].load(Ordering::Acquire),
    );
    // SAFETY: `act` is null or points to a sigaction (the caller's word).
    let mine = unsafe { act.as_ref() }.and_then(|a| {
        let h = a.sa_sigaction;
        if h == libc::SIG_DFL || h == libc::SIG_IGN || h == relay_address() {
            return None;
        }
        let mut r = *a;
        r.sa_sigaction = relay_address();
        r.sa_flags |= libc::SA_SIGINFO;
        Some((r, h, a.sa_flags & libc::SA_SIGINFO != 0))
    });
    if let Some((_, h, three)) = mine {
        SIGINFO[i].store(three, Ordering::Release);
        HANDLERS[i].store(h, Ordering::Release);
    }
    let given = match &mine {
        Some((r, _, _)) => r as *const libc::sigaction,
        None => act,
    };
    // SAFETY: `given` is null or a sigaction; `old` as the caller gave it.
    let rc = unsafe { real::sigaction(sig, given, old) };
    if rc != 0 {
        if mine.is_some() {
            SIGINFO[i].store(before.1, Ordering::Release);
            HANDLERS[i].store(before.0, Ordering::Release);
        }
        return rc;
    }
    // SAFETY: `old` is null or the sigaction the C library just wrote.
    if let Some(o) = unsafe { old.as_mut() } {
        if o.sa_sigaction == relay_address() {
            o.sa_sigaction = before.0;
            if !before.1 {
                o.sa_flags &= !libc::SA_SIGINFO;
            }
        }
    }
    rc
}

/// As signal(3) in glibc (BSD semantics): the handler stays installed,
/// the signal is blocked while it runs, and calls it interrupts restart.
///
/// # Safety
/// As the C function's.
#[no_mangle]
pub unsafe extern "C" fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    // SAFETY: an all-zero sigaction is a valid value of the C struct.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler;
    act.sa_flags = libc::SA_RESTART;
    // SAFETY: `act.sa_mask` is a sigset_t of this struct.
    unsafe {
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaddset(&mut act.sa_mask, sig);
    }
    // SAFETY: as above.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: both point to live sigactions.
    if unsafe { sigaction(sig, &act, &mut old) } != 0 {
        return libc::SIG_ERR;
    }
    old.sa_sigaction
}

#[cfg(test)]
mod tests {
    use super::*;

    static SEEN: AtomicUsize = AtomicUsize::new(0);

    extern "C" fn count(_: c_int) {
        SEEN.fetch_add(1, Ordering::SeqCst);
    }

    #[test]
    fn a_handler_runs_behind_the_relay_which_counts_it_and_is_never_reported() {
        // SAFETY: installs a handler for SIGUSR2 (not used elsewhere in
        // these tests) and raises it on this thread.
        unsafe {
            let before = delivered();
            let prev = signal(libc::SIGUSR2, count as Handler1 as libc::sighandler_t);
            assert_ne!(prev, libc::SIG_ERR);
            libc::raise(libc::SIGUSR2);
            assert_eq!(SEEN.load(Ordering::SeqCst), 1, "the program's handler ran");
            assert_eq!(delivered(), before + 1, "and the delivery was counted");
            let mut old: libc::sigaction = std::mem::zeroed();
            assert_eq!(sigaction(libc::SIGUSR2, std::ptr::null(), &mut old), 0);
            assert_eq!(old.sa_sigaction, count as Handler1 as usize);
            assert_eq!(old.sa_flags & libc::SA_SIGINFO, 0, "as the program set it");
            let back = signal(libc::SIGUSR2, libc::SIG_DFL);
            assert_eq!(back, count as Handler1 as usize);
        }
    }
}
