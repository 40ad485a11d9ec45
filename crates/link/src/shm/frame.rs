//! The shared-memory link's packet buffer, [`ShmFrame`]: a handle on one
//! frame slot inside the mapping, and the [`Tracker`] that says which frames
//! came back out of order or were dropped (the link knows which it handed
//! out: the frames are made, and taken back, only by its own calls, so
//! handing a frame out stores nothing).
//!
//! A frame is the engine's exclusive handle on its slot:
//! - a TX frame is one of this side's spare slots, taken from the free
//!   stack: the peer never reads spares (the link copies the frame into
//!   its ring position's slot when it is sent), and the link does not hand
//!   the spare out again before the frame is back or dropped;
//! - an RX frame is the slot of a ring position of the peer's direction
//!   that a published descriptor filled: the peer does not reuse it before
//!   our consumer index passes that position, which happens only once the
//!   frame is back (positions read are distinct and less than a ring
//!   apart, so no two frames out share a slot).
//!
//! The frame cannot borrow the link (the engine keeps frames in its own
//! queues), so the mapping and the tracker must outlive every frame: the
//! link leaks both when it is dropped with frames still out (said on
//! stderr), as the AF_XDP link does with its UMEM.
//!
//! A frame dropped without going back to its link marks its tracker entry
//! [`DROPPED`]; the link then takes the slot back (RX: the consumer index
//! moves past it; TX: the spare goes back on the free stack), so a lost frame
//! costs nothing lasting. Entries are atomics because a frame may be dropped
//! on another thread than the one driving its link.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};

use super::table::RingTable;
use crate::PacketBuffer;

/// A tracker entry with nothing to tell: a spare whose frame (if one is
/// out) is alive, or that is free; an RX position between the consumer
/// index and the next to read whose frame is out, or any other position.
/// A frame being handed out needs no store: its entry is idle already.
pub(super) const IDLE: u8 = 0;
/// RX only: the frame came back, but an earlier position's has not, so the
/// consumer index has not passed this one yet.
pub(super) const DONE: u8 = 2;
/// The frame was dropped without coming back: the link takes its slot back
/// when it next looks.
pub(super) const DROPPED: u8 = 3;

/// Which direction's slab a frame lies in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dir {
    /// A spare slot of this side's transmit direction, being built.
    Tx,
    /// A slot of the peer's direction, received.
    Rx,
}

/// What the link cannot see of its frames: one entry per spare slot and
/// one per RX ring position (masked).
pub(super) struct Tracker {
    pub tx: RingTable<AtomicU8>,
    pub rx: RingTable<AtomicU8>,
    /// TX frames dropped without coming back, ever: the link compares it
    /// with the count it has handled to know when to look for them.
    pub tx_dropped: AtomicU32,
    /// Bytes in each slot: every frame's capacity.
    pub frame_cap: u32,
}

impl Tracker {
    /// A tracker for `spares` spare slots and rings of `slots` entries
    /// (both powers of two), all idle, and slots of `frame_cap` bytes.
    pub fn new(slots: usize, spares: usize, frame_cap: usize) -> Tracker {
        assert!(
            frame_cap <= LEN_BITS as usize,
            "a frame's length fits its bits"
        );
        let idle = |n| RingTable::new(n, |_| AtomicU8::new(IDLE));
        Tracker {
            tx: idle(spares),
            rx: idle(slots),
            tx_dropped: AtomicU32::new(0),
            frame_cap: frame_cap as u32,
        }
    }

    /// The entry of a spare or an RX ring position, if there is one.
    pub fn entry(&self, dir: Dir, index: u32) -> Option<&AtomicU8> {
        match dir {
            Dir::Tx => self.tx.get(index as usize),
            Dir::Rx => Some(self.rx.at(index)),
        }
    }

    /// Spares whose frame was dropped and not taken back yet.
    pub fn tx_dropped_now(&self) -> usize {
        self.tx
            .iter()
            .filter(|e| e.load(Ordering::Acquire) == DROPPED)
            .count()
    }
}

/// A frame in a slot of a shared-memory link's mapping: the link's packet
/// buffer ([`crate::ShmLink`]'s `Link::Buf`).
///
/// Frames the engine builds through `Link::tx_place` are written in place in
/// their ring position's slot and need no handle; a frame handed out by
/// `alloc_tx` is a spare slot of this side's direction, copied into its
/// position's slot when sent. Received frames are the peer's slots, read
/// (and written: the engine completes partial checksums in place) where
/// they lie.
#[derive(Debug)]
pub struct ShmFrame {
    /// The slot's first byte.
    start: NonNull<u8>,
    /// The link's tracker, which outlives the frame. It also names the
    /// link (a tracker is freed only with its link, and only when no frame
    /// is out, otherwise it is leaked, so no two links with frames out ever
    /// have trackers at one address), and holds the slots' capacity.
    tracker: NonNull<Tracker>,
    /// The length (the bits of [`LEN_BITS`]), and the [`RX_BIT`] and
    /// [`CSUM_PARTIAL_BIT`] marks: a frame is three words, cheap to move
    /// through the engine's queues.
    len_flags: u32,
    /// TX: the spare's number; RX: the ring position (free-running).
    index: u32,
}

/// The bits of `ShmFrame::len_flags` that hold the length (slots hold at
/// most `MAX_MTU + FRAME_OVERHEAD` bytes, well below 2^24).
const LEN_BITS: u32 = (1 << 24) - 1;
/// Set in `ShmFrame::len_flags` for a received frame.
const RX_BIT: u32 = 1 << 30;
/// Set in `ShmFrame::len_flags` when the frame's checksum is partial.
const CSUM_PARTIAL_BIT: u32 = 1 << 31;

// SAFETY: a frame is the only handle on its slot (module doc), the mapping
// and the tracker stay valid as long as any frame exists (the link leaks
// them otherwise), and the frame touches the tracker only through atomics
// and its never-changing capacity; so it may move to another thread (with
// its engine, or to be dropped).
unsafe impl Send for ShmFrame {}

impl ShmFrame {
    /// A frame on the slot at `start`, of `tracker.frame_cap` bytes. The
    /// link gives each slot to one handle at a time.
    #[inline(always)]
    pub(super) fn new(
        start: NonNull<u8>,
        len: usize,
        dir: Dir,
        index: u32,
        tracker: NonNull<Tracker>,
    ) -> ShmFrame {
        debug_assert!(len <= LEN_BITS as usize);
        let rx = match dir {
            Dir::Tx => 0,
            Dir::Rx => RX_BIT,
        };
        ShmFrame {
            start,
            tracker,
            len_flags: len as u32 | rx,
            index,
        }
    }

    /// The tracker.
    fn tracker(&self) -> &Tracker {
        // SAFETY: the tracker outlives every frame (the link leaks it while
        // frames are out); it is only accessed through atomics and shared
        // references.
        unsafe { self.tracker.as_ref() }
    }

    /// Whether the link whose tracker is `tracker` made it.
    pub(super) fn is_of(&self, tracker: NonNull<Tracker>) -> bool {
        self.tracker == tracker
    }

    pub(super) fn dir(&self) -> Dir {
        if self.len_flags & RX_BIT != 0 {
            Dir::Rx
        } else {
            Dir::Tx
        }
    }

    /// TX: the spare's number; RX: the ring position.
    pub(super) fn index(&self) -> u32 {
        self.index
    }

    /// Where the frame's bytes start.
    pub fn as_ptr(&self) -> *const u8 {
        self.start.as_ptr()
    }

    #[inline(always)]
    fn len(&self) -> usize {
        (self.len_flags & LEN_BITS) as usize
    }
}

impl Drop for ShmFrame {
    /// Only frames that never went back to their link get here (the link
    /// forgets those it takes): mark the entry so the link takes the slot
    /// back.
    fn drop(&mut self) {
        let t = self.tracker();
        let dir = self.dir();
        if let Some(e) = t.entry(dir, self.index) {
            if dir == Dir::Tx {
                t.tx_dropped.fetch_add(1, Ordering::Release);
            }
            // Last, as the link may free the tracker once it sees it (when
            // it is being dropped itself). Release: our accesses to the
            // slot come before the link's reuse of it (it loads the entry
            // with Acquire).
            e.store(DROPPED, Ordering::Release);
        }
    }
}

impl PacketBuffer for ShmFrame {
    fn data(&self) -> &[u8] {
        // SAFETY: the length is at most the capacity (set_len checks) and
        // the slot has that many bytes inside the mapping, which outlives
        // the frame; the slot is
        // this frame's alone in this process (module doc), and the peer
        // does not write it while the frame exists (see the link's doc for
        // a peer that breaks the protocol).
        unsafe { std::slice::from_raw_parts(self.start.as_ptr(), self.len()) }
    }

    fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `data`; `&mut self` makes the slice unique, and the
        // mapping is writable over both slabs.
        unsafe { std::slice::from_raw_parts_mut(self.start.as_ptr(), self.len()) }
    }

    fn set_len(&mut self, len: usize) {
        let cap = self.capacity();
        assert!(len <= cap, "ShmFrame::set_len({len}) past capacity {cap}");
        self.len_flags = (self.len_flags & !LEN_BITS) | len as u32;
    }

    fn capacity(&self) -> usize {
        self.tracker().frame_cap as usize
    }

    fn csum_partial(&self) -> bool {
        self.len_flags & CSUM_PARTIAL_BIT != 0
    }

    fn set_csum_partial(&mut self, partial: bool) {
        self.len_flags =
            (self.len_flags & !CSUM_PARTIAL_BIT) | (CSUM_PARTIAL_BIT * u32::from(partial));
    }
}
