//! What the shared file holds and where: the header, the two index lines of
//! each direction, its descriptor ring and its slab of frame slots.
//!
//! ```text
//! page 0        header (written by side A before `ready`, read by both)
//! page 1        direction 0 (A -> B): consumer index   written by B
//! page 2        direction 1 (B -> A): consumer index   written by A
//! region 0      direction 0: producer index, descriptors, slots   written by A
//! region 1      direction 1: producer index, descriptors, slots   written by B
//! ```
//!
//! Every part another process writes starts on its own page, so each side
//! maps the indexes and descriptors its peer writes read-only (the peer's
//! slots stay writable: received frames are used, and written, in place). The producer index line and the
//! consumer index line are 64-byte lines on different pages, so the two
//! sides never write the same cache line. A region is the producer index
//! line, a gap line, the descriptor ring (`slots` × 8 bytes) from offset
//! 128, then the slots from the next page boundary, `stride` bytes apart:
//! first one per ring position (position `p` carries its frame in slot
//! `p mod slots`, so a descriptor holds only a length and flags), then the
//! producer's spare slots, where frames handed out before their position is
//! known are built (see `ShmLink::alloc_tx`); the peer never reads those.
//!
//! The layout is a pure function of (page size, MTU, slots): the opener
//! recomputes it from the header and checks that every stored number and the
//! file's length agree, so every offset it ever uses lies in the mapping.

use std::sync::atomic::{AtomicU32, AtomicU64};

/// "USTKSHM" and a format byte, little-endian.
pub(super) const MAGIC: u64 = u64::from_le_bytes(*b"USTKSHM\x01");
/// Bumped whenever the layout or the header changes.
pub(super) const VERSION: u32 = 2;
/// The value of `Header::ready` once side A has written everything.
pub(super) const READY: u32 = 0x5244_5921;

/// Room for the Ethernet header and one VLAN tag around an MTU-sized packet.
pub const FRAME_OVERHEAD: usize = 18;
/// The smallest MTU a link may have (IPv4's minimum).
pub const MIN_MTU: usize = 68;
/// The largest MTU a link may have: Linux loopback's.
pub const MAX_MTU: usize = 65536;
/// The most spare slots a direction has.
pub(super) const MAX_SPARES: usize = 2 * crate::MAX_BURST;
/// The fewest frames a direction's ring may hold.
pub const MIN_SLOTS: usize = 2;
/// The most frames a direction's ring may hold.
pub const MAX_SLOTS: usize = 1 << 16;

/// Frame slots start on cache lines.
const LINE: usize = 64;
/// Where the descriptors start in a region: past the producer index line and
/// a spare line (the adjacent-line prefetcher fetches lines in pairs).
const DESC_OFFSET: usize = 2 * LINE;
/// The size of one descriptor.
pub(super) const DESC_SIZE: usize = 8;

/// Descriptor flag: the frame's L4 checksum is partial (see
/// [`crate::PacketBuffer::csum_partial`]).
pub(super) const DESC_CSUM_PARTIAL: u16 = 1;

/// A ring entry: how long the frame in its position's slot is, and flags.
/// Shared as one `u64` (length in bits 0..32, flags in 48..64; bits 32..48
/// are written zero and ignored), written and read whole and atomically.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Desc {
    pub len: u32,
    pub flags: u16,
}

impl Desc {
    pub fn pack(self) -> u64 {
        u64::from(self.len) | u64::from(self.flags) << 48
    }

    pub fn unpack(v: u64) -> Desc {
        Desc {
            len: v as u32,
            flags: (v >> 48) as u16,
        }
    }
}

/// The file's first page. Every field is an atomic, so a racing or buggy
/// writer can only make the reader see wrong numbers (which validation
/// rejects), never a torn read the compiler was allowed to assume away.
#[repr(C)]
pub(super) struct Header {
    pub magic: AtomicU64,
    pub version: AtomicU32,
    pub page_size: AtomicU32,
    pub mtu: AtomicU32,
    pub frame_cap: AtomicU32,
    pub stride: AtomicU32,
    pub slots: AtomicU32,
    /// The MAC addresses in the low 48 bits, byte 0 lowest.
    pub mac_a: AtomicU64,
    pub mac_b: AtomicU64,
    pub file_len: AtomicU64,
    /// [`READY`] once the rest is written (stored with Release).
    pub ready: AtomicU32,
    /// Set to 1 by the one side B that may attach.
    pub attached: AtomicU32,
}

const _: () = assert!(std::mem::size_of::<Header>() <= 4096);

/// A ring index: a free-running `u32` counter, alone on its cache line.
#[repr(C, align(64))]
pub(super) struct Index(pub AtomicU32);

const _: () = assert!(std::mem::size_of::<Index>() == LINE);

/// The numbers everything else follows from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Geometry {
    pub page: usize,
    pub mtu: usize,
    /// The largest frame: `mtu + FRAME_OVERHEAD`.
    pub frame_cap: usize,
    /// Bytes from one slot to the next: `frame_cap` rounded up to a line.
    pub stride: usize,
    /// Ring entries (and their slots) per direction, a power of two.
    pub slots: usize,
    /// Spare slots per direction after the ring's: a quarter of `slots`,
    /// at least 1 and at most [`MAX_SPARES`] (a power of two).
    pub spares: usize,
}

impl Geometry {
    /// Checks `mtu` and `slots` and derives the rest, or says what is wrong.
    pub fn new(page: usize, mtu: usize, slots: usize) -> Result<Geometry, String> {
        if !(MIN_MTU..=MAX_MTU).contains(&mtu) {
            return Err(format!("mtu {mtu} outside {MIN_MTU}..={MAX_MTU}"));
        }
        if !(MIN_SLOTS..=MAX_SLOTS).contains(&slots) || !slots.is_power_of_two() {
            return Err(format!(
                "slots {slots} is not a power of two in {MIN_SLOTS}..={MAX_SLOTS}"
            ));
        }
        if !page.is_power_of_two() || !(4096..=1 << 20).contains(&page) {
            return Err(format!("page size {page} not supported"));
        }
        let frame_cap = mtu + FRAME_OVERHEAD;
        Ok(Geometry {
            page,
            mtu,
            frame_cap,
            stride: align_up(frame_cap, LINE),
            slots,
            spares: (slots / 4).clamp(1, MAX_SPARES),
        })
    }
}

/// Byte offsets of every part of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Layout {
    /// The consumer index of each direction (a page each).
    pub cons: [usize; 2],
    /// The start of each direction's region: its producer index.
    pub region: [usize; 2],
    /// The descriptor ring of each direction.
    pub desc: [usize; 2],
    /// The first slot of each direction.
    pub slab: [usize; 2],
    /// The end of each direction's region (page-aligned).
    pub region_end: [usize; 2],
    /// The file's length.
    pub total: usize,
}

impl Layout {
    /// Lays out a file for `g`. The numbers are bounded by [`Geometry::new`]
    /// (at most a few GiB), so nothing here overflows on a 64-bit target;
    /// the arithmetic is checked all the same.
    pub fn new(g: &Geometry) -> Option<Layout> {
        let page = g.page;
        let header = page;
        let cons = [header, header.checked_add(page)?];
        let mut off = cons[1].checked_add(page)?;
        let mut region = [0; 2];
        let mut desc = [0; 2];
        let mut slab = [0; 2];
        let mut region_end = [0; 2];
        for d in 0..2 {
            region[d] = off;
            desc[d] = off.checked_add(DESC_OFFSET)?;
            let desc_end = desc[d].checked_add(g.slots.checked_mul(DESC_SIZE)?)?;
            slab[d] = align_up(desc_end, page);
            let slab_end =
                slab[d].checked_add(g.slots.checked_add(g.spares)?.checked_mul(g.stride)?)?;
            region_end[d] = align_up(slab_end, page);
            off = region_end[d];
        }
        Some(Layout {
            cons,
            region,
            desc,
            slab,
            region_end,
            total: off,
        })
    }
}

pub(super) fn align_up(n: usize, align: usize) -> usize {
    debug_assert!(align.is_power_of_two());
    (n + align - 1) & !(align - 1)
}

pub(super) fn mac_to_u64(mac: [u8; 6]) -> u64 {
    let mut b = [0u8; 8];
    b[..6].copy_from_slice(&mac);
    u64::from_le_bytes(b)
}

pub(super) fn mac_from_u64(v: u64) -> [u8; 6] {
    let b = v.to_le_bytes();
    [b[0], b[1], b[2], b[3], b[4], b[5]]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_aligned_and_disjoint() {
        for (mtu, slots) in [(1500, 256), (65536, 2), (68, 65536), (9000, 1024)] {
            let g = Geometry::new(4096, mtu, slots).unwrap();
            assert_eq!(g.stride % 64, 0);
            assert!(g.stride >= g.frame_cap);
            let l = Layout::new(&g).unwrap();
            assert_eq!(l.cons, [4096, 8192]);
            assert_eq!(l.region[0], 3 * 4096);
            for d in 0..2 {
                assert_eq!(l.region[d] % 4096, 0);
                assert_eq!(l.slab[d] % 4096, 0);
                assert_eq!(l.region_end[d] % 4096, 0);
                assert!(l.desc[d] + slots * DESC_SIZE <= l.slab[d]);
                assert!(g.spares.is_power_of_two() && g.spares <= MAX_SPARES);
                assert!(l.slab[d] + (slots + g.spares) * g.stride <= l.region_end[d]);
            }
            assert_eq!(l.region[1], l.region_end[0]);
            assert_eq!(l.total, l.region_end[1]);
        }
    }

    #[test]
    fn geometry_rejects_bad_numbers() {
        assert!(Geometry::new(4096, 67, 256).is_err());
        assert!(Geometry::new(4096, 65537, 256).is_err());
        assert!(Geometry::new(4096, 1500, 100).is_err());
        assert!(Geometry::new(4096, 1500, 1).is_err());
        assert!(Geometry::new(4096, 1500, 1 << 17).is_err());
        assert!(Geometry::new(1000, 1500, 256).is_err());
        let g = Geometry::new(4096, 65536, 2).unwrap();
        assert_eq!(g.frame_cap, 65554);
        assert_eq!(g.stride, 65600);
    }

    #[test]
    fn desc_round_trips() {
        let d = Desc {
            len: 65554,
            flags: DESC_CSUM_PARTIAL,
        };
        assert_eq!(Desc::unpack(d.pack()), d);
        assert_eq!(d.pack() >> 32 & 0xffff, 0, "the reserved bits are zero");
        assert_eq!(
            Desc::unpack(u64::MAX),
            Desc {
                len: u32::MAX,
                flags: u16::MAX
            }
        );
    }

    #[test]
    fn mac_round_trips() {
        let m = [0x02, 0xab, 0xcd, 0xef, 0x01, 0x99];
        assert_eq!(mac_from_u64(mac_to_u64(m)), m);
        assert_eq!(mac_to_u64(m) >> 48, 0);
    }
}
