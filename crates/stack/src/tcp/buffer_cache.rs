//! A per-stack cache of ring storage by size class (DESIGN.md, Memory: a
//! per-core cache in front of allocation).  A connection's rings give their
//! storage back when they empty and take it again when data comes, so an
//! idle connection holds no buffer memory, and a busy one neither zeroes
//! nor frees memory on every round trip.
//!
//! The cache itself decays: storage that sat in it through a whole
//! [`BufferCache::decay`] period (the least it held over the period) is
//! freed, so a burst that once had every connection's rings in flight
//! (a million connections saying hello) does not pin their storage after
//! they go idle; a steady ping-pong keeps what it takes again each period.

/// The smallest ring storage.
pub const MIN_RING: usize = 1024;
/// Storage allocated at once when a class runs dry (see
/// [`BufferCache::refill`]).
pub(crate) const BATCH_BYTES: usize = 64 << 10;
/// Size classes: 1 KB << k.
const CLASSES: usize = 17;

#[derive(Debug)]
pub struct BufferCache {
    classes: Vec<Vec<Vec<u8>>>,
    held_bytes: usize,
    max_bytes: usize,
    /// Some ring emptied and kept its storage, and its connection has not
    /// yet claimed it (joined the stack's trim list).
    parked: bool,
    /// The least `held_bytes` since the last decay: storage nobody took
    /// in the period.
    low_water: usize,
    /// Bytes given back to the allocator by decay, since the start.
    released_bytes: u64,
    /// Bytes of storage taken and not given back: what the rings hold
    /// (the engine's TCP memory budget counts it).
    lent_bytes: usize,
}

impl BufferCache {
    /// A cache holding at most `max_bytes` of idle storage.
    pub fn new(max_bytes: usize) -> Self {
        BufferCache {
            classes: (0..CLASSES).map(|_| Vec::new()).collect(),
            held_bytes: 0,
            max_bytes,
            parked: false,
            low_water: 0,
            released_bytes: 0,
            lent_bytes: 0,
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
        self.lent_bytes += size;
        if let Some(v) = Self::class(size).and_then(|k| self.classes[k].pop()) {
            self.held_bytes -= v.len();
            self.low_water = self.low_water.min(self.held_bytes);
            return v;
        }
        self.refill(size);
        vec![0u8; size]
    }

    /// An empty class is refilled with [`BATCH_BYTES`] of storage at once:
    /// allocated together, it lies together in the heap, not between the
    /// connections allocated meanwhile, so when the cache frees it the
    /// pages it spans come free whole and go back to the system (see
    /// `runtime::heap`). What is not taken decays.
    #[cold]
    fn refill(&mut self, size: usize) {
        let Some(k) = Self::class(size) else {
            return;
        };
        for _ in 1..BATCH_BYTES / size {
            if self.held_bytes + size > self.max_bytes {
                break;
            }
            self.classes[k].push(vec![0u8; size]);
            self.held_bytes += size;
        }
    }

    /// Takes storage back, or frees it when the cache is full.
    pub fn give(&mut self, storage: Vec<u8>) {
        self.lent_bytes = self.lent_bytes.saturating_sub(storage.len());
        let Some(k) = Self::class(storage.len()) else {
            return;
        };
        if self.held_bytes + storage.len() <= self.max_bytes {
            self.held_bytes += storage.len();
            self.classes[k].push(storage);
        } else {
            self.released_bytes += storage.len() as u64;
        }
    }

    /// Notes that a ring emptied and kept its storage.
    pub fn note_parked(&mut self) {
        self.parked = true;
    }

    /// Whether a ring parked since the last claim.
    pub fn parked(&self) -> bool {
        self.parked
    }

    /// Claimed (false), or noted again.
    pub fn set_parked(&mut self, parked: bool) {
        self.parked = parked;
    }

    /// Bytes of storage the rings hold: taken, not yet given back.
    pub fn lent_bytes(&self) -> usize {
        self.lent_bytes
    }

    /// Bytes of idle storage held.
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Ends a decay period: frees the storage nobody took during it (at
    /// least the period's low-water mark, largest classes first) and
    /// starts the next. Returns the bytes freed.
    pub fn decay(&mut self) -> usize {
        let mut freed = 0;
        for class in self.classes.iter_mut().rev() {
            while freed < self.low_water {
                let Some(v) = class.pop() else { break };
                freed += v.len();
            }
        }
        self.held_bytes -= freed;
        self.released_bytes += freed as u64;
        self.low_water = self.held_bytes;
        freed
    }

    /// Bytes freed (by [`decay`](Self::decay), or given to a full cache)
    /// since the start (a caller
    /// that can return freed heap to the system watches it).
    pub fn released_bytes(&self) -> u64 {
        self.released_bytes
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
        assert_eq!(
            c.held_bytes(),
            8192,
            "the empty class was refilled up to the cap"
        );
        c.give(a);
        assert_eq!(c.held_bytes(), 8192, "a full cache frees what comes back");
        assert_eq!(c.released_bytes(), 4096);
        let b = c.take(4096);
        assert_eq!(c.held_bytes(), 4096, "taken from the cache");
        c.give(b);
        assert_eq!(c.held_bytes(), 8192);
        c.give(vec![0; 3000]);
        assert_eq!(c.held_bytes(), 8192, "odd sizes are not kept");
        assert_eq!(c.take(2048).len(), 2048);
        assert_eq!(c.held_bytes(), 8192, "no refill past the cap");
    }

    #[test]
    fn lent_bytes_follow_what_the_rings_hold_not_what_the_cache_keeps() {
        let mut c = BufferCache::new(8192);
        let a = c.take(4096);
        let b = c.take(1024);
        assert_eq!(
            c.lent_bytes(),
            5120,
            "the refill the cache keeps is not lent"
        );
        c.give(a);
        assert_eq!(c.lent_bytes(), 1024);
        c.give(b);
        assert_eq!(c.lent_bytes(), 0);
        c.give(vec![0; 2048]);
        assert_eq!(c.lent_bytes(), 0, "storage it never lent leaves no debt");
    }

    #[test]
    fn an_empty_class_is_refilled_with_a_batch() {
        let mut c = BufferCache::new(1 << 20);
        let _a = c.take(1024);
        assert_eq!(c.held_bytes(), BATCH_BYTES - 1024);
        let _b = c.take(16 << 10);
        assert_eq!(
            c.held_bytes(),
            BATCH_BYTES - 1024 + BATCH_BYTES - (16 << 10)
        );
        let _c = c.take(128 << 10);
        assert_eq!(
            c.held_bytes(),
            2 * BATCH_BYTES - 1024 - (16 << 10),
            "a class larger than a batch comes one at a time"
        );
    }

    #[test]
    fn decay_frees_what_sat_unused_through_a_period() {
        let mut c = BufferCache::new(1 << 20);
        for _ in 0..8 {
            c.give(vec![0; 1024]);
        }
        // The first period started empty: nothing sat through it.
        assert_eq!(c.decay(), 0);
        assert_eq!(c.held_bytes(), 8 * 1024);
        // A period where a ping-pong takes two and gives them back: six sat
        // unused through it and go; the two it uses stay.
        let (a, b) = (c.take(1024), c.take(1024));
        c.give(a);
        c.give(b);
        assert_eq!(c.decay(), 6 * 1024);
        assert_eq!(c.held_bytes(), 2 * 1024);
        assert_eq!(c.released_bytes(), 6 * 1024);
        // Nobody takes any more: the next period frees the rest.
        assert_eq!(c.decay(), 2 * 1024);
        assert_eq!(c.held_bytes(), 0);
        assert_eq!(c.released_bytes(), 8 * 1024);
    }
}
