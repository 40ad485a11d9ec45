//! A per-stack cache of ring storage by size class (DESIGN.md, Memory: a
//! per-core cache in front of allocation).  A connection's rings give their
//! storage back when they empty and take it again when data comes, so an
//! idle connection holds no buffer memory, and a busy one neither zeroes
//! nor frees memory on every round trip.

/// The smallest ring storage.
pub const MIN_RING: usize = 1024;
/// Size classes: 1 KB << k.
const CLASSES: usize = 17;

#[derive(Debug)]
pub struct BufferCache {
    classes: Vec<Vec<Vec<u8>>>,
    held_bytes: usize,
    max_bytes: usize,
    /// Some ring emptied and kept its storage: a trim scan is due.
    parked: bool,
}

impl BufferCache {
    /// A cache holding at most `max_bytes` of idle storage.
    pub fn new(max_bytes: usize) -> Self {
        BufferCache {
            classes: (0..CLASSES).map(|_| Vec::new()).collect(),
            held_bytes: 0,
            max_bytes,
            parked: false,
        }
    }

    fn class(size: usize) -> Option<usize> {
        let k = (size / MIN_RING).trailing_zeros() as usize;
        (size.is_power_of_two() && size >= MIN_RING && k < CLASSES).then_some(k)
    }

    /// Storage of `size` bytes (a power of two, at least [`MIN_RING`]); its
    /// contents are whatever they were.
    #[inline]
    pub fn take(&mut self, size: usize) -> Vec<u8> {
        if let Some(v) = Self::class(size).and_then(|k| self.classes[k].pop()) {
            self.held_bytes -= v.len();
            return v;
        }
        vec![0u8; size]
    }

    /// Takes storage back, or frees it when the cache is full.
    pub fn give(&mut self, storage: Vec<u8>) {
        let Some(k) = Self::class(storage.len()) else {
            return;
        };
        if self.held_bytes + storage.len() <= self.max_bytes {
            self.held_bytes += storage.len();
            self.classes[k].push(storage);
        }
    }

    /// Notes that a ring emptied and kept its storage.
    pub fn note_parked(&mut self) {
        self.parked = true;
    }

    /// Whether a ring may hold storage while empty.
    pub fn parked(&self) -> bool {
        self.parked
    }

    /// After a trim scan: whether some ring still waits for the next.
    pub fn set_parked(&mut self, parked: bool) {
        self.parked = parked;
    }

    /// Bytes of idle storage held.
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_by_class_and_stays_bounded() {
        let mut c = BufferCache::new(8192);
        let a = c.take(4096);
        assert_eq!(a.len(), 4096);
        c.give(a);
        assert_eq!(c.held_bytes(), 4096);
        let b = c.take(4096);
        assert_eq!(c.held_bytes(), 0, "the same storage came back");
        c.give(b);
        c.give(vec![0; 4096]);
        c.give(vec![0; 4096]);
        assert_eq!(c.held_bytes(), 8192, "the third did not fit and was freed");
        c.give(vec![0; 3000]);
        assert_eq!(c.held_bytes(), 8192, "odd sizes are not kept");
        assert_eq!(c.take(2048).len(), 2048);
    }
}
