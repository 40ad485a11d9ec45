//! The re-entrancy guard.  This library's own code (the socket layer, the
//! links, the Rust standard library) calls `close`, `read`, `poll` and the
//! rest, which resolve to the interposed functions here; while a thread is
//! inside ustack those must go straight to the C library, as must calls
//! from a thread that ustack itself runs.
//!
//! The flag is a thread-local, which a library loaded by the dynamic
//! linker reaches through a call (`__tls_get_addr`): an interposed call
//! looks it up once ([`Inside::outside`]) and the guard it returns sets
//! it back through the address it found.

use std::cell::Cell;

thread_local! {
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is inside ustack (its calls are ustack's
/// own, for the kernel).
#[inline]
pub fn inside() -> bool {
    // A thread being torn down has no thread-locals left: its calls are
    // the kernel's.
    INSIDE.try_with(|c| c.get()).unwrap_or(true)
}

/// Marks the calling thread inside ustack until dropped.
pub struct Inside {
    /// The calling thread's flag.  The guard is neither `Send` nor
    /// `Sync` (a raw pointer), so it is dropped on the thread whose flag
    /// it is, which outlives it; `None`: the thread's thread-locals are
    /// gone (it is being torn down).
    flag: Option<*const Cell<bool>>,
    was: bool,
}

impl Inside {
    /// Enters, whether or not the thread was inside already.
    pub fn enter() -> Inside {
        match INSIDE.try_with(|c| (c as *const Cell<bool>, c.replace(true))) {
            Ok((flag, was)) => Inside {
                flag: Some(flag),
                was,
            },
            Err(_) => Inside {
                flag: None,
                was: true,
            },
        }
    }

    /// For a call from the program: enters and returns the guard if the
    /// thread was outside ustack; `None` if it was inside already (the
    /// call is ustack's own, for the kernel).  One thread-local lookup
    /// for the call's whole life.
    #[inline]
    pub fn outside() -> Option<Inside> {
        let g = Inside::enter();
        (!g.was).then_some(g)
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        if let Some(flag) = self.flag {
            // SAFETY: the calling thread's own thread-local (see `flag`),
            // alive while the thread is.
            unsafe { (*flag).set(self.was) };
        }
    }
}
