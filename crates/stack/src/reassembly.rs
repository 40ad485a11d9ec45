//! IP reassembly with bounded memory and timeouts (RFC 791 section 3.2,
//! RFC 815's hole list, RFC 5722's rule that overlaps discard the datagram).
//!
//! Fragments are kept as they arrived and joined only when the datagram is
//! whole, so memory follows the bytes received: a fragment at a high offset
//! costs its own size, not the offset's.  Generic over the datagram key so
//! that IPv6 can use it too.

use core::hash::Hash;

use crate::iface::IfaceId;
use crate::rand::{KeyedMap, KeyedState};
use crate::time::{Duration, Instant};

/// What a fragment costs beyond its bytes, for the memory budget.
const FRAGMENT_OVERHEAD: usize = 64;

/// Limits of a reassembler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReassemblyConfig {
    /// Datagrams under reassembly at most.
    pub max_packets: usize,
    /// Fragments per datagram at most.
    pub max_frags: usize,
    /// Buffer bytes at most, all datagrams together.
    pub max_bytes: usize,
    /// The largest datagram payload (65535 - 20 for IPv4).
    pub max_payload: usize,
    pub timeout: Duration,
}

/// Why a fragment was refused.  The datagram it belonged to is discarded
/// where the reason says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReassemblyError {
    /// Empty, or not a multiple of 8 bytes while more fragments follow, or
    /// contradicting the known end of the datagram. Datagram discarded.
    Malformed,
    /// Overlaps data already received with other bytes. Datagram discarded.
    Overlap,
    /// Would end past the largest datagram. Datagram discarded.
    TooBig,
    /// No room for another datagram or more bytes.
    NoRoom,
    /// More fragments than allowed. Datagram discarded.
    TooManyFragments,
}

#[derive(Debug)]
struct Datagram {
    /// Fragments by offset, not overlapping.
    fragments: Vec<(usize, Vec<u8>)>,
    /// Bytes received.
    received: usize,
    /// The datagram's length once the last fragment is known.
    total: Option<usize>,
    expires: Instant,
    /// The first fragment's packet as received (its start), kept to quote
    /// when time runs out, and the interface it came in on.
    first: Option<(IfaceId, Vec<u8>)>,
}

impl Datagram {
    fn cost(&self) -> usize {
        let first = self.first.as_ref().map_or(0, |(_, q)| q.len());
        self.received + self.fragments.len() * FRAGMENT_OVERHEAD + first
    }
}

/// The most of a first fragment kept to quote: what an ICMPv6 error can
/// carry within the minimum MTU (RFC 4443 2.4 (c)).
pub const MAX_FIRST_QUOTE: usize = 1280 - 40 - 8;

/// What ran out of time in one [`Reassembler::poll`].
#[derive(Debug, Default)]
pub struct Expired {
    /// Datagrams dropped.
    pub count: usize,
    /// The first fragments of those that had one, to tell their senders
    /// (RFC 8200 4.5), with the interface each came in on.
    pub first_fragments: Vec<(IfaceId, Vec<u8>)>,
}

/// Datagrams under reassembly.
#[derive(Debug)]
pub struct Reassembler<K> {
    cfg: ReassemblyConfig,
    datagrams: KeyedMap<K, Datagram>,
    bytes: usize,
}

impl<K: Hash + Eq + Copy> Reassembler<K> {
    pub fn new(cfg: ReassemblyConfig, hasher: KeyedState) -> Self {
        Reassembler {
            cfg,
            datagrams: KeyedMap::with_hasher(hasher),
            bytes: 0,
        }
    }

    /// Datagrams under reassembly.
    pub fn len(&self) -> usize {
        self.datagrams.len()
    }

    pub fn is_empty(&self) -> bool {
        self.datagrams.is_empty()
    }

    /// Memory charged to held fragments.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Adds a fragment: `data` at byte `offset`, `more` set on all but the
    /// last.  Returns the whole payload once every fragment arrived.  A
    /// fragment that repeats bytes already received is accepted and ignored.
    pub fn insert(
        &mut self,
        now: Instant,
        key: K,
        offset: usize,
        data: &[u8],
        more: bool,
    ) -> Result<Option<Vec<u8>>, ReassemblyError> {
        let end = offset + data.len();
        if data.is_empty() || (more && !data.len().is_multiple_of(8)) {
            self.discard(&key);
            return Err(ReassemblyError::Malformed);
        }
        if end > self.cfg.max_payload {
            self.discard(&key);
            return Err(ReassemblyError::TooBig);
        }
        if !self.datagrams.contains_key(&key) {
            if self.datagrams.len() >= self.cfg.max_packets {
                return Err(ReassemblyError::NoRoom);
            }
            self.datagrams.insert(
                key,
                Datagram {
                    fragments: Vec::new(),
                    received: 0,
                    total: None,
                    expires: now + self.cfg.timeout,
                    first: None,
                },
            );
        }
        match self.add_to(key, offset, data, more) {
            Ok(true) => Ok(self.take_whole(&key)),
            Ok(false) => Ok(None),
            Err(ReassemblyError::NoRoom) => {
                if self
                    .datagrams
                    .get(&key)
                    .is_some_and(|d| d.fragments.is_empty())
                {
                    self.datagrams.remove(&key);
                }
                Err(ReassemblyError::NoRoom)
            }
            Err(e) => {
                self.discard(&key);
                Err(e)
            }
        }
    }

    /// Adds a fragment to a datagram; `Ok(true)` when it is complete.
    fn add_to(
        &mut self,
        key: K,
        offset: usize,
        data: &[u8],
        more: bool,
    ) -> Result<bool, ReassemblyError> {
        let end = offset + data.len();
        let cfg = self.cfg;
        let bytes = self.bytes;
        let d = self
            .datagrams
            .get_mut(&key)
            .ok_or(ReassemblyError::NoRoom)?;
        let highest = d.fragments.last().map_or(0, |(o, f)| o + f.len());
        if !more {
            if d.total.is_some_and(|t| t != end) || highest > end {
                return Err(ReassemblyError::Malformed);
            }
        } else if d.total.is_some_and(|t| end > t) {
            return Err(ReassemblyError::Malformed);
        }
        // Where it goes among the fragments by offset.
        let at = d.fragments.partition_point(|(o, _)| *o < offset);
        // A repeat of received bytes (a lossy link repeats frames) is
        // ignored if the bytes match; any other overlap is an attack or a
        // bug, and RFC 5722 discards the datagram.
        let prev_overlap = at > 0 && {
            let (o, f) = &d.fragments[at - 1];
            o + f.len() > offset
        };
        let next_overlap = d.fragments.get(at).is_some_and(|(o, _)| *o < end);
        if prev_overlap || next_overlap {
            return if covered_identically(&d.fragments, offset, data) {
                Ok(false)
            } else {
                Err(ReassemblyError::Overlap)
            };
        }
        if d.fragments.len() >= cfg.max_frags {
            return Err(ReassemblyError::TooManyFragments);
        }
        if bytes + data.len() + FRAGMENT_OVERHEAD > cfg.max_bytes {
            return Err(ReassemblyError::NoRoom);
        }
        d.fragments.insert(at, (offset, data.to_vec()));
        d.received += data.len();
        self.bytes += data.len() + FRAGMENT_OVERHEAD;
        if !more {
            d.total = Some(end);
        }
        Ok(d.total == Some(d.received))
    }

    fn take_whole(&mut self, key: &K) -> Option<Vec<u8>> {
        let d = self.datagrams.remove(key)?;
        self.bytes -= d.cost();
        let mut whole = Vec::with_capacity(d.received);
        for (_, f) in d.fragments {
            whole.extend_from_slice(&f);
        }
        Some(whole)
    }

    fn discard(&mut self, key: &K) {
        if let Some(d) = self.datagrams.remove(key) {
            self.bytes -= d.cost();
        }
    }

    /// Keeps the start of the packet that carried the first fragment of
    /// the datagram under `key` (one being reassembled), to quote if its
    /// time runs out; not when the byte budget has no room for it.
    pub fn keep_first(&mut self, key: &K, iface: IfaceId, packet: &[u8]) {
        let quote = &packet[..packet.len().min(MAX_FIRST_QUOTE)];
        if self.bytes + quote.len() > self.cfg.max_bytes {
            return;
        }
        if let Some(d) = self.datagrams.get_mut(key) {
            if d.first.is_none() {
                d.first = Some((iface, quote.to_vec()));
                self.bytes += quote.len();
            }
        }
    }

    /// Drops datagrams whose time ran out.
    pub fn poll(&mut self, now: Instant) -> Expired {
        let mut expired = Expired::default();
        let mut freed = 0;
        self.datagrams.retain(|_, d| {
            let keep = d.expires > now;
            if !keep {
                freed += d.cost();
                expired.count += 1;
                if let Some(first) = d.first.take() {
                    expired.first_fragments.push(first);
                }
            }
            keep
        });
        self.bytes -= freed;
        expired
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.datagrams.values().map(|d| d.expires).min()
    }
}

/// Whether `data` at `offset` lies entirely inside received fragments and
/// matches their bytes.
fn covered_identically(fragments: &[(usize, Vec<u8>)], offset: usize, data: &[u8]) -> bool {
    let mut pos = offset;
    let end = offset + data.len();
    for (o, f) in fragments {
        let f_end = o + f.len();
        if f_end <= pos {
            continue;
        }
        if *o > pos {
            return false;
        }
        let upto = end.min(f_end);
        if f[pos - o..upto - o] != data[pos - offset..upto - offset] {
            return false;
        }
        pos = upto;
        if pos == end {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r() -> Reassembler<u32> {
        Reassembler::new(
            ReassemblyConfig {
                max_packets: 4,
                max_frags: 8,
                max_bytes: 1 << 16,
                max_payload: 65515,
                timeout: Duration::from_secs(30),
            },
            KeyedState::new(3, 4),
        )
    }

    fn payload(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 % 251) as u8).collect()
    }

    #[test]
    fn any_order_reassembles() {
        let p = payload(3000);
        let chunks = [(0, 1480, true), (1480, 2960, true), (2960, 3000, false)];
        for order in [[0, 1, 2], [2, 1, 0], [1, 2, 0], [2, 0, 1]] {
            let mut r = r();
            let mut out = None;
            for &i in &order {
                let (s, e, more) = chunks[i];
                out = r.insert(Instant::ZERO, 1, s, &p[s..e], more).unwrap();
            }
            assert_eq!(out.as_deref(), Some(&p[..]));
            assert!(r.is_empty());
            assert_eq!(r.bytes(), 0);
        }
    }

    #[test]
    fn duplicates_are_ignored_and_overlaps_discard() {
        let p = payload(24);
        let mut r = r();
        assert_eq!(r.insert(Instant::ZERO, 1, 0, &p[..8], true), Ok(None));
        assert_eq!(r.insert(Instant::ZERO, 1, 0, &p[..8], true), Ok(None));
        assert_eq!(r.insert(Instant::ZERO, 1, 8, &p[8..16], true), Ok(None));
        assert_eq!(
            r.insert(Instant::ZERO, 1, 0, &p[..16], true),
            Ok(None),
            "a repeat spanning two fragments"
        );
        assert_eq!(
            r.insert(Instant::ZERO, 1, 0, &p[4..20], true),
            Err(ReassemblyError::Overlap),
            "same range, other bytes"
        );
        assert!(r.is_empty());
        assert_eq!(r.insert(Instant::ZERO, 2, 0, &p[..16], true), Ok(None));
        assert_eq!(
            r.insert(Instant::ZERO, 2, 8, &p[8..24], false),
            Err(ReassemblyError::Overlap)
        );
        assert!(r.is_empty());
        assert_eq!(r.bytes(), 0);
    }

    #[test]
    fn malformed_and_limits() {
        let p = payload(70000);
        let mut r = r();
        assert_eq!(
            r.insert(Instant::ZERO, 1, 0, &p[..7], true),
            Err(ReassemblyError::Malformed)
        );
        assert_eq!(
            r.insert(Instant::ZERO, 1, 65512, &p[..8], false),
            Err(ReassemblyError::TooBig)
        );
        // Last fragment then a fragment past its end.
        assert_eq!(r.insert(Instant::ZERO, 1, 16, &p[..8], false), Ok(None));
        assert_eq!(
            r.insert(Instant::ZERO, 1, 24, &p[..8], true),
            Err(ReassemblyError::Malformed)
        );
        // Too many datagrams.
        for k in 10..14 {
            r.insert(Instant::ZERO, k, 0, &p[..8], true).unwrap();
        }
        assert_eq!(
            r.insert(Instant::ZERO, 99, 0, &p[..8], true),
            Err(ReassemblyError::NoRoom)
        );
        // Too many fragments.
        let mut r2 = super::tests::r();
        for i in 0..8 {
            r2.insert(Instant::ZERO, 5, i * 16, &p[..8], true).unwrap();
        }
        assert_eq!(
            r2.insert(Instant::ZERO, 5, 200, &p[..8], true),
            Err(ReassemblyError::TooManyFragments)
        );
        assert!(r2.is_empty());
    }

    #[test]
    fn memory_follows_bytes_received_not_offsets() {
        let p = payload(64);
        let mut r = Reassembler::new(
            ReassemblyConfig {
                max_packets: 1024,
                max_frags: 8,
                max_bytes: 1 << 20,
                max_payload: 65515,
                timeout: Duration::from_secs(30),
            },
            KeyedState::new(0, 0),
        );
        // Tiny fragments at a high offset: 1000 datagrams cost ~72 KB, not 64 MB.
        for k in 0..1000u32 {
            r.insert(Instant::ZERO, k, 64000, &p[..8], true).unwrap();
        }
        assert_eq!(r.bytes(), 1000 * (8 + FRAGMENT_OVERHEAD));
        assert_eq!(
            r.insert(Instant::ZERO, 5000, 0, &p[..8], true),
            Ok(None),
            "room left for real traffic"
        );
    }

    #[test]
    fn byte_budget_and_timeout() {
        let p = payload(4096);
        let mut r = Reassembler::new(
            ReassemblyConfig {
                max_packets: 16,
                max_frags: 8,
                max_bytes: 4096,
                max_payload: 65515,
                timeout: Duration::from_secs(30),
            },
            KeyedState::new(0, 0),
        );
        r.insert(Instant::ZERO, 1u32, 0, &p[..2048], true).unwrap();
        assert_eq!(
            r.insert(Instant::ZERO, 2, 0, &p[..4096], true),
            Err(ReassemblyError::NoRoom)
        );
        assert_eq!(r.len(), 1);
        assert_eq!(r.next_deadline(), Some(Instant::from_secs(30)));
        assert_eq!(r.poll(Instant::from_secs(29)).count, 0);
        assert_eq!(r.poll(Instant::from_secs(30)).count, 1);
        assert_eq!(r.bytes(), 0);
    }

    #[test]
    fn the_first_fragment_is_handed_back_when_time_runs_out() {
        let mut r = r();
        let p = payload(3000);
        let packet = [7u8; 2000];
        // Datagram 1 has its first fragment, 2 only a later one.
        r.insert(Instant::ZERO, 1u32, 0, &p[..1000], true).unwrap();
        r.keep_first(&1, IfaceId(3), &packet);
        r.insert(Instant::ZERO, 2u32, 1000, &p[1000..2000], true)
            .unwrap();
        // Kept once, cut to what an ICMPv6 error can quote, charged.
        r.keep_first(&1, IfaceId(3), &[9u8; 10]);
        assert_eq!(r.bytes(), 2000 + 2 * FRAGMENT_OVERHEAD + MAX_FIRST_QUOTE);
        let expired = r.poll(Instant::from_secs(30));
        assert_eq!(expired.count, 2);
        assert_eq!(
            expired.first_fragments,
            vec![(IfaceId(3), packet[..MAX_FIRST_QUOTE].to_vec())]
        );
        assert_eq!(r.bytes(), 0);
    }
}
