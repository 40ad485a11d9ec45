//! The neighbor cache (ARP now, NDP later): IP address -> link address, with
//! aging, retries and a bounded queue of packets waiting for resolution.

use std::collections::VecDeque;

use core::net::IpAddr;

use crate::iface::IfaceId;
use crate::rand::{KeyedMap, KeyedState};
use crate::time::{Duration, Instant};

/// Limits and timings of the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeighborConfig {
    pub max_entries: usize,
    pub max_hold: usize,
    pub max_age: Duration,
    pub retry_interval: Duration,
    pub max_retries: u32,
}

#[derive(Debug)]
enum State {
    /// Requests sent, no answer yet; packets wait here (an IP packet each,
    /// without its Ethernet header).
    Incomplete {
        sent: u32,
        next_retry: Instant,
        held: VecDeque<Vec<u8>>,
    },
    Reachable {
        mac: [u8; 6],
        expires: Instant,
    },
}

/// What [`NeighborCache::lookup`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    Found([u8; 6]),
    /// A resolution is under way.
    Pending,
    Missing,
}

/// What happened when a packet was held for resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Held {
    /// A new resolution began: send a request now.
    pub send_request: bool,
    /// The oldest held packet was dropped to make room.
    pub dropped_oldest: bool,
    /// Another entry was evicted to make room.
    pub evicted: bool,
}

/// What [`NeighborCache::learn`] did.
#[derive(Debug, Default)]
pub struct Learned {
    /// Packets that waited for this neighbor, oldest first.
    pub released: Vec<Vec<u8>>,
    /// The neighbor was known with another link address.
    pub changed: bool,
    /// The cache was full and another entry was evicted.
    pub evicted: bool,
}

/// What the timers asked for.
#[derive(Debug, PartialEq, Eq)]
pub enum NeighborEvent {
    /// Send another request for this neighbor.
    Retry { iface: IfaceId, ip: IpAddr },
    /// The neighbor did not answer; `dropped` held packets were discarded.
    Failed {
        iface: IfaceId,
        ip: IpAddr,
        dropped: usize,
    },
}

/// The neighbor cache of one stack.
#[derive(Debug)]
pub struct NeighborCache {
    cfg: NeighborConfig,
    entries: KeyedMap<(IfaceId, IpAddr), State>,
    /// Counts changes that can make a cached resolution wrong before it
    /// expires (a new link address, a removal, an eviction).
    epoch: u64,
}

impl NeighborCache {
    pub fn new(cfg: NeighborConfig, hasher: KeyedState) -> Self {
        NeighborCache {
            cfg,
            entries: KeyedMap::with_hasher(hasher),
            epoch: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn lookup(&self, iface: IfaceId, ip: IpAddr, now: Instant) -> Lookup {
        match self.entries.get(&(iface, ip)) {
            Some(State::Reachable { mac, expires }) if *expires > now => Lookup::Found(*mac),
            Some(State::Incomplete { .. }) => Lookup::Pending,
            _ => Lookup::Missing,
        }
    }

    /// A reachable neighbor's link address and when that stops being
    /// known, for a path cached until then (or the [`epoch`](Self::epoch)
    /// changes).
    pub fn resolved(&self, iface: IfaceId, ip: IpAddr, now: Instant) -> Option<([u8; 6], Instant)> {
        match self.entries.get(&(iface, ip)) {
            Some(State::Reachable { mac, expires }) if *expires > now => Some((*mac, *expires)),
            _ => None,
        }
    }

    /// Grows with every learned, removed or evicted entry.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Holds `packet` until `ip` resolves, starting a resolution if none runs.
    pub fn hold(&mut self, iface: IfaceId, ip: IpAddr, now: Instant, packet: Vec<u8>) -> Held {
        let mut out = Held::default();
        self.epoch += 1;
        let key = (iface, ip);
        if !self.entries.contains_key(&key) {
            out.evicted = self.make_room();
        }
        let state = self.entries.entry(key).or_insert(State::Incomplete {
            sent: 0,
            next_retry: now,
            held: VecDeque::new(),
        });
        if let State::Reachable { .. } = state {
            // Callers hold only after a miss, so this entry has expired.
            *state = State::Incomplete {
                sent: 0,
                next_retry: now,
                held: VecDeque::new(),
            };
        }
        if let State::Incomplete {
            sent,
            next_retry,
            held,
        } = state
        {
            if self.cfg.max_hold == 0 {
                out.dropped_oldest = true;
            } else {
                if held.len() >= self.cfg.max_hold {
                    held.pop_front();
                    out.dropped_oldest = true;
                }
                held.push_back(packet);
            }
            if *sent == 0 {
                *sent = 1;
                *next_retry = now + self.cfg.retry_interval;
                out.send_request = true;
            }
        }
        out
    }

    /// Records that `ip` is at `mac`.  Without `create`, only an entry that
    /// exists is updated (RFC 826: merge only what we already track, unless
    /// the packet was meant for us).
    pub fn learn(
        &mut self,
        iface: IfaceId,
        ip: IpAddr,
        mac: [u8; 6],
        now: Instant,
        create: bool,
    ) -> Learned {
        let mut out = Learned::default();
        self.epoch += 1;
        let key = (iface, ip);
        let expires = now + self.cfg.max_age;
        match self.entries.get_mut(&key) {
            Some(state) => {
                let old = core::mem::replace(state, State::Reachable { mac, expires });
                match old {
                    State::Incomplete { held, .. } => out.released = held.into(),
                    State::Reachable { mac: old_mac, .. } => out.changed = old_mac != mac,
                }
            }
            None if create => {
                out.evicted = self.make_room();
                self.entries.insert(key, State::Reachable { mac, expires });
            }
            None => {}
        }
        out
    }

    /// Forgets a neighbor (for `arp -d`).
    pub fn remove(&mut self, iface: IfaceId, ip: IpAddr) -> bool {
        self.epoch += 1;
        self.entries.remove(&(iface, ip)).is_some()
    }

    /// Runs retries and aging.
    pub fn poll(&mut self, now: Instant, mut event: impl FnMut(NeighborEvent)) {
        let cfg = self.cfg;
        self.entries.retain(|&(iface, ip), state| match state {
            State::Reachable { expires, .. } => *expires > now,
            State::Incomplete {
                sent,
                next_retry,
                held,
            } => {
                if *next_retry > now {
                    return true;
                }
                if *sent >= cfg.max_retries {
                    event(NeighborEvent::Failed {
                        iface,
                        ip,
                        dropped: held.len(),
                    });
                    return false;
                }
                *sent += 1;
                *next_retry = now + cfg.retry_interval;
                event(NeighborEvent::Retry { iface, ip });
                true
            }
        });
    }

    /// The earliest time [`poll`](Self::poll) has work.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.entries
            .values()
            .map(|s| match s {
                State::Reachable { expires, .. } => *expires,
                State::Incomplete { next_retry, .. } => *next_retry,
            })
            .min()
    }

    /// Resolved entries: (interface, address, link address, expiry).
    pub fn entries(
        &self,
    ) -> impl Iterator<Item = (IfaceId, IpAddr, Option<[u8; 6]>, Option<Instant>)> + '_ {
        self.entries.iter().map(|(&(iface, ip), s)| match s {
            State::Reachable { mac, expires } => (iface, ip, Some(*mac), Some(*expires)),
            State::Incomplete { .. } => (iface, ip, None, None),
        })
    }

    /// Evicts one entry if the cache is full; prefers resolved ones so that
    /// held packets survive.  Returns whether it evicted.
    fn make_room(&mut self) -> bool {
        if self.entries.len() < self.cfg.max_entries {
            return false;
        }
        let victim = self
            .entries
            .iter()
            .find(|(_, s)| matches!(s, State::Reachable { .. }))
            .or_else(|| self.entries.iter().next())
            .map(|(k, _)| *k);
        if let Some(k) = victim {
            self.entries.remove(&k);
        }
        victim.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    fn cache(max_entries: usize, max_hold: usize) -> NeighborCache {
        NeighborCache::new(
            NeighborConfig {
                max_entries,
                max_hold,
                max_age: Duration::from_secs(60),
                retry_interval: Duration::from_secs(1),
                max_retries: 3,
            },
            KeyedState::new(1, 2),
        )
    }

    fn ip(d: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 99, 1, d))
    }

    const I: IfaceId = IfaceId(0);
    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 9];

    #[test]
    fn hold_then_resolve_releases_in_order() {
        let mut c = cache(8, 2);
        let t = Instant::ZERO;
        assert_eq!(c.lookup(I, ip(1), t), Lookup::Missing);
        assert!(c.hold(I, ip(1), t, vec![1]).send_request);
        assert!(!c.hold(I, ip(1), t, vec![2]).send_request);
        let h = c.hold(I, ip(1), t, vec![3]);
        assert!(h.dropped_oldest && !h.send_request);
        assert_eq!(c.lookup(I, ip(1), t), Lookup::Pending);
        let l = c.learn(I, ip(1), MAC, t, false);
        assert_eq!(l.released, vec![vec![2], vec![3]]);
        assert_eq!(c.lookup(I, ip(1), t), Lookup::Found(MAC));
        // Entries age out.
        assert_eq!(
            c.lookup(I, ip(1), t + Duration::from_secs(61)),
            Lookup::Missing
        );
        c.poll(t + Duration::from_secs(61), |_| {
            panic!("no events for aging")
        });
        assert!(c.is_empty());
    }

    #[test]
    fn retries_then_fails() {
        let mut c = cache(8, 4);
        let mut t = Instant::ZERO;
        c.hold(I, ip(1), t, vec![1]);
        c.hold(I, ip(1), t, vec![2]);
        let mut events = Vec::new();
        for _ in 0..5 {
            t += Duration::from_secs(1);
            c.poll(t, |e| events.push(e));
        }
        assert_eq!(
            events,
            vec![
                NeighborEvent::Retry {
                    iface: I,
                    ip: ip(1)
                },
                NeighborEvent::Retry {
                    iface: I,
                    ip: ip(1)
                },
                NeighborEvent::Failed {
                    iface: I,
                    ip: ip(1),
                    dropped: 2
                },
            ]
        );
        assert!(c.is_empty());
    }

    #[test]
    fn learn_without_create_only_updates() {
        let mut c = cache(8, 4);
        let t = Instant::ZERO;
        c.learn(I, ip(5), MAC, t, false);
        assert!(c.is_empty());
        c.learn(I, ip(5), MAC, t, true);
        let l = c.learn(I, ip(5), [2, 0, 0, 0, 0, 10], t, false);
        assert!(l.changed);
    }

    #[test]
    fn full_cache_evicts() {
        let mut c = cache(2, 4);
        let t = Instant::ZERO;
        c.learn(I, ip(1), MAC, t, true);
        c.learn(I, ip(2), MAC, t, true);
        assert!(c.learn(I, ip(3), MAC, t, true).evicted);
        assert_eq!(c.len(), 2);
        assert_eq!(c.lookup(I, ip(3), t), Lookup::Found(MAC));
    }
}
