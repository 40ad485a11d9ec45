//! The two RX ring layouts AF_PACKET offers, read without trusting them.
//!
//! - TPACKET_V2 (the default): a ring of fixed-size frame slots, each with
//!   its own status word. The kernel hands a frame over the moment it is
//!   written, so nothing waits. A frame longer than a slot is put in the
//!   ring truncated with `TP_STATUS_COPY`; with `PACKET_COPY_THRESH` set
//!   the kernel also queues the whole frame on the socket's receive queue
//!   (`tpacket_rcv` in `net/packet/af_packet.c`), in ring order, where
//!   `recvmsg` reads it. So slots stay small (a frame of the MTU) and a
//!   veth peer's 64 KiB TCP super-frames still arrive whole.
//! - TPACKET_V3: blocks of variable-size frames, handed over when full or
//!   when their retire timer (1 ms at least) fires: at low rates every
//!   frame waits up to that timer. Kept for comparison (`[portN]
//!   rx_ring=v3`).

use super::receive::{FrameMeta, VlanTag};
use crate::vnet_hdr::VNET_HDR_LEN;

/// Which RX ring a link uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RxRingKind {
    /// TPACKET_V2: a frame is seen as soon as the kernel wrote it.
    #[default]
    V2,
    /// TPACKET_V3: frames are seen a block at a time.
    V3,
}

pub const TP_STATUS_USER: u32 = 1 << 0;
pub const TP_STATUS_COPY: u32 = 1 << 1;
pub const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
pub const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
pub const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;

/// `sizeof(struct tpacket2_hdr)`; its fields' offsets follow.
pub const V2_HDR_LEN: usize = 32;
const V2_LEN: usize = 4;
const V2_SNAPLEN: usize = 8;
const V2_MAC: usize = 12;
const V2_VLAN_TCI: usize = 24;
const V2_VLAN_TPID: usize = 26;

/// `sizeof(struct tpacket3_hdr)`; its fields' offsets follow.
pub const V3_HDR_LEN: usize = 48;
const V3_NEXT_OFFSET: usize = 0;
const V3_SNAPLEN: usize = 12;
const V3_LEN: usize = 16;
const V3_STATUS: usize = 20;
const V3_MAC: usize = 24;
const V3_VLAN_TCI: usize = 32;
const V3_VLAN_TPID: usize = 36;

/// An entry of a ring that cannot be what the kernel writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

/// Where a received frame's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingFrame {
    /// In the ring, `len` bytes from `data` (relative to the slot or
    /// block given to the reader).
    Whole {
        data: usize,
        len: usize,
        meta: FrameMeta,
    },
    /// Truncated in the ring; the whole frame, `len` bytes, waits on the
    /// socket's receive queue.
    Copied { len: usize, meta: FrameMeta },
    /// Truncated, and no whole copy was queued (the socket's receive
    /// buffer was full): the frame is lost.
    Truncated,
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn meta(status: u32, tci: u16, tpid: u16, snap: usize) -> FrameMeta {
    let tagged = status & TP_STATUS_VLAN_VALID != 0 && snap >= 12;
    FrameMeta {
        vnet: None,
        partial: status & TP_STATUS_CSUMNOTREADY != 0,
        tag: tagged.then_some(VlanTag {
            tpid: if status & TP_STATUS_VLAN_TPID_VALID != 0 && tpid != 0 {
                tpid
            } else {
                0x8100
            },
            tci,
        }),
    }
}

/// Where the frame at `mac` of `snap` bytes (`len` on the wire) lies in a
/// `room`-byte region, given its status word.
fn place(
    status: u32,
    mac: usize,
    snap: usize,
    len: usize,
    room: usize,
    m: FrameMeta,
) -> Result<RingFrame, Malformed> {
    if mac + snap > room || snap > len {
        return Err(Malformed);
    }
    if snap == len {
        Ok(RingFrame::Whole {
            data: mac,
            len,
            meta: m,
        })
    } else if status & TP_STATUS_COPY != 0 {
        Ok(RingFrame::Copied { len, meta: m })
    } else {
        Ok(RingFrame::Truncated)
    }
}

/// The `virtio_net_hdr` the kernel wrote just before the frame at `mac`
/// (`PACKET_VNET_HDR`), in a region whose header takes `hdr_len` bytes.
fn vnet_before(region: &[u8], mac: usize, hdr_len: usize) -> Result<[u8; VNET_HDR_LEN], Malformed> {
    let at = mac.checked_sub(VNET_HDR_LEN).ok_or(Malformed)?;
    if at < hdr_len {
        return Err(Malformed);
    }
    let mut h = [0u8; VNET_HDR_LEN];
    h.copy_from_slice(region.get(at..mac).ok_or(Malformed)?);
    Ok(h)
}

/// Reads the TPACKET_V2 slot `slot` (all of it), whose status word (read
/// with Acquire) is `status` and has `TP_STATUS_USER`. `vnet`: the
/// socket has `PACKET_VNET_HDR`, so a `virtio_net_hdr` precedes the frame.
pub fn read_v2(slot: &[u8], status: u32, vnet: bool) -> Result<RingFrame, Malformed> {
    if slot.len() < V2_HDR_LEN {
        return Err(Malformed);
    }
    let snap = u32_at(slot, V2_SNAPLEN) as usize;
    let len = u32_at(slot, V2_LEN) as usize;
    let mac = usize::from(u16_at(slot, V2_MAC));
    if mac < V2_HDR_LEN {
        return Err(Malformed);
    }
    let mut m = meta(
        status,
        u16_at(slot, V2_VLAN_TCI),
        u16_at(slot, V2_VLAN_TPID),
        snap,
    );
    if vnet {
        m.vnet = Some(vnet_before(slot, mac, V2_HDR_LEN)?);
    }
    place(status, mac, snap, len, slot.len(), m)
}

/// Reads the TPACKET_V3 frame at `at` in the block `block` (all of it,
/// handed over). Returns it with the offset of the next frame from this
/// one (0: none). `vnet`: as for [`read_v2`].
pub fn read_v3(block: &[u8], at: usize, vnet: bool) -> Result<(RingFrame, usize), Malformed> {
    let h = block.get(at..at + V3_HDR_LEN).ok_or(Malformed)?;
    let snap = u32_at(h, V3_SNAPLEN) as usize;
    let len = u32_at(h, V3_LEN) as usize;
    let status = u32_at(h, V3_STATUS);
    let mac = usize::from(u16_at(h, V3_MAC));
    if mac < V3_HDR_LEN {
        return Err(Malformed);
    }
    let mut m = meta(
        status,
        u32_at(h, V3_VLAN_TCI) as u16,
        u16_at(h, V3_VLAN_TPID),
        snap,
    );
    if vnet {
        m.vnet = Some(vnet_before(&block[at..], mac, V3_HDR_LEN)?);
    }
    let frame = match place(status, mac, snap, len, block.len() - at, m)? {
        RingFrame::Whole { data, len, meta } => RingFrame::Whole {
            data: at + data,
            len,
            meta,
        },
        // A V3 ring never queues a copy (its frames are not cut at a
        // slot's size): a short frame is one the snap length cut.
        _ => RingFrame::Truncated,
    };
    Ok((frame, u32_at(h, V3_NEXT_OFFSET) as usize))
}

/// The reader's place in a ring of `count` fixed-size slots, laid out as
/// the kernel lays them (`packet_lookup_frame`): `per_block` slots from
/// the start of each block of `block_size` bytes, blocks one after the
/// other (the rest of a block, less than a slot, unused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotCursor {
    size: usize,
    count: usize,
    per_block: usize,
    block_size: usize,
    next: usize,
    in_block: usize,
    offset: usize,
}

impl SlotCursor {
    pub fn new(size: usize, count: usize, per_block: usize, block_size: usize) -> SlotCursor {
        SlotCursor {
            size,
            count,
            per_block: per_block.max(1),
            block_size,
            next: 0,
            in_block: 0,
            offset: 0,
        }
    }

    /// The offset of the slot to read next from the ring's start.
    pub fn offset(&self) -> usize {
        self.offset
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// Moves past the slot just given back, wrapping at the ring's end.
    pub fn advance(&mut self) {
        self.next += 1;
        self.in_block += 1;
        if self.next == self.count {
            *self = SlotCursor::new(self.size, self.count, self.per_block, self.block_size);
        } else if self.in_block == self.per_block {
            self.in_block = 0;
            self.offset = self.next / self.per_block * self.block_size;
        } else {
            self.offset += self.size;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A V2 slot of `size` bytes as the kernel writes one: the frame at
    /// 66 (what `tpacket_rcv` computes for Ethernet without a vnet
    /// header), `snap` of its `len` bytes there.
    fn v2_slot(size: usize, len: u32, snap: u32, tci: u16) -> Vec<u8> {
        let mut s = vec![0u8; size];
        s[V2_LEN..V2_LEN + 4].copy_from_slice(&len.to_ne_bytes());
        s[V2_SNAPLEN..V2_SNAPLEN + 4].copy_from_slice(&snap.to_ne_bytes());
        s[V2_MAC..V2_MAC + 2].copy_from_slice(&66u16.to_ne_bytes());
        s[V2_VLAN_TCI..V2_VLAN_TCI + 2].copy_from_slice(&tci.to_ne_bytes());
        s
    }

    #[test]
    fn a_v2_frame_that_fits_is_read_in_place_with_its_marks() {
        let s = v2_slot(2048, 1514, 1514, 0);
        let st = TP_STATUS_USER | TP_STATUS_CSUMNOTREADY;
        assert_eq!(
            read_v2(&s, st, false),
            Ok(RingFrame::Whole {
                data: 66,
                len: 1514,
                meta: FrameMeta {
                    partial: true,
                    tag: None,
                    vnet: None,
                }
            })
        );
        let s = v2_slot(2048, 60, 60, 7);
        let Ok(RingFrame::Whole { meta, .. }) =
            read_v2(&s, TP_STATUS_USER | TP_STATUS_VLAN_VALID, false)
        else {
            panic!("whole");
        };
        assert_eq!(
            meta.tag,
            Some(VlanTag {
                tpid: 0x8100,
                tci: 7
            })
        );
        assert!(!meta.partial);
    }

    #[test]
    fn a_v2_frame_longer_than_its_slot_is_copied_or_lost() {
        // What the kernel puts in a 2 KiB slot for a 64 KiB super-frame.
        let s = v2_slot(2048, 65_000, 2048 - 66, 0);
        let st = TP_STATUS_USER | TP_STATUS_COPY | TP_STATUS_CSUMNOTREADY;
        assert_eq!(
            read_v2(&s, st, false),
            Ok(RingFrame::Copied {
                len: 65_000,
                meta: FrameMeta {
                    partial: true,
                    tag: None,
                    vnet: None,
                }
            })
        );
        // No copy queued: the receive buffer was full.
        assert_eq!(
            read_v2(&s, TP_STATUS_USER | TP_STATUS_CSUMNOTREADY, false),
            Ok(RingFrame::Truncated)
        );
    }

    #[test]
    fn a_v2_entry_out_of_its_slot_is_refused_without_a_panic() {
        // Data past the slot's end.
        let s = v2_slot(2048, 3000, 2000, 0);
        assert_eq!(read_v2(&s, TP_STATUS_USER, false), Err(Malformed));
        // More captured than sent.
        let s = v2_slot(2048, 100, 200, 0);
        assert_eq!(read_v2(&s, TP_STATUS_USER, false), Err(Malformed));
        // Data inside the header.
        let mut s = v2_slot(2048, 60, 60, 0);
        s[V2_MAC..V2_MAC + 2].copy_from_slice(&8u16.to_ne_bytes());
        assert_eq!(read_v2(&s, TP_STATUS_USER, false), Err(Malformed));
        // A slot shorter than a header; any bytes at all.
        assert_eq!(read_v2(&[0; 10], TP_STATUS_USER, false), Err(Malformed));
        let mut junk = vec![0xffu8; 256];
        for i in 0..junk.len() {
            junk[i] = (i * 37) as u8;
            for vnet in [false, true] {
                let _ = read_v2(&junk, TP_STATUS_USER | TP_STATUS_COPY, vnet);
                let _ = read_v3(&junk, i, vnet);
            }
        }
    }

    #[test]
    fn v3_frames_chain_within_their_block() {
        let mut block = vec![0u8; 4096];
        let frame = |b: &mut [u8], at: usize, next: u32, len: u32| {
            b[at..at + 4].copy_from_slice(&next.to_ne_bytes());
            b[at + V3_SNAPLEN..at + V3_SNAPLEN + 4].copy_from_slice(&len.to_ne_bytes());
            b[at + V3_LEN..at + V3_LEN + 4].copy_from_slice(&len.to_ne_bytes());
            b[at + V3_STATUS..at + V3_STATUS + 4]
                .copy_from_slice(&(TP_STATUS_USER | TP_STATUS_CSUMNOTREADY).to_ne_bytes());
            b[at + V3_MAC..at + V3_MAC + 2].copy_from_slice(&82u16.to_ne_bytes());
        };
        frame(&mut block, 48, 160, 60);
        frame(&mut block, 208, 0, 1000);
        let (f, next) = read_v3(&block, 48, false).unwrap();
        assert_eq!(next, 160);
        assert!(matches!(f, RingFrame::Whole { data: 130, len: 60, meta } if meta.partial));
        let (f, next) = read_v3(&block, 208, false).unwrap();
        assert_eq!((f, next).1, 0);
        assert!(matches!(
            f,
            RingFrame::Whole {
                data: 290,
                len: 1000,
                ..
            }
        ));
        // A frame running past the block.
        frame(&mut block, 4000, 0, 60);
        assert_eq!(read_v3(&block, 4000, false), Err(Malformed));
    }

    #[test]
    fn the_vnet_header_is_read_just_before_the_frame() {
        // With PACKET_VNET_HDR the kernel moves the frame 10 bytes on and
        // writes the header in between.
        let mut s = v2_slot(2048, 1514, 1514, 0);
        s[V2_MAC..V2_MAC + 2].copy_from_slice(&76u16.to_ne_bytes());
        s[66..76].copy_from_slice(&[1, 1, 54, 0, 0xa8, 5, 34, 0, 16, 0]);
        let Ok(RingFrame::Whole { data, meta, .. }) = read_v2(&s, TP_STATUS_USER, true) else {
            panic!("whole");
        };
        assert_eq!(data, 76);
        assert_eq!(meta.vnet, Some([1, 1, 54, 0, 0xa8, 5, 34, 0, 16, 0]));
        // No room for a header after the slot's own.
        s[V2_MAC..V2_MAC + 2].copy_from_slice(&40u16.to_ne_bytes());
        assert_eq!(read_v2(&s, TP_STATUS_USER, true), Err(Malformed));
        // V3: the header just before the frame too.
        let mut block = vec![0u8; 4096];
        block[V3_SNAPLEN..V3_SNAPLEN + 4].copy_from_slice(&60u32.to_ne_bytes());
        block[V3_LEN..V3_LEN + 4].copy_from_slice(&60u32.to_ne_bytes());
        block[V3_MAC..V3_MAC + 2].copy_from_slice(&92u16.to_ne_bytes());
        block[82..92].copy_from_slice(&[2, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let Ok((RingFrame::Whole { meta, .. }, _)) = read_v3(&block, 0, true) else {
            panic!("whole");
        };
        assert_eq!(meta.vnet, Some([2, 0, 0, 0, 0, 0, 0, 0, 0, 0]));
        block[V3_MAC..V3_MAC + 2].copy_from_slice(&50u16.to_ne_bytes());
        assert_eq!(read_v3(&block, 0, true), Err(Malformed));
    }

    #[test]
    fn the_slot_cursor_walks_the_ring_and_wraps() {
        let mut c = SlotCursor::new(2048, 3, 2, 4096);
        let mut seen = Vec::new();
        for _ in 0..7 {
            seen.push(c.offset());
            c.advance();
        }
        assert_eq!(seen, [0, 2048, 4096, 0, 2048, 4096, 0]);
        // Slots that do not fill their block: each block starts afresh,
        // as the kernel's packet_lookup_frame places them.
        let mut c = SlotCursor::new(2112, 5, 2, 8192);
        let mut seen = Vec::new();
        for _ in 0..6 {
            seen.push(c.offset());
            c.advance();
        }
        assert_eq!(seen, [0, 2112, 8192, 8192 + 2112, 16384, 0]);
    }
}
