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
//!
//! Every function the C library exports that installs a handler is
//! defined here, with glibc's semantics, over this `sigaction`: inside the
//! C library they call its own sigaction directly, which the relay would
//! not see.  `signal`, `bsd_signal` and `ssignal` (BSD: SA_RESTART unless
//! `siginterrupt` said otherwise, the signal blocked in its handler);
//! `sysv_signal` and `__sysv_signal` (SA_RESETHAND | SA_NODEFER);
//! `sigset` (no SA_RESTART; SIG_HOLD blocks the signal); `siginterrupt`
//! (it keeps the set `signal` reads); `__sigaction`.  `sigignore` only
//! installs SIG_IGN and the mask calls (`sighold`, `sigrelse`, `sigpause`)
//! install nothing, so the C library's serve.  A handler installed by a
//! raw `rt_sigaction` system call (`syscall(SYS_rt_sigaction, ..)` or
//! inline assembly) cannot be seen: it runs, but a busy-polling wait does
//! not end for it (a wait that sleeps does: its kernel call is
//! interrupted).

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
/// The signals `siginterrupt(sig, 1)` was called for: `signal` installs
/// their handlers without SA_RESTART (glibc's `_sigintr`).
static INTERRUPTING: [AtomicBool; NSIG] = [const { AtomicBool::new(false) }; NSIG];

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

/// As `__sigaction` (glibc's other name for sigaction).
///
/// # Safety
/// As sigaction's.
#[no_mangle]
pub unsafe extern "C" fn __sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe { sigaction(sig, act, old) }
}

/// Installs `handler` for `sig` with `flags` through [`sigaction`], the
/// signal itself blocked while it runs if `block_self`; the old handler,
/// or SIG_ERR with errno.  As glibc's signal functions, SIG_ERR as the
/// handler and a signal out of range are EINVAL.
fn install(
    sig: c_int,
    handler: libc::sighandler_t,
    flags: c_int,
    block_self: bool,
) -> libc::sighandler_t {
    if handler == libc::SIG_ERR || index(sig).is_none() {
        crate::set_errno(api::Errno::EINVAL);
        return libc::SIG_ERR;
    }
    // SAFETY: an all-zero sigaction is a valid value of the C struct.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler;
    act.sa_flags = flags;
    // SAFETY: `act.sa_mask` is a sigset_t of this struct.
    unsafe {
        libc::sigemptyset(&mut act.sa_mask);
        if block_self {
            libc::sigaddset(&mut act.sa_mask, sig);
        }
    }
    // SAFETY: as above.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: both point to live sigactions.
    if unsafe { sigaction(sig, &act, &mut old) } != 0 {
        return libc::SIG_ERR;
    }
    old.sa_sigaction
}

/// As signal(3) in glibc (BSD semantics): the handler stays installed,
/// the signal is blocked while it runs, and calls it interrupts restart
/// (unless `siginterrupt(sig, 1)` was called).
///
/// # Safety
/// As the C function's.
#[no_mangle]
pub unsafe extern "C" fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    let interrupting = index(sig).is_some_and(|i| INTERRUPTING[i].load(Ordering::Acquire));
    let flags = if interrupting { 0 } else { libc::SA_RESTART };
    install(sig, handler, flags, true)
}

/// As glibc's `bsd_signal` (signal's other name).
///
/// # Safety
/// As the C function's.
#[no_mangle]
pub unsafe extern "C" fn bsd_signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    // SAFETY: the caller's arguments.
    unsafe { signal(sig, handler) }
}

/// As glibc's `ssignal` (signal's other name).
///
/// # Safety
/// As the C function's.
#[no_mangle]
pub unsafe extern "C" fn ssignal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    // SAFETY: the caller's arguments.
    unsafe { signal(sig, handler) }
}

/// As glibc's `sysv_signal` (System V semantics): the handler is reset to
/// the default as the signal is delivered (SA_RESETHAND), the signal is
/// not blocked while it runs (SA_NODEFER), and interrupted calls do not
/// restart.
///
/// # Safety
/// As the C function's.
#[no_mangle]
pub unsafe extern "C" fn sysv_signal(
    sig: c_int,
    handler: libc::sighandler_t,
) -> libc::sighandler_t {
    install(sig, handler, libc::SA_RESETHAND | libc::SA_NODEFER, false)
}

/// As glibc's `__sysv_signal` (sysv_signal's other name).
///
/// # Safety
/// As the C function's.
#[no_mangle]
pub unsafe extern "C" fn __sysv_signal(
    sig: c_int,
    handler: libc::sighandler_t,
) -> libc::sighandler_t {
    // SAFETY: the caller's arguments.
    unsafe { sysv_signal(sig, handler) }
}

/// The disposition `sigset` takes and returns for a held signal.
const SIG_HOLD: libc::sighandler_t = 2;

/// As glibc's `sigset` (System V): a handler is installed without
/// SA_RESTART, blocked while it runs, and the signal is unblocked; SIG_HOLD
/// blocks it instead (the handler stays).  Returns the old disposition, or
/// SIG_HOLD if the signal was blocked.
///
/// # Safety
/// As the C function's.
#[no_mangle]
pub unsafe extern "C" fn sigset(sig: c_int, disp: libc::sighandler_t) -> libc::sighandler_t {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut was: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is ours; sigaddset says EINVAL for a bad signal.
    if unsafe { libc::sigemptyset(&mut set) } < 0 || unsafe { libc::sigaddset(&mut set, sig) } < 0 {
        return libc::SIG_ERR;
    }
    if disp == SIG_HOLD {
        // SAFETY: both sets are ours.
        if unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut was) } != 0 {
            return libc::SIG_ERR;
        }
        // SAFETY: `was` was written by pthread_sigmask.
        if unsafe { libc::sigismember(&was, sig) } == 1 {
            return SIG_HOLD;
        }
        // SAFETY: a zeroed sigaction, written by the query.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: `old` is a live sigaction.
        if unsafe { sigaction(sig, std::ptr::null(), &mut old) } != 0 {
            return libc::SIG_ERR;
        }
        return old.sa_sigaction;
    }
    let old = install(sig, disp, 0, false);
    if old == libc::SIG_ERR {
        return libc::SIG_ERR;
    }
    // SAFETY: both sets are ours.
    if unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, &mut was) } != 0 {
        return libc::SIG_ERR;
    }
    // SAFETY: `was` was written by pthread_sigmask.
    if unsafe { libc::sigismember(&was, sig) } == 1 {
        SIG_HOLD
    } else {
        old
    }
}

/// As glibc's `siginterrupt`: whether the handler's interrupted calls
/// restart (SA_RESTART cleared when `interrupt`), for the handler now and
/// for those `signal` installs later.
///
/// # Safety
/// As the C function's.
#[no_mangle]
pub unsafe extern "C" fn siginterrupt(sig: c_int, interrupt: c_int) -> c_int {
    // SAFETY: a zeroed sigaction, written by the query.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: `act` is a live sigaction.
    if unsafe { sigaction(sig, std::ptr::null(), &mut act) } != 0 {
        return -1;
    }
    let Some(i) = index(sig) else {
        crate::set_errno(api::Errno::EINVAL);
        return -1;
    };
    if interrupt != 0 {
        INTERRUPTING[i].store(true, Ordering::Release);
        act.sa_flags &= !libc::SA_RESTART;
    } else {
        INTERRUPTING[i].store(false, Ordering::Release);
        act.sa_flags |= libc::SA_RESTART;
    }
    // SAFETY: `act` is a live sigaction.
    unsafe { sigaction(sig, &act, std::ptr::null_mut()) }
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

    static SYSV_SEEN: AtomicUsize = AtomicUsize::new(0);
    static SYSV_BLOCKED: AtomicBool = AtomicBool::new(true);

    /// Whether `sig` is blocked on the calling thread.
    fn blocked(sig: c_int) -> bool {
        // SAFETY: queries the thread's mask into a set of ours.
        unsafe {
            let mut now: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut now);
            libc::sigismember(&now, sig) == 1
        }
    }

    extern "C" fn sysv_handler(sig: c_int) {
        SYSV_SEEN.fetch_add(1, Ordering::SeqCst);
        SYSV_BLOCKED.store(blocked(sig), Ordering::SeqCst);
    }

    #[test]
    fn sysv_signal_resets_to_the_default_and_does_not_block_the_signal() {
        // SIGWINCH: its default is to be ignored, so a second delivery
        // after the reset is harmless.
        let sig = libc::SIGWINCH;
        // SAFETY: installs a handler for a signal these tests use nowhere
        // else and raises it on this thread.
        unsafe {
            let before = delivered();
            assert_ne!(
                sysv_signal(sig, sysv_handler as Handler1 as libc::sighandler_t),
                libc::SIG_ERR
            );
            let mut now: libc::sigaction = std::mem::zeroed();
            assert_eq!(sigaction(sig, std::ptr::null(), &mut now), 0);
            assert_eq!(now.sa_sigaction, sysv_handler as Handler1 as usize);
            assert_eq!(
                now.sa_flags & (libc::SA_RESETHAND | libc::SA_NODEFER | libc::SA_RESTART),
                libc::SA_RESETHAND | libc::SA_NODEFER
            );
            libc::raise(sig);
            assert_eq!(SYSV_SEEN.load(Ordering::SeqCst), 1, "the handler ran");
            assert!(!SYSV_BLOCKED.load(Ordering::SeqCst), "SA_NODEFER");
            assert_eq!(delivered(), before + 1, "behind the relay");
            assert_eq!(sigaction(sig, std::ptr::null(), &mut now), 0);
            assert_eq!(now.sa_sigaction, libc::SIG_DFL, "reset as it was delivered");
            libc::raise(sig);
            assert_eq!(SYSV_SEEN.load(Ordering::SeqCst), 1, "the default now");
            // The other name, and glibc's checks.
            assert_eq!(__sysv_signal(sig, libc::SIG_IGN), libc::SIG_DFL);
            assert_eq!(__sysv_signal(sig, libc::SIG_ERR), libc::SIG_ERR);
            assert_eq!(crate::last_errno(), api::Errno::EINVAL);
            assert_eq!(sysv_signal(0, libc::SIG_IGN), libc::SIG_ERR);
            assert_eq!(sysv_signal(sig, libc::SIG_DFL), libc::SIG_IGN);
        }
    }

    static SET_SEEN: AtomicUsize = AtomicUsize::new(0);
    static SET_BLOCKED: AtomicBool = AtomicBool::new(false);

    extern "C" fn set_handler(sig: c_int) {
        SET_SEEN.fetch_add(1, Ordering::SeqCst);
        SET_BLOCKED.store(blocked(sig), Ordering::SeqCst);
    }

    #[test]
    fn sigset_holds_the_signal_until_released_and_installs_without_restart() {
        // SIGURG: ignored by default.
        let sig = libc::SIGURG;
        let h = set_handler as Handler1 as libc::sighandler_t;
        // SAFETY: installs a handler for a signal these tests use nowhere
        // else, blocks and raises it on this thread.
        unsafe {
            let before = delivered();
            assert_eq!(sigset(sig, h), libc::SIG_DFL);
            let mut now: libc::sigaction = std::mem::zeroed();
            assert_eq!(sigaction(sig, std::ptr::null(), &mut now), 0);
            assert_eq!(now.sa_sigaction, h);
            assert_eq!(
                now.sa_flags & (libc::SA_RESETHAND | libc::SA_NODEFER | libc::SA_RESTART),
                0
            );
            // Held: the handler stays, the signal waits.
            assert_eq!(sigset(sig, SIG_HOLD), h);
            assert!(blocked(sig));
            assert_eq!(sigset(sig, SIG_HOLD), SIG_HOLD, "held already");
            libc::raise(sig);
            assert_eq!(SET_SEEN.load(Ordering::SeqCst), 0, "held");
            // Released (sigrelse is the C library's: the mask alone).
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            assert_eq!(SET_SEEN.load(Ordering::SeqCst), 1, "delivered on release");
            assert!(SET_BLOCKED.load(Ordering::SeqCst), "blocked while it ran");
            assert_eq!(delivered(), before + 1, "behind the relay");
            // A disposition set while held unblocks it and says it was.
            assert_eq!(sigset(sig, SIG_HOLD), h);
            assert_eq!(sigset(sig, libc::SIG_DFL), SIG_HOLD);
            assert!(!blocked(sig));
            assert_eq!(sigset(-1, libc::SIG_DFL), libc::SIG_ERR);
        }
    }

    extern "C" fn nothing(_: c_int) {}

    #[test]
    fn bsd_signal_restarts_unless_siginterrupt_says_otherwise() {
        let sig = libc::SIGPROF;
        let h = nothing as Handler1 as libc::sighandler_t;
        let flags = |sig| {
            // SAFETY: queries into a sigaction of ours.
            unsafe {
                let mut now: libc::sigaction = std::mem::zeroed();
                assert_eq!(sigaction(sig, std::ptr::null(), &mut now), 0);
                (now.sa_sigaction, now.sa_flags)
            }
        };
        // SAFETY: installs handlers for a signal these tests use nowhere
        // else; it is never raised.
        unsafe {
            assert_ne!(bsd_signal(sig, h), libc::SIG_ERR);
            let (now, f) = flags(sig);
            assert_eq!(now, h);
            assert_eq!(
                f & (libc::SA_RESTART | libc::SA_RESETHAND),
                libc::SA_RESTART
            );
            assert_eq!(siginterrupt(sig, 1), 0);
            assert_eq!(flags(sig), (h, f & !libc::SA_RESTART), "the handler stays");
            assert_eq!(ssignal(sig, h), h);
            assert_eq!(flags(sig).1 & libc::SA_RESTART, 0, "signal remembers it");
            assert_eq!(siginterrupt(sig, 0), 0);
            assert_eq!(signal(sig, h), h);
            assert_ne!(flags(sig).1 & libc::SA_RESTART, 0);
            assert_eq!(siginterrupt(0, 1), -1);
            assert_eq!(signal(sig, libc::SIG_DFL), h);
        }
    }
}
