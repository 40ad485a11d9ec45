//! The XDP program that hands an interface's frames to AF_XDP sockets.
//!
//! Five instructions, assembled here and loaded with the `bpf()` system call
//! (no libbpf, no compiler, no object file):
//!
//! ```text
//! r2 = *(u32 *)(r1 + rx_queue_index)    ; the queue the frame came in on
//! r1 = xskmap                           ; (a 16-byte load of the map's fd)
//! r3 = XDP_PASS                         ; what to do when no socket is there
//! call bpf_redirect_map                 ; to the socket of that queue
//! exit
//! ```
//!
//! A frame that arrives on a queue with an AF_XDP socket in the map goes to
//! that socket; on any other queue it goes on to the kernel (the low bits of
//! `bpf_redirect_map`'s flags are its fallback action, Linux 5.3+).
//!
//! The program is attached through a BPF link (`BPF_LINK_CREATE`, Linux
//! 5.9+) rather than netlink: the attachment belongs to a file descriptor,
//! so it goes away when the descriptor is closed, also when the process
//! dies; nothing is left on the interface.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::abi;

/// Where the XDP program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpMode {
    /// In the driver (`XDP_FLAGS_DRV_MODE`), before any socket buffer is
    /// made. veth has it.
    Native,
    /// In the kernel's receive path on socket buffers (`XDP_FLAGS_SKB_MODE`):
    /// every driver, slower.
    Generic,
}

impl XdpMode {
    pub fn name(self) -> &'static str {
        match self {
            XdpMode::Native => "native",
            XdpMode::Generic => "generic",
        }
    }
}

/// Sockets the map can hold: queues 0 to `MAX_QUEUES - 1`.
pub const MAX_QUEUES: u32 = 256;

/// The loaded program, its socket map and its attachment to one interface.
/// Dropping it detaches the program.
#[derive(Debug)]
pub struct XdpProgram {
    // Drop order: detach first, then the program, then the map.
    attachment: Attachment,
    map: OwnedFd,
    /// The maps of the classifying program (`xdp_program=libxdp`).
    #[cfg(feature = "libxdp")]
    served: Option<super::served::ServedMaps>,
    ifindex: u32,
    mode: XdpMode,
}

/// What holds the program on the interface.
#[derive(Debug)]
enum Attachment {
    /// The five-instruction program through a BPF link of ours (its
    /// program descriptor kept beside it).
    Link { _link: OwnedFd, _prog: OwnedFd },
    /// The classifying program through libxdp.
    #[cfg(feature = "libxdp")]
    Libxdp(super::dispatched::Dispatched),
    /// The classifying program chained in front of the interface's
    /// previous program (where libxdp's dispatcher cannot run).
    #[cfg(feature = "libxdp")]
    Chained(super::chained::Chained),
}

pub(crate) fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, fully initialised `union bpf_attr` prefix of
    // the layout `cmd` reads (declared in `abi`, size checked there); the
    // kernel reads at most `size_of::<T>()` bytes and treats the rest of the
    // union as zero. Pointers inside it (instructions, license, log) point at
    // data the caller keeps alive for the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            (attr as *mut T).cast::<libc::c_void>(),
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub(crate) fn owned(fd: libc::c_long) -> OwnedFd {
    // SAFETY: `fd` is a descriptor the kernel just returned to us and that
    // nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
}

pub(crate) fn name16(s: &str) -> [u8; 16] {
    let mut n = [0u8; 16];
    for (d, b) in n.iter_mut().zip(s.bytes().take(15)) {
        *d = b;
    }
    n
}

/// Loads a hand-assembled program of `prog_type`, to be attached as
/// `attach_type`, under `name`; a refusal carries the verifier's log,
/// with `what` naming the program.
pub(crate) fn load_program(
    prog_type: u32,
    attach_type: u32,
    name: &str,
    insns: &[abi::BpfInsn],
    what: &str,
) -> io::Result<OwnedFd> {
    let license = c"Dual MIT/GPL";
    let mut log = vec![0u8; 16384];
    let mut load = abi::ProgLoadAttr {
        prog_type,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 1,
        log_size: log.len() as u32,
        log_buf: log.as_mut_ptr() as u64,
        prog_name: name16(name),
        expected_attach_type: attach_type,
        ..Default::default()
    };
    match bpf(abi::BPF_PROG_LOAD, &mut load) {
        Ok(fd) => Ok(owned(fd)),
        Err(e) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            Err(annotate(
                e,
                &format!("loading {what} (verifier: {})", text.trim()),
            ))
        }
    }
}

/// The program's instructions for socket map `map_fd`.
fn instructions(map_fd: RawFd) -> [abi::BpfInsn; 6] {
    const BPF_LDX_MEM_W: u8 = 0x61; // BPF_LDX | BPF_MEM | BPF_W
    const BPF_LD_IMM64: u8 = 0x18; // BPF_LD | BPF_IMM | BPF_DW
    const BPF_MOV64_IMM: u8 = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K
    const BPF_CALL: u8 = 0x85; // BPF_JMP | BPF_CALL
    const BPF_EXIT: u8 = 0x95; // BPF_JMP | BPF_EXIT
    let regs = |dst: u8, src: u8| dst | (src << 4);
    [
        abi::BpfInsn {
            code: BPF_LDX_MEM_W,
            regs: regs(2, 1),
            off: abi::XDP_MD_RX_QUEUE_INDEX,
            imm: 0,
        },
        abi::BpfInsn {
            code: BPF_LD_IMM64,
            regs: regs(1, abi::BPF_PSEUDO_MAP_FD),
            off: 0,
            imm: map_fd,
        },
        // The second half of the 64-bit immediate.
        abi::BpfInsn::default(),
        abi::BpfInsn {
            code: BPF_MOV64_IMM,
            regs: regs(3, 0),
            off: 0,
            imm: abi::XDP_PASS,
        },
        abi::BpfInsn {
            code: BPF_CALL,
            regs: 0,
            off: 0,
            imm: abi::BPF_FUNC_REDIRECT_MAP,
        },
        abi::BpfInsn {
            code: BPF_EXIT,
            regs: 0,
            off: 0,
            imm: 0,
        },
    ]
}

impl XdpProgram {
    /// Loads the program and attaches it to interface `ifindex` in `mode`.
    /// Fails when the interface already has an XDP program (`EEXIST`) or
    /// the driver lacks the mode (`EOPNOTSUPP`, `EINVAL`).
    pub fn attach(ifindex: u32, mode: XdpMode) -> io::Result<XdpProgram> {
        let mut map_attr = abi::MapCreateAttr {
            map_type: abi::BPF_MAP_TYPE_XSKMAP,
            key_size: 4,
            value_size: 4,
            max_entries: MAX_QUEUES,
            map_name: name16("ustack_xsks"),
            ..Default::default()
        };
        let map = owned(
            bpf(abi::BPF_MAP_CREATE, &mut map_attr)
                .map_err(|e| annotate(e, "creating the XSKMAP"))?,
        );

        let insns = instructions(map.as_raw_fd());
        let prog = load_program(
            abi::BPF_PROG_TYPE_XDP,
            abi::BPF_XDP,
            "ustack_xsk",
            &insns,
            "the XDP program",
        )?;

        let mut link_attr = abi::LinkCreateAttr {
            prog_fd: prog.as_raw_fd() as u32,
            target_ifindex: ifindex,
            attach_type: abi::BPF_XDP,
            flags: match mode {
                XdpMode::Native => abi::XDP_FLAGS_DRV_MODE,
                XdpMode::Generic => abi::XDP_FLAGS_SKB_MODE,
            },
        };
        let link = owned(bpf(abi::BPF_LINK_CREATE, &mut link_attr).map_err(|e| {
            annotate(
                e,
                &format!("attaching the XDP program in {} mode", mode.name()),
            )
        })?);
        Ok(XdpProgram {
            attachment: Attachment::Link {
                _link: link,
                _prog: prog,
            },
            map,
            #[cfg(feature = "libxdp")]
            served: None,
            ifindex,
            mode,
        })
    }

    /// Loads ustack's classifying program (`bpf/ustack_xdp.c`) and attaches
    /// it to `ifindex` in `mode` through libxdp: in libxdp's dispatcher
    /// beside other programs where the kernel allows it, else alone
    /// (libxdp's fallback; [`XdpProgram::in_dispatcher`] says which).
    /// Frames go to the sockets only for the addresses given to
    /// [`XdpProgram::served`]; the rest pass to the kernel.
    ///
    /// When the interface already runs a program that is not libxdp's
    /// dispatcher (one attached alone, as libxdp's own fallback does where
    /// the kernel refuses the dispatcher), ustack's program is chained in
    /// front of it instead, in its mode (`chained.rs`).
    #[cfg(feature = "libxdp")]
    pub fn attach_libxdp(ifindex: u32, mode: XdpMode) -> io::Result<XdpProgram> {
        use super::stale::OnInterface;
        let chained = |mode: XdpMode,
                       previous: OwnedFd,
                       previous_id: u32,
                       replacing: Option<RawFd>|
         -> io::Result<XdpProgram> {
            let (held, maps) =
                super::chained::Chained::attach(ifindex, mode, previous, previous_id, replacing)?;
            Ok(XdpProgram {
                attachment: Attachment::Chained(held),
                map: maps.xsks,
                served: Some(super::served::ServedMaps::new(
                    maps.addrs4,
                    maps.addrs6,
                    maps.kni,
                )),
                ifindex,
                mode,
            })
        };
        match super::stale::inspect(ifindex)? {
            OnInterface::Ustack(found) if found.is_stale() => {
                // A crashed ustack's: take its place, keeping the program
                // it displaced behind ours.
                let (id, pid, stale_mode) = (found.id, found.owner.unwrap_or(0), found.mode);
                if found.previous.is_some() {
                    let (stale, previous) = found.into_parts();
                    let (prev, prev_id) = previous.expect("checked just above");
                    eprintln!(
                        "ustack: interface {ifindex} runs ustack's XDP program {id} left by \
                         process {pid}, which is gone: replacing it, program {prev_id} \
                         (which it displaced) stays behind ustack's"
                    );
                    let ours = chained(stale_mode, prev, prev_id, Some(stale.as_raw_fd()))?;
                    super::stale::unpin_next(id);
                    return Ok(ours);
                }
                eprintln!(
                    "ustack: interface {ifindex} runs ustack's XDP program {id} left by \
                     process {pid}, which is gone: removing it"
                );
                found
                    .remove(ifindex)
                    .map_err(|e| annotate(e, "removing the stale XDP program"))?;
            }
            OnInterface::Ustack(found) => {
                return Err(io::Error::new(
                    io::ErrorKind::ResourceBusy,
                    format!(
                        "interface {ifindex} runs ustack's XDP program {} already (process {}; \
                         `ustack xdp detach IFACE` removes one whose process is gone)",
                        found.id,
                        found.owner.map_or("unknown".to_string(), |p| p.to_string())
                    ),
                ));
            }
            OnInterface::Other { id, name, mode } if name != "xdp_dispatcher" => {
                let prev = get_fd_by_id(abi::BPF_PROG_GET_FD_BY_ID, id)
                    .map_err(|e| annotate(e, "opening the interface's XDP program"))?;
                return chained(mode, prev, id, None);
            }
            OnInterface::Other { .. } | OnInterface::Nothing => {}
        }
        let (held, maps) = super::dispatched::Dispatched::attach(ifindex, mode)?;
        Ok(XdpProgram {
            attachment: Attachment::Libxdp(held),
            map: maps.xsks,
            served: Some(super::served::ServedMaps::new(
                maps.addrs4,
                maps.addrs6,
                maps.kni,
            )),
            ifindex,
            mode,
        })
    }

    /// Whether the program runs in libxdp's dispatcher (beside other XDP
    /// programs); false when it holds the interface alone.
    pub fn in_dispatcher(&self) -> bool {
        match &self.attachment {
            Attachment::Link { .. } => false,
            #[cfg(feature = "libxdp")]
            Attachment::Libxdp(d) => d.in_dispatcher(),
            #[cfg(feature = "libxdp")]
            Attachment::Chained(_) => false,
        }
    }

    /// The program ustack's is chained in front of, if it is.
    pub fn chained_to(&self) -> Option<u32> {
        match &self.attachment {
            #[cfg(feature = "libxdp")]
            Attachment::Chained(c) => Some(c.previous_id()),
            _ => None,
        }
    }

    /// The addresses and exception ports the classifying program serves
    /// (none for the default program, which takes every frame).
    #[cfg(feature = "libxdp")]
    pub fn served(&self) -> Option<&super::served::ServedMaps> {
        self.served.as_ref()
    }

    /// Joins the ustack program interface `ifindex` of this namespace
    /// runs already (another process of a group attached it): its socket
    /// map, and a descriptor of its BPF link, which keeps the program
    /// attached while this process lives though the one that attached it
    /// ends.  Fails when the interface runs no program, or one that is not
    /// ustack's.
    pub fn join(ifindex: u32) -> io::Result<XdpProgram> {
        let not_ours = |what: String| io::Error::new(io::ErrorKind::InvalidInput, what);
        let Some((prog_id, mode)) = super::attached::attached_program(ifindex)
            .map_err(|e| annotate(e, "asking rtnetlink for the interface's XDP program"))?
        else {
            return Err(not_ours(format!(
                "interface {ifindex} runs no XDP program to join"
            )));
        };
        let prog = get_fd_by_id(abi::BPF_PROG_GET_FD_BY_ID, prog_id)
            .map_err(|e| annotate(e, "opening the interface's XDP program"))?;
        let mut map_id = 0u32;
        let mut info = abi::ProgInfo {
            nr_map_ids: 1,
            map_ids: (&mut map_id as *mut u32) as u64,
            ..Default::default()
        };
        info_by_fd(&prog, &mut info)?;
        if info.name != name16("ustack_xsk") || info.nr_map_ids != 1 {
            return Err(not_ours(format!(
                "interface {ifindex} runs an XDP program that is not ustack's (id {prog_id}):                  several processes share a port only under ustack's"
            )));
        }
        let map = get_fd_by_id(abi::BPF_MAP_GET_FD_BY_ID, map_id)
            .map_err(|e| annotate(e, "opening the XDP program's socket map"))?;
        let mut minfo = abi::MapInfo::default();
        info_by_fd(&map, &mut minfo)?;
        if minfo.map_type != abi::BPF_MAP_TYPE_XSKMAP || minfo.name != name16("ustack_xsks") {
            return Err(not_ours(format!(
                "the XDP program {prog_id} on interface {ifindex} has no ustack socket map"
            )));
        }
        let link = link_of(prog_id, ifindex)?;
        Ok(XdpProgram {
            attachment: Attachment::Link {
                _link: link,
                _prog: prog,
            },
            map,
            #[cfg(feature = "libxdp")]
            served: None,
            ifindex,
            mode,
        })
    }

    pub fn mode(&self) -> XdpMode {
        self.mode
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Sends frames of `queue` to socket `xsk`.
    pub fn insert(&self, queue: u32, xsk: RawFd) -> io::Result<()> {
        if queue >= MAX_QUEUES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("queue {queue} is past the {MAX_QUEUES} the socket map holds"),
            ));
        }
        let key = queue;
        let value = xsk as u32;
        let mut attr = abi::MapElemAttr {
            map_fd: self.map.as_raw_fd() as u32,
            key: (&key as *const u32) as u64,
            value: (&value as *const u32) as u64,
            ..Default::default()
        };
        bpf(abi::BPF_MAP_UPDATE_ELEM, &mut attr)
            .map_err(|e| annotate(e, "adding the socket to the XSKMAP"))?;
        Ok(())
    }

    /// Sends frames of `queue` to the kernel again.
    pub fn remove(&self, queue: u32) {
        let key = queue;
        let mut attr = abi::MapElemAttr {
            map_fd: self.map.as_raw_fd() as u32,
            key: (&key as *const u32) as u64,
            ..Default::default()
        };
        // Failing only when the entry is already gone, which is the goal.
        let _ = bpf(abi::BPF_MAP_DELETE_ELEM, &mut attr);
    }
}

/// The id of the XDP program interface `ifindex` of this namespace runs,
/// if any.
pub(super) fn attached_program_id(ifindex: u32) -> io::Result<Option<u32>> {
    Ok(super::attached::attached_program(ifindex)
        .map_err(|e| annotate(e, "asking rtnetlink for the interface's XDP program"))?
        .map(|(id, _)| id))
}

/// A descriptor of the object of kind `cmd` (a BPF_*_GET_FD_BY_ID) with
/// id `id`.
pub(super) fn get_fd_by_id(cmd: libc::c_long, id: u32) -> io::Result<OwnedFd> {
    let mut attr = abi::IdAttr {
        id,
        ..Default::default()
    };
    bpf(cmd, &mut attr).map(owned)
}

/// What the kernel says of BPF object `fd` (`T` is its info structure).
pub(super) fn info_by_fd<T>(fd: &OwnedFd, info: &mut T) -> io::Result<()> {
    let mut attr = abi::InfoAttr {
        bpf_fd: fd.as_raw_fd() as u32,
        info_len: std::mem::size_of::<T>() as u32,
        info: (info as *mut T) as u64,
    };
    bpf(abi::BPF_OBJ_GET_INFO_BY_FD, &mut attr)
        .map(|_| ())
        .map_err(|e| annotate(e, "reading a BPF object's information"))
}

/// The XDP BPF link of program `prog_id` on interface `ifindex` (program
/// ids are global: the program is the namespace's).
fn link_of(prog_id: u32, ifindex: u32) -> io::Result<OwnedFd> {
    let mut id = 0u32;
    loop {
        let mut next = abi::IdAttr {
            id,
            ..Default::default()
        };
        if let Err(e) = bpf(abi::BPF_LINK_GET_NEXT_ID, &mut next) {
            return Err(if e.raw_os_error() == Some(libc::ENOENT) {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "the XDP program {prog_id} on interface {ifindex} is not attached                          through a BPF link (not by ustack)"
                    ),
                )
            } else {
                annotate(e, "listing BPF links")
            });
        }
        id = next.next_id;
        // A link that went away between the two calls is passed over.
        let Ok(link) = get_fd_by_id(abi::BPF_LINK_GET_FD_BY_ID, id) else {
            continue;
        };
        let mut info = abi::LinkInfoXdp::default();
        if info_by_fd(&link, &mut info).is_ok()
            && info.link_type == abi::BPF_LINK_TYPE_XDP
            && info.prog_id == prog_id
            && info.ifindex == ifindex
        {
            return Ok(link);
        }
    }
}

fn annotate(e: io::Error, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_encode_registers_and_map() {
        let p = instructions(7);
        assert_eq!(p[0].regs, 0x12, "dst r2, src r1");
        assert_eq!(p[0].off, 16);
        assert_eq!(p[1].regs, 0x11, "dst r1, pseudo map fd");
        assert_eq!(p[1].imm, 7);
        assert_eq!(p[3].imm, 2, "fallback XDP_PASS");
        assert_eq!(p[4].imm, 51);
        assert_eq!(p[5].code, 0x95);
    }
}
