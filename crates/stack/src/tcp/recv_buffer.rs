//! The receive buffer: in-order bytes for the application, and segments
//! that arrived out of order kept in place past them until the hole fills
//! (RFC 9293 3.10.7.4 "seventh"; RFC 2018 for the SACK blocks they give).

use wire::tcp::SeqNumber;

use crate::tcp::buffer_cache::BufferCache;
use crate::tcp::byte_ring::ByteRing;

/// Out-of-order ranges kept at most; beyond it a segment that would add a
/// range is dropped (the sender retransmits it).
pub const MAX_OOO_RANGES: usize = 32;

#[derive(Debug, Clone, Default)]
pub struct RecvBuffer {
    ring: ByteRing,
    capacity: usize,
    /// Out-of-order ranges, sorted, not touching, all above the in-order end.
    ooo: Vec<(SeqNumber, SeqNumber)>,
    /// The range holding the most recently received out-of-order segment,
    /// for the first SACK block (RFC 2018 section 4).
    last_ooo: Option<(SeqNumber, SeqNumber)>,
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
        self.capacity = capacity.max(self.ring.len());
    }

    /// Bytes the application can read.
    pub fn readable(&self) -> usize {
        self.ring.len()
    }

    /// The receive window: room left past the readable bytes.
    pub fn window(&self) -> usize {
        self.capacity.saturating_sub(self.ring.len())
    }

    pub fn has_out_of_order(&self) -> bool {
        !self.ooo.is_empty()
    }

    /// Bytes of memory the buffer holds.
    pub fn allocated(&self) -> usize {
        self.ring.allocated() + self.ooo.capacity() * core::mem::size_of::<(SeqNumber, SeqNumber)>()
    }

    /// Places `data` that starts at `seq`, with `rcv_nxt` the next byte
    /// expected. Data outside `[rcv_nxt, rcv_nxt + window)` is trimmed.
    pub fn insert(
        &mut self,
        rcv_nxt: SeqNumber,
        seq: SeqNumber,
        data: &[u8],
        cache: &mut BufferCache,
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
        if offset > 0 {
            out.out_of_order = true;
            if !self.add_range(seq, end) {
                return Inserted {
                    advanced: 0,
                    out_of_order: true,
                    trimmed: out.trimmed + data.len(),
                };
            }
        }
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
        }
        out
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

    /// Copies readable bytes into `dst` and removes them.
    pub fn read(&mut self, dst: &mut [u8], cache: &mut BufferCache) -> usize {
        let n = self.ring.copy_out(0, dst);
        self.ring.consume(n);
        if self.ring.is_empty() && self.ooo.is_empty() {
            self.ring.release(cache);
        }
        n
    }

    /// Copies readable bytes without removing them (MSG_PEEK).
    pub fn peek(&self, dst: &mut [u8]) -> usize {
        self.ring.copy_out(0, dst)
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
        let mut b = RecvBuffer::new(10_000);
        let mut nxt = s(1000);
        let r = b.insert(nxt, s(1000), &[1; 100], &mut c);
        assert_eq!(r.advanced, 100);
        nxt += 100;
        // A hole at 1100..1200, then two out-of-order ranges.
        let r = b.insert(nxt, s(1300), &[4; 100], &mut c);
        assert!(r.out_of_order && r.advanced == 0);
        let r = b.insert(nxt, s(1200), &[3; 50], &mut c);
        assert!(r.out_of_order);
        assert_eq!(
            b.sack_blocks(),
            [Some((1200, 1250)), Some((1300, 1400)), None]
        );
        let r = b.insert(nxt, s(1250), &[3; 50], &mut c);
        assert_eq!(b.sack_blocks(), [Some((1200, 1400)), None, None], "merged");
        assert!(r.out_of_order);
        let r = b.insert(nxt, s(1100), &[2; 100], &mut c);
        assert_eq!(r.advanced, 300, "the hole filled and everything after it");
        assert!(!b.has_out_of_order());
        let mut out = vec![0u8; 400];
        assert_eq!(b.read(&mut out, &mut c), 400);
        assert_eq!(&out[..100], &[1; 100][..]);
        assert_eq!(&out[100..200], &[2; 100][..]);
        assert_eq!(&out[200..300], &[3; 100][..]);
        assert_eq!(&out[300..], &[4; 100][..]);
    }

    #[test]
    fn trims_to_window_and_old_data() {
        let mut c = BufferCache::new(1 << 24);
        let mut b = RecvBuffer::new(100);
        let r = b.insert(s(0), s(0), &[1; 150], &mut c);
        assert_eq!((r.advanced, r.trimmed), (100, 50));
        assert_eq!(b.window(), 0);
        let r = b.insert(s(100), s(50), &[1; 60], &mut c);
        assert_eq!(r.advanced, 0, "duplicate and out of window");
        let mut out = [0u8; 30];
        b.read(&mut out, &mut c);
        let r = b.insert(s(100), s(90), &[7; 40], &mut c);
        assert_eq!(
            (r.advanced, r.trimmed),
            (30, 0),
            "starts before rcv_nxt, fills the 30 bytes of window"
        );
    }

    #[test]
    fn wrapping_sequence_numbers() {
        let mut c = BufferCache::new(1 << 24);
        let mut b = RecvBuffer::new(1000);
        let start = SeqNumber(-10);
        let r = b.insert(start, start + 20, &[2; 10], &mut c);
        assert!(r.out_of_order);
        let r = b.insert(start, start, &[1; 20], &mut c);
        assert_eq!(r.advanced, 30);
    }

    #[test]
    fn range_table_is_bounded() {
        let mut c = BufferCache::new(1 << 24);
        let mut b = RecvBuffer::new(1 << 20);
        for i in 0..(MAX_OOO_RANGES as u32 + 5) {
            b.insert(s(0), s(100 + i * 20), &[0; 10], &mut c);
        }
        assert_eq!(b.ooo.len(), MAX_OOO_RANGES);
    }
}
