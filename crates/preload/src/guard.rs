//! The re-entrancy guard.  This library's own code (the socket layer, the
//! links, the Rust standard library) calls `close`, `read`, `poll` and the
//! rest, which resolve to the interposed functions here; while a thread is
//! inside ustack those must go straight to the C library, as must calls
//! from a thread that ustack itself runs.

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
    was: bool,
}

impl Inside {
    pub fn enter() -> Inside {
        let was = INSIDE.try_with(|c| c.replace(true)).unwrap_or(true);
        Inside { was }
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        let was = self.was;
        let _ = INSIDE.try_with(|c| c.set(was));
    }
}
