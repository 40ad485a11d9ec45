//! AF_XDP: frames go from the driver straight into memory the engine reads,
//! with no copy in user space and, where the driver offers it, none in the
//! kernel either.
//!
//! One [`AfXdpLink`] is one AF_XDP socket bound to one queue of an
//! interface (one per engine queue). Its UMEM (`umem.rs`) is cut into
//! chunks that are the link's packet buffers: [`Link::Buf`] is an
//! [`XdpFrame`], a handle on one chunk. The socket shares four rings with
//! the kernel (`ring.rs`):
//! - fill: chunks we give the kernel to receive into;
//! - RX: chunks it filled (address and length); `rx_burst` turns each into
//!   a frame where it lies, so the stack reads the bytes in the UMEM;
//! - TX: frames the engine wrote in place, handed over as they are;
//! - completion: chunks the kernel has finished sending, back to our free
//!   list.
//!
//! The XDP program (`program.rs`) sends every frame of the queue to the
//! socket; an interface has one program, shared by the sockets of its queues
//! through an [`Arc`]. It runs in the driver (native) or in the kernel's
//! generic path (SKB); [`XdpModeChoice::Auto`] tries native first.
//!
//! Binding: zero-copy (`XDP_ZEROCOPY`: the NIC DMAs into the UMEM) where the
//! driver offers it, else copy mode (`XDP_COPY`: the kernel copies each frame
//! into a UMEM chunk once, as it must to get it out of its own buffers).
//! Either way the link does no copy of its own: [`LinkStats::rx_copied`]
//! stays 0. [`XdpBindChoice::Auto`] tries zero-copy and falls back to copy
//! mode, saying so on stderr. With `XDP_USE_NEED_WAKEUP` the kernel sets a
//! flag on the fill and TX rings when it needs a system call to make
//! progress; the link makes one only then (copy-mode TX always needs one).
//!
//! Frames longer than a chunk: in generic mode the socket is bound with
//! `XDP_USE_SG` where the kernel has it, and a TCP super-frame (a veth
//! peer's TSO/GSO, a NIC's GRO) arrives in pieces that the link gathers
//! and cuts into segments (`gather.rs`); without it the kernel drops such
//! frames. Native mode sees the driver's frames, no larger than the MTU
//! (a veth whose peer runs native XDP stops its peer's GSO).
//!
//! Transmit checksums (`XdpConfig::tx_checksum`): the UMEM is registered
//! with room for an `xsk_tx_metadata` before each TX frame
//! (`tx_metadata_len`, Linux 6.11's `XDP_UMEM_TX_METADATA_LEN`), and a
//! frame the stack left partial goes with `XDP_TX_METADATA` and
//! `XDP_TXMD_FLAGS_CHECKSUM` saying where its TCP or UDP checksum lies
//! (`csum_site.rs`). In copy mode the kernel builds a `CHECKSUM_PARTIAL`
//! skb of it (since 6.8), which the device or the kernel's own code
//! finishes, or a veth's peer takes as it is, as for AF_PACKET. A
//! zero-copy driver may lack the offload and would ignore the request
//! (its support is not asked of the kernel here), so zero-copy sockets
//! leave checksums to the stack; so does a kernel that refuses the
//! metadata. Either is said once on stderr and shows in
//! `tx_csum_refused`. With the metadata registered, every TX descriptor
//! must leave room for it in its chunk: frames the link hands out start
//! `TX_METADATA_LEN` bytes in (received ones start further in anyway).
//!
//! Receive checksums: AF_XDP carries no checksum metadata. A kernel sender
//! on the same host whose transmit checksum offload is on (a veth's peer,
//! by default) hands over frames whose L4 checksum holds only the
//! pseudo-header sum; on such interfaces the link recognises that form and
//! marks the frame `csum_partial` (`partial_form.rs`, which says what
//! stays checked). Frames from a real wire always carry full checksums.
//!
//! Nothing here panics on what the kernel hands back: a descriptor outside
//! the UMEM or longer than its chunk, or a ring index that cannot be, is
//! counted in [`LinkStats::ring_errors`] and skipped.

pub(crate) mod abi;
mod attached;
#[cfg(feature = "libxdp")]
mod chained;
#[cfg(feature = "libxdp")]
mod dispatched;
mod gather;
pub(crate) mod hash_map;
pub(crate) mod program;
mod ring;
#[cfg(feature = "libxdp")]
pub mod served;
pub mod stale;
#[cfg(test)]
mod tests;
mod umem;

pub use program::{XdpMode, XdpProgram, MAX_QUEUES};
pub use umem::XdpFrame;

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use crate::ifreq::{cvt, CtlSocket};
use crate::partial_form::PartialForm;
use crate::{Link, LinkInfo, LinkStats, PacketBuffer, MAX_BURST};
use gather::{Gather, Gathered};
use ring::Ring;
use umem::Umem;

/// Ethernet header and one VLAN tag.
const FRAME_OVERHEAD: usize = 18;

/// Which XDP attach mode to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpModeChoice {
    /// Native if the driver has it, else generic (said on stderr).
    #[default]
    Auto,
    Native,
    Generic,
}

/// How to bind the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpBindChoice {
    /// Zero-copy if the driver offers it, else copy (said on stderr).
    #[default]
    Auto,
    ZeroCopy,
    Copy,
}

/// Sizes and modes of an AF_XDP link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdpConfig {
    /// The interface queue the socket binds to.
    pub queue: u32,
    pub mode: XdpModeChoice,
    pub bind: XdpBindChoice,
    /// Bytes per UMEM chunk: 2048 or 4096.
    pub frame_size: usize,
    /// UMEM chunks: every buffer the link has (fill, RX, TX, engine).
    pub frames: u32,
    /// Chunks kept back from [`Link::alloc_tx`] for
    /// [`Link::alloc_tx_reserved`] (ARP, ICMP) and, half of them, from the
    /// fill ring.
    pub reserve: u32,
    /// Entries of each ring (a power of two).
    pub ring_size: u32,
    /// Ask for `XDP_USE_NEED_WAKEUP`.
    pub need_wakeup: bool,
    /// Transmit checksum offload through AF_XDP TX metadata, where the
    /// kernel has it and the socket is in copy mode (module comment).
    pub tx_checksum: bool,
}

impl Default for XdpConfig {
    /// Queue 0, auto modes, 4096 chunks of 2048 bytes (8 MiB), rings of
    /// 2048, need-wakeup, transmit checksum offload.
    fn default() -> XdpConfig {
        XdpConfig {
            queue: 0,
            mode: XdpModeChoice::Auto,
            bind: XdpBindChoice::Auto,
            frame_size: 2048,
            frames: 4096,
            reserve: 256,
            ring_size: 2048,
            need_wakeup: true,
            tx_checksum: true,
        }
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// Attaches the XDP program to `ifname` as `choice` says.
pub fn attach_program(ifname: &str, choice: XdpModeChoice) -> io::Result<Arc<XdpProgram>> {
    attach_in_mode(ifname, choice, XdpProgram::attach)
}

/// Attaches ustack's classifying program to `ifname` through libxdp
/// ([`XdpProgram::attach_libxdp`]), in the mode `choice` says.
#[cfg(feature = "libxdp")]
pub fn attach_libxdp_program(ifname: &str, choice: XdpModeChoice) -> io::Result<Arc<XdpProgram>> {
    attach_in_mode(ifname, choice, XdpProgram::attach_libxdp)
}

/// Attaches a program to `ifname` by `attach` in the mode `choice` says
/// (auto: native, else generic, said on stderr).
fn attach_in_mode(
    ifname: &str,
    choice: XdpModeChoice,
    attach: fn(u32, XdpMode) -> io::Result<XdpProgram>,
) -> io::Result<Arc<XdpProgram>> {
    let ifindex = CtlSocket::new()?.index(ifname)? as u32;
    let prog = match choice {
        XdpModeChoice::Native => attach(ifindex, XdpMode::Native)?,
        XdpModeChoice::Generic => attach(ifindex, XdpMode::Generic)?,
        XdpModeChoice::Auto => match attach(ifindex, XdpMode::Native) {
            Ok(p) => p,
            // Another program is there: generic mode would meet it too.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::AlreadyExists | io::ErrorKind::ResourceBusy
                ) =>
            {
                return Err(e)
            }
            Err(e) => {
                eprintln!(
                    "ustack: af_xdp {ifname}: native XDP refused ({e}); using generic (SKB) XDP"
                );
                attach(ifindex, XdpMode::Generic)?
            }
        },
    };
    Ok(Arc::new(prog))
}

/// For one process of several sharing `ifname` (each its own queue):
/// attaches the XDP program as [`attach_program`] does when the interface
/// has none, else joins the ustack program another process of the group
/// attached ([`XdpProgram::join`]), whatever its mode (said on stderr when
/// it is not the one `choice` asks).
pub fn attach_or_join_program(ifname: &str, choice: XdpModeChoice) -> io::Result<Arc<XdpProgram>> {
    let ifindex = CtlSocket::new()?.index(ifname)? as u32;
    if program::attached_program_id(ifindex)?.is_none() {
        match attach_program(ifname, choice) {
            Ok(p) => return Ok(p),
            // Another process attached it in between: joined below.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::AlreadyExists | io::ErrorKind::ResourceBusy
                ) => {}
            Err(e) => return Err(e),
        }
    }
    let joined = XdpProgram::join(ifindex)?;
    let asked = match choice {
        XdpModeChoice::Auto => None,
        XdpModeChoice::Native => Some(XdpMode::Native),
        XdpModeChoice::Generic => Some(XdpMode::Generic),
    };
    if asked.is_some_and(|m| m != joined.mode()) {
        eprintln!(
            "ustack: af_xdp {ifname}: joined the group's XDP program in {} mode (xdp_mode asks {})",
            joined.mode().name(),
            asked.map_or("auto", XdpMode::name)
        );
    }
    Ok(Arc::new(joined))
}

/// A socket with its UMEM registered and its four rings mapped, not bound.
struct Socket {
    fill: Ring<u64>,
    completion: Ring<u64>,
    rx: Ring<abi::XdpDesc>,
    tx: Ring<abi::XdpDesc>,
    fd: OwnedFd,
    /// The UMEM was registered with `TX_METADATA_LEN` bytes of TX
    /// metadata; else why not, when it was asked.
    tx_metadata: Result<(), String>,
}

fn setsockopt<T>(fd: RawFd, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a live `T` of the layout option `name` reads, and
    // its size is passed.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            abi::SOL_XDP,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

fn getsockopt<T: Default>(fd: RawFd, name: libc::c_int) -> io::Result<T> {
    let mut value = T::default();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` is a live `T` and `len` its size; the kernel writes at
    // most `len` bytes of the layout option `name` has.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            abi::SOL_XDP,
            name,
            (&mut value as *mut T).cast(),
            &mut len,
        )
    })?;
    Ok(value)
}

impl Socket {
    fn new(umem: &Umem, cfg: &XdpConfig) -> io::Result<Socket> {
        // SAFETY: plain socket(2) call; the result is checked.
        let raw = cvt(unsafe {
            libc::socket(
                abi::AF_XDP,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                0,
            )
        })?;
        // SAFETY: `raw` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let s = fd.as_raw_fd();
        let plain = abi::UmemReg {
            addr: umem.base().as_ptr() as u64,
            len: umem.len() as u64,
            chunk_size: umem.chunk_size() as u32,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        let with_metadata = abi::UmemReg {
            flags: abi::XDP_UMEM_TX_METADATA_LEN,
            tx_metadata_len: abi::TX_METADATA_LEN as u32,
            ..plain
        };
        // A kernel without the flag refuses it (EINVAL) and registers
        // nothing, so the plain registration may follow on this socket.
        let tx_metadata = if !cfg.tx_checksum {
            Err("not asked".to_string())
        } else {
            match setsockopt(s, abi::XDP_UMEM_REG, &with_metadata) {
                Ok(()) => Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Err(format!(
                    "the kernel refused TX metadata (tx_metadata_len, Linux 6.11): {e}"
                )),
                Err(e) => return Err(e),
            }
        };
        if tx_metadata.is_err() {
            setsockopt(s, abi::XDP_UMEM_REG, &plain)?;
        }
        let n = cfg.ring_size;
        setsockopt(s, abi::XDP_UMEM_FILL_RING, &n)?;
        setsockopt(s, abi::XDP_UMEM_COMPLETION_RING, &n)?;
        setsockopt(s, abi::XDP_RX_RING, &n)?;
        setsockopt(s, abi::XDP_TX_RING, &n)?;
        let off: abi::MmapOffsets = getsockopt(s, abi::XDP_MMAP_OFFSETS)?;
        Ok(Socket {
            fill: Ring::map(s, abi::XDP_UMEM_PGOFF_FILL_RING, &off.fill, n, true)?,
            completion: Ring::map(
                s,
                abi::XDP_UMEM_PGOFF_COMPLETION_RING,
                &off.completion,
                n,
                false,
            )?,
            rx: Ring::map(s, abi::XDP_PGOFF_RX_RING, &off.rx, n, false)?,
            tx: Ring::map(s, abi::XDP_PGOFF_TX_RING, &off.tx, n, true)?,
            fd,
            tx_metadata,
        })
    }

    fn bind(&self, ifindex: u32, queue: u32, flags: u16) -> io::Result<()> {
        let sa = abi::SockaddrXdp {
            family: abi::AF_XDP as u16,
            flags,
            ifindex,
            queue_id: queue,
            shared_umem_fd: 0,
        };
        // SAFETY: `sa` is a live sockaddr_xdp and its size is passed.
        cvt(unsafe {
            libc::bind(
                self.fd.as_raw_fd(),
                (&sa as *const abi::SockaddrXdp).cast(),
                std::mem::size_of::<abi::SockaddrXdp>() as libc::socklen_t,
            )
        })?;
        Ok(())
    }
}

/// A link over one AF_XDP socket on one queue of an interface.
/// A socket bound in copy mode, with `XDP_USE_SG` when `sg` and the
/// kernel has it (else without); returns whether it has it.
fn bind_copy(
    umem: &Umem,
    cfg: &XdpConfig,
    ifindex: u32,
    wake: u16,
    sg: bool,
) -> io::Result<(Socket, bool)> {
    if sg {
        let s = Socket::new(umem, cfg)?;
        if s.bind(ifindex, cfg.queue, abi::XDP_COPY | abi::XDP_USE_SG | wake)
            .is_ok()
        {
            return Ok((s, true));
        }
    }
    let s = Socket::new(umem, cfg)?;
    s.bind(ifindex, cfg.queue, abi::XDP_COPY | wake)?;
    Ok((s, false))
}

pub struct AfXdpLink {
    // Field order matters for drop: rings unmapped, then the socket closed
    // (which also takes it out of the XSKMAP), then the program detached if
    // this was its last socket, then the UMEM unmapped.
    sock: Socket,
    program: Arc<XdpProgram>,
    umem: Umem,
    info: LinkInfo,
    queue: u32,
    zero_copy: bool,
    need_wakeup: bool,

    /// Chunks that are ours and idle.
    free: Vec<u32>,
    reserve: usize,
    /// Entries of each ring.
    ring_size: u32,
    /// Frames handed to the engine and not yet back.
    frames_out: u64,
    /// A TX wakeup that could not be made (busy) and must be retried.
    tx_kick_pending: bool,

    rx_frames: u64,
    rx_bytes: u64,
    tx_frames: u64,
    tx_bytes: u64,
    tx_dropped: u64,
    pool_exhausted: u64,
    rx_oversize: u64,
    bad_desc: u64,
    foreign: u64,
    rx_wakeups: u64,
    tx_wakeups: u64,
    /// Partial checksums recognised (on a veth).
    partial_form: PartialForm,
    /// Bound with `XDP_USE_SG`: frames longer than a chunk come in pieces.
    sg: bool,
    gather: Gather,
    /// Segments cut from a super-frame, handed out before the RX ring.
    segments: VecDeque<XdpFrame>,
    rx_super_frames: u64,
    /// The NIC's RSS as the engines must compute it, when asked
    /// (several queues): see [`AfXdpLink::set_rss_table`].
    rss: Option<Result<crate::nic_rss::RssTable, String>>,
    rx_super_bad_checksum: u64,
    /// Partial checksums go with TX metadata for the kernel to finish.
    tx_checksum: bool,
    /// Where frames handed out for sending start in their chunk: after
    /// room for the TX metadata when the UMEM has it.
    tx_offset: usize,
    /// Frames sent with a checksum request in their metadata.
    tx_csum_partial: u64,
    /// Transmit checksum offload was asked and could not be had.
    tx_csum_refused: bool,
}

// SAFETY: the socket, its ring mappings and the UMEM belong to this value
// alone; nothing in them is tied to the creating thread, so the link may
// move to an engine thread. Not `Sync`: one thread drives it at a time.
unsafe impl Send for AfXdpLink {}

impl AfXdpLink {
    /// Opens queue `cfg.queue` of `ifname` (brought up if down), attaching
    /// the XDP program as `cfg.mode` says.
    pub fn open(ifname: &str, cfg: &XdpConfig) -> io::Result<AfXdpLink> {
        let program = attach_program(ifname, cfg.mode)?;
        AfXdpLink::open_with(ifname, program, cfg)
    }

    /// Opens queue `cfg.queue` of `ifname` under a program already attached
    /// to it (several queues share one program).
    pub fn open_with(
        ifname: &str,
        program: Arc<XdpProgram>,
        cfg: &XdpConfig,
    ) -> io::Result<AfXdpLink> {
        let ctl = CtlSocket::new()?;
        let ifindex = ctl.index(ifname)? as u32;
        if ifindex != program.ifindex() {
            return Err(invalid(format!(
                "the XDP program is attached to interface {}, not {ifname}",
                program.ifindex()
            )));
        }
        let mac = ctl.hwaddr(ifname)?;
        let dev_mtu = ctl.mtu(ifname)?;
        ctl.set_up(ifname)?;
        if !cfg.ring_size.is_power_of_two() || cfg.ring_size < 16 {
            return Err(invalid(format!(
                "ring size {} must be a power of two of at least 16",
                cfg.ring_size
            )));
        }
        if cfg.frames < 2 * cfg.ring_size {
            return Err(invalid(format!(
                "{} frames cannot feed rings of {}: give at least {}",
                cfg.frames,
                cfg.ring_size,
                2 * cfg.ring_size
            )));
        }
        let umem = Umem::new(cfg.frame_size, cfg.frames)?;
        // Received data starts XDP_PACKET_HEADROOM into its chunk.
        let mtu = dev_mtu.min(cfg.frame_size - abi::XDP_PACKET_HEADROOM - FRAME_OVERHEAD);

        let wake = if cfg.need_wakeup {
            abi::XDP_USE_NEED_WAKEUP
        } else {
            0
        };
        // Generic mode sees the kernel's super-frames: take them in pieces.
        let want_sg = program.mode() == XdpMode::Generic;
        let (sock, zero_copy, sg) = match cfg.bind {
            XdpBindChoice::Copy => {
                let (s, sg) = bind_copy(&umem, cfg, ifindex, wake, want_sg)?;
                (s, false, sg)
            }
            XdpBindChoice::ZeroCopy => {
                let s = Socket::new(&umem, cfg)?;
                s.bind(ifindex, cfg.queue, abi::XDP_ZEROCOPY | wake)
                    .map_err(|e| io::Error::new(e.kind(), format!("zero-copy bind: {e}")))?;
                (s, true, false)
            }
            XdpBindChoice::Auto => {
                let s = Socket::new(&umem, cfg)?;
                match s.bind(ifindex, cfg.queue, abi::XDP_ZEROCOPY | wake) {
                    Ok(()) => (s, true, false),
                    Err(e) => {
                        eprintln!(
                            "ustack: af_xdp {ifname} queue {}: the driver offers no zero-copy ({e}); using copy mode",
                            cfg.queue
                        );
                        // A socket whose bind failed is not bound again:
                        // start over with a fresh one on the same UMEM.
                        drop(s);
                        let (s, sg) = bind_copy(&umem, cfg, ifindex, wake, want_sg)?;
                        (s, false, sg)
                    }
                }
            }
        };
        if want_sg && !sg {
            eprintln!(
                "ustack: af_xdp {ifname} queue {}: the kernel has no multi-buffer AF_XDP \
                 (XDP_USE_SG, Linux 6.6): frames longer than {} bytes (TCP super-frames of a \
                 peer with TSO/GSO or of GRO) are dropped by the kernel",
                cfg.queue,
                cfg.frame_size - abi::XDP_PACKET_HEADROOM
            );
        }
        // What the kernel says it did.
        let opts: u32 = getsockopt(sock.fd.as_raw_fd(), abi::XDP_OPTIONS)?;
        let zero_copy = zero_copy && opts & abi::XDP_OPTIONS_ZEROCOPY != 0;
        let tx_offset = if sock.tx_metadata.is_ok() {
            abi::TX_METADATA_LEN
        } else {
            0
        };
        let refused = match (&sock.tx_metadata, zero_copy) {
            _ if !cfg.tx_checksum => None,
            (Err(why), _) => Some(why.clone()),
            (Ok(()), true) => {
                Some("a zero-copy driver's TX checksum support is not known here".to_string())
            }
            (Ok(()), false) => None,
        };
        if let Some(why) = &refused {
            eprintln!(
                "ustack: af_xdp {ifname} queue {}: no transmit checksum offload ({why}); \
                 the stack computes every checksum",
                cfg.queue
            );
        }
        let tx_checksum = cfg.tx_checksum && refused.is_none();

        let mut link = AfXdpLink {
            sock,
            program,
            free: (0..umem.chunks()).rev().collect(),
            umem,
            info: LinkInfo {
                name: ifname.to_string(),
                mac,
                mtu,
            },
            queue: cfg.queue,
            zero_copy,
            need_wakeup: cfg.need_wakeup,
            reserve: cfg.reserve.min(cfg.frames / 2) as usize,
            ring_size: cfg.ring_size,
            frames_out: 0,
            tx_kick_pending: false,
            rx_frames: 0,
            rx_bytes: 0,
            tx_frames: 0,
            tx_bytes: 0,
            tx_dropped: 0,
            pool_exhausted: 0,
            rx_oversize: 0,
            bad_desc: 0,
            foreign: 0,
            rx_wakeups: 0,
            tx_wakeups: 0,
            partial_form: PartialForm::for_interface(ifname),
            sg,
            gather: Gather::default(),
            segments: VecDeque::new(),
            rx_super_frames: 0,
            rss: None,
            rx_super_bad_checksum: 0,
            tx_checksum,
            tx_offset,
            tx_csum_partial: 0,
            tx_csum_refused: refused.is_some(),
        };
        link.refill();
        link.program.insert(cfg.queue, link.sock.fd.as_raw_fd())?;
        Ok(link)
    }

    /// Whether the socket is bound in zero-copy mode (the kernel's word).
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Where the XDP program runs.
    pub fn xdp_mode(&self) -> XdpMode {
        self.program.mode()
    }

    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Records what programming or reading the interface's RSS found
    /// (`nic_rss::program_or_read`), for the engines to steer by.
    pub fn set_rss_table(&mut self, rss: Result<crate::nic_rss::RssTable, String>) {
        self.rss = Some(rss);
    }

    /// The interface's RSS as the engines must compute it, or why it is
    /// not known; `None` when it was not asked (one queue).
    pub fn rss_table(&self) -> Option<Result<&crate::nic_rss::RssTable, &str>> {
        self.rss
            .as_ref()
            .map(|r| r.as_ref().map_err(String::as_str))
    }

    /// The UMEM's address range: received frames' bytes lie inside it.
    pub fn umem_range(&self) -> std::ops::Range<usize> {
        let base = self.umem.base().as_ptr() as usize;
        base..base + self.umem.len()
    }

    /// Chunks on the free list now.
    pub fn free_frames(&self) -> usize {
        self.free.len()
    }

    /// UMEM frames the stack may hold: what is left after a full fill
    /// ring, half a TX ring in flight and the reserve.
    fn spare_frames(&self) -> usize {
        let ring = self.ring_size as usize;
        (self.umem.chunks() as usize).saturating_sub(ring + ring / 2 + self.reserve)
    }

    /// Wakeups made: (fill ring / RX, TX).
    pub fn wakeups(&self) -> (u64, u64) {
        (self.rx_wakeups, self.tx_wakeups)
    }

    /// One line saying how the link runs, for the program's start message.
    pub fn describe(&self) -> String {
        format!(
            "af_xdp queue {} {} XDP, {} mode{}{}, {} frames of {} bytes{}{}",
            self.queue,
            self.program.mode().name(),
            if self.zero_copy { "zero-copy" } else { "copy" },
            if self.need_wakeup {
                ", need-wakeup"
            } else {
                ""
            },
            if self.sg {
                ", multi-buffer (super-frames cut into segments)"
            } else {
                ""
            },
            self.umem.chunks(),
            self.umem.chunk_size(),
            if self.partial_form.is_on() {
                ", a peer's partial checksums recognised"
            } else {
                ""
            },
            if self.tx_checksum {
                ", TX checksums finished by the kernel (TX metadata)"
            } else {
                ""
            },
        )
    }

    /// The kernel's counters of this socket.
    fn kernel_stats(&self) -> abi::XdpStatistics {
        getsockopt(self.sock.fd.as_raw_fd(), abi::XDP_STATISTICS).unwrap_or_default()
    }

    /// Gives the kernel free chunks to receive into, keeping half the
    /// reserve for frames that must be sent.
    fn refill(&mut self) {
        let floor = self.reserve / 2;
        let spare = self.free.len().saturating_sub(floor) as u32;
        let room = self.sock.fill.free(spare.min(MAX_BURST as u32));
        let n = room.min(spare);
        if n > 0 {
            let size = self.umem.chunk_size() as u64;
            for i in 0..n {
                // `n <= spare <= free.len()`: the pop cannot fail.
                let Some(chunk) = self.free.pop() else { break };
                self.sock.fill.write(i, u64::from(chunk) * size);
            }
            self.sock.fill.submit(n);
        }
        if self.need_wakeup && self.sock.fill.needs_wakeup() {
            self.rx_wakeups += 1;
            // SAFETY: a zero-length, non-blocking recvfrom with no buffer and
            // no address is how AF_XDP is asked to look at its fill ring; the
            // kernel reads neither pointer.
            unsafe {
                libc::recvfrom(
                    self.sock.fd.as_raw_fd(),
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                );
            }
        }
    }

    /// Takes back the chunks the kernel has finished sending.
    fn reclaim(&mut self) {
        let n = self.sock.completion.ready(u32::MAX);
        for i in 0..n {
            let addr = self.sock.completion.read(i);
            match self.umem.chunk_of(addr) {
                Some(c) => self.free.push(c),
                None => self.bad_desc += 1,
            }
        }
        if n > 0 {
            self.sock.completion.release(n);
        }
    }

    /// Tells the kernel to send what is in the TX ring, when it asks to be
    /// told (copy mode always does).
    fn kick_tx(&mut self) -> io::Result<()> {
        if self.need_wakeup && !self.sock.tx.needs_wakeup() {
            self.tx_kick_pending = false;
            return Ok(());
        }
        self.tx_wakeups += 1;
        // SAFETY: a zero-length, non-blocking sendto with no buffer and no
        // address is how AF_XDP is asked to send its TX ring; the kernel
        // reads neither pointer.
        let r = unsafe {
            libc::sendto(
                self.sock.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if r >= 0 {
            // Copy mode sends at most a batch per call: go on next turn if
            // frames are left.
            self.tx_kick_pending = self.sock.tx.outstanding() > 0;
            return Ok(());
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            // Busy, or a batch done with more to go: the descriptors stay in
            // the ring; try again on the next turn.
            Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) | Some(libc::EINTR) => {
                self.tx_kick_pending = true;
                Ok(())
            }
            _ => Err(err),
        }
    }

    /// Cuts the frame just gathered into segments in chunks of our own,
    /// queued in `segments`; returns its length (0 if dropped).
    fn cut_gathered(&mut self) -> usize {
        let mtu = self.info.mtu;
        let (sf, frame) = match self.gather.finish(mtu) {
            Gathered::Tcp(sf, frame) => (sf, frame),
            Gathered::BadChecksum => {
                self.rx_super_bad_checksum += 1;
                return 0;
            }
            Gathered::Oversize => {
                self.rx_oversize += 1;
                return 0;
            }
        };
        self.rx_super_frames += 1;
        for i in 0..sf.segments() {
            // Keep half the reserve for frames that must be sent, as the
            // fill ring does.
            if self.free.len() <= self.reserve / 2 {
                // The rest of the frame is lost, as a full ring loses it.
                self.pool_exhausted += 1;
                break;
            }
            let Some(chunk) = self.free.pop() else { break };
            // Where a frame to send starts: the engine may send it on.
            let mut seg = self.umem.frame(chunk, self.tx_offset, 0);
            let len = sf.segment_len(i);
            if len > seg.capacity() {
                self.free.push(chunk);
                self.rx_oversize += 1;
                break;
            }
            seg.set_len(len);
            sf.write_segment(frame, i, seg.data_mut());
            seg.set_csum_partial(true);
            self.rx_frames += 1;
            self.frames_out += 1;
            self.segments.push_back(seg);
        }
        frame.len()
    }

    fn take_back(&mut self, frame: XdpFrame) {
        if self.umem.owns(&frame) {
            self.frames_out = self.frames_out.saturating_sub(1);
            self.free.push(frame.chunk());
        } else {
            // Not ours: it is not put on our free list (its chunk is in
            // another UMEM); it is lost to its own link, which shows it.
            self.foreign += 1;
        }
    }
}

impl Drop for AfXdpLink {
    fn drop(&mut self) {
        self.program.remove(self.queue);
        while let Some(seg) = self.segments.pop_front() {
            self.take_back(seg);
        }
        if self.frames_out > 0 {
            eprintln!(
                "ustack: af_xdp {}: {} frames still out when the link closed; their UMEM is left mapped",
                self.info.name, self.frames_out
            );
            self.umem.leak = true;
        }
    }
}

impl Link for AfXdpLink {
    fn serve_addresses(
        &self,
        v4: &[std::net::Ipv4Addr],
        v6: &[std::net::Ipv6Addr],
    ) -> io::Result<bool> {
        #[cfg(feature = "libxdp")]
        if let Some(served) = self.program.served() {
            served.set_addresses(v4, v6)?;
            return Ok(true);
        }
        let _ = (v4, v6);
        Ok(false)
    }

    fn serve_kernel_ports(
        &self,
        mode: crate::KernelPorts,
        tcp: &[u16],
        udp: &[u16],
    ) -> io::Result<bool> {
        #[cfg(feature = "libxdp")]
        if let Some(served) = self.program.served() {
            served.set_kernel_ports(mode, tcp, udp)?;
            return Ok(true);
        }
        let _ = (mode, tcp, udp);
        Ok(false)
    }

    type Buf = XdpFrame;

    fn rx_burst(&mut self, out: &mut Vec<XdpFrame>, max: usize) -> io::Result<usize> {
        let max = max.min(MAX_BURST);
        let mut got = 0;
        while got < max {
            let Some(seg) = self.segments.pop_front() else {
                break;
            };
            out.push(seg);
            got += 1;
        }
        if got == max {
            return Ok(got);
        }
        let n = self.sock.rx.ready((max - got) as u32);
        let size = self.umem.chunk_size() as u64;
        for i in 0..n {
            let d = self.sock.rx.read(i);
            let Some(chunk) = self.umem.chunk_of(d.addr) else {
                // An address outside the UMEM: nothing to take back.
                self.bad_desc += 1;
                self.gather.abandon();
                continue;
            };
            let offset = (d.addr - u64::from(chunk) * size) as usize;
            let len = d.len as usize;
            let piece = self.sg && (d.options & abi::XDP_PKT_CONTD != 0 || self.gather.active());
            if offset + len > size as usize || (len < 14 && !piece) {
                self.bad_desc += 1;
                self.rx_oversize += u64::from(offset + len > size as usize);
                self.free.push(chunk);
                self.gather.abandon();
                continue;
            }
            if piece {
                let frame = self.umem.frame(chunk, offset, len);
                self.gather.push(frame.data());
                self.free.push(chunk);
                if d.options & abi::XDP_PKT_CONTD == 0 {
                    self.rx_bytes += self.cut_gathered() as u64;
                }
                continue;
            }
            let mut frame = self.umem.frame(chunk, offset, len);
            self.partial_form.mark(&mut frame);
            self.rx_frames += 1;
            self.rx_bytes += len as u64;
            self.frames_out += 1;
            out.push(frame);
            got += 1;
        }
        if n > 0 {
            self.sock.rx.release(n);
        }
        while got < max {
            let Some(seg) = self.segments.pop_front() else {
                break;
            };
            out.push(seg);
            got += 1;
        }
        self.refill();
        Ok(got)
    }

    fn alloc_tx(&mut self) -> Option<XdpFrame> {
        if self.free.len() <= self.reserve {
            self.reclaim();
            if self.free.len() <= self.reserve {
                self.pool_exhausted += 1;
                return None;
            }
        }
        self.alloc_tx_reserved()
    }

    fn alloc_tx_reserved(&mut self) -> Option<XdpFrame> {
        if self.free.is_empty() {
            self.reclaim();
        }
        let Some(chunk) = self.free.pop() else {
            self.pool_exhausted += 1;
            return None;
        };
        self.frames_out += 1;
        Some(self.umem.frame(chunk, self.tx_offset, 0))
    }

    fn tx_burst(&mut self, bufs: &mut Vec<XdpFrame>) -> io::Result<usize> {
        self.reclaim();
        let max_len = self.info.mtu + FRAME_OVERHEAD;
        let room = self.sock.tx.free(bufs.len().min(MAX_BURST) as u32);
        let mut taken = 0;
        let mut queued = 0;
        let mut give_back = Vec::new();
        for buf in bufs.iter_mut() {
            if !self.umem.owns(buf) {
                self.foreign += 1;
                self.tx_dropped += 1;
                taken += 1;
                continue;
            }
            let len = buf.data().len();
            if !(14..=max_len).contains(&len) {
                self.tx_dropped += 1;
                give_back.push(buf.chunk());
                taken += 1;
                continue;
            }
            if queued == room {
                break;
            }
            let mut options = 0;
            if self.tx_checksum && buf.csum_partial() {
                match tx_checksum_metadata(buf) {
                    Some(()) => {
                        options = abi::XDP_TX_METADATA;
                        self.tx_csum_partial += 1;
                    }
                    None => {
                        // Nothing says where its checksum is (the stack
                        // marks none such): not sent wrong.
                        self.tx_dropped += 1;
                        give_back.push(buf.chunk());
                        taken += 1;
                        continue;
                    }
                }
            }
            self.sock.tx.write(
                queued,
                abi::XdpDesc {
                    addr: buf.addr(),
                    len: len as u32,
                    options,
                },
            );
            queued += 1;
            taken += 1;
            self.tx_frames += 1;
            self.tx_bytes += len as u64;
        }
        for buf in bufs.drain(..taken) {
            // Sent or dropped: either way it is no longer the engine's.
            if self.umem.owns(&buf) {
                self.frames_out = self.frames_out.saturating_sub(1);
            }
        }
        self.free.extend(give_back);
        if queued > 0 {
            self.sock.tx.submit(queued);
        }
        if queued > 0 || self.tx_kick_pending {
            self.kick_tx()?;
        }
        Ok(taken)
    }

    fn recycle(&mut self, buf: XdpFrame) {
        self.take_back(buf);
    }

    fn tx_checksum_offload(&self) -> bool {
        self.tx_checksum
    }

    fn info(&self) -> &LinkInfo {
        &self.info
    }

    fn stats(&self) -> LinkStats {
        let k = self.kernel_stats();
        LinkStats {
            rx_frames: self.rx_frames,
            rx_bytes: self.rx_bytes,
            tx_frames: self.tx_frames,
            tx_bytes: self.tx_bytes,
            rx_dropped: k.rx_dropped + k.rx_ring_full + k.rx_fill_ring_empty_descs,
            tx_dropped: self.tx_dropped + k.tx_invalid_descs,
            pool_exhausted: self.pool_exhausted,
            rx_oversize: self.rx_oversize,
            rx_copied: 0,
            ring_errors: self.bad_desc
                + self.foreign
                + k.rx_invalid_descs
                + k.tx_invalid_descs
                + self.sock.fill.bad_index
                + self.sock.completion.bad_index
                + self.sock.rx.bad_index
                + self.sock.tx.bad_index,
            rx_csum_partial_form: self.partial_form.marked(),
            rx_super_frames: self.rx_super_frames,
            rx_super_cut: 0,
            rx_queued_whole: 0,
            rx_super_bad_checksum: self.rx_super_bad_checksum,
            rx_gro_aggregates: 0,
            rx_gro_joined: 0,
            tx_super_frames: 0,
            tx_kick_short: 0,
            tx_csum_partial: self.tx_csum_partial,
            tx_csum_refused: u64::from(self.tx_csum_refused),
            rx_vnet: Default::default(),
            kernel_rx_drop_refused: 0,
        }
    }

    fn service(&mut self) -> io::Result<()> {
        self.reclaim();
        self.refill();
        if self.tx_kick_pending {
            self.kick_tx()?;
        }
        Ok(())
    }

    /// The received frames are UMEM chunks the kernel wrote: a socket may
    /// keep them as its receive buffer while the fill ring stays full.
    fn lend_budget(&self) -> usize {
        self.spare_frames()
    }

    fn rx_fd(&self) -> Option<RawFd> {
        Some(self.sock.fd.as_raw_fd())
    }

    /// An empty fill ring leaves the kernel nothing to receive into, so no
    /// frame can come to wake an idle engine: it looks again soon, to take
    /// back chunks whose sending completed and refill.  Otherwise the link
    /// needs nothing while idle (each turn's `service` refilled the ring
    /// and made the need-wakeup call before the engine slept).
    fn next_event(&self) -> Option<std::time::Instant> {
        (self.sock.fill.outstanding() == 0).then(|| std::time::Instant::now() + EMPTY_FILL_RECHECK)
    }
}

/// Writes the `xsk_tx_metadata` asking the kernel to finish `frame`'s TCP
/// or UDP checksum (its field holds the pseudo-header's sum) before the
/// frame; `None` when the frame has no such checksum or no room before it.
fn tx_checksum_metadata(frame: &mut XdpFrame) -> Option<()> {
    let site = crate::csum_site::locate(frame.data())?;
    frame
        .write_before(&tx_metadata_bytes(site.start, site.offset))
        .then_some(())
}

/// An `xsk_tx_metadata` (native byte order, as the kernel reads it):
/// `flags` = checksum, then `request.csum_start` and `csum_offset`; the
/// rest (launch time) zero.
fn tx_metadata_bytes(csum_start: u16, csum_offset: u16) -> [u8; abi::TX_METADATA_LEN] {
    let mut m = [0u8; abi::TX_METADATA_LEN];
    m[..8].copy_from_slice(&abi::XDP_TXMD_FLAGS_CHECKSUM.to_ne_bytes());
    m[8..10].copy_from_slice(&csum_start.to_ne_bytes());
    m[10..12].copy_from_slice(&csum_offset.to_ne_bytes());
    m
}

/// How soon an idle engine looks again at a link whose fill ring is empty.
const EMPTY_FILL_RECHECK: std::time::Duration = std::time::Duration::from_millis(1);
