//! Path MTU per IPv6 destination (RFC 8201): lowered by packet too big,
//! never below 1280, forgotten after a while so that a path that widened
//! is found again.

use core::net::Ipv6Addr;

use crate::rand::{KeyedMap, KeyedState};
use crate::time::{Duration, Instant};

/// How long a lowered path MTU holds (RFC 8201 5.3: at least five
/// minutes; ten, as Linux and FreeBSD).
pub const PMTU_TIMEOUT: Duration = Duration::from_secs(600);

/// The lowered path MTUs, bounded.
#[derive(Debug)]
pub struct PathMtuCache {
    entries: KeyedMap<Ipv6Addr, (usize, Instant)>,
    limit: usize,
    /// Counts changes, for paths cached from it.
    epoch: u64,
}

impl PathMtuCache {
    pub fn new(limit: usize, hasher: KeyedState) -> Self {
        PathMtuCache {
            entries: KeyedMap::with_hasher(hasher),
            limit,
            epoch: 0,
        }
    }

    /// The lowered MTU toward `dst`, if one holds at `now`.
    pub fn get(&self, dst: Ipv6Addr, now: Instant) -> Option<usize> {
        self.entries
            .get(&dst)
            .filter(|(_, until)| now < *until)
            .map(|(mtu, _)| *mtu)
    }

    /// When the lowered MTU toward `dst` lapses, if one holds at `now`:
    /// what was cached along the path holds until then.
    pub fn expiry(&self, dst: Ipv6Addr, now: Instant) -> Option<Instant> {
        self.entries
            .get(&dst)
            .map(|(_, until)| *until)
            .filter(|until| now < *until)
    }

    /// A packet too big said `mtu` toward `dst`: keeps the lower of it
    /// (at least 1280, RFC 8200 5) and what is known.  Returns whether the
    /// path MTU went down.
    pub fn lower(&mut self, dst: Ipv6Addr, mtu: usize, link_mtu: usize, now: Instant) -> bool {
        let mtu = mtu.max(wire::ipv6::MIN_MTU);
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
