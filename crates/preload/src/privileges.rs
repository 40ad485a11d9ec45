//! Calls that take privileges away (setuid and its kin, capset,
//! PR_CAPBSET_DROP, chroot).  Opening a packet socket needs CAP_NET_RAW, and
//! a program may drop it before it first uses the network: nginx's workers
//! switch to their user, Knot and NSD drop capabilities.  So just before such
//! a call, a process that serves ustack sockets and has no engine yet makes
//! the packet sockets its engine will need (`link::packet_socket`).

use std::os::raw::{c_char, c_int, c_ulong, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

use libc::{gid_t, uid_t};

use crate::guard::{self, Inside};
use crate::{notes, process, real};

static STASHED: AtomicBool = AtomicBool::new(false);

/// In a child after fork: the sockets its parent made are the parent's.
pub fn forget_after_fork() {
    STASHED.store(false, Ordering::Release);
    let _g = Inside::enter();
    link::packet_socket::clear_packet_socket_stash();
}

fn before_privileges_go() {
    if guard::inside() || process::engine_up() || STASHED.swap(true, Ordering::AcqRel) {
        return;
    }
    let Some(s) = process::settings() else {
        return;
    };
    let _g = Inside::enter();
    let n = s.packet_sockets_needed();
    if n == 0 {
        return;
    }
    if let Err(e) = link::packet_socket::stash_packet_sockets(n) {
        notes::once(format!(
            "cannot open packet sockets before the program drops its privileges: {e}"
        ));
    }
}

/// After a call that may have taken privileges away: an AF_XDP socket, its
/// UMEM and the XDP program cannot be made ahead and kept as packet
/// sockets are, so a process that lost them before its engine started
/// will not have one; said once, by name.
fn after_privileges_change() {
    if guard::inside() || process::engine_up() {
        return;
    }
    let Some(port) = process::settings().and_then(|s| s.af_xdp_port()) else {
        return;
    };
    let _g = Inside::enter();
    if has_xdp_capabilities() {
        return;
    }
    notes::once(format!(
        "[port{port}] link=af_xdp: the program gave up CAP_NET_ADMIN or CAP_NET_RAW before this \
         process's engine started, and an AF_XDP engine cannot start without them: its ustack \
         sockets fail with ENETDOWN (keep the privileges, e.g. nginx's `user root;`, or use \
         link=af_packet)"
    ));
}

/// Whether the process still has CAP_NET_ADMIN and CAP_NET_RAW (its
/// effective set in /proc/self/status).
fn has_xdp_capabilities() -> bool {
    const CAP_NET_ADMIN: u32 = 12;
    const CAP_NET_RAW: u32 = 13;
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return true;
    };
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok());
    eff.is_none_or(|e| e & (1 << CAP_NET_ADMIN) != 0 && e & (1 << CAP_NET_RAW) != 0)
}

macro_rules! dropping {
    ($( fn $name:ident($($a:ident: $t:ty),*) -> $r:ty; )*) => {
        $(
            /// # Safety
            /// As the C function's.
            #[no_mangle]
            pub unsafe extern "C" fn $name($($a: $t),*) -> $r {
                before_privileges_go();
                // SAFETY: the caller's arguments.
                let r = unsafe { real::$name($($a),*) };
                after_privileges_change();
                r
            }
        )*
    };
}

dropping! {
    fn setuid(uid: uid_t) -> c_int;
    fn setgid(gid: gid_t) -> c_int;
    fn setreuid(r: uid_t, e: uid_t) -> c_int;
    fn setregid(r: gid_t, e: gid_t) -> c_int;
    fn setresuid(r: uid_t, e: uid_t, s: uid_t) -> c_int;
    fn setresgid(r: gid_t, e: gid_t, s: gid_t) -> c_int;
    fn setgroups(n: usize, list: *const gid_t) -> c_int;
    fn capset(hdr: *mut c_void, data: *const c_void) -> c_int;
    fn chroot(path: *const c_char) -> c_int;
}

/// # Safety
/// As prctl(2); the variadic arguments are passed as words.
#[no_mangle]
pub unsafe extern "C" fn prctl(
    option: c_int,
    a2: c_ulong,
    a3: c_ulong,
    a4: c_ulong,
    a5: c_ulong,
) -> c_int {
    if option == libc::PR_CAPBSET_DROP || option == libc::PR_SET_SECUREBITS {
        before_privileges_go();
    }
    // SAFETY: the caller's arguments.
    let r = unsafe { real::prctl(option, a2, a3, a4, a5) };
    if option == libc::PR_CAPBSET_DROP || option == libc::PR_SET_SECUREBITS {
        after_privileges_change();
    }
    r
}
