//! A bounded queue of datagrams in one preallocated byte ring: receiving a
//! datagram copies it once and allocates nothing.
//!
//! Each datagram's bytes are contiguous.  A datagram that does not fit
//! between the newest one and the ring's end goes to the start, if the
//! oldest one has left room there.

use std::collections::VecDeque;

/// Where a datagram's bytes are, and what came with it.
#[derive(Debug, Clone, Copy)]
struct Slot<M> {
    offset: usize,
    len: usize,
    meta: M,
}

/// A ring of datagrams, each with metadata `M` (addresses).
#[derive(Debug)]
pub struct DatagramRing<M> {
    bytes: Box<[u8]>,
    slots: VecDeque<Slot<M>>,
    max_datagrams: usize,
}

impl<M: Copy> DatagramRing<M> {
    pub fn new(capacity: usize, max_datagrams: usize) -> Self {
        DatagramRing {
            bytes: vec![0u8; capacity].into_boxed_slice(),
            slots: VecDeque::with_capacity(max_datagrams),
            max_datagrams,
        }
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Payload bytes queued.
    pub fn queued_bytes(&self) -> usize {
        self.slots.iter().map(|s| s.len).sum()
    }

    /// Where `len` contiguous bytes fit, if anywhere.
    fn place(&self, len: usize) -> Option<usize> {
        let cap = self.bytes.len();
        let (front, back) = match (self.slots.front(), self.slots.back()) {
            (Some(f), Some(b)) => (f, b),
            _ => return (len <= cap).then_some(0),
        };
        let back_end = back.offset + back.len;
        if back.offset >= front.offset {
            // Not wrapped: free space after the newest and before the oldest.
            if cap - back_end >= len {
                Some(back_end)
            } else if front.offset >= len && len > 0 {
                Some(0)
            } else if len == 0 {
                Some(back_end)
            } else {
                None
            }
        } else {
            (front.offset - back_end >= len).then_some(back_end)
        }
    }

    /// Queues a datagram; `false` when it does not fit (the caller counts it).
    pub fn push(&mut self, data: &[u8], meta: M) -> bool {
        if self.slots.len() >= self.max_datagrams {
            return false;
        }
        let Some(offset) = self.place(data.len()) else {
            return false;
        };
        self.bytes[offset..offset + data.len()].copy_from_slice(data);
        self.slots.push_back(Slot {
            offset,
            len: data.len(),
            meta,
        });
        true
    }

    /// The oldest datagram's length and metadata.
    pub fn peek(&self) -> Option<(usize, M)> {
        self.slots.front().map(|s| (s.len, s.meta))
    }

    /// Copies the oldest datagram into `buf` (truncating) and leaves it.
    /// Returns (bytes copied, the datagram's full length, metadata).
    pub fn peek_into(&self, buf: &mut [u8]) -> Option<(usize, usize, M)> {
        let s = self.slots.front()?;
        let n = s.len.min(buf.len());
        buf[..n].copy_from_slice(&self.bytes[s.offset..s.offset + n]);
        Some((n, s.len, s.meta))
    }

    /// A new capacity: the datagrams queued move over, oldest first, as
    /// many as fit.
    pub fn resize(&mut self, capacity: usize, max_datagrams: usize) {
        let old = core::mem::replace(self, DatagramRing::new(capacity, max_datagrams));
        for s in &old.slots {
            if !self.push(&old.bytes[s.offset..s.offset + s.len], s.meta) {
                break;
            }
        }
    }

    /// Copies the oldest datagram into `buf` (truncating) and removes it.
    /// Returns (bytes copied, the datagram's full length, metadata).
    pub fn pop_into(&mut self, buf: &mut [u8]) -> Option<(usize, usize, M)> {
        let s = self.slots.pop_front()?;
        let n = s.len.min(buf.len());
        buf[..n].copy_from_slice(&self.bytes[s.offset..s.offset + n]);
        Some((n, s.len, s.meta))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_with_wraparound() {
        let mut r: DatagramRing<u32> = DatagramRing::new(100, 16);
        assert!(r.push(&[1; 40], 1));
        assert!(r.push(&[2; 40], 2));
        assert!(
            !r.push(&[3; 40], 3),
            "only 20 bytes at the end and none at the start"
        );
        let mut buf = [0u8; 64];
        assert_eq!(r.pop_into(&mut buf), Some((40, 40, 1)));
        assert!(buf[..40].iter().all(|&b| b == 1));
        assert!(r.push(&[3; 40], 3), "wraps to the start");
        assert!(
            !r.push(&[4; 1], 4),
            "nothing free between the newest and the oldest"
        );
        assert_eq!(r.pop_into(&mut buf), Some((40, 40, 2)));
        assert!(r.push(&[4; 50], 4));
        assert_eq!(r.pop_into(&mut buf), Some((40, 40, 3)));
        assert!(buf[..40].iter().all(|&b| b == 3));
        assert_eq!(r.pop_into(&mut buf[..10]), Some((10, 50, 4)));
        assert!(r.is_empty());
        assert!(
            r.push(&[5; 100], 5),
            "empty ring takes a full-size datagram"
        );
    }

    #[test]
    fn peek_and_resize_keep_datagrams() {
        let mut r: DatagramRing<u8> = DatagramRing::new(100, 16);
        assert!(r.push(&[1; 30], 1));
        assert!(r.push(&[2; 30], 2));
        let mut buf = [0u8; 10];
        assert_eq!(r.peek_into(&mut buf), Some((10, 30, 1)));
        assert_eq!(r.len(), 2, "peek leaves the datagram");
        r.resize(40, 4);
        assert_eq!(r.len(), 1, "only the oldest fits in 40 bytes");
        assert_eq!(r.pop_into(&mut buf), Some((10, 30, 1)));
        assert!(!r.push(&[3; 41], 3));
    }

    #[test]
    fn empty_datagrams_and_count_limit() {
        let mut r: DatagramRing<()> = DatagramRing::new(10, 3);
        assert!(r.push(&[], ()));
        assert!(r.push(&[9; 10], ()));
        assert!(r.push(&[], ()));
        assert!(!r.push(&[], ()), "count limit");
        let mut buf = [0u8; 10];
        assert_eq!(r.pop_into(&mut buf), Some((0, 0, ())));
        assert_eq!(r.pop_into(&mut buf), Some((10, 10, ())));
        assert_eq!(r.pop_into(&mut buf), Some((0, 0, ())));
        assert_eq!(r.pop_into(&mut buf), None);
        assert!(!r.push(&[0; 11], ()));
    }
}
