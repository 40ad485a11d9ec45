//! The packet dispatcher hook: an application callback that sees each
//! received frame before the stack (F-Stack's
//! `ff_regist_packet_dispatcher`), over the engine's frame hook.

use std::os::raw::{c_int, c_void};

use runtime::engine::{FrameHook, HookVerdict};
use runtime::PortLink;

use crate::ret_unit;

/// `ustack_dispatch_fn`: the frame is `frame[..*len]`, `room` bytes are
/// writable; an answer is written in place and its length put in `*len`.
pub type DispatchFn = unsafe extern "C" fn(
    frame: *mut c_void,
    len: *mut u16,
    room: u16,
    port: u16,
    arg: *mut c_void,
) -> c_int;

/// Let the frame go on to the stack.
pub const USTACK_DISPATCH_PASS: c_int = 0;
/// The application took the frame: it is dropped.
pub const USTACK_DISPATCH_CONSUME: c_int = 1;
/// The application wrote an answer in place: it leaves through the port
/// the frame came in on.
pub const USTACK_DISPATCH_ANSWER: c_int = 2;

/// The application's argument pointer, carried to the engine thread.
pub(crate) struct AppArg(pub *mut c_void);

// SAFETY: the pointer is only handed back to the application's callback,
// on the engine's thread; what it points to is the application's business,
// as with any C callback argument.
unsafe impl Send for AppArg {}

impl AppArg {
    /// The pointer (a method, so closures capture the whole `AppArg`).
    pub(crate) fn ptr(&self) -> *mut c_void {
        self.0
    }
}

/// Installs `f` as the engine's frame hook (None removes it).  Must run on
/// the engine thread (the one that called `ustack_init`).
pub(crate) fn install(hook: Option<Box<dyn FrameHook>>) -> api::Result<()> {
    api::with_engine::<PortLink, _>(0, |e| e.set_frame_hook(hook))?.ok_or(api::Errno::ENODEV)
}

/// Registers the dispatcher callback (NULL removes it).  Call it on the
/// thread that called `ustack_init`, before `ustack_run`.  The callback
/// runs inside the engine's loop turn: it must not block or make socket
/// calls (they fail with EDEADLK there).
///
/// # Safety
/// `f` is null or a function that may be called with `arg` on this
/// thread while the engine runs.
#[no_mangle]
pub unsafe extern "C" fn ustack_regist_packet_dispatcher(
    f: Option<DispatchFn>,
    arg: *mut c_void,
) -> c_int {
    let Some(f) = f else {
        return ret_unit(install(None));
    };
    let arg = AppArg(arg);
    let hook = move |port: u16, buf: &mut [u8], len: usize| {
        let room = u16::try_from(buf.len()).unwrap_or(u16::MAX);
        let Ok(mut len16) = u16::try_from(len) else {
            // Longer than the callback's lengths can say (a TAP with a
            // 64 KiB MTU): not shown to it.
            return HookVerdict::Pass;
        };
        // SAFETY: `buf` is `room` writable bytes for the call; `len16` a
        // writable u16; the callback is the application's, with its arg.
        let v = unsafe { f(buf.as_mut_ptr().cast(), &mut len16, room, port, arg.ptr()) };
        match v {
            USTACK_DISPATCH_CONSUME => HookVerdict::Consume,
            USTACK_DISPATCH_ANSWER => HookVerdict::Answer(usize::from(len16)),
            _ => HookVerdict::Pass,
        }
    };
    ret_unit(install(Some(Box::new(hook))))
}
