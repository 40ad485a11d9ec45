//! [`RingTable`]: the link's own bookkeeping per ring position or per spare slot,
//! looked up on every frame without a bounds check.

/// A table of a power-of-two number of entries, one per ring position
/// (reached by a free-running position, masked with the table's own length)
/// or one per spare slot (reached by its number, checked).
pub(super) struct RingTable<T> {
    entries: Box<[T]>,
    /// `entries.len() - 1`, kept so that masking a position is one
    /// instruction.
    mask: u32,
}

impl<T> RingTable<T> {
    /// `len` entries made by `f`. Panics unless `len` is a power of two.
    pub fn new(len: usize, f: impl FnMut(usize) -> T) -> RingTable<T> {
        assert!(len.is_power_of_two(), "ring tables have 2^n entries");
        let mask = u32::try_from(len - 1).expect("ring tables have at most 2^32 entries");
        RingTable {
            entries: (0..len).map(f).collect(),
            mask,
        }
    }

    /// The index of free-running position `pos`.
    #[inline(always)]
    fn index(&self, pos: u32) -> usize {
        // `mask` is `len - 1` for a nonzero power of two `len` (checked in
        // `new`; a boxed slice never changes length), so the result is
        // below `len`.
        (pos & self.mask) as usize
    }

    /// The entry of position `pos` (masked).
    #[inline(always)]
    pub fn at(&self, pos: u32) -> &T {
        let i = self.index(pos);
        // SAFETY: `i < len` (see `index`).
        unsafe { self.entries.get_unchecked(i) }
    }

    /// Entry `i`, if there is one (a spare's number, from a frame).
    #[inline(always)]
    pub fn get(&self, i: usize) -> Option<&T> {
        self.entries.get(i)
    }

    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.entries.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::RingTable;

    #[test]
    fn positions_wrap_onto_the_entries() {
        let t = RingTable::new(8, |i| i);
        assert_eq!(*t.at(3), 3);
        assert_eq!(*t.at(8 + 5), 5);
        assert_eq!(*t.at(u32::MAX), 7);
        assert_eq!(t.get(7), Some(&7));
        assert_eq!(t.get(8), None);
    }

    #[test]
    #[should_panic(expected = "2^n")]
    fn a_length_not_a_power_of_two_is_refused() {
        let _ = RingTable::new(6, |i| i);
    }
}
