//! ustack's C ABI: `libustack.so` and `libustack.a`, declared in
//! `include/ustack.h`, and the F-Stack `ff_*` layer over it, declared in
//! `include/fstack/` (`ff_api.h`, `ff_epoll.h`, `ff_config.h`).
//!
//! Every call is a thin wrapper over the socket layer (`crates/api`): C
//! pointers become slices and addresses, the socket layer's `Errno` becomes
//! `errno` (set through libc's `__errno_location`, as the C library does)
//! and a -1 return.  The socket layer already has Linux's semantics and
//! errno values, so nothing here decides what a call means; it only checks
//! what a C caller can get wrong (null pointers, negative lengths, address
//! families and lengths) the way Linux does.
//!
//! The engine: [`ustack_init`] reads an F-Stack style `config.ini`, builds
//! one engine and makes the calling thread its engine thread
//! (`api::attach`).  [`ustack_run`] then runs the engine loop with the
//! application's callback inside (F-Stack's `ff_run`).  Sockets may be used
//! from other threads too (the socket layer posts their calls to the engine
//! thread).
//!
//! Zero-copy send: `ustack_zc_send_get` / `ustack_zc_send_commit` (the
//! application writes into the send buffer in place), and F-Stack's
//! `ff_zc_mbuf_get` / `ff_zc_mbuf_write` / `ff_write` (`zero_copy.rs`).
//!
//! The rest of F-Stack's API: `ff_poll`, `ff_select`, `ff_kevent_do_each`
//! (`wait.rs`), `ff_dup`, `ff_dup2`, `ff_getmaxfd`, `ff_gettimeofday`,
//! `ff_pthread_create`/`_join` (`fstack.rs`), `ff_sysctl` (`sysctl.rs`),
//! `ff_route_ctl` (`route.rs`), `ff_get_traffic` (`stats.rs`),
//! `ff_zc_mbuf_read` (`zero_copy.rs`), and the variadic `ff_ioctl`,
//! `ff_fcntl` and ff_log.h's log, written in C (`ff_variadic.c`, compiled
//! and exported by build.rs).
//!
//! F-Stack's multi-process mode: with an `lcore_mask` of N cores, N
//! processes started from one configuration with `--proc-id 0..N-1`
//! (`--proc-type primary` or `secondary`, in id order) each run one engine
//! on their core and share the ports (`link=af_packet`) through one
//! fanout group: each flow reaches one process, outgoing connections take
//! source ports whose replies come back to the process that opened them,
//! ARP reaches all (`runtime::procgroup`).
//!
//! Not offered: zero-copy receive, several processes on `af_xdp`,
//! `dpdk` or `tap` ports, `ff_dpdk_raw_packet_send`,
//! `ff_regist_pcblddr_fun`, `ff_rtioctl`, `ff_ngctl`, the `*_freebsd`
//! calls.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod addr;
mod events;
pub mod fstack;
mod hook;
mod init;
mod msg;
pub mod route;
mod sockets;
mod stats;
mod sysctl;
mod wait;
mod zero_copy;

pub use events::*;
pub use hook::*;
pub use init::*;
pub use msg::*;
pub use sockets::*;
pub use stats::*;
pub use sysctl::*;
pub use wait::*;
pub use zero_copy::*;

use std::os::raw::c_int;

use api::Errno;

/// Sets the calling thread's `errno`.
pub(crate) fn set_errno(e: Errno) {
    // SAFETY: `__errno_location` returns the calling thread's errno slot,
    // valid for writes for the thread's whole life.
    unsafe { *libc::__errno_location() = e.0 };
}

/// An int result as C returns it: the value, or -1 with `errno` set.
pub(crate) fn ret_int(r: api::Result<c_int>) -> c_int {
    match r {
        Ok(v) => v,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// A call that returns nothing but success: 0, or -1 with `errno` set.
pub(crate) fn ret_unit(r: api::Result<()>) -> c_int {
    ret_int(r.map(|()| 0))
}

/// A byte count as C returns it: the count, or -1 with `errno` set.
pub(crate) fn ret_size(r: api::Result<usize>) -> isize {
    match r {
        // A count always fits: it is at most the length of one buffer.
        Ok(n) => n as isize,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

pub(crate) const EFAULT: Errno = Errno(libc::EFAULT);
