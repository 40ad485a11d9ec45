//! A ring of bytes whose storage comes from the stack's [`BufferCache`] on
//! first use, grows by doubling, and goes back once the ring has stayed
//! empty for a while ([`ByteRing::park`] then [`ByteRing::trim`]): a
//! connection that is not moving data holds no buffer memory, and one in a
//! ping-pong does not give its storage back and take it again every round
//! trip.
//!
//! A send ring can also lend the free room after its held bytes to the
//! application ([`ByteRing::reserve_tail`]), which writes there in place
//! and then commits what it wrote ([`ByteRing::commit_reserved`]): the
//! zero-copy send.  While such a reservation is out the storage stays put:
//! it neither goes back to the cache nor moves (a copying append, which
//! may move it, ends the reservation first).

use crate::tcp::buffer_cache::{BufferCache, MIN_RING};

/// `at` (less than two laps) as a position in storage of `cap` bytes.
#[inline]
fn wrap(at: usize, cap: usize) -> usize {
    if at >= cap {
        at - cap
    } else {
        at
    }
}

/// `dst.copy_from_slice(src)`, with the short copies of request/response
/// traffic (16 to 64 bytes) done inline as two overlapping fixed-size
/// moves instead of a call into `memcpy`.
#[inline(always)]
fn copy_bytes(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if n == dst.len() && (16..=64).contains(&n) {
        // Straight from the source's chunks: `dst` and `src` cannot
        // overlap, and no copy through a local keeps the moves in
        // registers.
        if n >= 32 {
            if let (Some(a), Some(b)) = (src.first_chunk::<32>(), src.last_chunk::<32>()) {
                dst[..32].copy_from_slice(a);
                dst[n - 32..].copy_from_slice(b);
                return;
            }
        } else if let (Some(a), Some(b)) = (src.first_chunk::<16>(), src.last_chunk::<16>()) {
            dst[..16].copy_from_slice(a);
            dst[n - 16..].copy_from_slice(b);
            return;
        }
    }
    dst.copy_from_slice(src);
}

#[derive(Debug, Default, Clone)]
pub struct ByteRing {
    storage: Vec<u8>,
    head: usize,
    len: usize,
    /// Bytes past the held ones lent out by [`ByteRing::reserve_tail`].
    reserved: usize,
    /// The most bytes held since the storage was taken.
    peak: usize,
    /// The storage to take when data comes to an empty ring: what the last
    /// busy period needed. A stream empties its rings between bursts, and
    /// growing again from the smallest class by doubling would copy the
    /// held bytes at every step.
    regrow_to: usize,
    /// Written to since the last [`ByteRing::trim`].
    touched: bool,
}

impl ByteRing {
    pub fn new() -> Self {
        ByteRing::default()
    }

    /// Bytes held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of storage allocated.
    pub fn allocated(&self) -> usize {
        self.storage.len()
    }

    /// Makes room for `total` bytes from the head (held bytes plus bytes
    /// to be written past them), growing the storage by doubling.
    #[inline(always)]
    pub fn reserve_total(&mut self, total: usize, cache: &mut BufferCache) {
        self.touched = true;
        if total > self.storage.len() {
            self.grow_to(total, cache);
        }
    }

    #[inline(never)]
    fn grow_to(&mut self, total: usize, cache: &mut BufferCache) {
        let new_cap = total.next_power_of_two().max(MIN_RING);
        if self.storage.is_empty() {
            // The common case: a ring that gave its storage back when it
            // emptied takes some again (every round trip of a ping-pong).
            self.storage = cache.take(new_cap.max(self.regrow_to));
            self.head = 0;
            self.peak = 0;
            return;
        }
        let mut storage = cache.take(new_cap);
        // Keep held bytes and anything written beyond them (out-of-order
        // data lives there), up to the old capacity.
        let old_cap = self.storage.len();
        let (wrapped, front) = self.storage.split_at(self.head.min(old_cap));
        storage[..front.len()].copy_from_slice(front);
        storage[front.len()..old_cap].copy_from_slice(wrapped);
        cache.give(core::mem::replace(&mut self.storage, storage));
        self.head = 0;
    }

    /// Gives the storage back when nothing is held (the caller knows that
    /// nothing waits past the held bytes either).
    pub fn release(&mut self, cache: &mut BufferCache) {
        if self.len == 0 && self.reserved == 0 && !self.storage.is_empty() {
            // Halve the next storage when this period used under half of
            // it, so one bulk transfer does not pin large rings on what
            // becomes a ping-pong.
            let cap = self.storage.len();
            self.regrow_to = if self.peak * 2 <= cap { cap / 2 } else { cap };
            cache.give(core::mem::take(&mut self.storage));
            self.head = 0;
        }
    }

    /// The ring emptied: it keeps its storage for now (data may come again
    /// at once) and the cache learns that a trim is due.
    pub fn park(&mut self, cache: &mut BufferCache) {
        if self.len == 0 && !self.storage.is_empty() {
            cache.note_parked();
        }
    }

    /// The ring's owner is gone: its storage goes back to the cache
    /// whatever it held (a closed connection's parked ring would
    /// otherwise be freed, and the next connection's allocated anew).
    pub fn discard(&mut self, cache: &mut BufferCache) {
        if !self.storage.is_empty() {
            cache.give(core::mem::take(&mut self.storage));
        }
        self.head = 0;
        self.len = 0;
        self.reserved = 0;
    }

    /// A trim scan: gives the storage back if the ring is empty and was
    /// not written to since the previous scan. Returns whether it keeps
    /// storage while empty (to be looked at again by the next scan).
    pub fn trim(&mut self, cache: &mut BufferCache) -> bool {
        if self.len != 0 || self.reserved != 0 || self.storage.is_empty() {
            return false;
        }
        if core::mem::take(&mut self.touched) {
            return true;
        }
        self.release(cache);
        false
    }

    /// Writes `data` at `offset` bytes past the head (at or beyond the held
    /// bytes), without making it held. The caller reserved the room.
    #[inline(always)]
    pub fn write_at(&mut self, offset: usize, data: &[u8]) {
        let cap = self.storage.len();
        if cap == 0 || offset + data.len() > cap {
            return;
        }
        let start = wrap(self.head + offset, cap);
        let first = data.len().min(cap - start);
        copy_bytes(&mut self.storage[start..start + first], &data[..first]);
        if first < data.len() {
            self.storage[..data.len() - first].copy_from_slice(&data[first..]);
        }
    }

    /// Counts `n` bytes written past the held ones as held.
    pub fn commit(&mut self, n: usize) {
        self.len = (self.len + n).min(self.storage.len());
        self.peak = self.peak.max(self.len);
    }

    /// Appends as much of `data` as fits under `limit` held bytes.
    /// Ends an outstanding reservation.
    #[inline(always)]
    pub fn append(&mut self, data: &[u8], limit: usize, cache: &mut BufferCache) -> usize {
        self.reserved = 0;
        let n = data.len().min(limit.saturating_sub(self.len));
        if n == 0 {
            return 0;
        }
        self.push(&data[..n], cache);
        n
    }

    /// Appends all of `data` as held bytes, growing the storage as needed:
    /// [`append`](Self::append)'s and the in-order receive's common step,
    /// which after the growth needs none of `write_at`'s checks.
    #[inline(always)]
    pub fn push(&mut self, data: &[u8], cache: &mut BufferCache) {
        self.reserve_total(self.len + data.len(), cache);
        if self.len == 0 {
            // Nothing held (and, as both callers ensure, nothing written
            // past it): from the front, where the room is whole and no
            // wrap is to be reckoned with (a request/reply's every push).
            self.head = 0;
            if let Some(dst) = self.storage.get_mut(..data.len()) {
                copy_bytes(dst, data);
            }
            self.len = data.len();
            self.peak = self.peak.max(self.len);
            return;
        }
        let cap = self.storage.len();
        let start = wrap(self.head + self.len, cap);
        // The room after `start` first, then from the front: both in
        // bounds, as the storage now holds `len + data.len()` bytes.
        debug_assert!(self.len + data.len() <= cap && start < cap.max(1));
        let (first, rest) = data.split_at(data.len().min(cap - start));
        if let Some(dst) = self.storage.get_mut(start..start + first.len()) {
            copy_bytes(dst, first);
        }
        if !rest.is_empty() {
            if let Some(dst) = self.storage.get_mut(..rest.len()) {
                dst.copy_from_slice(rest);
            }
        }
        self.len += data.len();
        self.peak = self.peak.max(self.len);
    }

    /// Lends the application a contiguous region right after the held
    /// bytes, of at most `want` bytes and within `limit` held bytes, growing
    /// the storage as [`ByteRing::append`] does.  Shorter than asked when
    /// the free room wraps past the end of the storage; empty when there is
    /// no room.  The region stays valid (in the same place) until
    /// [`ByteRing::commit_reserved`], [`ByteRing::cancel_reservation`],
    /// another reservation or an append.
    pub fn reserve_tail(
        &mut self,
        want: usize,
        limit: usize,
        cache: &mut BufferCache,
    ) -> &mut [u8] {
        self.reserved = 0;
        let n = want.min(limit.saturating_sub(self.len));
        if n == 0 {
            return &mut [];
        }
        if self.len == 0 {
            // Nothing held: start at the front, where the room is whole.
            self.head = 0;
        }
        self.reserve_total(self.len + n, cache);
        let cap = self.storage.len();
        let start = (self.head + self.len) % cap;
        // Free room runs from `start` to the head, or to the end of the
        // storage when the held bytes do not wrap.
        let contiguous = (cap - self.len).min(cap - start);
        let m = n.min(contiguous);
        self.reserved = m;
        &mut self.storage[start..start + m]
    }

    /// Counts the first `n` bytes of the lent region as held and ends the
    /// reservation; false (and nothing changes) when `n` is more than was
    /// lent.
    pub fn commit_reserved(&mut self, n: usize) -> bool {
        if n > self.reserved {
            return false;
        }
        self.len += n;
        self.peak = self.peak.max(self.len);
        self.reserved = 0;
        true
    }

    /// Ends a reservation without taking any of its bytes.
    pub fn cancel_reservation(&mut self) {
        self.reserved = 0;
    }

    /// Copies held bytes starting `offset` past the head into `dst`.
    #[inline(always)]
    pub fn copy_out(&self, offset: usize, dst: &mut [u8]) -> usize {
        let cap = self.storage.len();
        let n = dst.len().min(self.len.saturating_sub(offset));
        if n == 0 {
            return 0;
        }
        let start = wrap(self.head + offset, cap);
        if start + n <= cap {
            // One run (always, for a ring that starts from the front).
            if let (Some(d), Some(s)) = (dst.get_mut(..n), self.storage.get(start..start + n)) {
                copy_bytes(d, s);
            }
            return n;
        }
        // Wrapped: `start < cap < start + n`, so both runs are non-empty
        // and in bounds; taken with `get` all the same.
        let first = cap - start;
        let runs = (self.storage.get(start..), self.storage.get(..n - first));
        if let (Some(d), (Some(s1), Some(s2))) = (dst.get_mut(..n), runs) {
            if let Some((d1, d2)) = d.split_at_mut_checked(first) {
                copy_bytes(d1, s1);
                d2.copy_from_slice(s2);
            }
        }
        n
    }

    /// The held bytes from the head up to the end of the storage (or of
    /// the held bytes): the first contiguous run.
    pub fn first_run(&self) -> &[u8] {
        let cap = self.storage.len();
        if cap == 0 {
            return &[];
        }
        &self.storage[self.head..self.head + self.len.min(cap - self.head)]
    }

    /// Moves held bytes from the head into `dst`: [`copy_out`](Self::copy_out)
    /// from the head then [`consume`](Self::consume), in one pass.
    #[inline(always)]
    pub fn pop_into(&mut self, dst: &mut [u8]) -> usize {
        let n = dst.len().min(self.len);
        if n == 0 {
            return 0;
        }
        // Held bytes imply storage, and the head is within it.
        let cap = self.storage.len();
        let start = self.head;
        debug_assert!(start < cap);
        if n == self.len && start + n <= cap {
            // All of it, in one run (a request/reply's every read). The
            // head moves past it all the same: bytes written beyond the
            // held ones (out-of-order data) stay where they are.
            if let (Some(d), Some(s)) = (dst.get_mut(..n), self.storage.get(start..start + n)) {
                copy_bytes(d, s);
            }
            self.head = wrap(start + n, cap);
            self.len = 0;
            return n;
        }
        let first = n.min(cap - start);
        if let (Some(d), Some(s)) = (dst.get_mut(..first), self.storage.get(start..start + first)) {
            copy_bytes(d, s);
        }
        if first < n {
            if let (Some(d), Some(s)) = (dst.get_mut(first..n), self.storage.get(..n - first)) {
                d.copy_from_slice(s);
            }
        }
        self.head = wrap(start + n, cap);
        self.len -= n;
        n
    }

    /// Drops `n` bytes from the head.
    pub fn consume(&mut self, n: usize) {
        let n = n.min(self.len);
        if self.storage.is_empty() {
            return;
        }
        self.head = wrap(self.head + n, self.storage.len());
        self.len -= n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::buffer_cache::BATCH_BYTES;

    /// Reading every held byte keeps what was written beyond them (the
    /// receive ring's out-of-order data) where it was, relative to the
    /// head.
    #[test]
    fn a_read_of_everything_held_keeps_the_bytes_beyond() {
        let mut c = BufferCache::new(1 << 20);
        let mut r = ByteRing::new();
        assert_eq!(r.append(&[1; 10], 1 << 20, &mut c), 10);
        r.write_at(10 + 5, &[9; 4]);
        let mut out = [0u8; 16];
        assert_eq!(r.pop_into(&mut out), 10);
        assert_eq!(&out[..10], &[1; 10][..]);
        // The hole before the out-of-order bytes is filled; all of it is
        // held now.
        r.write_at(0, &[8; 5]);
        r.commit(9);
        assert_eq!(r.pop_into(&mut out), 9);
        assert_eq!(&out[..9], &[8, 8, 8, 8, 8, 9, 9, 9, 9][..]);
    }

    /// An append to an empty ring starts at the front, wherever the head
    /// was; later appends that wrap still come out in order.
    #[test]
    fn an_append_to_an_empty_ring_starts_at_the_front() {
        let mut c = BufferCache::new(1 << 20);
        let mut r = ByteRing::new();
        assert_eq!(r.append(&[1; 10], 1 << 20, &mut c), 10);
        let cap = r.allocated();
        let mut out = vec![0u8; cap];
        assert_eq!(r.pop_into(&mut out[..10]), 10);
        assert_eq!((r.head, r.len), (10, 0));
        assert_eq!(r.append(&[2; 20], 1 << 20, &mut c), 20);
        assert_eq!((r.head, r.len), (0, 20));
        assert_eq!(r.first_run(), &[2; 20][..]);
        assert_eq!(r.pop_into(&mut out[..20]), 20);
        assert_eq!(&out[..20], &[2; 20][..]);
        // Held bytes from the front to near the end, three taken, then an
        // append that runs past the end and on from the front.
        assert_eq!(r.append(&vec![3; cap - 5], 1 << 20, &mut c), cap - 5);
        assert_eq!(r.pop_into(&mut out[..3]), 3);
        assert_eq!(r.append(&[4; 8], 1 << 20, &mut c), 8);
        assert_eq!(r.allocated(), cap, "no growth: it fit");
        // A copy from the last held bytes runs past the end and on from
        // the front; one from before the end does not.
        let mut tail = [0u8; 6];
        assert_eq!(r.copy_out(cap - 5, &mut tail), 5);
        assert_eq!(&tail[..5], &[4; 5][..]);
        assert_eq!(r.copy_out(cap - 10, &mut tail), 6);
        assert_eq!(tail, [3, 3, 4, 4, 4, 4]);
        let n = r.len();
        assert_eq!(r.pop_into(&mut out[..n]), cap);
        assert!(out[..cap - 8].iter().all(|&b| b == 3));
        assert_eq!(&out[cap - 8..cap], &[4; 8][..]);
        assert!(r.is_empty());
    }

    #[test]
    fn pop_into_takes_bytes_across_the_wrap() {
        let mut c = BufferCache::new(1 << 20);
        let mut r = ByteRing::new();
        assert_eq!(r.pop_into(&mut [0; 8]), 0, "empty");
        let cap = {
            r.append(&[1; 10], 1 << 20, &mut c);
            r.allocated()
        };
        // Move the head near the end, then wrap the held bytes.
        let mut sink = vec![0; cap];
        assert_eq!(r.pop_into(&mut sink[..10]), 10);
        r.append(&vec![2; cap - 20], 1 << 20, &mut c);
        assert_eq!(r.pop_into(&mut sink[..cap - 20]), cap - 20);
        let data: Vec<u8> = (0..40).collect();
        assert_eq!(r.append(&data, 1 << 20, &mut c), 40);
        let mut out = [0u8; 64];
        assert_eq!(r.pop_into(&mut out[..25]), 25);
        assert_eq!(&out[..25], &data[..25]);
        assert_eq!(r.pop_into(&mut out), 15);
        assert_eq!(&out[..15], &data[25..]);
        assert!(r.is_empty());
    }

    #[test]
    fn append_consume_wrap_and_grow() {
        let mut r = ByteRing::new();
        let mut c = BufferCache::new(1 << 20);
        assert_eq!(r.allocated(), 0);
        assert_eq!(r.append(&[1; 1000], 4096, &mut c), 1000);
        assert_eq!(r.allocated(), 1024);
        r.consume(900);
        assert_eq!(r.append(&[2; 500], 4096, &mut c), 500, "wraps");
        let mut out = [0u8; 600];
        assert_eq!(r.copy_out(0, &mut out), 600);
        assert_eq!(&out[..100], &[1; 100][..]);
        assert_eq!(&out[100..], &[2; 500][..]);
        assert_eq!(
            r.append(&[3; 3000], 4096, &mut c),
            3000,
            "grows keeping order"
        );
        let mut all = vec![0u8; 3600];
        assert_eq!(r.copy_out(0, &mut all), 3600);
        assert_eq!(&all[..100], &[1; 100][..]);
        assert_eq!(&all[600..], &[3; 3000][..]);
        assert_eq!(r.append(&[4; 1000], 4096, &mut c), 496, "limit");
        r.consume(r.len());
        r.release(&mut c);
        assert_eq!(r.allocated(), 0);
        assert_eq!(
            c.held_bytes(),
            2 * BATCH_BYTES,
            "the storage outgrown and the last went back to the cache (beside \
             the rest of the two classes' first batches)"
        );
    }

    #[test]
    fn regrows_to_what_the_last_busy_period_needed() {
        let mut r = ByteRing::new();
        let mut c = BufferCache::new(1 << 22);
        assert_eq!(r.append(&[7; 100_000], 1 << 20, &mut c), 100_000);
        assert_eq!(r.allocated(), 128 * 1024);
        r.consume(r.len());
        r.release(&mut c);
        assert_eq!(r.allocated(), 0, "an empty ring holds nothing");
        assert_eq!(r.append(&[8; 10], 1 << 20, &mut c), 10);
        assert_eq!(
            r.allocated(),
            128 * 1024,
            "a stream's next burst starts at the size the last one reached, not by doubling from 1 KB"
        );
        let mut out = [0u8; 10];
        assert_eq!(r.copy_out(0, &mut out), 10);
        assert_eq!(out, [8; 10]);
        // Periods that use little of the storage halve it each time.
        for want in [64 * 1024, 32 * 1024, 16 * 1024] {
            r.consume(r.len());
            r.release(&mut c);
            assert_eq!(r.append(&[9; 10], 1 << 20, &mut c), 10);
            assert_eq!(r.allocated(), want);
        }
    }

    #[test]
    fn reserve_in_place_then_commit() {
        let mut r = ByteRing::new();
        let mut c = BufferCache::new(1 << 20);
        let first = r.reserve_tail(300, 4096, &mut c);
        assert_eq!(first.len(), 300);
        first.copy_from_slice(&[5; 300]);
        let first_at = first.as_ptr() as usize;
        assert!(r.commit_reserved(200), "less than lent");
        assert_eq!(r.len(), 200);
        assert_eq!(r.reserved, 0);
        let second = r.reserve_tail(100, 4096, &mut c);
        assert_eq!(
            second.as_ptr() as usize,
            first_at + 200,
            "the next region starts where the committed bytes end"
        );
        second.copy_from_slice(&[6; 100]);
        assert!(!r.commit_reserved(101), "more than lent");
        assert!(r.commit_reserved(100));
        let mut out = [0u8; 300];
        assert_eq!(r.copy_out(0, &mut out), 300);
        assert_eq!(&out[..200], &[5; 200][..]);
        assert_eq!(&out[200..], &[6; 100][..]);
    }

    #[test]
    fn reserve_stops_at_the_wrap_and_limit() {
        let mut r = ByteRing::new();
        let mut c = BufferCache::new(1 << 20);
        assert_eq!(r.append(&[1; 1000], 1024, &mut c), 1000);
        r.consume(900);
        // Held: 100 bytes at 900..1000; free: 1000..1024 then 0..900.
        let tail = r.reserve_tail(500, 1024, &mut c);
        assert_eq!(tail.len(), 24, "up to the end of the storage");
        tail.copy_from_slice(&[2; 24]);
        assert!(r.commit_reserved(24));
        let wrapped = r.reserve_tail(500, 1024, &mut c);
        assert_eq!(wrapped.len(), 500, "then from the front");
        wrapped.copy_from_slice(&[3; 500]);
        assert!(r.commit_reserved(500));
        let mut out = vec![0u8; 624];
        assert_eq!(r.copy_out(0, &mut out), 624);
        assert_eq!(&out[..100], &[1; 100][..]);
        assert_eq!(&out[100..124], &[2; 24][..]);
        assert_eq!(&out[124..], &[3; 500][..]);
        assert_eq!(r.reserve_tail(1000, 1024, &mut c).len(), 400, "limit");
        assert!(r.reserve_tail(1, 624, &mut c).is_empty(), "full");
    }

    #[test]
    fn reservation_keeps_storage_and_append_ends_it() {
        let mut r = ByteRing::new();
        let mut c = BufferCache::new(1 << 20);
        assert_eq!(r.reserve_tail(10, 4096, &mut c).len(), 10);
        r.release(&mut c);
        assert_eq!(r.allocated(), 1024, "lent storage is not given back");
        assert_eq!(r.append(&[7; 4], 4096, &mut c), 4);
        assert_eq!(r.reserved, 0, "a copying append ends the reservation");
        assert!(!r.commit_reserved(1));
        r.consume(4);
        r.release(&mut c);
        assert_eq!(r.allocated(), 0);
    }

    #[test]
    fn write_beyond_then_commit() {
        let mut r = ByteRing::new();
        let mut c = BufferCache::new(1 << 20);
        r.reserve_total(2048, &mut c);
        r.write_at(100, &[9; 50]);
        r.write_at(0, &[8; 100]);
        r.commit(150);
        let mut out = [0u8; 150];
        r.copy_out(0, &mut out);
        assert_eq!(&out[..100], &[8; 100][..]);
        assert_eq!(&out[100..], &[9; 50][..]);
    }
}
