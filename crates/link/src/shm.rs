//! A link between two processes through shared memory: each process owns one
//! end, and frames cross through two lock-free single-producer
//! single-consumer rings in a file under `/dev/shm`.
//!
//! Side A [`ShmLink::create`]s the file (header, then both directions) and
//! side B [`ShmLink::open`]s it. Each direction is a ring of `slots`
//! descriptors (8 bytes: length and flags) and as many frame slots of
//! `mtu + 18` bytes (rounded up to a cache line), one per ring position
//! (position `p` carries its frame in slot `p mod slots`), and a few spare
//! slots of the producer's own. The layout is in `shm/layout.rs`.
//!
//! The engine's frames are not copied:
//! - `tx_place` (the engine's way) gives the slot of the next ring position
//!   to build the frame in, its descriptor (length, the checksum mark)
//!   written; `tx_flush` publishes what is queued;
//! - `rx_next` (the engine's way: one at a time, after `rx_ready` has read
//!   the producer's index) or `rx_burst` hands out a [`ShmFrame`]
//!   (`shm/frame.rs`), a handle on the peer's slot where the peer wrote
//!   the frame ([`LinkStats::rx_copied`] stays 0).
//!
//! A frame to send whose position is not known when it is handed out
//! (`alloc_tx`, for callers that build frames and send them later, in any
//! order, or not at all) is a [`ShmFrame`] on a spare slot; `tx_push` or
//! `tx_burst` copies it into the next position's slot (counted in
//! [`ShmStats::tx_copied`]) and the spare is free again.
//!
//! Our consumer index moves past a descriptor only once its frame is back
//! (recycled, or dropped and noticed): frames may come back in any order,
//! and the index moves over the prefix of positions whose frames are all
//! back, so the peer never reuses a slot we still read. It is published at
//! the start of `rx_burst`, when `tx_burst` or `tx_flush` publishes, and in
//! `service` (every engine turn), not by `recycle` itself (see
//! `ShmLink::publish_rx`).
//!
//! A frame that is not this link's (another link's, an RX frame handed to
//! `tx_push` or `tx_burst`) is counted in [`ShmStats::foreign_frames`] and
//! [`LinkStats::ring_errors`] and not used; a frame dropped without being
//! recycled is not lost: its link notices and takes the slot back (counted
//! in [`ShmStats::dropped_frames`]). The mapping outlives every frame: a
//! link dropped while frames are out leaves it mapped (said on stderr).
//!
//! Transmit back-pressure: when the peer is slow to consume, the ring has
//! no free position and `tx_place`, `alloc_tx` and `alloc_tx_reserved` say
//! so (counted in [`LinkStats::pool_exhausted`]); the last quarter of the
//! positions (at most `2 × MAX_BURST`) is kept for `alloc_tx_reserved`
//! (ARP, ICMP), and a frame pushed with the ring full is dropped and
//! counted (`tx_dropped`), so `tx_burst` takes every frame it is given.
//!
//! [`Link::lend_budget`] is 0: a received frame kept in a socket would stop
//! our consumer index at its position, and `slots` frames later the peer
//! would have no slot left to send in: one socket the application does not
//! read would stall every connection on the link. So every frame comes back
//! within the engine's turn, and the stack copies payload out of it.
//!
//! A slot per position, rather than slots the producer picks and names in
//! each descriptor: neither side keeps a table of which slot each position
//! carries or which slots are out, and the consumer has no slot number to
//! check (it cannot be handed two frames on one slot). Cycling through the
//! slots in order also measured faster on the benchmark than the producer
//! reusing its most recently freed slot: 11% and 21% more ping-pong round
//! trips at 100 and 1000 connections, 15% more UDP, 3% at one connection
//! (a slot just freed is still in the peer's cache, and writing it again at
//! once pulls it back).
//!
//! The fast path makes no system calls and takes no locks:
//! - the producer writes descriptors (its frames are already in their
//!   slots), then publishes its index once per burst with a Release store;
//!   the consumer reads that index with an Acquire load, and publishes its
//!   own index with a Release store at most once per burst, which the
//!   producer's Acquire load pairs with before it reuses those slots;
//! - the cache lines the engine is about to touch in shared slots are
//!   asked for ahead: the first lines of each received frame as `rx_burst`
//!   hands it out, and the first lines of the next free TX slot, for
//!   writing, once a burst is published (the peer read them last);
//! - each side reads the other side's index at most once per burst: the
//!   consumer only when its cached copy shows fewer frames than asked for,
//!   the producer once per publication (to take back the slots consumed since,
//!   while they are still warm) and in `alloc_tx` when free slots run low;
//! - the producer index, the consumer index and the descriptors live on
//!   separate cache lines (and pages), each written by one side only.
//!
//! The peer is not trusted with our memory: the header of a file we open is
//! validated (magic, version, every size against the one layout they imply,
//! and the file's length), indexes read from shared memory are checked
//! against what they can possibly be, positions are masked (so every slot
//! reached is in the mapping, and positions less than a ring apart never
//! share one), and a descriptor's length is checked against the slot size
//! before a frame is made of it. An impossible index is an
//! [`io::ErrorKind::InvalidData`] error (counted in
//! [`ShmStats::peer_errors`]); an impossible descriptor drops that frame
//! (counted in `rx_dropped` and `rx_oversize`).
//!
//! What each side maps read-only: the parts only its peer writes that decide
//! where anyone reads or writes, i.e. the peer's producer index and
//! descriptors and the consumer index the peer keeps for our direction. The
//! peer's slab is mapped read-write, because the engine writes into the
//! frames it receives (it completes partial checksums in place, and a
//! dispatcher hook gets `data_mut`), and with zero copy those frames are
//! the peer's slots. That is acceptable: we write only slots the peer has
//! handed over with a descriptor and does not touch again until our
//! consumer index has passed them (after which we no longer can, the frame
//! being gone), and the peer never reads back a slot it has published. A
//! bug of ours that wrote elsewhere in that slab could only garble frame
//! bytes the peer is building, which decide nothing about the peer's
//! memory: its indexes and descriptors stay out of our reach.
//!
//! What the peer could still do: rewrite a slot it has published while our
//! engine parses it in place. Frame contents are untrusted input anyway, but
//! a rewrite in the middle of parsing can make two reads of one field
//! disagree; the link does not defend against that (only a copy would), so
//! both ends must be cooperating processes, as the file's mode (0600, its
//! creator's user only) makes them. The peer could also truncate the file,
//! which would make our next access fault (SIGBUS).
//!
//! No descriptor to sleep on: [`Link::rx_fd`] is `None`, the engine polls.

mod frame;
mod layout;
mod map;
mod table;
#[cfg(test)]
mod tests;

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::mem::ManuallyDrop;
use std::ops::Range;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::{Link, LinkInfo, LinkStats, PacketBuffer, TxPlaced, MAX_BURST};
use frame::{Dir, Tracker, DONE, DROPPED, IDLE};
use layout::{Desc, Geometry, Header, Layout, DESC_CSUM_PARTIAL, MAGIC, READY, VERSION};
use map::Mapping;

pub use frame::ShmFrame;
pub use layout::{FRAME_OVERHEAD, MAX_MTU, MAX_SLOTS, MIN_MTU, MIN_SLOTS};

/// The most TX slots kept back from [`Link::alloc_tx`] for
/// [`Link::alloc_tx_reserved`] (ARP and ICMP replies); rings of fewer than
/// `4 × TX_RESERVE_MAX` slots keep a quarter of them.
const TX_RESERVE_MAX: usize = 2 * MAX_BURST;

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
    /// Received descriptors with a length larger than a slot, dropped
    /// (also in `rx_dropped` and `rx_oversize`).
    pub rx_bad_desc: u64,
    /// Impossible ring indexes read from the peer (each an
    /// `InvalidData` error of the call that saw it, or, in `alloc_tx`,
    /// only counted).
    pub peer_errors: u64,
    /// Frames handed to `recycle`, `tx_push` or `tx_burst` that were not
    /// this link's to take there (another link's, an RX frame to send, one
    /// already back): counted and not used (also in `ring_errors`).
    pub foreign_frames: u64,
    /// Frames dropped without coming back, whose slots the link took back.
    pub dropped_frames: u64,
    /// Times `alloc_tx_reserved` gave a frame from the reserve.
    pub reserve_taken: u64,
    /// Frames sent by copying them from their spare slot into their ring
    /// position's (those `alloc_tx` handed out).
    pub tx_copied: u64,
}

/// One direction as this side sees it: where its parts are in the mapping.
///
/// The pointers are computed once, from a validated [`Layout`] whose total
/// equals the mapping's length, so every one of them, and every position
/// reached through [`Ring::desc`] and [`Ring::slot_at`] (which mask) and
/// [`Ring::spare`] (which checks), lies in the mapping. The mapping is owned by the same
/// [`ShmLink`] and outlives every use (rings are only used through
/// `&ShmLink`/`&mut ShmLink`, and the link leaves the mapping in place if
/// frames made from its slots are still out when it goes).
struct Ring {
    prod: *const AtomicU32,
    cons: *const AtomicU32,
    desc: *const AtomicU64,
    slab: NonNull<u8>,
    mask: u32,
    slots: u32,
    spares: u32,
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
        // bounds of one allocated object, and the mapping's base is not
        // null, so neither is the slab's.
        unsafe {
            Ring {
                prod: base.add(l.region[d]).cast(),
                cons: base.add(l.cons[d]).cast(),
                desc: base.add(l.desc[d]).cast(),
                slab: NonNull::new_unchecked(base.add(l.slab[d])),
                mask: (g.slots - 1) as u32,
                slots: g.slots as u32,
                spares: g.spares as u32,
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

    /// The first byte of the slot of ring position `pos` (masked), which
    /// has `frame_cap` bytes.
    #[inline(always)]
    fn slot_at(&self, pos: u32) -> NonNull<u8> {
        let i = (pos & self.mask) as usize;
        // SAFETY: `i < slots`, and the layout gives the ring `slots` slots
        // of `stride >= frame_cap` bytes from `slab`, inside the mapping.
        unsafe { self.slab.add(i * self.stride) }
    }

    /// The first byte of spare slot `j`, which has `frame_cap` bytes.
    /// Panics if there is no such spare.
    fn spare(&self, j: u32) -> NonNull<u8> {
        assert!(j < self.spares, "spare {j} out of range");
        // SAFETY: `j < spares` (checked above), and the layout puts `spares`
        // slots of `stride` bytes right after the ring's `slots`, inside the
        // mapping.
        unsafe { self.slab.add((self.slots + j) as usize * self.stride) }
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
    /// Which frames are out; shared with them, freed on drop (or leaked
    /// with the mapping while frames are out). Its address names this
    /// link in its frames (see `ShmFrame::is_of`).
    tracker: NonNull<Tracker>,
    tx: Ring,
    /// Our producer index as published: positions from here on are free,
    /// but for the first `tx_queued`, whose descriptors are written.
    tx_head: u32,
    /// Frames in the ring behind `tx_head`, not published yet.
    tx_queued: u32,
    /// Their bytes.
    tx_queued_bytes: u64,
    /// The consumer's index as last read: positions before it plus a ring
    /// are free.
    tx_tail_cache: u32,
    /// Free positions kept for `alloc_tx_reserved`.
    tx_reserve: usize,
    /// Spare slots not handed out, most recently freed last.
    spare_free: Vec<u16>,
    /// Spare frames out (held by the engine).
    tx_held: usize,
    /// Dropped TX frames taken back so far (against `Tracker::tx_dropped`).
    tx_dropped_seen: u32,
    rx: Ring,
    /// Our consumer index: every position before it is done.
    rx_tail: u32,
    /// Our consumer index as last published (stored for the producer).
    rx_published: u32,
    /// The next position to read; frames between `rx_tail` and here are
    /// out or done.
    rx_next: u32,
    /// The producer's index as last read.
    rx_head_cache: u32,
    /// The end of the positions `rx_ready` readied for `rx_next` (at most
    /// `rx_head_cache`; `rx_next` when none are left).
    rx_ready_end: u32,
    // Counts a frame moves together are not side by side: the compiler
    // would pair their increments in vector registers (more instructions,
    // on every frame).
    rx_frames: u64,
    tx_frames: u64,
    rx_bytes: u64,
    tx_bytes: u64,
    tx_dropped: u64,
    /// RX frames out (held by the engine).
    rx_held: usize,
    pool_exhausted: u64,
    /// Descriptors dropped for their length (in `rx_oversize`).
    rx_bad_len: u64,
    shm: ShmStats,
    /// Unmapped on drop, unless frames are still out (then left mapped).
    map: ManuallyDrop<Mapping>,
}

// SAFETY: the raw pointers point into `map` and the tracker, which this
// link owns and which are process-wide memory without thread affinity.
// Moving the link to another thread moves its exclusive ownership of its
// end of the rings; what it shares with its frames (the tracker) is only
// accessed through atomics.
unsafe impl Send for ShmLink {}

impl fmt::Debug for ShmLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShmLink")
            .field("side", &self.side)
            .field("path", &self.path)
            .field("config", &self.config)
            .field("tx_head", &self.tx_head)
            .field("rx_tail", &self.rx_tail)
            .field("rx_next", &self.rx_next)
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
        // A only reads these parts B writes: B's consumer index of
        // direction 0, and B's producer index and descriptors (direction 1).
        // B's slots stay writable: A's received frames are in them (see the
        // module doc).
        map.protect_read_only(l.cons[0], l.cons[0] + g.page)?;
        map.protect_read_only(l.region[1], l.slab[1])?;
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
        // B only reads these parts A writes: A's consumer index of
        // direction 1, and A's producer index and descriptors (direction 0).
        // A's slots stay writable, as B's do for A.
        map.protect_read_only(l.cons[1], l.cons[1] + g.page)?;
        map.protect_read_only(l.region[0], l.slab[0])?;
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
        let tracker = NonNull::from(Box::leak(Box::new(Tracker::new(
            g.slots,
            g.spares,
            g.frame_cap,
        ))));
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
            tracker,
            tx: Ring::new(&map, g, l, tx_dir),
            tx_head: 0,
            tx_queued: 0,
            tx_queued_bytes: 0,
            tx_tail_cache: 0,
            tx_reserve: (g.slots / 4).min(TX_RESERVE_MAX),
            // Popped from the end: spare 0 goes first.
            spare_free: (0..g.spares).rev().map(|i| i as u16).collect(),
            tx_held: 0,
            tx_dropped_seen: 0,
            rx: Ring::new(&map, g, l, rx_dir),
            rx_tail: 0,
            rx_published: 0,
            rx_next: 0,
            rx_head_cache: 0,
            rx_ready_end: 0,
            rx_held: 0,
            rx_frames: 0,
            rx_bytes: 0,
            tx_frames: 0,
            tx_bytes: 0,
            tx_dropped: 0,
            pool_exhausted: 0,
            rx_bad_len: 0,
            shm: ShmStats::default(),
            map: ManuallyDrop::new(map),
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
        let head = self.rx.prod().load(Ordering::Acquire);
        let n = head.wrapping_sub(self.rx_published);
        let read = self.rx_next.wrapping_sub(self.rx_published);
        if n > self.rx.slots || n < read {
            0
        } else {
            (n - read) as usize
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

    /// Counters beyond [`LinkStats`].
    pub fn shm_stats(&self) -> ShmStats {
        self.shm
    }

    /// Frames the engine holds now: (being built for transmit, received).
    pub fn frames_held(&self) -> (usize, usize) {
        (self.tx_held, self.rx_held)
    }

    /// Ring positions free for frames to send (as of the last look at the
    /// consumer's index), the reserve of `alloc_tx_reserved` included.
    pub fn tx_slots_free(&self) -> usize {
        self.tx_room() as usize
    }

    /// The mapping's address range: every frame's bytes lie inside it.
    pub fn mapping_range(&self) -> Range<usize> {
        let base = self.map.base() as usize;
        base..base + self.map.len()
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

    fn tracker(&self) -> &Tracker {
        // SAFETY: the tracker is this link's, freed only when the link is
        // dropped (and then only with no frame out); frames share it, but
        // only through atomics and shared references.
        unsafe { self.tracker.as_ref() }
    }

    /// Ring positions free for frames to send, as of the last look at the
    /// consumer's index: a ring past it, less those written.
    #[inline(always)]
    fn tx_room(&self) -> u32 {
        let written = self.tx_head.wrapping_add(self.tx_queued);
        self.tx_tail_cache
            .wrapping_add(self.tx.slots)
            .wrapping_sub(written)
    }

    /// Whether more positions than the reserve are free, looking at the
    /// consumer's index again when they seem not to be; a refusal is
    /// counted (`pool_exhausted`).
    #[inline(always)]
    fn room_past_reserve(&mut self) -> bool {
        if self.tx_room() as usize > self.tx_reserve
            || self.refresh_tx_room() as usize > self.tx_reserve
        {
            return true;
        }
        self.pool_exhausted += 1;
        false
    }

    /// Reads the consumer's index: the positions it has passed since the
    /// last look, and their slots, are free again.
    #[inline]
    fn reclaim_tx_positions(&mut self) -> io::Result<()> {
        let tail = self.tx.cons().load(Ordering::Acquire);
        let done = tail.wrapping_sub(self.tx_tail_cache);
        if done > self.tx_head.wrapping_sub(self.tx_tail_cache) {
            return Err(self.bad_consumer_index(tail));
        }
        self.tx_tail_cache = tail;
        Ok(())
    }

    /// Counts and describes a consumer index outside what it can be.
    #[cold]
    #[inline(never)]
    fn bad_consumer_index(&mut self, tail: u32) -> io::Error {
        self.shm.peer_errors += 1;
        peer_error(format!(
            "consumer index {tail} outside {}..={}",
            self.tx_tail_cache, self.tx_head
        ))
    }

    /// Counts and describes a producer index outside what it can be.
    #[cold]
    #[inline(never)]
    fn bad_producer_index(&mut self, head: u32) -> io::Error {
        self.shm.peer_errors += 1;
        peer_error(format!(
            "producer index {head} outside {}..={}",
            self.rx_next,
            self.rx_published.wrapping_add(self.rx.slots)
        ))
    }

    /// A descriptor at `pos` (read, so behind `rx_next`) with a length past
    /// the slots': counted, nothing handed out, the position done at once.
    #[cold]
    #[inline(never)]
    fn drop_bad_desc(&mut self, pos: u32) {
        self.shm.rx_bad_desc += 1;
        self.rx_bad_len += 1;
        self.tracker().rx.at(pos).store(DONE, Ordering::Relaxed);
        self.advance_rx();
    }

    /// Takes back the spares of TX frames dropped without coming back, if
    /// any were (one load when none were).
    #[inline]
    fn take_back_dropped_tx(&mut self) {
        let dropped = self.tracker().tx_dropped.load(Ordering::Acquire);
        if dropped != self.tx_dropped_seen {
            self.find_dropped_tx();
        }
    }

    /// [`ShmLink::take_back_dropped_tx`] when some were dropped: looks at
    /// every spare's entry.
    #[cold]
    #[inline(never)]
    fn find_dropped_tx(&mut self) {
        // SAFETY: as in `tracker()`; a local reference so the loop can
        // update the other fields.
        let t = unsafe { self.tracker.as_ref() };
        for (spare, e) in t.tx.iter().enumerate() {
            if e.load(Ordering::Acquire) == DROPPED {
                e.store(IDLE, Ordering::Relaxed);
                self.spare_free.push(spare as u16);
                self.tx_held -= 1;
                self.shm.dropped_frames += 1;
                // Counted as found: a frame counts itself before it marks
                // its entry, so one not marked yet is looked for again.
                self.tx_dropped_seen = self.tx_dropped_seen.wrapping_add(1);
            }
        }
    }

    /// Looks again when few positions seem free: those the consumer is done
    /// with are free. An impossible consumer index is counted (in
    /// `peer_errors`) and leaves the positions as they were.
    #[inline(never)]
    fn refresh_tx_room(&mut self) -> u32 {
        let _ = self.reclaim_tx_positions();
        self.tx_room()
    }

    /// Moves our consumer index over the positions whose frames are back
    /// (recycled, dropped, or never handed out: bad descriptors), up to the
    /// first one still held. [`ShmLink::publish_rx`] tells the producer.
    /// One comparison when every frame handed out has been passed.
    #[inline]
    fn advance_rx(&mut self) {
        if self.rx_tail != self.rx_next {
            self.advance_rx_over_back();
        }
    }

    /// [`ShmLink::advance_rx`] when some position is not passed yet.
    #[inline(never)]
    fn advance_rx_over_back(&mut self) {
        // SAFETY: as in `tracker()`; a local reference so the loop can
        // update the other fields.
        let t = unsafe { self.tracker.as_ref() };
        while self.rx_tail != self.rx_next {
            // Acquire: a frame dropped on another thread did its accesses
            // to the slot before its Release store of DROPPED.
            let e = t.rx.at(self.rx_tail);
            match e.load(Ordering::Acquire) {
                DONE => {}
                DROPPED => {
                    self.rx_held -= 1;
                    self.shm.dropped_frames += 1;
                }
                _ => break, // IDLE: its frame is out
            }
            e.store(IDLE, Ordering::Relaxed);
            self.pass_rx_tail();
        }
    }

    /// Moves our consumer index past its position, whose frame is back and
    /// whose entry is idle (again): its slot is the producer's again.
    #[inline]
    fn pass_rx_tail(&mut self) {
        let pos = self.rx_tail;
        debug_assert_eq!(self.tracker().rx.at(pos).load(Ordering::Relaxed), IDLE);
        self.rx_tail = pos.wrapping_add(1);
    }

    /// Stores our consumer index for the producer, if it moved since: at
    /// the start of `rx_burst`, when TX frames are published and in
    /// `service`, so a few times per engine turn rather than at every
    /// recycle (the producer reads the line, so each store of it must take
    /// the line back from the peer's core).
    fn publish_rx(&mut self) {
        if self.rx_tail != self.rx_published {
            // Release: every access to those slots (ours, and those of
            // frames dropped elsewhere, through the Acquire in
            // `advance_rx`) comes before the producer's reuse of them.
            self.rx.cons().store(self.rx_tail, Ordering::Release);
            self.rx_published = self.rx_tail;
        }
    }

    /// Whether `f` is a frame this link handed out and has not got back,
    /// with an entry in the tracker that says so.
    fn is_held(&self, f: &ShmFrame) -> bool {
        if !f.is_of(self.tracker) {
            return false;
        }
        match f.dir() {
            // A slot of ours whose frame was not dropped.
            Dir::Tx => self
                .tracker()
                .tx
                .get(f.index() as usize)
                .is_some_and(|e| e.load(Ordering::Relaxed) != DROPPED),
            // A position read and not passed, whose frame is out.
            Dir::Rx => {
                f.index().wrapping_sub(self.rx_tail) < self.rx_next.wrapping_sub(self.rx_tail)
                    && self.tracker().rx.at(f.index()).load(Ordering::Relaxed) == IDLE
            }
        }
    }

    /// Takes back a frame of ours that is held (checked by the caller):
    /// a spare goes back on the free stack, an RX position is done.
    fn take_back(&mut self, f: ManuallyDrop<ShmFrame>) {
        match f.dir() {
            Dir::Tx => self.take_back_tx(f.index()),
            Dir::Rx => self.take_back_rx(f.index()),
        }
    }

    /// [`ShmLink::take_back`] of a TX frame on `spare`, sent (copied) or
    /// not: the spare is free again.
    #[inline]
    fn take_back_tx(&mut self, spare: u32) {
        self.spare_free.push(spare as u16);
        self.tx_held -= 1;
    }

    /// [`ShmLink::take_back`] of a received frame at ring position `pos`:
    /// every one comes this way, mostly the oldest out.
    #[inline(always)]
    fn take_back_rx(&mut self, pos: u32) {
        self.rx_held -= 1;
        if pos == self.rx_tail {
            // The oldest position: passed now, with those after it whose
            // frames are back already.
            self.pass_rx_tail();
            self.advance_rx();
        } else {
            self.tracker().rx.at(pos).store(DONE, Ordering::Relaxed);
        }
    }

    /// A frame to send that is not a held TX frame of ours:
    /// not sent (counted in `tx_dropped`); a received frame of ours is done
    /// with, any other is refused.
    #[cold]
    #[inline(never)]
    fn refuse_to_send(&mut self, f: ManuallyDrop<ShmFrame>) {
        self.tx_dropped += 1;
        if f.dir() == Dir::Rx && self.is_held(&f) {
            // A received frame to send: not sent, but its position is done
            // with.
            self.shm.foreign_frames += 1;
            self.take_back(f);
        } else {
            self.refuse(f);
        }
    }

    /// Deals with a frame that is not ours to take (see
    /// [`ShmStats::foreign_frames`]): another link's goes to its own drop,
    /// which tells that link; one of ours that is not held (impossible
    /// through this API) is forgotten, as its drop would mark an entry that
    /// is no longer its own.
    fn refuse(&mut self, f: ManuallyDrop<ShmFrame>) {
        self.shm.foreign_frames += 1;
        if !f.is_of(self.tracker) {
            drop(ManuallyDrop::into_inner(f));
        }
    }

    /// Whether any frame made by this link may still exist: a TX frame not
    /// taken back whose slot is not marked dropped, or an RX position read
    /// and not passed whose entry is idle. A frame marks its entry as the
    /// last thing its drop does (with Release, loaded here with Acquire), so
    /// one not marked yet counts as out.
    fn frames_out(&self) -> bool {
        let t = self.tracker();
        let rx_out = (0..self.rx_next.wrapping_sub(self.rx_tail)).any(|k| {
            let pos = self.rx_tail.wrapping_add(k);
            t.rx.at(pos).load(Ordering::Acquire) == IDLE
        });
        rx_out || self.tx_held > t.tx_dropped_now()
    }

    /// Puts a TX frame of ours in the ring behind those queued, unpublished:
    /// copied from its spare into the next free position's slot, its
    /// descriptor written, the spare free again. With no free position the
    /// frame is dropped and counted (`tx_dropped`). Any other frame is
    /// counted and not sent (see `refuse_to_send`).
    fn queue_tx(&mut self, f: ShmFrame) {
        // Ours and held: a TX frame of this link whose spare's entry does
        // not say it was dropped (the spare number checked by the lookup).
        let held = f.dir() == Dir::Tx
            && f.is_of(self.tracker)
            && self
                .tracker()
                .tx
                .get(f.index() as usize)
                .is_some_and(|e| e.load(Ordering::Relaxed) != DROPPED);
        if !held {
            // Only a refused frame of another link runs its drop (see
            // `refuse`).
            self.refuse_to_send(ManuallyDrop::new(f));
            return;
        };
        let (spare, len, partial) = (f.index(), f.data().len(), f.csum_partial());
        debug_assert!(len <= self.tx.frame_cap, "set_len checks the capacity");
        let src = f.as_ptr();
        // Back (sent or dropped) either way, through `take_back_tx`:
        // forgotten, as its drop would mark the spare dropped.
        std::mem::forget(f);
        if self.tx_room() == 0 && self.refresh_tx_room() == 0 {
            self.tx_dropped += 1;
            self.take_back_tx(spare);
            return;
        }
        let pos = self.queue_tx_desc(len, partial);
        // SAFETY: `src` is the spare's first byte, and the spare holds the
        // frame's `len <= frame_cap` bytes (the frame was held, so the
        // spare was ours alone, and it is freed only below); the position's
        // slot is free (there was room: the consumer's index has passed its
        // last use) and holds `frame_cap` bytes. Spares and ring slots are
        // disjoint parts of the slab.
        unsafe { ptr::copy_nonoverlapping(src, self.tx.slot_at(pos).as_ptr(), len) };
        self.shm.tx_copied += 1;
        self.take_back_tx(spare);
    }

    /// Writes the descriptor of a frame of `len <= frame_cap` bytes at the
    /// next position, behind those queued, and returns the position (the
    /// caller has checked it is free: `tx_room() > 0`).
    #[inline(always)]
    fn queue_tx_desc(&mut self, len: usize, csum_partial: bool) -> u32 {
        let pos = self.tx_head.wrapping_add(self.tx_queued);
        debug_assert!(pos.wrapping_sub(self.tx_tail_cache) < self.tx.slots);
        let desc = Desc {
            len: len as u32,
            flags: if csum_partial { DESC_CSUM_PARTIAL } else { 0 },
        };
        self.tx.desc(pos).store(desc.pack(), Ordering::Relaxed);
        self.tx_queued += 1;
        self.tx_queued_bytes += len as u64;
        pos
    }

    /// Publishes the queued frames (one Release store of our producer
    /// index), reads how far the consumer is, claims the next free slot's
    /// first lines and publishes our consumer index.
    #[inline(always)]
    fn publish_tx(&mut self) -> io::Result<()> {
        // On error, keep going with the positions the last good index gave.
        let result = self.reclaim_tx_positions();
        let sent = self.tx_queued;
        if sent != 0 {
            let head = self.tx_head.wrapping_add(sent);
            self.tx_head = head;
            self.tx_queued = 0;
            self.tx_frames += u64::from(sent);
            self.tx_bytes += std::mem::take(&mut self.tx_queued_bytes);
            // Release: the frames' bytes, written in place, and their
            // descriptors come before the consumer's Acquire of the index.
            self.tx.prod().store(head, Ordering::Release);
        }
        if self.tx_room() != 0 {
            claim_head(self.tx.slot_at(self.tx_head), self.tx.frame_cap);
        }
        self.publish_rx();
        result
    }

    #[inline]
    fn make_frame(&self, start: NonNull<u8>, len: usize, dir: Dir, index: u32) -> ShmFrame {
        ShmFrame::new(start, len, dir, index, self.tracker)
    }

    /// A frame on a free spare, if one is left (after taking back those of
    /// dropped frames).
    fn alloc_spare(&mut self) -> Option<ShmFrame> {
        if self.spare_free.is_empty() {
            self.take_back_dropped_tx();
        }
        // Its entry is idle: free spares' entries are.
        let spare = self.spare_free.pop()?;
        self.tx_held += 1;
        let spare = u32::from(spare);
        Some(self.make_frame(self.tx.spare(spare), 0, Dir::Tx, spare))
    }
}

impl Drop for ShmLink {
    fn drop(&mut self) {
        if self.remove_on_drop {
            let _ = self.unlink();
        }
        if self.frames_out() {
            // Frames point into the mapping and the tracker: leave both.
            eprintln!(
                "ustack: shm link {}: {} frames still out when the link closed; its mapping is left in place",
                self.info.name,
                self.tx_held + self.rx_held
            );
            return;
        }
        // SAFETY: no frame is out (just checked; frames are only made by
        // this link, which is going away, so none can appear), so nothing
        // refers to the mapping or the tracker any more; each is released
        // once, here. The tracker came from `Box::leak` in `build`.
        unsafe {
            ManuallyDrop::drop(&mut self.map);
            drop(Box::from_raw(self.tracker.as_ptr()));
        }
    }
}

/// Bytes of a received frame fetched ahead: the headers of any frame and
/// the whole of a small one.
const PREFETCH_BYTES: usize = 256;

/// Asks for the cache lines of the first `len` bytes at `start` (at most
/// [`PREFETCH_BYTES`]). They were written by the peer's core, so each is a
/// transfer between cores; fetched together they overlap, where the
/// engine's parsing would wait for one after the other.
#[inline]
fn prefetch_head(start: NonNull<u8>, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let line = |off: usize| {
            // SAFETY: a prefetch is a hint: it reads no memory the program
            // sees and never faults; the address is inside the slot (`off`
            // is 0 or below `len <= frame_cap`) anyway. SSE is part of
            // x86_64.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.as_ptr().add(off).cast()) };
        };
        // Unrolled over the PREFETCH_BYTES (four lines): one test per line
        // after the first.
        const _: () = assert!(PREFETCH_BYTES == 4 * 64);
        line(0);
        if len > 64 {
            line(64);
        }
        if len > 128 {
            line(128);
        }
        if len > 192 {
            line(192);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, len);
}

/// Takes the first [`PREFETCH_BYTES`] of a free TX slot (the next one
/// `alloc_tx` hands out) into this core's cache for writing, now that the
/// burst is published: the peer read those lines last, and the engine's
/// writes into them, and its reads of what it wrote (the IP checksum),
/// would otherwise wait for each to come back while it builds the frame.
#[inline]
fn claim_head(slot: NonNull<u8>, cap: usize) {
    let write_line = |off: usize| {
        // SAFETY: the slot is free, so ours alone (the consumer's index has
        // passed its last descriptor, and no frame points at it), and it
        // holds `cap > off` bytes inside the mapping (callers pass offsets
        // below `cap`).
        unsafe { ptr::write_volatile(slot.as_ptr().add(off), 0) };
    };
    if cap >= PREFETCH_BYTES {
        // Slots of every MTU but the smallest: a fixed number of lines,
        // written without a comparison each.
        for off in (0..PREFETCH_BYTES).step_by(64) {
            write_line(off);
        }
    } else {
        for off in (0..cap).step_by(64) {
            write_line(off);
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

    /// Frames cross only memory: the sender's stack wrote the header sum,
    /// and nothing can have changed it since.
    fn rx_ip_checksum_offload(&self) -> bool {
        true
    }

    type Buf = ShmFrame;

    #[inline]
    fn rx_burst(&mut self, out: &mut Vec<ShmFrame>, max: usize) -> io::Result<usize> {
        // Positions of frames dropped since the last call may hold our
        // index back (one comparison when all frames are back).
        self.advance_rx();
        self.publish_rx();
        self.rx_ready(max)?;
        let mut got = 0;
        while let Some(frame) = self.rx_next() {
            out.push(frame);
            got += 1;
        }
        Ok(got)
    }

    const RX_ONE_AT_A_TIME: bool = true;

    /// Reads the producer's index when the frames known to wait are fewer
    /// than `max`. Our own index was moved and published by `service`,
    /// which the engine calls just before (`rx_burst` does both itself).
    #[inline(always)]
    fn rx_ready(&mut self, max: usize) -> io::Result<usize> {
        let max = max.min(MAX_BURST) as u32;
        let mut avail = self.rx_head_cache.wrapping_sub(self.rx_next);
        if avail < max {
            let head = self.rx.prod().load(Ordering::Acquire);
            // The producer can be at most a ring ahead of our published
            // index (so every position from there to its index has its own
            // entry in our masked tables), and not behind what it published
            // before.
            let n = head.wrapping_sub(self.rx_published);
            let read = self.rx_next.wrapping_sub(self.rx_published);
            if n > self.rx.slots || n < read {
                self.rx_ready_end = self.rx_next;
                return Err(self.bad_producer_index(head));
            }
            self.rx_head_cache = head;
            avail = n - read;
        }
        let n = avail.min(max);
        self.rx_ready_end = self.rx_next.wrapping_add(n);
        Ok(n as usize)
    }

    /// Checks the next readied descriptor (its length) and makes a frame
    /// of its position's slot; a bad one is counted and skipped.
    #[inline(always)]
    fn rx_next(&mut self) -> Option<ShmFrame> {
        while self.rx_next != self.rx_ready_end {
            let pos = self.rx_next;
            // Read now: its frame is out, or it is done (a bad one).
            self.rx_next = pos.wrapping_add(1);
            let d = Desc::unpack(self.rx.desc(pos).load(Ordering::Relaxed));
            let len = d.len as usize;
            if len > self.rx.frame_cap {
                self.drop_bad_desc(pos);
                continue;
            }
            // The position's slot holds `frame_cap >= len` bytes the
            // producer published with this descriptor (Acquire in
            // `rx_ready`) and will not reuse before our index passes `pos`,
            // which waits for this frame to come back; positions out are
            // less than a ring apart, so no other frame is on this slot.
            // Its entry is idle (passed positions' entries are): out.
            let start = self.rx.slot_at(pos);
            prefetch_head(start, len);
            let mut frame = self.make_frame(start, len, Dir::Rx, pos);
            frame.set_csum_partial(d.flags & DESC_CSUM_PARTIAL != 0);
            self.rx_frames += 1;
            self.rx_bytes += len as u64;
            self.rx_held += 1;
            return Some(frame);
        }
        None
    }

    /// A frame on a spare slot, while the ring has more free positions than
    /// the reserve and a spare is free.
    #[inline]
    fn alloc_tx(&mut self) -> Option<ShmFrame> {
        if !self.room_past_reserve() {
            return None;
        }
        let f = self.alloc_spare();
        self.pool_exhausted += u64::from(f.is_none());
        f
    }

    /// [`Link::alloc_tx`] that may take the last free positions.
    fn alloc_tx_reserved(&mut self) -> Option<ShmFrame> {
        let mut room = self.tx_room() as usize;
        if room <= self.tx_reserve {
            room = self.refresh_tx_room() as usize;
        }
        let f = if room == 0 { None } else { self.alloc_spare() };
        match &f {
            None => self.pool_exhausted += 1,
            Some(_) if room <= self.tx_reserve => self.shm.reserve_taken += 1,
            Some(_) => {}
        }
        f
    }

    /// Takes every frame: each is copied into the ring, or dropped and
    /// counted (`tx_dropped`) when the ring has no free position, so none is
    /// ever left in `bufs`. Frames that are not this link's TX frames are
    /// counted (in `tx_dropped` and `ring_errors`) and not sent. Frames
    /// queued by `tx_push` go first.
    fn tx_burst(&mut self, bufs: &mut Vec<ShmFrame>) -> io::Result<usize> {
        if bufs.is_empty() {
            return Ok(0);
        }
        let taken = bufs.len();
        for f in bufs.drain(..) {
            self.queue_tx(f);
        }
        self.publish_tx().map(|()| taken)
    }

    /// Copies the frame into the ring behind those already queued (see
    /// `queue_tx`); the next `tx_flush` or `tx_burst` publishes it. Takes
    /// every frame.
    #[inline(always)]
    fn tx_push(&mut self, buf: ShmFrame) -> Option<ShmFrame> {
        self.queue_tx(buf);
        None
    }

    /// Queues the frame in place in the next free position's slot, its
    /// descriptor behind those queued: no frame is handed out, so there is
    /// none to check when it comes back.
    #[inline(always)]
    fn tx_place(&mut self, len: usize, csum_partial: bool) -> TxPlaced<'_, ShmFrame> {
        if !self.room_past_reserve() {
            return TxPlaced::NoBuffer;
        }
        if len > self.tx.frame_cap {
            return TxPlaced::Oversize;
        }
        let pos = self.queue_tx_desc(len, csum_partial);
        let start = self.tx.slot_at(pos);
        // SAFETY: the position was free (more than the reserve were), so
        // its slot is ours alone (the consumer's index has passed its last
        // use, and no frame points at ring slots we send from), and it
        // holds `frame_cap >= len` bytes inside the mapping.  Queued, it is
        // published only by a flush, which needs `&mut self`: the slice,
        // which borrows `self`, is gone by then.
        TxPlaced::InPlace(unsafe { std::slice::from_raw_parts_mut(start.as_ptr(), len) })
    }

    #[inline(always)]
    fn tx_fits_in_place(&self, len: usize) -> bool {
        self.tx_room() as usize > self.tx_reserve && len <= self.tx.frame_cap
    }

    #[inline(always)]
    fn tx_pending(&self) -> usize {
        self.tx_queued as usize
    }

    #[inline(always)]
    fn tx_flush(&mut self) -> io::Result<()> {
        if self.tx_queued == 0 {
            return Ok(());
        }
        self.publish_tx()
    }

    /// Takes back a frame: an unsent TX frame's slot goes back on the free
    /// stack; a received frame's position is done, and our consumer index
    /// moves past it once every earlier position is done too. Another
    /// link's frame is counted (in `ring_errors`) and left to its own link.
    #[inline(always)]
    fn recycle(&mut self, buf: ShmFrame) {
        // A frame that exists and names our tracker is held: the link made
        // it, and takes back (and forgets) each frame only once, so its
        // entry cannot say it is back (only its own drop would say
        // dropped), and an RX frame's position cannot have been passed. A
        // tracker is freed only with no frame out, so no other link's can
        // be at this address.
        if !buf.is_of(self.tracker) {
            self.refuse(ManuallyDrop::new(buf));
            return;
        }
        debug_assert!(self.is_held(&buf), "a frame of ours is held");
        let (dir, index) = (buf.dir(), buf.index());
        // Back: forgotten (its drop would mark the slot dropped).
        std::mem::forget(buf);
        match dir {
            Dir::Rx => self.take_back_rx(index),
            Dir::Tx => self.take_back_tx(index),
        }
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
            pool_exhausted: self.pool_exhausted,
            rx_oversize: self.rx_bad_len,
            rx_copied: 0,
            ring_errors: self.shm.rx_bad_desc + self.shm.peer_errors + self.shm.foreign_frames,
            rx_csum_partial_form: 0,
            rx_super_frames: 0,
            rx_super_cut: 0,
            rx_queued_whole: 0,
            rx_super_bad_checksum: 0,
            rx_gro_aggregates: 0,
            rx_gro_joined: 0,
            tx_super_frames: 0,
            tx_kick_short: 0,
            tx_csum_partial: 0,
            tx_csum_refused: 0,
            rx_vnet: Default::default(),
            kernel_rx_drop_refused: 0,
        }
    }

    /// Notices frames dropped without coming back and takes their slots.
    #[inline]
    fn service(&mut self) -> io::Result<()> {
        self.advance_rx();
        self.publish_rx();
        self.take_back_dropped_tx();
        Ok(())
    }
}
