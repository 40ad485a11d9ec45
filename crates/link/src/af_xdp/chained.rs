//! The equivalent of libxdp's dispatcher where the kernel refuses it:
//! ustack's classifying program chained in front of the program the
//! interface already runs alone.
//!
//! libxdp's dispatcher needs freplace (`BPF_PROG_TYPE_EXT`) programs; a
//! kernel that refuses them (EPERM here, under its BPF LSM and lockdown)
//! leaves libxdp attaching each program alone, and then a second program
//! cannot join. So when the interface already runs a program (attached
//! through netlink, as libxdp's fallback and `ip link` do), ustack loads
//! `ustack_xsk_chain` with that program in its `ustack_next` slot and puts
//! it in the old one's place in one atomic netlink replace
//! (`XDP_FLAGS_REPLACE` with the old program as the expected one): frames
//! ustack takes go to its sockets, every other frame is tail-called into the
//! previous program, which decides as before. Dropping puts the previous
//! program back the same way, so it keeps the interface after ustack.
//!
//! The order differs from the dispatcher's priorities: ustack's frames do
//! not pass through the previous program (a tail call does not return), and
//! a program that was not attached through netlink (a BPF link) cannot be
//! replaced: that is refused with the reason.

use std::ffi::{c_char, c_int};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::dispatched::{bpf_object__close, map_fd, open_object, BpfObject, ProgramMaps};
use super::program::XdpMode;

#[repr(C)]
struct BpfProgram {
    _private: [u8; 0],
}

#[link(name = "bpf")]
extern "C" {
    fn bpf_object__load(obj: *mut BpfObject) -> c_int;
    fn bpf_object__find_program_by_name(
        obj: *const BpfObject,
        name: *const c_char,
    ) -> *mut BpfProgram;
    fn bpf_program__fd(prog: *const BpfProgram) -> c_int;
}

/// ustack's program chained in front of `previous`; dropping it puts
/// `previous` back.
#[derive(Debug)]
pub struct Chained {
    obj: *mut BpfObject,
    /// Ours, owned by `obj`, and its id.
    prog_fd: RawFd,
    id: u32,
    previous: OwnedFd,
    previous_id: u32,
    ifindex: u32,
    mode: XdpMode,
}

// SAFETY: the libbpf object is only touched in `attach` and `drop`
// (exclusive access); libbpf keeps no thread-bound state in it.
unsafe impl Send for Chained {}
// SAFETY: no method through `&self` touches the object.
unsafe impl Sync for Chained {}

impl Chained {
    /// Chains ustack's program in front of `previous` (id `previous_id`),
    /// in `mode`, in place of program `replacing` on interface `ifindex`:
    /// `previous` itself when it is the interface's program, or the stale
    /// ustack program that displaced it (`stale.rs`).
    pub fn attach(
        ifindex: u32,
        mode: XdpMode,
        previous: OwnedFd,
        previous_id: u32,
        replacing: Option<RawFd>,
    ) -> io::Result<(Chained, ProgramMaps)> {
        let obj = open_object()?;
        let mut c = Chained {
            obj,
            prog_fd: -1,
            id: 0,
            previous,
            previous_id,
            ifindex,
            mode,
        };
        // SAFETY: `obj` is a live, opened object of ours.
        let r = unsafe { bpf_object__load(obj) };
        if r < 0 {
            return Err(io::Error::other(format!(
                "loading ustack's XDP program: {}",
                io::Error::from_raw_os_error(-r)
            )));
        }
        // SAFETY: `obj` is loaded; the name is NUL-terminated.
        let prog = unsafe { bpf_object__find_program_by_name(obj, c"ustack_xsk_chain".as_ptr()) };
        // SAFETY: `prog` is checked for NULL first; it belongs to `obj`.
        let fd = if prog.is_null() {
            -1
        } else {
            unsafe { bpf_program__fd(prog) }
        };
        if fd < 0 {
            return Err(io::Error::other("the XDP object has no ustack_xsk_chain"));
        }
        let maps = ProgramMaps {
            xsks: map_fd(obj, c"ustack_xsks")?,
            addrs4: map_fd(obj, c"ustack_addrs4")?,
            addrs6: map_fd(obj, c"ustack_addrs6")?,
            kni: map_fd(obj, c"ustack_kni")?,
            owner: map_fd(obj, c"ustack_owner")?,
        };
        // Recorded before the program is on the interface: a later ustack
        // can tell whether it is stale from the start.
        super::stale::claim(fd, &maps.owner)?;
        let next = map_fd(obj, c"ustack_next")?;
        let key = 0u32;
        let value = c.previous.as_raw_fd() as u32;
        let mut attr = super::abi::MapElemAttr {
            map_fd: next.as_raw_fd() as u32,
            key: (&key as *const u32) as u64,
            value: (&value as *const u32) as u64,
            ..Default::default()
        };
        super::program::bpf(super::abi::BPF_MAP_UPDATE_ELEM, &mut attr).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("putting program {previous_id} behind ustack's (a tail call): {e}"),
            )
        })?;
        let expected = replacing.unwrap_or(c.previous.as_raw_fd());
        super::attached::replace_program(ifindex, mode, fd, expected).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "putting ustack's XDP program in front of program {previous_id} \
                         (netlink replace; a program attached through a BPF link cannot be \
                         replaced): {e}"
                ),
            )
        })?;
        c.prog_fd = fd;
        // What it displaced must outlive a SIGKILL of this process.
        c.id = super::stale::prog_id(fd)?;
        super::stale::pin_next(&next, c.id);
        Ok((c, maps))
    }

    /// The program ustack chains to.
    pub fn previous_id(&self) -> u32 {
        self.previous_id
    }
}

impl Drop for Chained {
    fn drop(&mut self) {
        if self.prog_fd >= 0 {
            if let Err(e) = super::attached::replace_program(
                self.ifindex,
                self.mode,
                self.previous.as_raw_fd(),
                self.prog_fd,
            ) {
                eprintln!(
                    "ustack: putting XDP program {} back on interface {}: {e}",
                    self.previous_id, self.ifindex
                );
            } else {
                super::stale::unpin_next(self.id);
            }
        }
        // SAFETY: `obj` is ours and used by nothing after this.
        unsafe { bpf_object__close(self.obj) };
    }
}
