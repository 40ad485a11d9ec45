//! ustack's classifying XDP program (`xdp_program=libxdp`) left on an
//! interface by a process that died without detaching it (SIGKILL, a
//! crash): told apart from a live one, and taken over or removed.
//!
//! That program is attached through netlink (libxdp's fallback, or chained
//! in front of another program), so unlike the default program's BPF link
//! it outlives its process; chained, it also keeps the displaced program
//! in its `ustack_next` slot (alive, but off the interface). While it stays,
//! the kernel's frames still reach the kernel (through the displaced
//! program where there is one), and ustack's frames too: their socket is
//! gone from the map, so the redirect falls back to XDP_PASS.
//!
//! The program carries its owner in its `ustack_owner` map (bound to it
//! with `BPF_PROG_BIND_MAP`, as the program itself never reads it): the
//! pid and the start time of the process that loaded it. A later ustack
//! finds the program through rtnetlink, reads the record, and calls the
//! owner gone when no process of that pid started at that time (a reused
//! pid has another start time). It then takes the program's place (chained:
//! in one atomic replace, the displaced program kept behind ustack's new
//! one and put back when that one stops); `ustack xdp detach IFACE` removes
//! it, putting the displaced program back.
//!
//! Chained, one more thing must outlive the process: the kernel empties a
//! program array (`ustack_next`) when the last descriptor of it closes, so
//! after a SIGKILL the stale program's tail call would fall through (every
//! frame it does not take to the kernel, the displaced program no longer
//! deciding, and freed). ustack therefore pins that map in bpffs
//! (`$LIBXDP_BPFFS`, else `/sys/fs/bpf`, as libxdp; `ustack_next_<program
//! id>`) where one is mounted, and unpins it when its program leaves the
//! interface. Without a bpffs the displaced program is lost on a SIGKILL
//! (said at start) and the kernel gets every frame ustack does not take.
//!
//! Owners are told by pid, so this assumes one pid namespace for the
//! processes that share an interface.

use std::io;
#[cfg(feature = "libxdp")]
use std::os::fd::RawFd;
use std::os::fd::{AsRawFd, OwnedFd};

use super::abi;
use super::program::{bpf, get_fd_by_id, info_by_fd, name16, XdpMode};

/// `struct ustack_owner_rec` of bpf/ustack_xdp.c.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct OwnerRecord {
    pid: u32,
    _pad: u32,
    start_ticks: u64,
}

const _: () = assert!(std::mem::size_of::<OwnerRecord>() == 16);

/// The start time of process `pid` (field 22 of /proc/PID/stat, clock ticks
/// after boot), if it exists.
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: the
    // fields after it follow its last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Records this process as the owner of program `prog` in its map `owner`.
#[cfg(feature = "libxdp")]
pub(super) fn claim(prog: RawFd, owner: &OwnedFd) -> io::Result<()> {
    let annotate = |e: io::Error, what: &str| io::Error::new(e.kind(), format!("{what}: {e}"));
    let mut bind = abi::BindMapAttr {
        prog_fd: prog as u32,
        map_fd: owner.as_raw_fd() as u32,
        flags: 0,
    };
    bpf(abi::BPF_PROG_BIND_MAP, &mut bind)
        .map_err(|e| annotate(e, "binding the owner map to ustack's XDP program"))?;
    let pid = std::process::id();
    let rec = OwnerRecord {
        pid,
        _pad: 0,
        start_ticks: start_ticks(pid).ok_or_else(|| {
            io::Error::other("reading this process's start time from /proc/self/stat")
        })?,
    };
    let key = 0u32;
    let mut attr = abi::MapElemAttr {
        map_fd: owner.as_raw_fd() as u32,
        key: (&key as *const u32) as u64,
        value: (&rec as *const OwnerRecord) as u64,
        ..Default::default()
    };
    bpf(abi::BPF_MAP_UPDATE_ELEM, &mut attr)
        .map(|_| ())
        .map_err(|e| annotate(e, "recording the XDP program's owner"))
}

/// The bpffs directory where ustack pins (libxdp's: `$LIBXDP_BPFFS`, else
/// `/sys/fs/bpf`), if a bpffs is mounted there.
fn bpffs() -> Option<std::path::PathBuf> {
    const BPF_FS_MAGIC: i64 = 0xcafe_4a11;
    let dir = std::env::var_os("LIBXDP_BPFFS").unwrap_or_else(|| "/sys/fs/bpf".into());
    let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(dir.as_os_str())).ok()?;
    // SAFETY: statfs is plain data; `c` is NUL-terminated and outlives the
    // call, which writes `st` only.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let r = unsafe { libc::statfs(c.as_ptr(), &mut st) };
    (r == 0 && st.f_type as i64 == BPF_FS_MAGIC).then(|| dir.into())
}

/// Where the program array of chained program `prog_id` is pinned.
fn next_pin(prog_id: u32) -> Option<std::path::PathBuf> {
    bpffs().map(|d| d.join(format!("ustack_next_{prog_id}")))
}

/// The id of BPF program `prog`.
#[cfg(feature = "libxdp")]
pub(super) fn prog_id(prog: RawFd) -> io::Result<u32> {
    let mut info = abi::ProgInfo::default();
    let mut attr = abi::InfoAttr {
        bpf_fd: prog as u32,
        info_len: std::mem::size_of::<abi::ProgInfo>() as u32,
        info: (&mut info as *mut abi::ProgInfo) as u64,
    };
    bpf(abi::BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    Ok(info.id)
}

/// Pins `next`, the program array of chained program `prog_id`, so that it
/// keeps the displaced program should this process be killed. Says on
/// stderr when it cannot.
#[cfg(feature = "libxdp")]
pub(super) fn pin_next(next: &OwnedFd, prog_id: u32) {
    let Some(path) = next_pin(prog_id) else {
        eprintln!(
            "ustack: no bpffs at $LIBXDP_BPFFS or /sys/fs/bpf: should this process be killed \
             (SIGKILL), the XDP program ustack's is chained in front of stops running"
        );
        return;
    };
    let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()))
        .expect("a path of ours has no NUL");
    let mut attr = abi::ObjPinAttr {
        pathname: c.as_ptr() as u64,
        bpf_fd: next.as_raw_fd() as u32,
        file_flags: 0,
    };
    if let Err(e) = bpf(abi::BPF_OBJ_PIN, &mut attr) {
        eprintln!(
            "ustack: pinning the chained XDP program's map at {}: {e}; should this process be \
             killed, the program it is chained in front of stops running",
            path.display()
        );
    }
}

/// Unpins the program array of chained program `prog_id` (gone from the
/// interface), if it was pinned.
pub(super) fn unpin_next(prog_id: u32) {
    if let Some(path) = next_pin(prog_id) {
        // Not there: nothing was pinned (no bpffs then, or a failure said).
        let _ = std::fs::remove_file(path);
    }
}

/// Entry 0 of map `map` as a `V` (`None` when the entry is empty).
fn lookup0<V: Default>(map: &OwnedFd) -> io::Result<Option<V>> {
    let key = 0u32;
    let mut value = V::default();
    let mut attr = abi::MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: (&key as *const u32) as u64,
        value: (&mut value as *mut V) as u64,
        ..Default::default()
    };
    match bpf(abi::BPF_MAP_LOOKUP_ELEM, &mut attr) {
        Ok(_) => Ok(Some(value)),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// What an interface runs, as far as ustack is concerned.
#[derive(Debug)]
pub enum OnInterface {
    /// No XDP program.
    Nothing,
    /// A program that is not ustack's classifying one (`name` as the kernel
    /// keeps it, 15 bytes at most), in `mode`.
    Other {
        id: u32,
        name: String,
        mode: XdpMode,
    },
    /// ustack's classifying program.
    Ustack(Found),
}

/// ustack's classifying program found on an interface.
#[derive(Debug)]
pub struct Found {
    pub id: u32,
    pub mode: XdpMode,
    prog: OwnedFd,
    /// The pid its owner record names (none: no record, as with ustack's
    /// default program, whose BPF link goes with its processes, or an owner
    /// that had not written it yet).
    pub owner: Option<u32>,
    /// Whether that owner still runs.
    pub owner_alive: bool,
    /// The program it displaced (chained), and that program's id.
    pub previous: Option<(OwnedFd, u32)>,
}

impl Found {
    /// Left by a process that is gone: safe to take over or remove.
    pub fn is_stale(&self) -> bool {
        self.owner.is_some() && !self.owner_alive
    }

    /// The program's descriptor and the program it displaced.
    #[cfg(feature = "libxdp")]
    pub(super) fn into_parts(self) -> (OwnedFd, Option<(OwnedFd, u32)>) {
        (self.prog, self.previous)
    }

    /// Takes the program off interface `ifindex`: the program it displaced
    /// goes back in its place in one step, else the interface is left with
    /// none. Refused by the kernel when it is no longer the interface's.
    pub fn remove(self, ifindex: u32) -> io::Result<()> {
        let put = self.previous.as_ref().map_or(-1, |(fd, _)| fd.as_raw_fd());
        super::attached::replace_program(ifindex, self.mode, put, self.prog.as_raw_fd())?;
        unpin_next(self.id);
        Ok(())
    }
}

/// What interface `ifindex` of this network namespace runs.
pub fn inspect(ifindex: u32) -> io::Result<OnInterface> {
    let annotate = |e: io::Error, what: &str| io::Error::new(e.kind(), format!("{what}: {e}"));
    let Some((id, mode)) = super::attached::attached_program(ifindex)
        .map_err(|e| annotate(e, "asking rtnetlink for the interface's XDP program"))?
    else {
        return Ok(OnInterface::Nothing);
    };
    let prog = get_fd_by_id(abi::BPF_PROG_GET_FD_BY_ID, id)
        .map_err(|e| annotate(e, "opening the interface's XDP program"))?;
    let mut map_ids = [0u32; 16];
    let mut info = abi::ProgInfo {
        nr_map_ids: map_ids.len() as u32,
        map_ids: map_ids.as_mut_ptr() as u64,
        ..Default::default()
    };
    info_by_fd(&prog, &mut info)?;
    if info.name != name16("ustack_xsk") && info.name != name16("ustack_xsk_chain") {
        let end = info.name.iter().position(|&b| b == 0).unwrap_or(16);
        return Ok(OnInterface::Other {
            id,
            mode,
            name: String::from_utf8_lossy(&info.name[..end]).into_owned(),
        });
    }
    let mut found = Found {
        id,
        mode,
        prog,
        owner: None,
        owner_alive: false,
        previous: None,
    };
    let n = (info.nr_map_ids as usize).min(map_ids.len());
    for &map_id in &map_ids[..n] {
        // A map that went away meanwhile tells nothing.
        let Ok(map) = get_fd_by_id(abi::BPF_MAP_GET_FD_BY_ID, map_id) else {
            continue;
        };
        let mut minfo = abi::MapInfo::default();
        info_by_fd(&map, &mut minfo)?;
        if minfo.name == name16("ustack_owner") {
            let rec: Option<OwnerRecord> =
                lookup0(&map).map_err(|e| annotate(e, "reading the XDP program's owner record"))?;
            if let Some(rec) = rec.filter(|r| r.pid != 0) {
                found.owner = Some(rec.pid);
                found.owner_alive = start_ticks(rec.pid) == Some(rec.start_ticks);
            }
        } else if minfo.name == name16("ustack_next") {
            // A program array answers a look-up with the program's id.
            let next: Option<u32> = lookup0(&map)
                .map_err(|e| annotate(e, "reading the program ustack's is chained to"))?;
            if let Some(next_id) = next {
                let fd = get_fd_by_id(abi::BPF_PROG_GET_FD_BY_ID, next_id)
                    .map_err(|e| annotate(e, "opening the program ustack's is chained to"))?;
                found.previous = Some((fd, next_id));
            }
        }
    }
    Ok(OnInterface::Ustack(found))
}

/// Writes an owner record naming `pid` (with a start time no process has)
/// into the program on `ifindex`: a stand-in for a killed owner in tests.
#[cfg(all(test, feature = "libxdp"))]
pub(super) fn forge_dead_owner(ifindex: u32, pid: u32) {
    let (id, _) = super::attached::attached_program(ifindex)
        .unwrap()
        .expect("a program on the interface");
    let prog = get_fd_by_id(abi::BPF_PROG_GET_FD_BY_ID, id).unwrap();
    let mut map_ids = [0u32; 16];
    let mut info = abi::ProgInfo {
        nr_map_ids: map_ids.len() as u32,
        map_ids: map_ids.as_mut_ptr() as u64,
        ..Default::default()
    };
    info_by_fd(&prog, &mut info).unwrap();
    for &map_id in &map_ids[..info.nr_map_ids as usize] {
        let map = get_fd_by_id(abi::BPF_MAP_GET_FD_BY_ID, map_id).unwrap();
        let mut minfo = abi::MapInfo::default();
        info_by_fd(&map, &mut minfo).unwrap();
        if minfo.name == name16("ustack_owner") {
            let rec = OwnerRecord {
                pid,
                _pad: 0,
                start_ticks: u64::MAX,
            };
            let key = 0u32;
            let mut attr = abi::MapElemAttr {
                map_fd: map.as_raw_fd() as u32,
                key: (&key as *const u32) as u64,
                value: (&rec as *const OwnerRecord) as u64,
                ..Default::default()
            };
            bpf(abi::BPF_MAP_UPDATE_ELEM, &mut attr).unwrap();
            return;
        }
    }
    panic!("program {id} has no ustack_owner map");
}

/// `ustack xdp detach IFACE`: removes ustack's classifying program that a
/// process gone left on interface `ifname` (of this network namespace),
/// putting back the program it displaced; refuses a live owner's program
/// and programs that are not ustack's. Says what it did.
pub fn detach_stale(ifname: &str) -> io::Result<String> {
    let ifindex = crate::ifreq::CtlSocket::new()?
        .index(ifname)
        .map_err(|e| io::Error::new(e.kind(), format!("{ifname}: {e}")))? as u32;
    match inspect(ifindex)? {
        OnInterface::Nothing => Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{ifname} runs no XDP program"),
        )),
        OnInterface::Other { id, name, .. } => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{ifname} runs XDP program {id} ({name}), not ustack's: left alone"),
        )),
        OnInterface::Ustack(f) if !f.is_stale() => Err(io::Error::new(
            io::ErrorKind::ResourceBusy,
            match f.owner {
                Some(pid) => format!(
                    "{ifname}: ustack's XDP program {} belongs to process {pid}, which runs",
                    f.id
                ),
                None => format!(
                    "{ifname}: ustack's XDP program {} records no owner (the default program's \
                     BPF link goes with its processes): left alone",
                    f.id
                ),
            },
        )),
        OnInterface::Ustack(f) => {
            let (id, pid) = (f.id, f.owner.unwrap_or(0));
            let back = f.previous.as_ref().map(|(_, prev)| *prev);
            f.remove(ifindex)?;
            Ok(match back {
                Some(prev) => format!(
                    "{ifname}: removed ustack's XDP program {id} (its process {pid} is gone); \
                     program {prev} is back in its place"
                ),
                None => format!(
                    "{ifname}: removed ustack's XDP program {id} (its process {pid} is gone)"
                ),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_start_time_is_read_and_stays() {
        let me = std::process::id();
        let t = start_ticks(me).expect("this process's start time");
        assert_eq!(start_ticks(me), Some(t));
        // pid_max is at most 2^22: no process has this pid.
        assert_eq!(start_ticks(0x7fff_fff0), None);
    }
}
