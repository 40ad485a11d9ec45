//! DPDK's Environment Abstraction Layer: started once per process from the
//! `[dpdk]` section.
//!
//! `rte_eal_init` can run only once in a process, so the arguments of the
//! first start are kept: starting again with the same arguments is a no-op,
//! with others an error that says so.
//!
//! Besides what the config asks, ustack passes `--in-memory` (no shared
//! files under /var/run/dpdk, no hugetlbfs mount needed: hugepages are
//! mapped anonymously, and nothing is left behind at exit) unless the
//! process is a secondary one (with `no_huge`, which DPDK does not combine
//! with `--in-memory`, `--no-shconf`), and `--no-telemetry` (ustack has its
//! own counters). Without `lcore_mask` the EAL's one lcore floats over every CPU
//! the process may use, so the engine thread stays unpinned.

use std::ffi::{CStr, CString};
use std::io;
use std::sync::Mutex;

use super::ffi;

/// `[dpdk] proc_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProcType {
    #[default]
    Auto,
    Primary,
    Secondary,
}

/// How to start the EAL (`[dpdk]`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EalConfig {
    /// `lcore_mask`: the cores of the EAL's lcores, ascending; the first is
    /// the main lcore, the calling thread. `None`: one lcore, unpinned.
    pub lcores: Option<Vec<u32>>,
    /// `channel`: memory channels (`-n`).
    pub channels: Option<u32>,
    /// `allow` / `pci_whitelist`: PCI devices to probe (`-a` each); empty
    /// probes every device bound to a DPDK driver.
    pub allow: Vec<String>,
    /// Do not probe PCI devices (`--no-pci`): for a process that uses only
    /// virtual devices, so that no NIC of the machine is touched.
    pub no_pci: bool,
    /// `file_prefix` (`--file-prefix`).
    pub file_prefix: Option<String>,
    /// `no_huge` (`--no-huge`): ordinary 4 KiB pages, for development and
    /// tests; DPDK then has `memory` MB (64 by default) in all.
    pub no_huge: bool,
    /// `memory` (`-m`), megabytes.
    pub memory_mb: Option<u32>,
    /// `vdev`: virtual devices (`--vdev` each), such as
    /// `net_af_packet0,iface=veth0`.
    pub vdevs: Vec<String>,
    /// `base_virtaddr` (`--base-virtaddr`).
    pub base_virtaddr: Option<u64>,
    /// `proc_type` (`--proc-type`).
    pub proc_type: ProcType,
    /// `log_level` (`--log-level`), 1 (emergency) ..= 8 (debug).
    pub log_level: Option<u8>,
}

impl EalConfig {
    /// The EAL's command line, program name first.
    pub fn args(&self) -> Vec<String> {
        let mut a = vec!["ustack".to_string()];
        match &self.lcores {
            Some(cores) => {
                let list: Vec<String> = cores.iter().map(u32::to_string).collect();
                a.push("-l".into());
                a.push(list.join(","));
            }
            None => {
                // lcore 0 on every CPU this process may run on.
                let cpus = allowed_cpus();
                let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
                a.push("--lcores".into());
                a.push(format!("0@({})", list.join(",")));
            }
        }
        if let Some(n) = self.channels {
            a.push("-n".into());
            a.push(n.to_string());
        }
        for dev in &self.allow {
            a.push("-a".into());
            a.push(dev.clone());
        }
        if self.no_pci {
            a.push("--no-pci".into());
        }
        if let Some(p) = &self.file_prefix {
            a.push("--file-prefix".into());
            a.push(p.clone());
        }
        if self.no_huge {
            a.push("--no-huge".into());
        }
        if let Some(mb) = self.memory_mb {
            a.push("-m".into());
            a.push(mb.to_string());
        }
        for v in &self.vdevs {
            a.push("--vdev".into());
            a.push(vdev_devargs(v).0);
        }
        if let Some(addr) = self.base_virtaddr {
            a.push("--base-virtaddr".into());
            a.push(format!("{addr:#x}"));
        }
        a.push("--proc-type".into());
        a.push(
            match self.proc_type {
                ProcType::Auto => "auto",
                ProcType::Primary => "primary",
                ProcType::Secondary => "secondary",
            }
            .into(),
        );
        if self.proc_type != ProcType::Secondary {
            // --no-huge is legacy memory, which --in-memory refuses; its
            // memory is anonymous anyway, so only the shared files go.
            a.push(
                if self.no_huge {
                    "--no-shconf"
                } else {
                    "--in-memory"
                }
                .into(),
            );
        }
        if let Some(l) = self.log_level {
            a.push("--log-level".into());
            a.push(l.to_string());
        }
        a.push("--no-telemetry".into());
        a
    }
}

/// The CPUs this process may run on (every online one if that cannot be
/// read).
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a live cpu_set_t and its size is passed.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    let mut cpus = Vec::new();
    if r == 0 {
        for cpu in 0..libc::CPU_SETSIZE as usize {
            // SAFETY: `cpu` is below CPU_SETSIZE, the set's size.
            if unsafe { libc::CPU_ISSET(cpu, &set) } {
                cpus.push(cpu);
            }
        }
    }
    if cpus.is_empty() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        cpus = (0..n).collect();
    }
    cpus
}

/// The arguments of the EAL's start in this process, and whether it
/// worked (`rte_eal_init` cannot be tried twice).
type Start = (Vec<String>, Result<(), String>);

static STARTED: Mutex<Option<Start>> = Mutex::new(None);

/// DPDK's message for an `rte_errno` value.
pub(crate) fn rte_strerror(err: i32) -> String {
    // SAFETY: rte_strerror returns a pointer to a static or thread-local
    // NUL-terminated string, read at once.
    let p = unsafe { ffi::ustack_dpdk_strerror(err) };
    if p.is_null() {
        return format!("error {err}");
    }
    // SAFETY: non-null, NUL-terminated, valid until the next call on this
    // thread; copied out here.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// An `io::Error` for a DPDK call that returned `-errno` (or set
/// `rte_errno`), naming the call.
pub(crate) fn dpdk_error(call: &str, err: i32) -> io::Error {
    let err = err.abs();
    io::Error::new(
        io::Error::from_raw_os_error(err).kind(),
        format!("{call}: {} (errno {err})", rte_strerror(err)),
    )
}

/// Starts the EAL with `cfg`, once per process.
///
/// Fails if it was already started with other arguments, or if
/// `rte_eal_init` fails (DPDK prints its reason on stderr too).
pub fn init(cfg: &EalConfig) -> io::Result<()> {
    let args = cfg.args();
    for v in &cfg.vdevs {
        if let Some(note) = vdev_devargs(v).1 {
            if !is_started() {
                eprintln!("{note}");
            }
        }
    }
    let mut started = STARTED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((prev, outcome)) = started.as_ref() {
        if let Err(msg) = outcome {
            return Err(io::Error::other(format!(
                "the DPDK EAL failed to start earlier in this process and cannot be \
                 started again: {msg}"
            )));
        }
        if *prev == args {
            return Ok(());
        }
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "the DPDK EAL is already running in this process with `{}`; it cannot \
                 start again with `{}`",
                prev.join(" "),
                args.join(" ")
            ),
        ));
    }
    let c_args: Vec<CString> = args
        .iter()
        .map(|a| CString::new(a.as_str()))
        .collect::<Result<_, _>>()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "an EAL argument has a NUL"))?;
    // rte_eal_init may permute argv, and keeps pointers into it: the
    // strings are leaked on purpose, they live as long as the EAL.
    let mut argv: Vec<*mut libc::c_char> = c_args.into_iter().map(CString::into_raw).collect();
    let argc = argv.len() as libc::c_int;
    argv.push(std::ptr::null_mut());
    // SAFETY: argv holds `argc` valid NUL-terminated strings followed by
    // NULL, all leaked (valid for the process's life); the lock above makes
    // this the only call in the process.
    let r = unsafe { ffi::ustack_dpdk_eal_init(argc, argv.as_mut_ptr()) };
    std::mem::forget(argv);
    if r < 0 {
        // SAFETY: reads the thread's rte_errno, set by the failed call.
        let err = unsafe { ffi::ustack_dpdk_errno() };
        let e = dpdk_error("rte_eal_init", err);
        let e = io::Error::new(e.kind(), format!("{e} (arguments: {})", args.join(" ")));
        *started = Some((args, Err(e.to_string())));
        return Err(e);
    }
    *started = Some((args, Ok(())));
    if cfg.proc_type != ProcType::Secondary {
        remove_runtime_dir();
    }
    Ok(())
}

/// Removes the EAL's runtime directory (/var/run/dpdk/PREFIX) and its
/// parent if they are empty, as they are without shared files: the process
/// leaves nothing behind. `rmdir` never removes a directory in use.
fn remove_runtime_dir() {
    // SAFETY: the EAL is started; the call returns its static path string.
    let p = unsafe { ffi::ustack_dpdk_runtime_dir() };
    if p.is_null() {
        return;
    }
    // SAFETY: non-null, NUL-terminated, static for the EAL's life.
    let dir = std::path::PathBuf::from(unsafe { CStr::from_ptr(p) }.to_string_lossy().as_ref());
    if std::fs::remove_dir(&dir).is_ok() {
        if let Some(parent) = dir.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
}

/// Whether the EAL has been started in this process.
pub fn is_started() -> bool {
    STARTED
        .lock()
        .map(|s| matches!(s.as_ref(), Some((_, Ok(())))))
        .unwrap_or(false)
}

/// The frame size ustack gives DPDK's af_packet driver when the devargs
/// name none (the driver's own default is 2048): large enough for the
/// largest frames the kernel hands over, small enough that an mbuf holds
/// its data (`framesz` - 32 <= 65535 - 128), a multiple of 16. A frame
/// starts 66 bytes into its slot, so frames of up to 65,342 bytes arrive
/// whole: a Linux peer's TCP super-frames (at most 65,536 - 321 bytes of
/// payload, `sk_dst_gso_max_size`, in whole segments, plus headers) and
/// datagrams reassembled to 64 KB less a little.
pub const AF_PACKET_FRAME_SIZE: u32 = 65408;

/// The block that holds such frames: the driver finds frame i at i times
/// the frame size from the ring's start, so a block must be a whole
/// number of frames, and the kernel wants whole pages: 32 frames are 511
/// pages.
pub const AF_PACKET_BLOCK_SIZE: u32 = 32 * AF_PACKET_FRAME_SIZE;

/// Frames per ring when ustack sets the frame size (4 blocks, 8 MB per
/// ring, as the 512 frames of 16 KB given before).
pub const AF_PACKET_FRAME_COUNT: u32 = 128;

/// The frame size for a `blocksz` given alone: the largest that is at most
/// [`AF_PACKET_FRAME_SIZE`], a multiple of 16 and a whole fraction of the
/// block (the driver's ring layout), or none.
fn frame_size_for_block(block: u32) -> Option<u32> {
    (1..=block / 16).find_map(|k| {
        let f = block / k;
        (block.is_multiple_of(k) && f.is_multiple_of(16) && f <= AF_PACKET_FRAME_SIZE).then_some(f)
    })
}

/// A virtual device's devargs as ustack hands them to DPDK, and what it
/// added, to be said once. DPDK's af_packet driver (22.11) copies each
/// frame the kernel hands its TPACKET_V2 ring into one mbuf, and the
/// kernel cuts a frame longer than the ring's slot (`framesz`, 2048 by
/// default) to the slot, silently: its socket joins a fanout group with
/// the defragmentation flag, so a fragmented datagram arrives reassembled
/// as one frame, and a veth peer with TSO/GSO on (every container's) hands
/// over TCP super-frames of up to 64 KB; with 2048-byte slots every one is
/// cut, then dropped by the stack, and a transfer crawls on
/// retransmissions. Without a `framesz` the devargs get
/// `framesz=65408,blocksz=2093056,framecnt=128` (the driver has no vnet
/// header to ask the kernel to cut them instead); with a `blocksz` alone,
/// the largest `framesz` that fits it whole (at most 65408); a `framesz`
/// the user wrote is kept.
pub fn vdev_devargs(devargs: &str) -> (String, Option<String>) {
    let mut fields = devargs.split(',');
    let name = fields.next().unwrap_or("").trim();
    if !name.starts_with("net_af_packet") {
        return (devargs.to_string(), None);
    }
    let value = |key: &str| {
        devargs.split(',').skip(1).find_map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (k.trim() == key).then(|| v.trim().to_string())
        })
    };
    if value("framesz").is_some() {
        return (devargs.to_string(), None);
    }
    let added = match value("blocksz") {
        Some(b) => match b.parse().ok().and_then(frame_size_for_block) {
            Some(frame) => format!("framesz={frame}"),
            // The driver refuses the block itself, and says so.
            None => return (devargs.to_string(), None),
        },
        None => {
            let mut a = format!("framesz={AF_PACKET_FRAME_SIZE},blocksz={AF_PACKET_BLOCK_SIZE}");
            if value("framecnt").is_none() {
                a.push_str(&format!(",framecnt={AF_PACKET_FRAME_COUNT}"));
            }
            a
        }
    };
    let note = format!(
        "ustack: vdev {name}: no framesz given, so {added} is added (name a framesz to choose): \
         the af_packet driver cuts every frame longer than its ring's slot (2048 bytes by \
         default), and the kernel hands it TCP super-frames of up to 64 KB from a peer with \
         TSO/GSO on and fragmented datagrams reassembled; ustack receives them into mbufs of \
         that size"
    );
    (format!("{devargs},{added}"), Some(note))
}

/// Adds a virtual device after the EAL started (hot plug), as `--vdev`
/// would have at start (`net_af_packet1,iface=veth1`), and returns its
/// port id.
pub fn probe_vdev(devargs: &str) -> io::Result<u16> {
    if !is_started() {
        return Err(io::Error::other("the DPDK EAL is not started"));
    }
    let (devargs, note) = vdev_devargs(devargs);
    if let Some(n) = note {
        eprintln!("{n}");
    }
    let devargs = devargs.as_str();
    let c = CString::new(devargs)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "devargs has a NUL"))?;
    // SAFETY: `c` is a valid NUL-terminated string for the call's duration.
    let r = unsafe { ffi::ustack_dpdk_dev_probe(c.as_ptr()) };
    if r < 0 {
        return Err(dpdk_error(&format!("rte_dev_probe({devargs})"), r));
    }
    let name = devargs.split(',').next().unwrap_or(devargs);
    let c = CString::new(name).expect("a prefix of a string without NUL");
    let mut port = 0u16;
    // SAFETY: `c` is a valid C string and `port` a live out-parameter.
    let r = unsafe { ffi::ustack_dpdk_port_by_name(c.as_ptr(), &mut port) };
    if r < 0 {
        return Err(dpdk_error(
            &format!("rte_eth_dev_get_port_by_name({name})"),
            r,
        ));
    }
    Ok(port)
}

/// The number of ethdev ports DPDK found.
pub fn port_count() -> u16 {
    if !is_started() {
        return 0;
    }
    // SAFETY: the EAL is started; the call only reads ethdev's port table.
    unsafe { ffi::ustack_dpdk_port_count() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn af_packet_vdevs_get_a_frame_size_when_none_is_given() {
        let (a, note) = vdev_devargs("net_af_packet0,iface=v0");
        assert_eq!(
            a,
            "net_af_packet0,iface=v0,framesz=65408,blocksz=2093056,framecnt=128"
        );
        assert!(note.unwrap().contains("framesz=65408"));
        // The block is whole pages, a whole number of frames.
        assert_eq!(AF_PACKET_BLOCK_SIZE % 4096, 0);
        assert_eq!(AF_PACKET_BLOCK_SIZE % AF_PACKET_FRAME_SIZE, 0);
        assert_eq!(
            AF_PACKET_FRAME_COUNT % (AF_PACKET_BLOCK_SIZE / AF_PACKET_FRAME_SIZE),
            0
        );
        let (a, note) = vdev_devargs("net_af_packet0,iface=v0,framecnt=512");
        assert_eq!(
            a,
            "net_af_packet0,iface=v0,framecnt=512,framesz=65408,blocksz=2093056"
        );
        assert!(note.is_some());
        let (a, _) = vdev_devargs("net_af_packet0,iface=v0,blocksz=65536");
        assert_eq!(a, "net_af_packet0,iface=v0,blocksz=65536,framesz=32768");
        let (a, _) = vdev_devargs("net_af_packet0,iface=v0,blocksz=16384");
        assert_eq!(a, "net_af_packet0,iface=v0,blocksz=16384,framesz=16384");
        let (a, _) = vdev_devargs("net_af_packet0,iface=v0,blocksz=2093056");
        assert_eq!(a, "net_af_packet0,iface=v0,blocksz=2093056,framesz=65408");
        for kept in [
            "net_af_packet0,iface=v0,framesz=4096",
            "net_af_packet1,iface=v0, framesz=2048,blocksz=4096",
            "net_af_xdp0,iface=v0",
            "net_tap0,iface=t0",
            "net_null0",
        ] {
            assert_eq!(vdev_devargs(kept), (kept.to_string(), None), "{kept}");
        }
    }

    #[test]
    fn eal_arguments_from_config() {
        let cfg = EalConfig {
            lcores: Some(vec![1, 2]),
            channels: Some(4),
            allow: vec!["0000:02:00.0".into()],
            no_pci: false,
            file_prefix: Some("us1".into()),
            no_huge: true,
            memory_mb: Some(128),
            vdevs: vec!["net_af_packet0,iface=a".into(), "net_null0".into()],
            base_virtaddr: Some(0x1000_0000),
            proc_type: ProcType::Primary,
            log_level: Some(4),
        };
        assert_eq!(
            cfg.args().join(" "),
            "ustack -l 1,2 -n 4 -a 0000:02:00.0 --file-prefix us1 --no-huge -m 128 \
             --vdev net_af_packet0,iface=a,framesz=65408,blocksz=2093056,framecnt=128 --vdev net_null0 \
             --base-virtaddr 0x10000000 \
             --proc-type primary --no-shconf --log-level 4 --no-telemetry"
        );
        let secondary = EalConfig {
            proc_type: ProcType::Secondary,
            ..EalConfig::default()
        };
        let a = secondary.args();
        assert!(
            !a.iter().any(|x| x == "--in-memory" || x == "--no-shconf"),
            "{a:?}"
        );
        let huge = EalConfig::default().args();
        assert!(huge.iter().any(|x| x == "--in-memory"), "{huge:?}");
        // Unpinned: lcore 0 over every allowed CPU.
        assert_eq!(a[1], "--lcores");
        assert!(a[2].starts_with("0@(") && a[2].ends_with(')'), "{a:?}");
    }
}
