//! TCP connections by four-tuple: the lookup every received segment makes.
//!
//! IPv4 connections live in an open-addressed table of 16-byte buckets
//! (both addresses in one word, both ports and the socket's slot in
//! another), probed linearly from a keyed hash of one multiplication, and
//! kept at most half full; a removal shifts the following entries back
//! rather than leaving a tombstone, so a lookup never walks past dead
//! entries. A hit costs the hash, one bucket's two compares and the slot,
//! where a general keyed map hashes three words, probes a control group and
//! compares a 48-byte key. IPv6 connections, whose key is four times
//! larger, stay in a keyed map.

use crate::rand::{KeyedMap, KeyedState};
use crate::socket::table::ConnKey;

/// A bucket's slot when it holds no connection.
const EMPTY: u32 = u32::MAX;
/// Buckets of a new table (a power of two).
const MIN_BUCKETS: usize = 16;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Local address in the high half, remote in the low.
    addrs: u64,
    /// Local port in the high half, remote in the low.
    ports: u32,
    /// The connection's socket slot, or [`EMPTY`].
    slot: u32,
}

const EMPTY_BUCKET: Bucket = Bucket {
    addrs: 0,
    ports: 0,
    slot: EMPTY,
};

/// IPv4 connections: see the module doc.
#[derive(Debug)]
struct V4Table {
    buckets: Vec<Bucket>,
    len: usize,
    hasher: KeyedState,
}

impl V4Table {
    fn new(hasher: KeyedState) -> Self {
        V4Table {
            buckets: vec![EMPTY_BUCKET; MIN_BUCKETS],
            len: 0,
            hasher,
        }
    }

    /// The bucket count less one: the table always has a power of two
    /// of at least [`MIN_BUCKETS`], so every index masked with it is in
    /// bounds.
    #[inline(always)]
    fn mask(&self) -> usize {
        self.buckets.len().saturating_sub(1)
    }

    /// Where the probe for a key starts.
    #[inline(always)]
    fn home(&self, addrs: u64, ports: u32) -> usize {
        self.hasher.hash_pair(addrs, u64::from(ports)) as usize & self.mask()
    }

    /// The bucket holding the key, if any, and its slot.
    #[inline(always)]
    fn find(&self, addrs: u64, ports: u32) -> Option<(usize, u32)> {
        // The mask taken from the length itself, so that every index is
        // known to be in bounds.
        let mask = self.buckets.len().checked_sub(1)?;
        let mut i = self.hasher.hash_pair(addrs, u64::from(ports)) as usize & mask;
        // At most half full, so an empty bucket ends every probe.
        loop {
            let b = &self.buckets[i & mask];
            if b.slot == EMPTY {
                return None;
            }
            if b.addrs == addrs && b.ports == ports {
                return Some((i & mask, b.slot));
            }
            i = (i & mask) + 1;
        }
    }

    #[inline(always)]
    fn get(&self, addrs: u64, ports: u32) -> Option<u32> {
        self.find(addrs, ports).map(|(_, slot)| slot)
    }

    /// Sets the key's slot; the slot it had, if any.
    fn insert(&mut self, addrs: u64, ports: u32, slot: u32) -> Option<u32> {
        if let Some((i, _)) = self.find(addrs, ports) {
            return Some(core::mem::replace(&mut self.buckets[i].slot, slot));
        }
        if (self.len + 1) * 2 > self.buckets.len() {
            self.grow();
        }
        self.place(Bucket { addrs, ports, slot });
        self.len += 1;
        None
    }

    /// Puts a bucket known to be absent in the first empty bucket of its
    /// probe.
    fn place(&mut self, b: Bucket) {
        let mut i = self.home(b.addrs, b.ports);
        while self.buckets[i].slot != EMPTY {
            i = (i + 1) & self.mask();
        }
        self.buckets[i] = b;
    }

    fn grow(&mut self) {
        let n = self.buckets.len() * 2;
        let old = core::mem::replace(&mut self.buckets, vec![EMPTY_BUCKET; n]);
        for b in old.into_iter().filter(|b| b.slot != EMPTY) {
            self.place(b);
        }
    }

    /// Removes the key; its slot, if it was there.
    fn remove(&mut self, addrs: u64, ports: u32) -> Option<u32> {
        let (mut hole, slot) = self.find(addrs, ports)?;
        // Backward shift: each later entry of the run whose probe passes
        // the hole moves into it, so no probe meets an empty bucket before
        // its key.
        let mask = self.mask();
        let mut j = (hole + 1) & mask;
        loop {
            let b = self.buckets[j];
            if b.slot == EMPTY {
                break;
            }
            let home = self.home(b.addrs, b.ports);
            if j.wrapping_sub(home) & mask >= j.wrapping_sub(hole) & mask {
                self.buckets[hole] = b;
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.buckets[hole] = EMPTY_BUCKET;
        self.len -= 1;
        Some(slot)
    }
}

/// The connection table of a stack (see the module doc).
#[derive(Debug)]
pub(crate) struct ConnTable {
    v4: V4Table,
    v6: KeyedMap<ConnKey, u32>,
}

impl ConnTable {
    pub(crate) fn new(v4: KeyedState, v6: KeyedState) -> Self {
        ConnTable {
            v4: V4Table::new(v4),
            v6: KeyedMap::with_hasher(v6),
        }
    }

    /// The slot of the connection with this key.
    #[inline(always)]
    pub(crate) fn get(&self, key: &ConnKey) -> Option<u32> {
        match key.v4_words() {
            Some((addrs, ports)) => self.v4.get(addrs, ports),
            None => self.v6.get(key).copied(),
        }
    }

    pub(crate) fn contains_key(&self, key: &ConnKey) -> bool {
        self.get(key).is_some()
    }

    /// Sets the slot of the connection with this key; the one it had.
    pub(crate) fn insert(&mut self, key: ConnKey, slot: u32) -> Option<u32> {
        match key.v4_words() {
            Some((addrs, ports)) => self.v4.insert(addrs, ports, slot),
            None => self.v6.insert(key, slot),
        }
    }

    /// Forgets the connection with this key; the slot it had.
    pub(crate) fn remove(&mut self, key: &ConnKey) -> Option<u32> {
        match key.v4_words() {
            Some((addrs, ports)) => self.v4.remove(addrs, ports),
            None => self.v6.remove(key),
        }
    }

    /// Bytes the table takes, used or not (a keyed map's entry and its
    /// control byte for IPv6).
    pub(crate) fn bytes(&self) -> usize {
        self.v4.buckets.len() * core::mem::size_of::<Bucket>()
            + self.v6.capacity() * (core::mem::size_of::<(ConnKey, u32)>() + 1)
    }

    /// What [`ConnTable::bytes`] grows by when one more connection is put
    /// in (at most: either family's growth, as the family is not known).
    pub(crate) fn growth_for_one_more(&self) -> usize {
        let v4 = if (self.v4.len + 1) * 2 > self.v4.buckets.len() {
            self.v4.buckets.len() * core::mem::size_of::<Bucket>()
        } else {
            0
        };
        let v6 = if self.v6.len() == self.v6.capacity() {
            self.v6.capacity().max(4) * (core::mem::size_of::<(ConnKey, u32)>() + 1)
        } else {
            0
        };
        v4 + v6
    }

    /// Connections in the table.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.v4.len + self.v6.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

    fn v4(local: u32, lport: u16, remote: u32, rport: u16) -> ConnKey {
        ConnKey::v4(
            (Ipv4Addr::from(local), lport),
            (Ipv4Addr::from(remote), rport),
        )
    }

    fn table() -> ConnTable {
        ConnTable::new(KeyedState::new(0x1234, 0x5678), KeyedState::new(9, 10))
    }

    #[test]
    fn insert_get_replace_remove() {
        let mut t = table();
        let a = v4(0x0a63_0001, 80, 0x0a63_0002, 40000);
        let b = v4(0x0a63_0001, 80, 0x0a63_0002, 40001);
        assert_eq!(t.get(&a), None);
        assert_eq!(t.insert(a, 7), None);
        assert_eq!(t.insert(b, 8), None);
        assert_eq!((t.get(&a), t.get(&b), t.len()), (Some(7), Some(8), 2));
        assert_eq!(t.insert(a, 9), Some(7));
        assert_eq!((t.get(&a), t.len()), (Some(9), 2));
        assert_eq!(t.remove(&a), Some(9));
        assert_eq!(t.remove(&a), None);
        assert_eq!((t.get(&a), t.get(&b), t.len()), (None, Some(8), 1));
    }

    #[test]
    fn v4_and_v6_keys_with_the_same_bits_differ() {
        let mut t = table();
        let four = v4(1, 2, 3, 4);
        let six = ConnKey::new(
            SocketAddr::new(Ipv6Addr::from(1u128).into(), 2),
            SocketAddr::new(Ipv6Addr::from(3u128).into(), 4),
        );
        t.insert(four, 1);
        assert!(!t.contains_key(&six));
        t.insert(six, 2);
        assert_eq!((t.get(&four), t.get(&six), t.len()), (Some(1), Some(2), 2));
        assert_eq!(t.remove(&six), Some(2));
        assert_eq!(t.get(&four), Some(1));
    }

    /// Against a model, through growth and removals in every order: every
    /// key present is found with its slot, every key removed is not, and
    /// the table never fills.
    #[test]
    fn matches_a_model_through_growth_and_removal() {
        use std::collections::HashMap;
        let mut t = table();
        let mut model = HashMap::new();
        let mut rng = crate::rand::Rng::new(42);
        for step in 0..40_000u32 {
            // Few distinct addresses and ports, so that runs collide.
            let key = v4(
                0x0a63_0000 | (rng.next_u32() % 4),
                (rng.next_u32() % 64) as u16,
                0x0a63_0100 | (rng.next_u32() % 4),
                (rng.next_u32() % 64) as u16,
            );
            if rng.next_u32().is_multiple_of(3) {
                assert_eq!(t.remove(&key), model.remove(&key), "step {step}");
            } else {
                assert_eq!(t.insert(key, step), model.insert(key, step), "step {step}");
            }
            assert_eq!(t.len(), model.len());
            assert!(t.v4.len * 2 <= t.v4.buckets.len());
        }
        for (k, v) in &model {
            assert_eq!(t.get(k), Some(*v));
        }
        let live = t.v4.buckets.iter().filter(|b| b.slot != EMPTY).count();
        assert_eq!(live, model.len());
    }
}
