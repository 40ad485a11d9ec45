//! The receive buffer: in-order bytes for the application, and segments
//! that arrived out of order kept in place past them until the hole fills
//! (RFC 9293 3.10.7.4 "seventh"; RFC 2018 for the SACK blocks they give).
//!
//! In-order bytes are copied into a ring, or, when the frame was lent to
//! the stack (`lend.rs`), stay in the frame: the buffer then keeps the
//! in-order data as a queue of chunks, runs of ring bytes and frame
//! payloads, in stream order. Out-of-order data always goes to the ring
//! (at its place past the ring's in-order bytes, whose end is RCV.NXT
//! whatever frames hold before it), and a segment that fills a hole is
//! copied, so that the ring's bytes stay contiguous.

use std::collections::VecDeque;

use wire::tcp::SeqNumber;

use crate::iface::IfaceId;
use crate::lend::{Claim, FrameLending, LentFrame};
use crate::tcp::buffer_cache::BufferCache;
use crate::tcp::byte_ring::ByteRing;

/// Out-of-order ranges kept at most; beyond it a segment that would add a
/// range is dropped (the sender retransmits it).
pub const MAX_OOO_RANGES: usize = 32;

/// A run of in-order bytes, when frames hold some of them.
enum Chunk {
    /// The next `n` bytes of the ring.
    Ring(usize),
    /// Payload held in a received frame.
    Frame(HeldPayload),
}

struct HeldPayload {
    frame: LentFrame,
    iface: IfaceId,
    /// Where the unread payload starts in the frame, and its length.
    start: usize,
    len: usize,
}

impl HeldPayload {
    /// The unread payload; empty if the frame no longer has it (a broken
    /// [`RxFrame`](crate::lend::RxFrame)).
    fn bytes(&self) -> &[u8] {
        self.frame
            .bytes()
            .get(self.start..self.start + self.len)
            .unwrap_or(&[])
    }
}

impl core::fmt::Debug for Chunk {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Chunk::Ring(n) => write!(f, "Ring({n})"),
            Chunk::Frame(h) => write!(f, "Frame({}+{} on {:?})", h.start, h.len, h.iface),
        }
    }
}

/// A frame claimed for in-order payload during a receive, attached when the
/// receive returns.
#[derive(Debug, Clone, Copy)]
struct Pending {
    iface: IfaceId,
    start: usize,
    len: usize,
}

#[derive(Debug, Default)]
pub struct RecvBuffer {
    ring: ByteRing,
    capacity: usize,
    /// Out-of-order ranges, sorted, not touching, all above the in-order end.
    ooo: Vec<(SeqNumber, SeqNumber)>,
    /// The range holding the most recently received out-of-order segment,
    /// for the first SACK block (RFC 2018 section 4).
    last_ooo: Option<(SeqNumber, SeqNumber)>,
    /// The in-order bytes in stream order while frames hold some of them;
    /// empty when the ring holds every readable byte.
    chunks: VecDeque<Chunk>,
    /// Readable bytes in held frames (and in the pending one).
    held_bytes: usize,
    /// Frames held.
    held_frames: usize,
    pending: Option<Pending>,
}

/// What inserting a segment did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Inserted {
    /// Bytes by which RCV.NXT advances.
    pub advanced: usize,
    /// The segment (or part of it) went out of order.
    pub out_of_order: bool,
    /// Bytes of the segment outside the window, trimmed.
    pub trimmed: usize,
    /// The payload was copied into the ring (not held in its frame).
    pub copied: bool,
}

impl RecvBuffer {
    pub fn new(capacity: usize) -> Self {
        RecvBuffer {
            capacity,
            ..RecvBuffer::default()
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Grows the buffer (auto-tuning); never shrinks below what is held.
    pub fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity.max(self.readable());
    }

    /// Bytes the application can read.
    #[inline]
    pub fn readable(&self) -> usize {
        self.ring.len() + self.held_bytes
    }

    /// The receive window: room left past the readable bytes.
    pub fn window(&self) -> usize {
        self.capacity.saturating_sub(self.readable())
    }

    pub fn has_out_of_order(&self) -> bool {
        !self.ooo.is_empty()
    }

    /// Bytes of memory the buffer holds (held frames are the link's).
    pub fn allocated(&self) -> usize {
        self.ring.allocated()
            + self.ooo.capacity() * core::mem::size_of::<(SeqNumber, SeqNumber)>()
            + self.chunks.capacity() * core::mem::size_of::<Chunk>()
    }

    /// Places `data` that starts at `seq`, with `rcv_nxt` the next byte
    /// expected. Data outside `[rcv_nxt, rcv_nxt + window)` is trimmed.
    /// In-order data may stay in the frame being received, as `lend` says.
    #[inline(always)]
    pub fn insert(
        &mut self,
        rcv_nxt: SeqNumber,
        seq: SeqNumber,
        data: &[u8],
        cache: &mut BufferCache,
        lend: &mut FrameLending,
    ) -> Inserted {
        if let Some(n) = self.insert_next(rcv_nxt, seq, data, cache, lend) {
            return Inserted {
                advanced: n,
                copied: true,
                ..Inserted::default()
            };
        }
        self.insert_any(rcv_nxt, seq, data, cache, lend)
    }

    /// [`insert`](Self::insert) of the common case: the next bytes, in
    /// the window, nothing out of order, no frames held, none to hold:
    /// onto the end of the ring, all of them (their count returned).
    /// `None`, with nothing done, otherwise.
    #[inline(always)]
    pub fn insert_next(
        &mut self,
        rcv_nxt: SeqNumber,
        seq: SeqNumber,
        data: &[u8],
        cache: &mut BufferCache,
        lend: &FrameLending,
    ) -> Option<usize> {
        if seq != rcv_nxt
            || data.is_empty()
            || data.len() > self.window()
            || !self.ooo.is_empty()
            || !self.chunks.is_empty()
            || lend.lending()
        {
            return None;
        }
        self.ring.push(data, cache);
        if self.last_ooo.is_some_and(|(_, e)| e <= seq + data.len()) {
            self.last_ooo = None;
        }
        Some(data.len())
    }

    /// [`insert`](Self::insert) in every case.
    #[inline(never)]
    fn insert_any(
        &mut self,
        rcv_nxt: SeqNumber,
        seq: SeqNumber,
        data: &[u8],
        cache: &mut BufferCache,
        lend: &mut FrameLending,
    ) -> Inserted {
        let mut out = Inserted::default();
        let window_end = rcv_nxt + self.window();
        // Trim what is before RCV.NXT (already received) and past the window.
        let (mut seq, mut data) = (seq, data);
        if seq < rcv_nxt {
            let skip = (rcv_nxt - seq).min(data.len());
            data = &data[skip..];
            seq = rcv_nxt;
        }
        let room = window_end - seq;
        if data.len() > room {
            out.trimmed = data.len() - room;
            data = &data[..room];
        }
        if data.is_empty() {
            return out;
        }
        let end = seq + data.len();
        let offset = seq - rcv_nxt;
        if offset == 0 && lend.lending() && self.ooo.is_empty() && self.try_hold(data, lend) {
            out.advanced = data.len();
            return out;
        }
        if offset > 0 {
            out.out_of_order = true;
            if !self.add_range(seq, end) {
                return Inserted {
                    advanced: 0,
                    out_of_order: true,
                    trimmed: out.trimmed + data.len(),
                    ..Inserted::default()
                };
            }
        }
        out.copied = true;
        self.ring
            .reserve_total(self.ring.len() + offset + data.len(), cache);
        self.ring.write_at(self.ring.len() + offset, data);
        if offset == 0 {
            // In order: the hole at RCV.NXT is filled; absorb the
            // out-of-order ranges this reaches.
            let mut new_end = end;
            while let Some(&(s, e)) = self.ooo.first() {
                if s > new_end {
                    break;
                }
                new_end = new_end.max(e);
                self.ooo.remove(0);
            }
            if self.last_ooo.is_some_and(|(_, e)| e <= new_end) {
                self.last_ooo = None;
            }
            out.advanced = new_end - rcv_nxt;
            self.ring.commit(out.advanced);
            if !self.chunks.is_empty() {
                self.push_ring(out.advanced);
            }
        }
        out
    }

    /// Keeps in-order `data` in the frame being received, if `lend` allows.
    #[inline(never)]
    fn try_hold(&mut self, data: &[u8], lend: &mut FrameLending) -> bool {
        if self.pending.is_some() {
            return false;
        }
        let Claim::Hold { iface, offset } = lend.claim(data, self.held_frames) else {
            return false;
        };
        self.pending = Some(Pending {
            iface,
            start: offset,
            len: data.len(),
        });
        self.held_bytes += data.len();
        true
    }

    /// Whether a frame was claimed and waits for [`attach`](Self::attach).
    pub fn has_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// Attaches the frame claimed during the receive that just ended.
    pub fn attach(&mut self, frame: LentFrame) {
        let Some(p) = self.pending.take() else {
            return;
        };
        if self.chunks.is_empty() && !self.ring.is_empty() {
            self.chunks.push_back(Chunk::Ring(self.ring.len()));
        }
        self.chunks.push_back(Chunk::Frame(HeldPayload {
            frame,
            iface: p.iface,
            start: p.start,
            len: p.len,
        }));
        self.held_frames += 1;
    }

    /// Counts `n` bytes just committed to the ring in the chunk queue.
    fn push_ring(&mut self, n: usize) {
        if let Some(Chunk::Ring(last)) = self.chunks.back_mut() {
            *last += n;
        } else {
            self.chunks.push_back(Chunk::Ring(n));
        }
    }
    /// Adds an out-of-order range, merging neighbours; false if the range
    /// table is full.
    fn add_range(&mut self, start: SeqNumber, end: SeqNumber) -> bool {
        let at = self.ooo.partition_point(|&(_, e)| e < start);
        let mut lo = start;
        let mut hi = end;
        let mut remove_to = at;
        while remove_to < self.ooo.len() && self.ooo[remove_to].0 <= hi {
            lo = lo.min(self.ooo[remove_to].0);
            hi = hi.max(self.ooo[remove_to].1);
            remove_to += 1;
        }
        if remove_to == at && self.ooo.len() >= MAX_OOO_RANGES {
            return false;
        }
        self.ooo.splice(at..remove_to, core::iter::once((lo, hi)));
        self.last_ooo = Some((lo, hi));
        true
    }

    /// Copies readable bytes into `dst` and removes them; frames whose
    /// payload is all read go back through `lend`.
    #[inline(always)]
    pub fn read(
        &mut self,
        dst: &mut [u8],
        cache: &mut BufferCache,
        lend: &mut FrameLending,
    ) -> usize {
        if self.chunks.is_empty() {
            // Every readable byte is in the ring.
            let n = self.ring.pop_into(dst);
            if self.ring.is_empty() && self.ooo.is_empty() {
                self.ring.park(cache);
            }
            return n;
        }
        self.read_chunks(dst, cache, lend)
    }

    /// [`read`](Self::read) while frames hold some of the bytes.
    #[inline(never)]
    fn read_chunks(
        &mut self,
        dst: &mut [u8],
        cache: &mut BufferCache,
        lend: &mut FrameLending,
    ) -> usize {
        let mut n = 0;
        while n < dst.len() && !self.chunks.is_empty() {
            let before = (self.chunks.len(), self.readable());
            let got = self.copy_front(&mut dst[n..]);
            self.consume_front(got, lend);
            n += got;
            if (self.chunks.len(), self.readable()) == before {
                break; // no progress: the ring lacks bytes it counted
            }
        }
        self.after_read(cache);
        n
    }

    /// Lets `f` read the first contiguous run of readable bytes in place
    /// (in a held frame, or in the ring) and removes as many as it says it
    /// used. `None` when nothing is readable.
    pub fn read_in_place(
        &mut self,
        f: impl FnOnce(&[u8]) -> usize,
        cache: &mut BufferCache,
        lend: &mut FrameLending,
    ) -> Option<usize> {
        if self.readable() == 0 {
            return None;
        }
        let used = match self.chunks.front() {
            None => {
                let run = self.ring.first_run();
                let used = f(run).min(run.len());
                self.ring.consume(used);
                used
            }
            Some(Chunk::Ring(r)) => {
                let run = self.ring.first_run();
                let run = &run[..run.len().min(*r)];
                let used = f(run).min(run.len());
                self.consume_front(used, lend);
                used
            }
            Some(Chunk::Frame(h)) => {
                let run = h.bytes();
                let used = f(run).min(run.len());
                self.consume_front(used, lend);
                used
            }
        };
        self.after_read(cache);
        Some(used)
    }

    /// Copies from the first chunk into `dst`.
    fn copy_front(&self, dst: &mut [u8]) -> usize {
        match self.chunks.front() {
            None => 0,
            Some(Chunk::Ring(r)) => {
                let k = dst.len().min(*r);
                self.ring.copy_out(0, &mut dst[..k])
            }
            Some(Chunk::Frame(h)) => {
                let b = h.bytes();
                let k = dst.len().min(b.len());
                dst[..k].copy_from_slice(&b[..k]);
                // A frame short of its payload gives up what it lacks.
                if b.is_empty() {
                    0
                } else {
                    k
                }
            }
        }
    }

    /// Removes `n` bytes (at most the first chunk's) from the front; a frame
    /// left empty, or short of its payload, is released.
    fn consume_front(&mut self, n: usize, lend: &mut FrameLending) {
        match self.chunks.front_mut() {
            None => {}
            Some(Chunk::Ring(r)) => {
                let k = n.min(*r);
                self.ring.consume(k);
                *r -= k;
                if *r == 0 {
                    self.chunks.pop_front();
                }
            }
            Some(Chunk::Frame(h)) => {
                let broken = h.bytes().len() < h.len;
                let k = if broken { h.len } else { n.min(h.len) };
                h.start += k;
                h.len -= k;
                self.held_bytes -= k;
                if h.len == 0 {
                    if let Some(Chunk::Frame(h)) = self.chunks.pop_front() {
                        self.held_frames -= 1;
                        lend.release(h.iface, h.frame);
                    }
                }
            }
        }
    }

    /// After a read: back to the ring alone when no frame is held, and the
    /// ring's storage parked for a trim when nothing is left.
    fn after_read(&mut self, cache: &mut BufferCache) {
        if self.held_frames == 0 && self.pending.is_none() {
            self.chunks.clear();
            if self.chunks.capacity() > 0 {
                // The queue's memory goes at the next trim scan.
                cache.note_parked();
            }
        }
        if self.ring.is_empty() && self.ooo.is_empty() {
            self.ring.park(cache);
        }
    }

    /// The connection is gone: the ring's storage back to the cache.
    pub fn discard_storage(&mut self, cache: &mut BufferCache) {
        self.ring.discard(cache);
    }

    /// A trim scan (see [`ByteRing::trim`]); the ring only counts as empty
    /// when no out-of-order data waits past it.
    /// The queues of held frames and out-of-order ranges, once empty, give
    /// their memory back too.
    pub fn trim(&mut self, cache: &mut BufferCache) -> bool {
        if self.chunks.is_empty() && self.chunks.capacity() > 0 {
            self.chunks = VecDeque::new();
        }
        if self.ooo.is_empty() && self.ooo.capacity() > 0 {
            self.ooo = Vec::new();
        }
        self.ooo.is_empty() && self.ring.trim(cache)
    }

    /// Copies readable bytes without removing them (MSG_PEEK).
    pub fn peek(&self, dst: &mut [u8]) -> usize {
        if self.chunks.is_empty() {
            return self.ring.copy_out(0, dst);
        }
        let mut n = 0;
        let mut ring_at = 0;
        for c in &self.chunks {
            if n == dst.len() {
                break;
            }
            match c {
                Chunk::Ring(r) => {
                    let k = (dst.len() - n).min(*r);
                    n += self.ring.copy_out(ring_at, &mut dst[n..n + k]);
                    ring_at += r;
                }
                Chunk::Frame(h) => {
                    let b = h.bytes();
                    let k = (dst.len() - n).min(b.len());
                    dst[n..n + k].copy_from_slice(&b[..k]);
                    n += k;
                }
            }
        }
        n
    }

    /// Calls `f` with each frame held.
    pub fn visit_frames(&self, f: &mut impl FnMut(&dyn crate::lend::RxFrame)) {
        for c in &self.chunks {
            if let Chunk::Frame(h) = c {
                f(h.frame.as_ref());
            }
        }
    }

    /// Hands every held frame back through `lend`, dropping the unread
    /// bytes in them (the connection is going away).
    pub fn release_frames(&mut self, lend: &mut FrameLending) {
        for c in self.chunks.drain(..) {
            if let Chunk::Frame(h) = c {
                lend.release(h.iface, h.frame);
            }
        }
        self.held_bytes = self.pending.map_or(0, |p| p.len);
        self.held_frames = 0;
    }

    /// Up to three SACK blocks: the most recent range first, then the
    /// others highest first (RFC 2018 section 4).
    pub fn sack_blocks(&self) -> [Option<(u32, u32)>; 3] {
        let mut out = [None; 3];
        let mut n = 0;
        if let Some((s, e)) = self.last_ooo {
            out[0] = Some((s.0 as u32, e.0 as u32));
            n = 1;
        }
        for &(s, e) in self.ooo.iter().rev() {
            if n == 3 {
                break;
            }
            if Some((s, e)) == self.last_ooo {
                continue;
            }
            out[n] = Some((s.0 as u32, e.0 as u32));
            n += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(n: u32) -> SeqNumber {
        SeqNumber(n as i32)
    }

    #[test]
    fn in_order_and_holes() {
        let mut c = BufferCache::new(1 << 24);
        let mut l = FrameLending::default();
        let mut b = RecvBuffer::new(10_000);
        let mut nxt = s(1000);
        let r = b.insert(nxt, s(1000), &[1; 100], &mut c, &mut l);
        assert_eq!(r.advanced, 100);
        nxt += 100;
        // A hole at 1100..1200, then two out-of-order ranges.
        let r = b.insert(nxt, s(1300), &[4; 100], &mut c, &mut l);
        assert!(r.out_of_order && r.advanced == 0);
        let r = b.insert(nxt, s(1200), &[3; 50], &mut c, &mut l);
        assert!(r.out_of_order);
        assert_eq!(
            b.sack_blocks(),
            [Some((1200, 1250)), Some((1300, 1400)), None]
        );
        let r = b.insert(nxt, s(1250), &[3; 50], &mut c, &mut l);
        assert_eq!(b.sack_blocks(), [Some((1200, 1400)), None, None], "merged");
        assert!(r.out_of_order);
        let r = b.insert(nxt, s(1100), &[2; 100], &mut c, &mut l);
        assert_eq!(r.advanced, 300, "the hole filled and everything after it");
        assert!(!b.has_out_of_order());
        let mut out = vec![0u8; 400];
        assert_eq!(b.read(&mut out, &mut c, &mut l), 400);
        assert_eq!(&out[..100], &[1; 100][..]);
        assert_eq!(&out[100..200], &[2; 100][..]);
        assert_eq!(&out[200..300], &[3; 100][..]);
        assert_eq!(&out[300..], &[4; 100][..]);
    }

    #[test]
    fn trims_to_window_and_old_data() {
        let mut c = BufferCache::new(1 << 24);
        let mut l = FrameLending::default();
        let mut b = RecvBuffer::new(100);
        let r = b.insert(s(0), s(0), &[1; 150], &mut c, &mut l);
        assert_eq!((r.advanced, r.trimmed), (100, 50));
        assert_eq!(b.window(), 0);
        let r = b.insert(s(100), s(50), &[1; 60], &mut c, &mut l);
        assert_eq!(r.advanced, 0, "duplicate and out of window");
        let mut out = [0u8; 30];
        b.read(&mut out, &mut c, &mut l);
        let r = b.insert(s(100), s(90), &[7; 40], &mut c, &mut l);
        assert_eq!(
            (r.advanced, r.trimmed),
            (30, 0),
            "starts before rcv_nxt, fills the 30 bytes of window"
        );
    }

    #[test]
    fn wrapping_sequence_numbers() {
        let mut c = BufferCache::new(1 << 24);
        let mut l = FrameLending::default();
        let mut b = RecvBuffer::new(1000);
        let start = SeqNumber(-10);
        let r = b.insert(start, start + 20, &[2; 10], &mut c, &mut l);
        assert!(r.out_of_order);
        let r = b.insert(start, start, &[1; 20], &mut c, &mut l);
        assert_eq!(r.advanced, 30);
    }

    #[test]
    fn range_table_is_bounded() {
        let mut c = BufferCache::new(1 << 24);
        let mut l = FrameLending::default();
        let mut b = RecvBuffer::new(1 << 20);
        for i in 0..(MAX_OOO_RANGES as u32 + 5) {
            b.insert(s(0), s(100 + i * 20), &[0; 10], &mut c, &mut l);
        }
        assert_eq!(b.ooo.len(), MAX_OOO_RANGES);
    }
}
