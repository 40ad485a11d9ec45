//! Maps keyed by numbers the process chose itself (fd numbers, socket
//! handles), looked up several times per request (the event pump, epoll's
//! registrations): hashed by one multiply per word instead of SipHash.
//! SipHash guards a map against keys an attacker picks, at some twenty
//! times the cost; none of these keys come from the network.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Folds each word into the state with a rotate, an xor and a multiply by
/// an odd constant (the high bits, which the table's control bytes use,
/// depend on every bit of the key).
#[derive(Debug, Default, Clone, Copy)]
pub struct IntHasher(u64);

const K: u64 = 0x517c_c1b7_2722_0a95;

impl IntHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.add(u64::from(b));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u16(&mut self, n: u16) {
        self.add(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn write_i32(&mut self, n: i32) {
        self.add(u64::from(n as u32));
    }
}

/// A `HashMap` with [`IntHasher`].
pub type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hash};

    fn hash<T: Hash>(t: T) -> u64 {
        BuildHasherDefault::<IntHasher>::default().hash_one(t)
    }

    #[test]
    fn distinct_small_keys_spread_over_high_and_low_bits() {
        let hashes: Vec<u64> = (0..1024i32).map(|fd| hash((fd, 3i32))).collect();
        let mut top: Vec<u64> = hashes.iter().map(|h| h >> 57).collect();
        top.sort_unstable();
        top.dedup();
        assert!(top.len() > 100, "top 7 bits take {} values", top.len());
        let mut low: Vec<u64> = hashes.iter().map(|h| h & 1023).collect();
        low.sort_unstable();
        low.dedup();
        assert!(low.len() > 600, "low 10 bits take {} values", low.len());
        assert_ne!(hash((1i32, 2i32)), hash((2i32, 1i32)));
    }

    #[test]
    fn a_map_keeps_its_entries() {
        let mut m: IntMap<(i32, i32), u32> = IntMap::default();
        for i in 0..5000 {
            m.insert((i, i % 7), i as u32);
        }
        assert!((0..5000).all(|i| m.get(&(i, i % 7)) == Some(&(i as u32))));
        assert_eq!(m.get(&(1, 2)), None);
    }
}
