//! A link between two processes through shared memory: each process owns one
//! end, and frames cross through two lock-free single-producer
//! single-consumer rings in a file under `/dev/shm`.
//!
//! Side A [`ShmLink::create`]s the file (header, then both directions) and
//! side B [`ShmLink::open`]s it. Each direction is a ring of `slots`
//! descriptors (8 bytes: length, slot number, flags) and as many frame slots
//! of `mtu + 18` bytes (rounded up to a cache line). The layout is in
//! `shm/layout.rs`.
//!
//! Frames are copied: `tx_burst` copies each frame from the engine's pool
//! buffer into a free slot, and `rx_burst` copies each received frame into
//! a pool buffer of its own side. So both ends keep [`PoolBuf`] as their
//! buffer type, like every other link, and a buffer in the engine's hands is
//! never memory the other process can see.
//!
//! The producer picks slots from a stack of free ones, and gets a slot back
//! once the consumer's index has passed the descriptor that carried it (it
//! remembers, in its own memory, which slot it put at each position). So
//! with few frames in flight the same few slots are used over and over and
//! stay in cache, however large the ring: with a 64 KiB MTU a ring of 256
//! slots spans 16 MiB, which cycling through in order would drag through
//! memory for every frame.
//!
//! The fast path makes no system calls and takes no locks:
//! - the producer writes slots and descriptors, then publishes its index
//!   once per burst with a Release store; the consumer reads that index with
//!   an Acquire load, copies the frames out, and publishes its own index once
//!   per burst with a Release store, which the producer's Acquire load pairs
//!   with before it reuses those slots;
//! - each side reads the other side's index at most once per burst: the
//!   consumer only when its cached copy shows fewer frames than asked for,
//!   the producer once per `tx_burst` (to take back the slots consumed since,
//!   while they are still warm);
//! - the producer index, the consumer index and the descriptors live on
//!   separate cache lines (and pages), each written by one side only.
//!
//! When the ring is full, `tx_burst` leaves the frames it could not queue in
//! `bufs` (the [`Link::tx_burst`] contract), counted in
//! [`ShmStats::tx_ring_full`]; the engine retries them and drops past its own
//! queue limit. When this side's pool is empty, `rx_burst` leaves frames in
//! the ring: nothing is lost, the peer sees the ring full.
//!
//! The peer is not trusted: the header of a file we open is validated
//! (magic, version, every size against the one layout they imply, and the
//! file's length), indexes read from shared memory are checked against what
//! they can possibly be, positions are masked, and a descriptor's length and
//! slot number are checked against the slot size and count before anything
//! is copied. An impossible index is an [`io::ErrorKind::InvalidData`] error
//! (counted in [`ShmStats::peer_errors`]); an impossible length or slot
//! number drops that frame (counted in `rx_dropped`, and a length in
//! `rx_oversize`). Each side maps the parts only its peer writes read-only. What the peer could still do is garble
//! frame bytes while we copy them (a race we cannot prevent, harmless to
//! us: frame contents are untrusted input anyway), or truncate the file,
//! which would make our next access fault (SIGBUS).
//!
//! No descriptor to sleep on: [`Link::rx_fd`] is `None`, the engine polls.

mod layout;
mod map;
#[cfg(test)]
mod tests;

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::pool::{PacketPool, PoolBuf, PoolStats};
use crate::{Link, LinkInfo, LinkStats, PacketBuffer, MAX_BURST};
use layout::{Desc, Geometry, Header, Layout, DESC_CSUM_PARTIAL, MAGIC, READY, VERSION};
use map::Mapping;

pub use layout::{FRAME_OVERHEAD, MAX_MTU, MAX_SLOTS, MIN_MTU, MIN_SLOTS};

/// Buffers in each side's local pool (frames being built for transmit, and
/// frames just received).
const POOL_BUFS: usize = 512;
/// Of those, kept for receive and for ARP and ICMP replies.
const POOL_RESERVE: usize = 2 * MAX_BURST;

/// How a shared-memory link is laid out. Side A gives it; side B reads it
/// from the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShmConfig {
    /// The largest IP packet, [`MIN_MTU`]..=[`MAX_MTU`]; slots hold
    /// `mtu + 18` bytes (Ethernet header and a VLAN tag).
    pub mtu: usize,
    /// Frames per direction, a power of two in [`MIN_SLOTS`]..=[`MAX_SLOTS`].
    pub slots: usize,
    /// Side A's Ethernet address.
    pub mac_a: [u8; 6],
    /// Side B's Ethernet address.
    pub mac_b: [u8; 6],
}

impl ShmConfig {
    /// `mtu` and `slots` as given; side A is 02:00:00:00:00:01 and side B
    /// 02:00:00:00:00:02.
    pub fn new(mtu: usize, slots: usize) -> ShmConfig {
        ShmConfig {
            mtu,
            slots,
            mac_a: [0x02, 0, 0, 0, 0, 1],
            mac_b: [0x02, 0, 0, 0, 0, 2],
        }
    }
}

/// Which end of the link this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShmSide {
    /// The creator: sends on direction 0, receives on direction 1.
    A,
    /// The opener: sends on direction 1, receives on direction 0.
    B,
}

/// Counters beyond [`LinkStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShmStats {
    /// `tx_burst` calls that left frames in `bufs` because the ring was full.
    pub tx_ring_full: u64,
    /// Received descriptors with a length larger than a slot or a slot
    /// number past the last, dropped (also in `rx_dropped`; those with a bad
    /// length also in `rx_oversize`).
    pub rx_bad_desc: u64,
    /// Impossible ring indexes read from the peer (each an
    /// `InvalidData` error of the call that saw it).
    pub peer_errors: u64,
}

/// One direction as this side sees it: where its parts are in the mapping.
///
/// The pointers are computed once, from a validated [`Layout`] whose total
/// equals the mapping's length, so every one of them, and every position
/// reached through [`Ring::desc`] (which masks) and [`Ring::slot`] (which
/// checks), lies in the mapping. The mapping is owned by the same [`ShmLink`] and outlives
/// every use (rings are only used through `&ShmLink`/`&mut ShmLink`).
struct Ring {
    prod: *const AtomicU32,
    cons: *const AtomicU32,
    desc: *const AtomicU64,
    slab: *mut u8,
    mask: u32,
    slots: u32,
    stride: usize,
    frame_cap: usize,
}

impl Ring {
    /// Direction `d`'s parts in `map`, laid out as `l`.
    fn new(map: &Mapping, g: &Geometry, l: &Layout, d: usize) -> Ring {
        assert_eq!(map.len(), l.total, "the layout describes this mapping");
        let base = map.base();
        // SAFETY: each offset is inside the mapping (`l.total == map.len()`
        // and every part ends at or before `l.total`), so `add` stays in
        // bounds of one allocated object.
        unsafe {
            Ring {
                prod: base.add(l.region[d]).cast(),
                cons: base.add(l.cons[d]).cast(),
                desc: base.add(l.desc[d]).cast(),
                slab: base.add(l.slab[d]),
                mask: (g.slots - 1) as u32,
                slots: g.slots as u32,
                stride: g.stride,
                frame_cap: g.frame_cap,
            }
        }
    }

    /// The producer index.
    fn prod(&self) -> &AtomicU32 {
        // SAFETY: in the mapping (see the type's doc) and 64-aligned (a page
        // boundary); shared memory is only accessed atomically here, so the
        // other process writing it is no data race. The reference lives no
        // longer than `&self`, and the mapping outlives `self`.
        unsafe { &*self.prod }
    }

    /// The consumer index.
    fn cons(&self) -> &AtomicU32 {
        // SAFETY: as for `prod`.
        unsafe { &*self.cons }
    }

    /// The descriptor of ring position `pos` (masked).
    fn desc(&self, pos: u32) -> &AtomicU64 {
        let i = (pos & self.mask) as usize;
        // SAFETY: `i < slots`, and the layout gives the ring `slots`
        // descriptors of 8 bytes from an offset 128 past a page boundary
        // (so 8-aligned), inside the mapping; accessed atomically only.
        unsafe { &*self.desc.add(i) }
    }

    /// The first byte of slot `i`, which has `frame_cap` bytes. Panics if
    /// there is no such slot (callers check numbers from the peer first).
    fn slot(&self, i: u16) -> *mut u8 {
        assert!(u32::from(i) < self.slots, "slot {i} out of range");
        // SAFETY: `i < slots` (checked above), and the layout gives the ring
        // `slots` slots of `stride >= frame_cap` bytes inside the mapping.
        unsafe { self.slab.add(usize::from(i) * self.stride) }
    }
}

/// One end of a shared-memory link.
pub struct ShmLink {
    side: ShmSide,
    config: ShmConfig,
    info: LinkInfo,
    path: PathBuf,
    /// The file's (device, inode): the path is removed only while it still
    /// names this file.
    file_id: (u64, u64),
    /// Side A removes the file on drop, unless [`ShmLink::unlink`] did.
    remove_on_drop: bool,
    tx: Ring,
    /// Our producer index: the next position to fill.
    tx_head: u32,
    /// The consumer's index as last read.
    tx_tail_cache: u32,
    /// Slots not in the ring, most recently freed last.
    tx_free: Vec<u16>,
    /// The slot each ring position (masked) was given, for taking it back.
    tx_slot_of: Box<[u16]>,
    rx: Ring,
    /// Our consumer index: the next position to read.
    rx_tail: u32,
    /// The producer's index as last read.
    rx_head_cache: u32,
    pool: PacketPool,
    rx_frames: u64,
    rx_bytes: u64,
    tx_frames: u64,
    tx_bytes: u64,
    tx_dropped: u64,
    /// Descriptors dropped for their length (in `rx_oversize`).
    rx_bad_len: u64,
    shm: ShmStats,
    /// Last, so it is unmapped after everything else is gone (nothing else
    /// has a destructor that touches it, but this keeps it obvious).
    map: Mapping,
}

// SAFETY: the raw pointers point into `map`, which this link owns and which
// is process-wide memory without thread affinity. Moving the link to another
// thread moves its exclusive ownership of its end of the rings; nothing is
// shared with other threads of this process.
unsafe impl Send for ShmLink {}

impl fmt::Debug for ShmLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShmLink")
            .field("side", &self.side)
            .field("path", &self.path)
            .field("config", &self.config)
            .field("tx_head", &self.tx_head)
            .field("rx_tail", &self.rx_tail)
            .finish_non_exhaustive()
    }
}

fn invalid_input(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.into())
}

fn invalid_data(path: &Path, msg: impl fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: not a usable ustack shm link: {msg}", path.display()),
    )
}

fn not_ready(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::WouldBlock,
        format!("{}: shm link not initialised yet", path.display()),
    )
}

fn peer_error(msg: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("shm link peer is corrupt: {msg}"),
    )
}

impl ShmLink {
    /// Side A: creates the file at `path` (normally under `/dev/shm`), sizes
    /// it (reserving the memory, so a full `/dev/shm` is an error now rather
    /// than a fault later), maps it and initialises it. A leftover link file
    /// at `path` (one with our magic, or empty) is replaced; any other
    /// existing file is an `AlreadyExists` error. The file is removed when
    /// this link is dropped.
    pub fn create(path: &Path, cfg: &ShmConfig) -> io::Result<ShmLink> {
        let page = map::page_size();
        let g = Geometry::new(page, cfg.mtu, cfg.slots).map_err(invalid_input)?;
        let l = Layout::new(&g).ok_or_else(|| invalid_input("shm link too large"))?;
        let file = create_file(path)?;
        let id = file_id(&file);
        let made = Self::init(path, &file, cfg, &g, &l).and_then(|map| {
            let mut link = ShmLink::build(map, id?, ShmSide::A, cfg.clone(), path, &g, &l);
            link.remove_on_drop = true;
            Ok(link)
        });
        if made.is_err() {
            let _ = fs::remove_file(path);
        }
        made
    }

    fn init(
        path: &Path,
        file: &File,
        cfg: &ShmConfig,
        g: &Geometry,
        l: &Layout,
    ) -> io::Result<Mapping> {
        let len = l.total as libc::off_t;
        // SAFETY: plain system call on an open descriptor; it reports errors
        // by return value.
        let r = unsafe { libc::posix_fallocate(std::os::fd::AsRawFd::as_raw_fd(file), 0, len) };
        if r != 0 {
            let e = io::Error::from_raw_os_error(r);
            return Err(io::Error::new(
                e.kind(),
                format!("{}: sizing to {} bytes: {e}", path.display(), l.total),
            ));
        }
        let map = Mapping::new(file, l.total, true)?;
        let h = header(&map);
        let rl = Ordering::Relaxed;
        h.magic.store(MAGIC, rl);
        h.version.store(VERSION, rl);
        h.page_size.store(g.page as u32, rl);
        h.mtu.store(g.mtu as u32, rl);
        h.frame_cap.store(g.frame_cap as u32, rl);
        h.stride.store(g.stride as u32, rl);
        h.slots.store(g.slots as u32, rl);
        h.mac_a.store(layout::mac_to_u64(cfg.mac_a), rl);
        h.mac_b.store(layout::mac_to_u64(cfg.mac_b), rl);
        h.file_len.store(l.total as u64, rl);
        h.attached.store(0, rl);
        // The rings' indexes are zero: the file is new. Publish.
        h.ready.store(READY, Ordering::Release);
        // A only reads what B writes: B's consumer index of direction 0 and
        // B's region (direction 1).
        map.protect_read_only(l.cons[0], l.cons[0] + g.page)?;
        map.protect_read_only(l.region[1], l.region_end[1])?;
        Ok(map)
    }

    /// Side B: maps the link file at `path` that side A created. Fails at
    /// once, never waiting: `NotFound` when there is no file,
    /// `WouldBlock` when side A has not finished initialising it,
    /// `InvalidData` when its header is wrong or inconsistent with its
    /// length, `AddrInUse` when a side B has attached already (a link file
    /// takes one side B in its life, as the rings' state is not handed
    /// over). See [`ShmLink::open_wait`] to wait for side A.
    pub fn open(path: &Path) -> io::Result<ShmLink> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let meta = file.metadata()?;
        let len = meta.len();
        let page = map::page_size();
        if len < page as u64 {
            return Err(not_ready(path));
        }
        // Look at the header alone first: the rest may be huge or garbage.
        let head = Mapping::new(&file, page, false)?;
        let (cfg, g, l) = read_header(path, header(&head), page, len)?;
        drop(head);
        let map = Mapping::new(&file, l.total, true)?;
        // B only reads what A writes: A's consumer index of direction 1 and
        // A's region (direction 0).
        map.protect_read_only(l.cons[1], l.cons[1] + g.page)?;
        map.protect_read_only(l.region[0], l.region_end[0])?;
        let h = header(&map);
        if h.attached
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{}: shm link already has its side B", path.display()),
            ));
        }
        let id = (meta.dev(), meta.ino());
        Ok(ShmLink::build(map, id, ShmSide::B, cfg, path, &g, &l))
    }

    /// Side B: like [`ShmLink::open`], but while the file is missing or not
    /// initialised yet, tries again every millisecond for up to `timeout`
    /// (then a `TimedOut` error).
    pub fn open_wait(path: &Path, timeout: Duration) -> io::Result<ShmLink> {
        let start = Instant::now();
        loop {
            match ShmLink::open(path) {
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::NotFound | io::ErrorKind::WouldBlock
                    ) =>
                {
                    if start.elapsed() >= timeout {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!("waited {timeout:?} for the shm link: {e}"),
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                r => return r,
            }
        }
    }

    fn build(
        map: Mapping,
        file_id: (u64, u64),
        side: ShmSide,
        config: ShmConfig,
        path: &Path,
        g: &Geometry,
        l: &Layout,
    ) -> ShmLink {
        let (tx_dir, rx_dir, n, mac) = match side {
            ShmSide::A => (0, 1, 0, config.mac_a),
            ShmSide::B => (1, 0, 1, config.mac_b),
        };
        ShmLink {
            side,
            info: LinkInfo {
                name: format!("shm{n}"),
                mac,
                mtu: config.mtu,
            },
            config,
            path: path.to_path_buf(),
            file_id,
            remove_on_drop: false,
            tx: Ring::new(&map, g, l, tx_dir),
            tx_head: 0,
            tx_tail_cache: 0,
            // Popped from the end: slot 0 goes first.
            tx_free: (0..g.slots).rev().map(|i| i as u16).collect(),
            tx_slot_of: vec![0; g.slots].into_boxed_slice(),
            rx: Ring::new(&map, g, l, rx_dir),
            rx_tail: 0,
            rx_head_cache: 0,
            pool: PacketPool::with_reserve(g.frame_cap, POOL_BUFS, POOL_RESERVE),
            rx_frames: 0,
            rx_bytes: 0,
            tx_frames: 0,
            tx_bytes: 0,
            tx_dropped: 0,
            rx_bad_len: 0,
            shm: ShmStats::default(),
            map,
        }
    }

    /// Which end this is.
    pub fn side(&self) -> ShmSide {
        self.side
    }

    /// The link's layout (side B: as read from the file).
    pub fn config(&self) -> &ShmConfig {
        &self.config
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether side B has attached (always true on side B).
    pub fn peer_attached(&self) -> bool {
        header(&self.map).attached.load(Ordering::Acquire) != 0
    }

    /// Frames waiting to be received on this side (0 if the peer's index
    /// makes no sense). Reads the peer's index: not for the fast path.
    pub fn rx_pending(&self) -> usize {
        let n = self
            .rx
            .prod()
            .load(Ordering::Acquire)
            .wrapping_sub(self.rx_tail);
        if n > self.rx.slots {
            0
        } else {
            n as usize
        }
    }

    /// Sets this side's name.
    pub fn set_name(&mut self, name: &str) {
        self.info.name = name.to_string();
    }

    /// Sets this side's Ethernet address (the file keeps the one it was
    /// created with).
    pub fn set_mac(&mut self, mac: [u8; 6]) {
        self.info.mac = mac;
    }

    /// This side's pool levels and counters.
    pub fn pool_stats(&self) -> PoolStats {
        self.pool.stats()
    }

    /// Counters beyond [`LinkStats`].
    pub fn shm_stats(&self) -> ShmStats {
        self.shm
    }

    /// Removes the file now (if the path still names it), so no other
    /// process can open it; both ends keep working. Drop no longer removes
    /// it.
    pub fn unlink(&mut self) -> io::Result<()> {
        self.remove_on_drop = false;
        let meta = fs::metadata(&self.path)?;
        if (meta.dev(), meta.ino()) != self.file_id {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} is no longer this link's file", self.path.display()),
            ));
        }
        fs::remove_file(&self.path)
    }

    /// Reads the consumer's index and takes back the slots of the frames it
    /// has consumed since the last look.
    fn reclaim_tx_slots(&mut self) -> io::Result<()> {
        let tail = self.tx.cons().load(Ordering::Acquire);
        let done = tail.wrapping_sub(self.tx_tail_cache);
        if done > self.tx_head.wrapping_sub(self.tx_tail_cache) {
            self.shm.peer_errors += 1;
            return Err(peer_error(format!(
                "consumer index {tail} outside {}..={}",
                self.tx_tail_cache, self.tx_head
            )));
        }
        let mut pos = self.tx_tail_cache;
        while pos != tail {
            // Never grows the stack: each slot is in the ring once.
            self.tx_free
                .push(self.tx_slot_of[(pos & self.tx.mask) as usize]);
            pos = pos.wrapping_add(1);
        }
        self.tx_tail_cache = tail;
        Ok(())
    }
}

impl Drop for ShmLink {
    fn drop(&mut self) {
        if self.remove_on_drop {
            let _ = self.unlink();
        }
    }
}

/// The header at the start of `map`.
fn header(map: &Mapping) -> &Header {
    debug_assert!(map.len() >= std::mem::size_of::<Header>());
    // SAFETY: every mapping we make is at least a page, which holds the
    // header; the base is page-aligned; the header has only atomic fields,
    // so sharing it with another process is no data race. The reference
    // lives no longer than `map`.
    unsafe { &*map.base().cast::<Header>() }
}

/// The (device, inode) of an open file.
fn file_id(file: &File) -> io::Result<(u64, u64)> {
    let meta = file.metadata()?;
    Ok((meta.dev(), meta.ino()))
}

/// Makes the file, replacing a leftover link file.
fn create_file(path: &Path) -> io::Result<File> {
    let open = || {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
    };
    match open() {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            if !is_leftover(path) {
                return Err(io::Error::new(
                    e.kind(),
                    format!("{} exists and is not a ustack shm link", path.display()),
                ));
            }
            fs::remove_file(path)?;
            open()
        }
        r => r,
    }
}

/// Whether the file at `path` is an old link file (our magic) or empty.
fn is_leftover(path: &Path) -> bool {
    let Ok(mut f) = File::open(path) else {
        return false;
    };
    let mut b = [0u8; 8];
    match f.read(&mut b) {
        Ok(0) => true,
        Ok(8) => u64::from_ne_bytes(b) == MAGIC,
        _ => false,
    }
}

/// Checks the header of a file of `file_len` bytes and derives its layout.
fn read_header(
    path: &Path,
    h: &Header,
    page: usize,
    file_len: u64,
) -> io::Result<(ShmConfig, Geometry, Layout)> {
    let rl = Ordering::Relaxed;
    let magic = h.magic.load(rl);
    if magic != MAGIC && magic != 0 {
        return Err(invalid_data(path, format_args!("bad magic {magic:#x}")));
    }
    if h.ready.load(Ordering::Acquire) != READY {
        return Err(not_ready(path));
    }
    if magic != MAGIC {
        return Err(invalid_data(path, "ready without magic"));
    }
    let version = h.version.load(rl);
    if version != VERSION {
        return Err(invalid_data(
            path,
            format_args!("version {version}, expected {VERSION}"),
        ));
    }
    let stored_page = h.page_size.load(rl) as usize;
    if stored_page != page {
        return Err(invalid_data(
            path,
            format_args!("made with page size {stored_page}, ours is {page}"),
        ));
    }
    let g = Geometry::new(page, h.mtu.load(rl) as usize, h.slots.load(rl) as usize)
        .map_err(|e| invalid_data(path, e))?;
    let frame_cap = h.frame_cap.load(rl) as usize;
    let stride = h.stride.load(rl) as usize;
    if frame_cap != g.frame_cap || stride != g.stride {
        return Err(invalid_data(
            path,
            format_args!(
                "slot sizes {frame_cap}/{stride} do not follow from mtu {}",
                g.mtu
            ),
        ));
    }
    let l = Layout::new(&g).ok_or_else(|| invalid_data(path, "layout overflows"))?;
    let stored_len = h.file_len.load(rl);
    if stored_len != l.total as u64 || file_len != l.total as u64 {
        return Err(invalid_data(
            path,
            format_args!(
                "length {file_len} (header says {stored_len}), layout needs {}",
                l.total
            ),
        ));
    }
    let cfg = ShmConfig {
        mtu: g.mtu,
        slots: g.slots,
        mac_a: layout::mac_from_u64(h.mac_a.load(rl)),
        mac_b: layout::mac_from_u64(h.mac_b.load(rl)),
    };
    Ok((cfg, g, l))
}

impl Link for ShmLink {
    /// The mark travels in the slot descriptor and the receiving stack
    /// skips what it would verify, as Linux loopback does: the frame never
    /// leaves the machine's memory.
    fn tx_checksum_offload(&self) -> bool {
        true
    }

    type Buf = PoolBuf;

    fn rx_burst(&mut self, out: &mut Vec<PoolBuf>, max: usize) -> io::Result<usize> {
        let max = max.min(MAX_BURST) as u32;
        let mut avail = self.rx_head_cache.wrapping_sub(self.rx_tail);
        if avail < max {
            let head = self.rx.prod().load(Ordering::Acquire);
            let n = head.wrapping_sub(self.rx_tail);
            if n > self.rx.slots {
                self.shm.peer_errors += 1;
                return Err(peer_error(format!(
                    "producer index {head} outside {}..={}",
                    self.rx_tail,
                    self.rx_tail.wrapping_add(self.rx.slots)
                )));
            }
            self.rx_head_cache = head;
            avail = n;
        }
        let mut got = 0;
        let mut used = 0;
        while used < avail && got < max {
            let pos = self.rx_tail.wrapping_add(used);
            let d = Desc::unpack(self.rx.desc(pos).load(Ordering::Relaxed));
            let len = d.len as usize;
            if len > self.rx.frame_cap || u32::from(d.slot) >= self.rx.slots {
                self.shm.rx_bad_desc += 1;
                self.rx_bad_len += u64::from(len > self.rx.frame_cap);
                used += 1;
                continue;
            }
            let Some(mut buf) = self.pool.alloc_reserved() else {
                break; // leave the rest in the ring
            };
            // Pool buffers hold `frame_cap` bytes: this slicing is in bounds.
            let dst = &mut buf.storage_mut()[..len];
            // SAFETY: the source is the first `len <= frame_cap` bytes of a
            // slot (number checked above) that the producer published with
            // this descriptor (Acquire above) and will not reuse before our
            // Release store below; the destination is a distinct heap buffer
            // of `len` bytes.
            unsafe { ptr::copy_nonoverlapping(self.rx.slot(d.slot), dst.as_mut_ptr(), len) };
            buf.set_len(len);
            buf.set_csum_partial(d.flags & DESC_CSUM_PARTIAL != 0);
            self.rx_frames += 1;
            self.rx_bytes += len as u64;
            out.push(buf);
            got += 1;
            used += 1;
        }
        if used > 0 {
            self.rx_tail = self.rx_tail.wrapping_add(used);
            self.rx.cons().store(self.rx_tail, Ordering::Release);
        }
        Ok(got as usize)
    }

    fn alloc_tx(&mut self) -> Option<PoolBuf> {
        self.pool.alloc()
    }

    fn alloc_tx_reserved(&mut self) -> Option<PoolBuf> {
        self.pool.alloc_reserved()
    }

    fn tx_burst(&mut self, bufs: &mut Vec<PoolBuf>) -> io::Result<usize> {
        if bufs.is_empty() {
            return Ok(0);
        }
        // On error, keep going with the slots the last good index gave.
        let result = self.reclaim_tx_slots();
        let start = self.tx_head;
        let mut taken = 0;
        for buf in bufs.iter() {
            let frame = buf.data();
            if frame.len() > self.tx.frame_cap {
                self.tx_dropped += 1;
                taken += 1;
                continue;
            }
            // A free slot means a free ring entry too: the ring holds
            // `slots` entries, each with its own slot.
            let Some(slot) = self.tx_free.pop() else {
                self.shm.tx_ring_full += 1;
                break;
            };
            // SAFETY: the slot holds `frame_cap >= frame.len()` bytes and is
            // ours: it was free, i.e. never published or taken back after the
            // consumer's index (read with Acquire) passed its descriptor, so
            // the consumer is done with it and will not look at it before
            // our Release store below. The source is a distinct heap buffer.
            unsafe { ptr::copy_nonoverlapping(frame.as_ptr(), self.tx.slot(slot), frame.len()) };
            let pos = self.tx_head;
            let desc = Desc {
                len: frame.len() as u32,
                slot,
                flags: if buf.csum_partial() {
                    DESC_CSUM_PARTIAL
                } else {
                    0
                },
            };
            self.tx.desc(pos).store(desc.pack(), Ordering::Relaxed);
            self.tx_slot_of[(pos & self.tx.mask) as usize] = slot;
            self.tx_head = pos.wrapping_add(1);
            taken += 1;
            self.tx_frames += 1;
            self.tx_bytes += frame.len() as u64;
        }
        if self.tx_head != start {
            self.tx.prod().store(self.tx_head, Ordering::Release);
        }
        for buf in bufs.drain(..taken) {
            self.pool.free(buf);
        }
        result.map(|()| taken)
    }

    fn recycle(&mut self, buf: PoolBuf) {
        self.pool.free(buf);
    }

    fn info(&self) -> &LinkInfo {
        &self.info
    }

    fn stats(&self) -> LinkStats {
        LinkStats {
            rx_frames: self.rx_frames,
            rx_bytes: self.rx_bytes,
            tx_frames: self.tx_frames,
            tx_bytes: self.tx_bytes,
            rx_dropped: self.shm.rx_bad_desc,
            tx_dropped: self.tx_dropped,
            pool_exhausted: self.pool.stats().exhausted,
            rx_oversize: self.rx_bad_len,
            rx_copied: self.rx_frames,
            ring_errors: 0,
        }
    }
}
