//! ustack's classifying XDP program (`bpf/ustack_xdp.c`, built by clang
//! with the `libxdp` feature) loaded through libxdp, so that it runs in
//! libxdp's multi-program dispatcher beside other XDP programs (a
//! firewall, a load balancer) where the kernel allows it, and the frames
//! ustack does not serve go on to the kernel (see the C file for the
//! rules).
//!
//! libxdp's dispatcher replaces each program's entry with `freplace`
//! (`BPF_PROG_TYPE_EXT`) programs; a kernel that refuses those (this one
//! under its BPF LSM / lockdown answers EPERM even to root) makes libxdp
//! fall back to attaching the program alone, as its convention says. Which
//! one happened is said on stderr at start ([`Dispatched::in_dispatcher`]).
//!
//! Detaching (drop) takes ustack's program out of the dispatcher and
//! leaves the others running. The dispatcher keeps its programs in bpffs,
//! and libxdp's fallback attaches through netlink, so a process killed
//! before it detaches leaves its program behind (unlike the BPF link of the
//! default program, which goes with the process): attached alone, the next
//! ustack takes it over and `ustack xdp detach` removes it (`stale.rs`); in
//! the dispatcher (untested: this kernel refuses it), `xdp-loader unload`.

use std::ffi::{c_char, c_int, c_long, c_void, CStr};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use super::program::XdpMode;

/// The program object clang built (build.rs).
pub(super) static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ustack_xdp.o"));

/// Opens ustack's program object (not yet loaded), for libxdp's
/// attachment here and the chained one (`chained.rs`).
pub(super) fn open_object() -> io::Result<*mut BpfObject> {
    // SAFETY: OBJECT is a static byte slice that outlives the call;
    // NULL options are libbpf's defaults.
    let obj =
        unsafe { bpf_object__open_mem(OBJECT.as_ptr().cast(), OBJECT.len(), std::ptr::null()) };
    // SAFETY: libbpf's error check on the pointer it returned.
    let err = unsafe { libbpf_get_error(obj.cast()) };
    if obj.is_null() || err != 0 {
        return Err(io::Error::other(format!(
            "opening ustack's XDP program object: {}",
            io::Error::from_raw_os_error((-err) as i32)
        )));
    }
    Ok(obj)
}

#[repr(C)]
pub(super) struct BpfObject {
    _private: [u8; 0],
}
#[repr(C)]
struct LibxdpProgram {
    _private: [u8; 0],
}
#[repr(C)]
struct LibxdpMultiprog {
    _private: [u8; 0],
}

const XDP_MODE_NATIVE: c_int = 1;
const XDP_MODE_SKB: c_int = 2;

#[link(name = "bpf")]
extern "C" {
    pub(super) fn bpf_object__open_mem(
        buf: *const c_void,
        size: usize,
        opts: *const c_void,
    ) -> *mut BpfObject;
    pub(super) fn bpf_object__close(obj: *mut BpfObject);
    fn bpf_object__find_map_fd_by_name(obj: *const BpfObject, name: *const c_char) -> c_int;
    pub(super) fn libbpf_get_error(ptr: *const c_void) -> c_long;
}

#[link(name = "xdp")]
extern "C" {
    fn xdp_program__from_bpf_obj(obj: *mut BpfObject, section: *const c_char)
        -> *mut LibxdpProgram;
    fn xdp_program__attach(p: *mut LibxdpProgram, ifindex: c_int, mode: c_int, flags: u32)
        -> c_int;
    fn xdp_program__detach(p: *mut LibxdpProgram, ifindex: c_int, mode: c_int, flags: u32)
        -> c_int;
    fn xdp_program__close(p: *mut LibxdpProgram);
    fn xdp_program__fd(p: *const LibxdpProgram) -> c_int;
    fn xdp_multiprog__get_from_ifindex(ifindex: c_int) -> *mut LibxdpMultiprog;
    fn xdp_multiprog__is_legacy(mp: *const LibxdpMultiprog) -> bool;
    fn xdp_multiprog__close(mp: *mut LibxdpMultiprog);
    fn libxdp_get_error(ptr: *const c_void) -> c_long;
}

/// The maps of the loaded program, each a descriptor of our own.
#[derive(Debug)]
pub struct ProgramMaps {
    pub xsks: OwnedFd,
    pub addrs4: OwnedFd,
    pub addrs6: OwnedFd,
    pub kni: OwnedFd,
    /// Who loaded the program (`stale.rs`).
    pub owner: OwnedFd,
}

/// ustack's program attached through libxdp; dropping it detaches it.
#[derive(Debug)]
pub struct Dispatched {
    obj: *mut BpfObject,
    prog: *mut LibxdpProgram,
    ifindex: u32,
    mode: XdpMode,
    in_dispatcher: bool,
}

// SAFETY: the libxdp and libbpf handles are only used under `&mut self`
// (drop) or not at all after attach; libxdp keeps no thread-bound state in
// them.
unsafe impl Send for Dispatched {}
// SAFETY: no method through `&self` touches the handles.
unsafe impl Sync for Dispatched {}

fn libxdp_mode(mode: XdpMode) -> c_int {
    match mode {
        XdpMode::Native => XDP_MODE_NATIVE,
        XdpMode::Generic => XDP_MODE_SKB,
    }
}

pub(super) fn map_fd(obj: *mut BpfObject, name: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: `obj` is a loaded object we own; `name` is NUL-terminated.
    let fd = unsafe { bpf_object__find_map_fd_by_name(obj, name.as_ptr()) };
    if fd < 0 {
        return Err(io::Error::other(format!(
            "the XDP program object has no map {name:?}"
        )));
    }
    // SAFETY: `fd` is the object's live map descriptor; F_DUPFD_CLOEXEC
    // gives a new one that we own.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `dup` was just returned to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(dup as RawFd) })
}

impl Dispatched {
    /// Loads the program and attaches it to `ifindex` in `mode` through
    /// libxdp, returning it with its maps.
    pub fn attach(ifindex: u32, mode: XdpMode) -> io::Result<(Dispatched, ProgramMaps)> {
        let obj = open_object()?;
        // SAFETY: `obj` is a live object; the section name is
        // NUL-terminated.
        let prog = unsafe { xdp_program__from_bpf_obj(obj, c"xdp".as_ptr()) };
        // SAFETY: libxdp's error check on the pointer it returned.
        let err = unsafe { libxdp_get_error(prog.cast()) };
        if prog.is_null() || err != 0 {
            // SAFETY: `obj` is ours and used by nothing else.
            unsafe { bpf_object__close(obj) };
            return Err(io::Error::other(format!(
                "libxdp refused ustack's XDP program: {}",
                io::Error::from_raw_os_error((-err) as i32)
            )));
        }
        let mut d = Dispatched {
            obj,
            prog,
            ifindex,
            mode,
            in_dispatcher: false,
        };
        // SAFETY: `prog` is live; ifindex and mode are plain values.
        let r = unsafe { xdp_program__attach(prog, ifindex as c_int, libxdp_mode(mode), 0) };
        if r < 0 {
            // Not attached: nothing to detach when `d` drops.
            d.ifindex = 0;
            return Err(io::Error::from_raw_os_error(-r)).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "libxdp attaching ustack's XDP program in {} mode: {e}",
                        mode.name()
                    ),
                )
            });
        }
        // SAFETY: a lookup of the interface's programs; the handle is
        // checked and closed here.
        unsafe {
            let mp = xdp_multiprog__get_from_ifindex(ifindex as c_int);
            if !mp.is_null() && libxdp_get_error(mp.cast()) == 0 {
                d.in_dispatcher = !xdp_multiprog__is_legacy(mp);
                xdp_multiprog__close(mp);
            }
        }
        let maps = ProgramMaps {
            xsks: map_fd(obj, c"ustack_xsks")?,
            addrs4: map_fd(obj, c"ustack_addrs4")?,
            addrs6: map_fd(obj, c"ustack_addrs6")?,
            kni: map_fd(obj, c"ustack_kni")?,
            owner: map_fd(obj, c"ustack_owner")?,
        };
        // SAFETY: `prog` is live and loaded (attached above).
        let fd = unsafe { xdp_program__fd(prog) };
        super::stale::claim(fd, &maps.owner)?;
        Ok((d, maps))
    }

    /// Whether libxdp put the program in its dispatcher (beside others),
    /// rather than alone on the interface (its fallback).
    pub fn in_dispatcher(&self) -> bool {
        self.in_dispatcher
    }
}

impl Drop for Dispatched {
    fn drop(&mut self) {
        // SAFETY: `prog` and `obj` are ours, live, and used by nothing
        // after this.
        unsafe {
            if self.ifindex != 0 {
                let r = xdp_program__detach(
                    self.prog,
                    self.ifindex as c_int,
                    libxdp_mode(self.mode),
                    0,
                );
                if r < 0 {
                    eprintln!(
                        "ustack: detaching the XDP program from interface {}: {}",
                        self.ifindex,
                        io::Error::from_raw_os_error(-r)
                    );
                }
            }
            xdp_program__close(self.prog);
            bpf_object__close(self.obj);
        }
    }
}
