//! The neighbor cache: IP address -> link address, with aging, retries and
//! a bounded queue of packets waiting for resolution.
//!
//! An IPv4 (ARP) entry is incomplete or reachable until it expires.  An
//! IPv6 entry follows RFC 4861 7.3.2: INCOMPLETE, REACHABLE for
//! ReachableTime, then STALE (still used); the first packet sent to a
//! stale neighbor starts DELAY, which becomes PROBE (unicast
//! solicitations) unless an advertisement confirms the neighbor first.

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
    /// IPv6: not confirmed lately, still used; forgotten at `expires`.
    Stale {
        mac: [u8; 6],
        expires: Instant,
    },
    /// IPv6: a packet went to a stale neighbor; probe at `until` unless
    /// it is confirmed first.
    Delay {
        mac: [u8; 6],
        until: Instant,
    },
    /// IPv6: unicast solicitations under way.
    Probe {
        mac: [u8; 6],
        sent: u32,
        next: Instant,
    },
    /// Set by the operator (`arp -s`, `ndp -s`): never expires, never
    /// evicted, and what the network says does not change it (FreeBSD's
    /// static entries).
    Permanent {
        mac: [u8; 6],
    },
}

/// The expiry a permanent entry reports to a path cache: never, in
/// practice (a path cached until then is still dropped when the cache's
/// epoch changes).
const PERMANENT_UNTIL: Instant = Instant::from_micros(u64::MAX / 2);

impl State {
    /// The link address packets go to now, if any.
    fn mac(&self) -> Option<[u8; 6]> {
        match self {
            State::Incomplete { .. } => None,
            State::Reachable { mac, .. }
            | State::Stale { mac, .. }
            | State::Delay { mac, .. }
            | State::Probe { mac, .. }
            | State::Permanent { mac } => Some(*mac),
        }
    }
}

/// RFC 4861 10: REACHABLE_TIME, DELAY_FIRST_PROBE_TIME, RETRANS_TIMER and
/// MAX_UNICAST_SOLICIT.
pub const NDP_REACHABLE_TIME: Duration = Duration::from_secs(30);
pub const NDP_DELAY_FIRST_PROBE: Duration = Duration::from_secs(5);
pub const NDP_RETRANS_TIMER: Duration = Duration::from_secs(1);
pub const NDP_MAX_UNICAST_SOLICIT: u32 = 3;

/// What an NDP message says of its sender or target (RFC 4861 7.2.3-7.2.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NdpNews {
    /// A solicitation's or advertisement's source link-layer option, or a
    /// router advertisement's: the neighbor exists at that address.
    Source,
    /// A neighbor advertisement's target option with its flags.
    Advert { solicited: bool, override_: bool },
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
    /// IPv6: send a unicast solicitation to this neighbor at `mac`.
    Probe {
        iface: IfaceId,
        ip: IpAddr,
        mac: [u8; 6],
    },
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
            Some(State::Permanent { mac }) => Lookup::Found(*mac),
            Some(State::Incomplete { .. }) => Lookup::Pending,
            Some(s @ (State::Stale { .. } | State::Delay { .. } | State::Probe { .. })) => {
                s.mac().map_or(Lookup::Missing, Lookup::Found)
            }
            _ => Lookup::Missing,
        }
    }

    /// [`lookup`](Self::lookup) for a packet about to be sent to an IPv6
    /// neighbor: a stale one enters DELAY (RFC 4861 7.3.3), and an expired
    /// reachable one is stale.
    pub fn lookup_to_send(&mut self, iface: IfaceId, ip: IpAddr, now: Instant) -> Lookup {
        let Some(state) = self.entries.get_mut(&(iface, ip)) else {
            return Lookup::Missing;
        };
        match *state {
            State::Incomplete { .. } => Lookup::Pending,
            State::Reachable { mac, expires } if expires > now => Lookup::Found(mac),
            State::Reachable { mac, .. } | State::Stale { mac, .. } => {
                *state = State::Delay {
                    mac,
                    until: now + NDP_DELAY_FIRST_PROBE,
                };
                Lookup::Found(mac)
            }
            State::Delay { mac, .. } | State::Probe { mac, .. } | State::Permanent { mac } => {
                Lookup::Found(mac)
            }
        }
    }

    /// Records what an NDP message says of neighbor `ip` (RFC 4861 7.2.3,
    /// 7.2.5, 7.3.3).  `create` makes an entry that does not exist (a
    /// solicitation or router advertisement to us); an advertisement
    /// updates only an entry we have.
    pub fn learn_ndp(
        &mut self,
        iface: IfaceId,
        ip: IpAddr,
        mac: [u8; 6],
        news: NdpNews,
        now: Instant,
    ) -> Learned {
        let mut out = Learned::default();
        let key = (iface, ip);
        let stale = State::Stale {
            mac,
            expires: now + self.cfg.max_age,
        };
        let reachable = State::Reachable {
            mac,
            expires: now + NDP_REACHABLE_TIME,
        };
        let Some(state) = self.entries.get_mut(&key) else {
            if news == NdpNews::Source {
                self.epoch += 1;
                out.evicted = self.make_room();
                if self.has_room() {
                    self.entries.insert(key, stale);
                }
            }
            return out;
        };
        if matches!(state, State::Permanent { .. }) {
            return out;
        }
        let old_mac = state.mac();
        let next = match (news, &*state) {
            (NdpNews::Source, State::Incomplete { .. }) => Some(stale),
            (NdpNews::Source, _) if old_mac != Some(mac) => Some(stale),
            (NdpNews::Source, _) => None,
            (NdpNews::Advert { solicited, .. }, State::Incomplete { .. }) => {
                Some(if solicited { reachable } else { stale })
            }
            // A different address without override: the entry we have
            // stands, but is no longer trusted (RFC 4861 7.2.5).
            (
                NdpNews::Advert {
                    override_: false, ..
                },
                State::Reachable { mac: m, .. },
            ) if old_mac != Some(mac) => Some(State::Stale {
                mac: *m,
                expires: now + self.cfg.max_age,
            }),
            (
                NdpNews::Advert {
                    override_: false, ..
                },
                _,
            ) if old_mac != Some(mac) => None,
            (
                NdpNews::Advert {
                    solicited: true, ..
                },
                _,
            ) => Some(reachable),
            (NdpNews::Advert { .. }, _) if old_mac != Some(mac) => Some(stale),
            (NdpNews::Advert { .. }, _) => None,
        };
        if let Some(next) = next {
            self.epoch += 1;
            let old = core::mem::replace(state, next);
            if let State::Incomplete { held, .. } = old {
                out.released = held.into();
            } else {
                out.changed = old_mac != state.mac();
            }
        }
        out
    }

    /// RFC 4861 7.3.1: an upper layer's sign of forward progress (TCP's
    /// new data acknowledged) confirms IPv6 neighbor `ip` reachable, as a
    /// solicited advertisement would, so a neighbor under a live
    /// connection does not go STALE, then DELAY and PROBE.  An entry
    /// still reachable for more than half of ReachableTime is left as it
    /// is (hints come often); incomplete, permanent and IPv4 entries are
    /// not touched.  The epoch stays: a path cached until the old expiry
    /// is rebuilt then, with the new one.  Returns whether the entry was
    /// confirmed.
    pub fn confirm_reachable(&mut self, iface: IfaceId, ip: IpAddr, now: Instant) -> bool {
        if !ip.is_ipv6() {
            return false;
        }
        let Some(state) = self.entries.get_mut(&(iface, ip)) else {
            return false;
        };
        let mac = match *state {
            State::Reachable { expires, .. } if expires > now + NDP_REACHABLE_TIME / 2 => {
                return false
            }
            State::Reachable { mac, .. }
            | State::Stale { mac, .. }
            | State::Delay { mac, .. }
            | State::Probe { mac, .. } => mac,
            State::Incomplete { .. } | State::Permanent { .. } => return false,
        };
        *state = State::Reachable {
            mac,
            expires: now + NDP_REACHABLE_TIME,
        };
        true
    }

    /// The link address an entry holds (none while it is incomplete).
    pub fn cached_mac(&self, iface: IfaceId, ip: IpAddr) -> Option<[u8; 6]> {
        self.entries.get(&(iface, ip)).and_then(State::mac)
    }

    /// A reachable neighbor's link address and when that stops being
    /// known, for a path cached until then (or the [`epoch`](Self::epoch)
    /// changes).
    pub fn resolved(&self, iface: IfaceId, ip: IpAddr, now: Instant) -> Option<([u8; 6], Instant)> {
        match self.entries.get(&(iface, ip)) {
            Some(State::Reachable { mac, expires }) if *expires > now => Some((*mac, *expires)),
            Some(State::Permanent { mac }) => Some((*mac, PERMANENT_UNTIL)),
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
            if !self.has_room() {
                // Full of the operator's entries: nowhere to wait.
                out.dropped_oldest = true;
                return out;
            }
        }
        let state = self.entries.entry(key).or_insert(State::Incomplete {
            sent: 0,
            next_retry: now,
            held: VecDeque::new(),
        });
        if !matches!(state, State::Incomplete { .. }) {
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
            Some(State::Permanent { .. }) => {}
            Some(state) => {
                let old = core::mem::replace(state, State::Reachable { mac, expires });
                match old {
                    State::Incomplete { held, .. } => out.released = held.into(),
                    other => out.changed = other.mac() != Some(mac),
                }
            }
            None if create => {
                out.evicted = self.make_room();
                if self.has_room() {
                    self.entries.insert(key, State::Reachable { mac, expires });
                }
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
        let mut changed = false;
        self.entries.retain(|&(iface, ip), state| match state {
            // An IPv6 neighbor not confirmed for ReachableTime is stale,
            // not gone (RFC 4861 7.3.2); an IPv4 one is asked for again.
            State::Reachable { mac, expires } => {
                if *expires > now {
                    return true;
                }
                if ip.is_ipv6() {
                    *state = State::Stale {
                        mac: *mac,
                        expires: now + cfg.max_age,
                    };
                    return true;
                }
                false
            }
            State::Stale { expires, .. } => *expires > now,
            State::Permanent { .. } => true,
            State::Delay { mac, until } => {
                if *until > now {
                    return true;
                }
                let mac = *mac;
                *state = State::Probe {
                    mac,
                    sent: 1,
                    next: now + NDP_RETRANS_TIMER,
                };
                event(NeighborEvent::Probe { iface, ip, mac });
                true
            }
            State::Probe { mac, sent, next } => {
                if *next > now {
                    return true;
                }
                if *sent >= NDP_MAX_UNICAST_SOLICIT {
                    changed = true;
                    event(NeighborEvent::Failed {
                        iface,
                        ip,
                        dropped: 0,
                    });
                    return false;
                }
                *sent += 1;
                *next = now + NDP_RETRANS_TIMER;
                event(NeighborEvent::Probe {
                    iface,
                    ip,
                    mac: *mac,
                });
                true
            }
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
        if changed {
            self.epoch += 1;
        }
    }

    /// The earliest time [`poll`](Self::poll) has work.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.entries
            .values()
            .filter_map(|s| match s {
                State::Reachable { expires, .. } | State::Stale { expires, .. } => Some(*expires),
                State::Incomplete { next_retry, .. } => Some(*next_retry),
                State::Delay { until, .. } => Some(*until),
                State::Probe { next, .. } => Some(*next),
                State::Permanent { .. } => None,
            })
            .min()
    }

    /// Resolved entries: (interface, address, link address, expiry).
    pub fn entries(
        &self,
    ) -> impl Iterator<Item = (IfaceId, IpAddr, Option<[u8; 6]>, Option<Instant>)> + '_ {
        self.entries.iter().map(|(&(iface, ip), s)| match s {
            State::Reachable { mac, expires } | State::Stale { mac, expires } => {
                (iface, ip, Some(*mac), Some(*expires))
            }
            State::Delay { mac, .. } | State::Probe { mac, .. } | State::Permanent { mac } => {
                (iface, ip, Some(*mac), None)
            }
            State::Incomplete { .. } => (iface, ip, None, None),
        })
    }

    /// Whether the entry for `ip` is the operator's (see
    /// [`set_permanent`](Self::set_permanent)).
    pub fn is_permanent(&self, iface: IfaceId, ip: IpAddr) -> bool {
        matches!(
            self.entries.get(&(iface, ip)),
            Some(State::Permanent { .. })
        )
    }

    /// Sets a permanent entry (`arp -s`): `ip` is at `mac` until removed.
    /// Returns the packets that waited for `ip`, to be sent now.  `None`
    /// when the cache is full of permanent entries.
    pub fn set_permanent(&mut self, iface: IfaceId, ip: IpAddr, mac: [u8; 6]) -> Option<Learned> {
        let mut out = Learned::default();
        let key = (iface, ip);
        if !self.entries.contains_key(&key) {
            out.evicted = self.make_room();
            if !self.has_room() {
                return None;
            }
        }
        self.epoch += 1;
        match self.entries.insert(key, State::Permanent { mac }) {
            Some(State::Incomplete { held, .. }) => out.released = held.into(),
            Some(old) => out.changed = old.mac() != Some(mac),
            None => {}
        }
        Some(out)
    }

    /// Removes every entry of one family (`arp -F`, `ndp -c`); the
    /// permanent ones too when `permanent`.  Returns how many went.
    /// How long a neighbour resolved from now on stays so.
    pub fn set_max_age(&mut self, max_age: Duration) {
        self.cfg.max_age = max_age;
    }

    /// How many packets wait for an unresolved neighbour from now on (those
    /// already held stay).
    pub fn set_max_hold(&mut self, max_hold: usize) {
        self.cfg.max_hold = max_hold;
    }

    /// Forgets every neighbour of `iface`, permanent ones and the packets
    /// held for them too (an interface destroyed).  Returns how many
    /// entries and how many held packets.
    pub fn remove_iface(&mut self, iface: IfaceId) -> (usize, usize) {
        let before = self.entries.len();
        let mut held = 0;
        self.entries.retain(|&(i, _), s| {
            if i != iface {
                return true;
            }
            if let State::Incomplete { held: q, .. } = s {
                held += q.len();
            }
            false
        });
        self.epoch += 1;
        (before - self.entries.len(), held)
    }

    pub fn flush(&mut self, v6: bool, permanent: bool) -> usize {
        let before = self.entries.len();
        self.entries.retain(|&(_, ip), s| {
            ip.is_ipv6() != v6 || (!permanent && matches!(s, State::Permanent { .. }))
        });
        self.epoch += 1;
        before - self.entries.len()
    }

    /// Whether an entry can be added (after [`make_room`](Self::make_room),
    /// only when every entry is permanent is there none).
    fn has_room(&self) -> bool {
        self.entries.len() < self.cfg.max_entries
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
            .find(|(_, s)| !matches!(s, State::Incomplete { .. } | State::Permanent { .. }))
            .or_else(|| {
                self.entries
                    .iter()
                    .find(|(_, s)| !matches!(s, State::Permanent { .. }))
            })
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

    fn ip6(last: u16) -> IpAddr {
        IpAddr::V6(core::net::Ipv6Addr::new(0xfd99, 0, 0, 0, 0, 0, 0, last))
    }

    fn events(c: &mut NeighborCache, now: Instant) -> Vec<NeighborEvent> {
        let mut out = Vec::new();
        c.poll(now, |e| out.push(e));
        out
    }

    const SOLICITED: NdpNews = NdpNews::Advert {
        solicited: true,
        override_: true,
    };

    #[test]
    fn forward_progress_confirms_a_known_ipv6_neighbor_reachable() {
        let mut c = cache(8, 4);
        let t0 = Instant::ZERO;
        c.hold(I, ip6(1), t0, vec![1]);
        // Incomplete: nothing to confirm.
        assert!(!c.confirm_reachable(I, ip6(1), t0));
        c.learn_ndp(I, ip6(1), MAC, SOLICITED, t0);
        // Fresh: left as it is.
        assert!(!c.confirm_reachable(I, ip6(1), t0 + Duration::from_secs(10)));
        // Past half of ReachableTime: refreshed.
        let t1 = t0 + Duration::from_secs(20);
        assert!(c.confirm_reachable(I, ip6(1), t1));
        assert_eq!(
            c.resolved(I, ip6(1), t1).map(|(_, until)| until),
            Some(t1 + NDP_REACHABLE_TIME)
        );
        // Stale, then in DELAY: back to reachable, no probe.
        let t2 = t1 + NDP_REACHABLE_TIME;
        assert!(events(&mut c, t2).is_empty());
        assert!(c.resolved(I, ip6(1), t2).is_none());
        c.lookup_to_send(I, ip6(1), t2);
        assert!(c.confirm_reachable(I, ip6(1), t2 + Duration::from_secs(1)));
        assert!(events(&mut c, t2 + NDP_DELAY_FIRST_PROBE).is_empty());
        assert!(c.resolved(I, ip6(1), t2 + NDP_DELAY_FIRST_PROBE).is_some());
        // Not a neighbor we know, and never IPv4 (ARP has no such state).
        assert!(!c.confirm_reachable(I, ip6(2), t2));
        let v4 = IpAddr::V4(core::net::Ipv4Addr::new(10, 0, 0, 1));
        c.learn(I, v4, MAC, t0, true);
        assert!(!c.confirm_reachable(I, v4, t2));
    }

    #[test]
    fn an_ipv6_neighbor_goes_stale_then_delay_then_probe_then_away() {
        let mut c = cache(8, 4);
        let t0 = Instant::ZERO;
        assert!(c.hold(I, ip6(1), t0, vec![1]).send_request);
        let l = c.learn_ndp(I, ip6(1), MAC, SOLICITED, t0);
        assert_eq!(l.released, vec![vec![1]]);
        // REACHABLE for ReachableTime, then STALE, still used.
        let t1 = t0 + NDP_REACHABLE_TIME;
        assert!(events(&mut c, t1).is_empty());
        assert_eq!(c.lookup(I, ip6(1), t1), Lookup::Found(MAC));
        // A packet to it starts DELAY; no probe before its end.
        assert_eq!(c.lookup_to_send(I, ip6(1), t1), Lookup::Found(MAC));
        assert!(events(&mut c, t1 + Duration::from_secs(4)).is_empty());
        // Then unicast probes, one a second, and the entry goes.
        let mut t = t1 + NDP_DELAY_FIRST_PROBE;
        for _ in 0..NDP_MAX_UNICAST_SOLICIT {
            assert_eq!(
                events(&mut c, t),
                vec![NeighborEvent::Probe {
                    iface: I,
                    ip: ip6(1),
                    mac: MAC
                }]
            );
            assert_eq!(
                c.lookup(I, ip6(1), t),
                Lookup::Found(MAC),
                "used while probed"
            );
            t += NDP_RETRANS_TIMER;
        }
        assert_eq!(
            events(&mut c, t),
            vec![NeighborEvent::Failed {
                iface: I,
                ip: ip6(1),
                dropped: 0
            }]
        );
        assert_eq!(c.lookup(I, ip6(1), t), Lookup::Missing);
    }

    #[test]
    fn a_solicited_advert_confirms_a_probed_neighbor() {
        let mut c = cache(8, 4);
        let t0 = Instant::ZERO;
        c.learn_ndp(I, ip6(1), MAC, NdpNews::Source, t0);
        assert_eq!(c.lookup_to_send(I, ip6(1), t0), Lookup::Found(MAC));
        let t = t0 + NDP_DELAY_FIRST_PROBE;
        assert_eq!(events(&mut c, t).len(), 1);
        c.learn_ndp(I, ip6(1), MAC, SOLICITED, t);
        // Reachable again: nothing until ReachableTime has passed.
        assert!(events(&mut c, t + Duration::from_secs(29)).is_empty());
        assert_eq!(c.lookup_to_send(I, ip6(1), t), Lookup::Found(MAC));
    }

    #[test]
    fn adverts_follow_rfc_4861_7_2_5() {
        let mut c = cache(8, 4);
        let t = Instant::ZERO;
        let other = [2, 0, 0, 0, 0, 10];
        // An advertisement creates nothing.
        c.learn_ndp(I, ip6(1), MAC, SOLICITED, t);
        assert!(c.is_empty());
        // A solicitation's source option creates a STALE entry.
        c.learn_ndp(I, ip6(1), MAC, NdpNews::Source, t);
        assert_eq!(c.lookup(I, ip6(1), t), Lookup::Found(MAC));
        c.learn_ndp(I, ip6(1), MAC, SOLICITED, t);
        // Without override, another address does not replace a reachable
        // entry's.
        let no_override = NdpNews::Advert {
            solicited: false,
            override_: false,
        };
        let l = c.learn_ndp(I, ip6(1), other, no_override, t);
        assert!(!l.changed);
        assert_eq!(c.lookup(I, ip6(1), t), Lookup::Found(MAC));
        // With override it does.
        let l = c.learn_ndp(
            I,
            ip6(1),
            other,
            NdpNews::Advert {
                solicited: false,
                override_: true,
            },
            t,
        );
        assert!(l.changed);
        assert_eq!(c.lookup(I, ip6(1), t), Lookup::Found(other));
    }

    #[test]
    fn ipv4_entries_still_expire_outright() {
        let mut c = cache(8, 4);
        let t = Instant::ZERO;
        c.learn(I, ip(1), MAC, t, true);
        assert!(events(&mut c, t + Duration::from_secs(60)).is_empty());
        assert!(c.is_empty());
    }

    #[test]
    fn a_permanent_entry_stays_whatever_the_network_says() {
        let mut c = cache(2, 4);
        let t = Instant::ZERO;
        let held = c.hold(I, ip(1), t, vec![1, 2, 3]);
        assert!(held.send_request);
        let set = c.set_permanent(I, ip(1), [2, 0, 0, 0, 0, 9]).unwrap();
        assert_eq!(set.released, vec![vec![1, 2, 3]]);
        assert!(c.is_permanent(I, ip(1)));
        // ARP saying otherwise changes nothing.
        c.learn(I, ip(1), MAC, t, true);
        let late = t + Duration::from_secs(3600);
        assert_eq!(c.lookup(I, ip(1), late), Lookup::Found([2, 0, 0, 0, 0, 9]));
        assert!(events(&mut c, late).is_empty());
        assert_eq!(c.next_deadline(), None);
        // Not evicted to make room; a full cache of them refuses more.
        c.set_permanent(I, ip(2), MAC).unwrap();
        assert!(c.set_permanent(I, ip(3), MAC).is_none());
        c.learn(I, ip(4), MAC, t, true);
        assert!(c.is_permanent(I, ip(1)) && c.is_permanent(I, ip(2)));
        // A flush of the other family leaves them; of theirs, takes them.
        assert_eq!(c.flush(true, true), 0);
        assert_eq!(c.flush(false, false), 0);
        assert_eq!(c.flush(false, true), 2);
        assert!(c.is_empty());
    }
}
