//! Path MTU per destination: IPv6's (RFC 8201) lowered by packet too big,
//! never below 1280; IPv4's (RFC 1191) by fragmentation needed, never below
//! a floor (see `PMTU4_MIN`).  Forgotten after a while so that a path that
//! widened is found again.

use core::hash::Hash;
use core::net::Ipv6Addr;

use crate::rand::{KeyedMap, KeyedState};
use crate::time::{Duration, Instant};

/// How long a lowered path MTU holds (RFC 8201 5.3: at least five
/// minutes; ten, as Linux and FreeBSD).
pub const PMTU_TIMEOUT: Duration = Duration::from_secs(600);

/// The smallest IPv4 path MTU a fragmentation needed can set: Linux's
/// `min_pmtu` (552).  RFC 791's 68 would let a forged error make every
/// segment tiny (RFC 5927 7.3).
pub const PMTU4_MIN: usize = 552;

/// The lowered path MTUs, bounded, keyed by destination address.
#[derive(Debug)]
pub struct PathMtuCache<A = Ipv6Addr> {
    entries: KeyedMap<A, (usize, Instant)>,
    limit: usize,
    /// No MTU below this is kept (a lower figure is raised to it).
    floor: usize,
    /// Counts changes, for paths cached from it.
    epoch: u64,
}

impl PathMtuCache<Ipv6Addr> {
    /// IPv6's: never below 1280 (RFC 8200 5).
    pub fn new(limit: usize, hasher: KeyedState) -> Self {
        PathMtuCache::with_floor(limit, wire::ipv6::MIN_MTU, hasher)
    }
}

impl<A: Copy + Eq + Hash> PathMtuCache<A> {
    /// A cache that keeps no MTU below `floor`.
    pub fn with_floor(limit: usize, floor: usize, hasher: KeyedState) -> Self {
        PathMtuCache {
            entries: KeyedMap::with_hasher(hasher),
            limit,
            floor,
            epoch: 0,
        }
    }

    /// The lowered MTU toward `dst`, if one holds at `now`.
    pub fn get(&self, dst: A, now: Instant) -> Option<usize> {
        self.entries
            .get(&dst)
            .filter(|(_, until)| now < *until)
            .map(|(mtu, _)| *mtu)
    }

    /// When the lowered MTU toward `dst` lapses, if one holds at `now`:
    /// what was cached along the path holds until then.
    pub fn expiry(&self, dst: A, now: Instant) -> Option<Instant> {
        self.entries
            .get(&dst)
            .map(|(_, until)| *until)
            .filter(|until| now < *until)
    }

    /// A packet too big (or fragmentation needed) said `mtu` toward
    /// `dst`: keeps the lower of it (at least the floor) and what is
    /// known.  Returns whether the path MTU went down.
    pub fn lower(&mut self, dst: A, mtu: usize, link_mtu: usize, now: Instant) -> bool {
        let mtu = mtu.max(self.floor);
        let current = self.get(dst, now).unwrap_or(link_mtu);
        if mtu >= current {
            return false;
        }
        if self.entries.len() >= self.limit && !self.entries.contains_key(&dst) {
            self.entries.retain(|_, (_, until)| now < *until);
            if self.entries.len() >= self.limit {
                // Full of live entries: forget one, which then learns its
                // MTU again from the next packet too big.
                if let Some(k) = self.entries.keys().next().copied() {
                    self.entries.remove(&k);
                }
            }
        }
        self.entries.insert(dst, (mtu, now + PMTU_TIMEOUT));
        self.epoch += 1;
        true
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rand::Rng;

    #[test]
    fn lowers_never_below_the_minimum_and_expires() {
        let mut c = PathMtuCache::new(2, KeyedState::from_rng(&mut Rng::new(1)));
        let a: Ipv6Addr = "fd99::1".parse().unwrap();
        let t0 = Instant::ZERO;
        assert!(c.lower(a, 1400, 1500, t0));
        assert_eq!(c.get(a, t0), Some(1400));
        assert!(
            !c.lower(a, 1450, 1500, t0),
            "a higher figure never raises it"
        );
        assert!(c.lower(a, 600, 1500, t0));
        assert_eq!(c.get(a, t0), Some(1280));
        assert_eq!(c.get(a, t0 + PMTU_TIMEOUT), None);
        assert!(!c.lower(a, 1600, 1500, t0 + PMTU_TIMEOUT));
    }

    #[test]
    fn ipv4_floor() {
        let mut c = PathMtuCache::with_floor(2, PMTU4_MIN, KeyedState::from_rng(&mut Rng::new(1)));
        let a = core::net::Ipv4Addr::new(10, 99, 1, 1);
        assert!(c.lower(a, 68, 1500, Instant::ZERO));
        assert_eq!(c.get(a, Instant::ZERO), Some(PMTU4_MIN));
    }

    #[test]
    fn stays_within_its_limit() {
        let mut c = PathMtuCache::new(2, KeyedState::from_rng(&mut Rng::new(1)));
        for i in 0..10u16 {
            c.lower(
                Ipv6Addr::new(0xfd99, 0, 0, 0, 0, 0, 0, i),
                1300,
                1500,
                Instant::ZERO,
            );
        }
        assert!(c.len() <= 2);
    }
}
