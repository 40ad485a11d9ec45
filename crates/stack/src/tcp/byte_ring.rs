//! A ring of bytes whose storage comes from the stack's [`BufferCache`] on
//! first use, grows by doubling, and goes back when the ring empties: a
//! connection that is not moving data holds no buffer memory.

use crate::tcp::buffer_cache::{BufferCache, MIN_RING};

#[derive(Debug, Default, Clone)]
pub struct ByteRing {
    storage: Vec<u8>,
    head: usize,
    len: usize,
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
    pub fn reserve_total(&mut self, total: usize, cache: &mut BufferCache) {
        if total <= self.storage.len() {
            return;
        }
        let new_cap = total.next_power_of_two().max(MIN_RING);
        if self.storage.is_empty() {
            // The common case: a ring that gave its storage back when it
            // emptied takes some again (every round trip of a ping-pong).
            self.storage = cache.take(new_cap);
            self.head = 0;
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
        if self.len == 0 && !self.storage.is_empty() {
            cache.give(core::mem::take(&mut self.storage));
            self.head = 0;
        }
    }

    /// Writes `data` at `offset` bytes past the head (at or beyond the held
    /// bytes), without making it held. The caller reserved the room.
    pub fn write_at(&mut self, offset: usize, data: &[u8]) {
        let cap = self.storage.len();
        if cap == 0 || offset + data.len() > cap {
            return;
        }
        let start = (self.head + offset) % cap;
        let first = data.len().min(cap - start);
        self.storage[start..start + first].copy_from_slice(&data[..first]);
        self.storage[..data.len() - first].copy_from_slice(&data[first..]);
    }

    /// Counts `n` bytes written past the held ones as held.
    pub fn commit(&mut self, n: usize) {
        self.len = (self.len + n).min(self.storage.len());
    }

    /// Appends as much of `data` as fits under `limit` held bytes.
    pub fn append(&mut self, data: &[u8], limit: usize, cache: &mut BufferCache) -> usize {
        let n = data.len().min(limit.saturating_sub(self.len));
        if n == 0 {
            return 0;
        }
        self.reserve_total(self.len + n, cache);
        self.write_at(self.len, &data[..n]);
        self.len += n;
        n
    }

    /// Copies held bytes starting `offset` past the head into `dst`.
    pub fn copy_out(&self, offset: usize, dst: &mut [u8]) -> usize {
        let cap = self.storage.len();
        let n = dst.len().min(self.len.saturating_sub(offset));
        if n == 0 {
            return 0;
        }
        let start = (self.head + offset) % cap;
        let first = n.min(cap - start);
        dst[..first].copy_from_slice(&self.storage[start..start + first]);
        dst[first..n].copy_from_slice(&self.storage[..n - first]);
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

    /// Drops `n` bytes from the head.
    pub fn consume(&mut self, n: usize) {
        let n = n.min(self.len);
        if self.storage.is_empty() {
            return;
        }
        self.head = (self.head + n) % self.storage.len();
        self.len -= n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            1024 + 4096,
            "the storage outgrown and the last went back to the cache"
        );
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
