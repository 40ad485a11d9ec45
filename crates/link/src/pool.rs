//! A per-engine pool of fixed-size packet buffers.
//!
//! Every buffer is allocated when the pool is made; afterwards the pool only
//! moves boxes between its free list and its users, so the fast path never
//! allocates. The free list is a stack (`Vec` with its full capacity reserved
//! up front), which also keeps recently used, cache-warm buffers in use.
//!
//! The last `reserve` free buffers are kept back from [`PacketPool::alloc`]:
//! only [`PacketPool::alloc_reserved`] may take them. Backends use the reserve
//! for NIC receive, and the engine for ARP and ICMP replies, so a pool drained
//! by socket buffers never silences the host (DESIGN.md, "Memory").

use crate::PacketBuffer;

/// Counters and levels of a pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffers the pool was made with.
    pub capacity: usize,
    /// Buffers on the free list now.
    pub available: usize,
    /// Times a buffer was wanted and none could be given (plain `alloc` with
    /// only the reserve left, or `alloc_reserved` with nothing left).
    pub exhausted: u64,
    /// Buffers kept back for `alloc_reserved`.
    pub reserve: usize,
    /// Times `alloc_reserved` gave a buffer from the reserve.
    pub reserve_taken: u64,
    /// Buffers handed to `free` that did not belong here (wrong size, or the
    /// free list already full) and were dropped.
    pub foreign_freed: u64,
}

/// A frame buffer from a [`PacketPool`].
///
/// A fresh buffer has length 0: call [`PacketBuffer::set_len`] with the
/// frame's length before writing into [`PacketBuffer::data_mut`].
#[derive(Debug)]
pub struct PoolBuf {
    bytes: Box<[u8]>,
    len: usize,
    csum_partial: bool,
    gso_size: u16,
}

impl PoolBuf {
    /// Marks the frame's L4 checksum as partial (left for the NIC), or not.
    /// Backends set it on receive; the engine may clear it.
    pub fn set_csum_partial(&mut self, partial: bool) {
        self.csum_partial = partial;
    }

    /// The whole buffer, past the frame's length too, for backends that
    /// receive into it before they know the length.
    pub fn storage_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }

    /// Copies `frame` into the buffer and sets the length to match. Returns
    /// false (and changes nothing) when the frame does not fit.
    pub fn fill_from(&mut self, frame: &[u8]) -> bool {
        if frame.len() > self.bytes.len() {
            return false;
        }
        self.bytes[..frame.len()].copy_from_slice(frame);
        self.len = frame.len();
        true
    }
}

impl PacketBuffer for PoolBuf {
    fn data(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    fn data_mut(&mut self) -> &mut [u8] {
        &mut self.bytes[..self.len]
    }

    fn set_len(&mut self, len: usize) {
        assert!(
            len <= self.bytes.len(),
            "PoolBuf::set_len({len}) past capacity {}",
            self.bytes.len()
        );
        self.len = len;
    }

    fn capacity(&self) -> usize {
        self.bytes.len()
    }

    fn csum_partial(&self) -> bool {
        self.csum_partial
    }

    fn set_csum_partial(&mut self, partial: bool) {
        self.csum_partial = partial;
    }

    fn gso_size(&self) -> u16 {
        self.gso_size
    }

    fn set_gso_size(&mut self, size: u16) {
        self.gso_size = size;
    }
}

/// A fixed set of equally sized buffers, all allocated at creation.
#[derive(Debug)]
pub struct PacketPool {
    free: Vec<Box<[u8]>>,
    buf_size: usize,
    capacity: usize,
    reserve: usize,
    exhausted: u64,
    reserve_taken: u64,
    foreign_freed: u64,
}

impl PacketPool {
    /// Makes a pool of `count` buffers of `buf_size` bytes each, with no
    /// reserve.
    pub fn new(buf_size: usize, count: usize) -> PacketPool {
        PacketPool::with_reserve(buf_size, count, 0)
    }

    /// Makes a pool of `count` buffers of `buf_size` bytes, keeping the last
    /// `reserve` of them (at most `count`) for [`PacketPool::alloc_reserved`].
    pub fn with_reserve(buf_size: usize, count: usize, reserve: usize) -> PacketPool {
        let mut free = Vec::with_capacity(count);
        for _ in 0..count {
            free.push(vec![0u8; buf_size].into_boxed_slice());
        }
        PacketPool {
            free,
            buf_size,
            capacity: count,
            reserve: reserve.min(count),
            exhausted: 0,
            reserve_taken: 0,
            foreign_freed: 0,
        }
    }

    /// The size of every buffer.
    pub fn buf_size(&self) -> usize {
        self.buf_size
    }

    /// Buffers on the free list now.
    pub fn available(&self) -> usize {
        self.free.len()
    }

    /// Takes a buffer, leaving the reserve alone. `None` (counted) when only
    /// the reserve is left.
    pub fn alloc(&mut self) -> Option<PoolBuf> {
        if self.free.len() <= self.reserve {
            self.exhausted += 1;
            return None;
        }
        self.pop()
    }

    /// Takes a buffer, from the reserve if need be. `None` (counted) when the
    /// pool is empty.
    pub fn alloc_reserved(&mut self) -> Option<PoolBuf> {
        if self.free.is_empty() {
            self.exhausted += 1;
            return None;
        }
        if self.free.len() <= self.reserve {
            self.reserve_taken += 1;
        }
        self.pop()
    }

    fn pop(&mut self) -> Option<PoolBuf> {
        self.free.pop().map(|bytes| PoolBuf {
            bytes,
            len: 0,
            csum_partial: false,
            gso_size: 0,
        })
    }

    /// Returns a buffer to the free list. A buffer of another size, or one
    /// more than the pool was made with, is dropped and counted.
    pub fn free(&mut self, buf: PoolBuf) {
        if buf.bytes.len() != self.buf_size || self.free.len() >= self.capacity {
            self.foreign_freed += 1;
            return;
        }
        // Never reallocates: the vector's capacity is `self.capacity`.
        self.free.push(buf.bytes);
    }

    /// Counters and levels.
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            capacity: self.capacity,
            available: self.free.len(),
            exhausted: self.exhausted,
            reserve: self.reserve,
            reserve_taken: self.reserve_taken,
            foreign_freed: self.foreign_freed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_until_exhausted_is_counted() {
        let mut pool = PacketPool::new(256, 4);
        let bufs: Vec<_> = (0..4).map(|_| pool.alloc().unwrap()).collect();
        assert_eq!(pool.available(), 0);
        assert!(pool.alloc().is_none());
        assert!(pool.alloc().is_none());
        let stats = pool.stats();
        assert_eq!(stats.exhausted, 2);
        assert_eq!(stats.capacity, 4);
        for b in bufs {
            pool.free(b);
        }
        assert_eq!(pool.available(), 4);
    }

    #[test]
    fn reserve_is_left_to_alloc_reserved() {
        let mut pool = PacketPool::with_reserve(128, 5, 2);
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(pool.alloc().unwrap());
        }
        assert!(
            pool.alloc().is_none(),
            "plain alloc must not touch the reserve"
        );
        assert_eq!(pool.stats().exhausted, 1);
        held.push(pool.alloc_reserved().unwrap());
        held.push(pool.alloc_reserved().unwrap());
        assert!(pool.alloc_reserved().is_none());
        let stats = pool.stats();
        assert_eq!(stats.reserve_taken, 2);
        assert_eq!(stats.exhausted, 2);
        for b in held {
            pool.free(b);
        }
        assert_eq!(pool.available(), 5);
        assert!(pool.alloc().is_some());
    }

    #[test]
    fn recycled_buffer_is_reset() {
        let mut pool = PacketPool::new(64, 1);
        let mut b = pool.alloc().unwrap();
        assert_eq!(b.data().len(), 0);
        assert_eq!(b.capacity(), 64);
        b.set_len(10);
        b.data_mut().fill(7);
        b.set_csum_partial(true);
        pool.free(b);
        let b = pool.alloc().unwrap();
        assert_eq!(b.data().len(), 0);
        assert!(!b.csum_partial());
    }

    #[test]
    fn foreign_buffers_are_dropped() {
        let mut small = PacketPool::new(64, 1);
        let mut big = PacketPool::new(128, 1);
        let b = small.alloc().unwrap();
        big.free(b);
        assert_eq!(big.stats().foreign_freed, 1);
        assert_eq!(big.available(), 1);
        let mut other = PacketPool::new(128, 1);
        let extra = other.alloc().unwrap();
        big.free(extra); // big is already full
        assert_eq!(big.stats().foreign_freed, 2);
        assert_eq!(big.available(), 1);
    }

    #[test]
    fn fill_from_checks_capacity() {
        let mut pool = PacketPool::new(8, 1);
        let mut b = pool.alloc().unwrap();
        assert!(!b.fill_from(&[0; 9]));
        assert!(b.fill_from(&[1, 2, 3]));
        assert_eq!(b.data(), &[1, 2, 3]);
    }

    #[test]
    #[should_panic]
    fn set_len_past_capacity_panics() {
        let mut pool = PacketPool::new(8, 1);
        let mut b = pool.alloc().unwrap();
        b.set_len(9);
    }
}
