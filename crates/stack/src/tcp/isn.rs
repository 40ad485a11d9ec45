//! Numbers a remote attacker must not guess, all derived from the per-boot
//! secret with SipHash: initial sequence numbers (RFC 6528), ephemeral
//! ports (RFC 6056) and SYN cookies (RFC 4987 3.6).
//!
//! Every generator hashes a fixed-size buffer on the stack (no allocation)
//! with a distinct leading tag, so that one secret gives independent
//! functions.  Nothing here panics, whatever the input.

use core::fmt;
use core::net::{IpAddr, SocketAddr};

use crate::rand::KeyedState;
use crate::steer::FlowSteering;
use crate::time::Instant;

const TAG_ISN: u8 = 1;
const TAG_PORT: u8 = 2;
const TAG_PORT_TABLE: u8 = 3;
const TAG_COOKIE_MASK: u8 = 4;
const TAG_COOKIE_MAC: u8 = 5;

/// The input of one keyed hash, built on the stack.
struct HashInput {
    buf: [u8; 64],
    len: usize,
}

impl HashInput {
    fn new(tag: u8) -> Self {
        let mut h = HashInput {
            buf: [0; 64],
            len: 0,
        };
        h.bytes(&[tag]);
        h
    }

    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        // The inputs below are at most 53 bytes; were one longer, it would
        // be cut, not panic.
        let end = self.len.saturating_add(b.len()).min(self.buf.len());
        if let (Some(dst), Some(src)) = (self.buf.get_mut(self.len..end), b.get(..end - self.len)) {
            dst.copy_from_slice(src);
        }
        self.len = end;
        self
    }

    /// An address with its family, so that no IPv4 address collides with
    /// an IPv6 one.
    fn ip(&mut self, ip: IpAddr) -> &mut Self {
        match ip {
            IpAddr::V4(a) => self.bytes(&[4]).bytes(&a.octets()),
            IpAddr::V6(a) => self.bytes(&[6]).bytes(&a.octets()),
        }
    }

    fn addr(&mut self, a: SocketAddr) -> &mut Self {
        self.ip(a.ip()).bytes(&a.port().to_be_bytes())
    }

    fn hash(&self, key: &KeyedState) -> u64 {
        key.hash_bytes(&self.buf[..self.len])
    }
}

/// RFC 6528 initial sequence numbers.
#[derive(Clone)]
pub struct IsnGenerator {
    secret: KeyedState,
}

impl fmt::Debug for IsnGenerator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IsnGenerator { .. }")
    }
}

impl IsnGenerator {
    pub fn new(secret: KeyedState) -> Self {
        IsnGenerator { secret }
    }

    /// RFC 6528 3: "ISN = M + F(localip, localport, remoteip, remoteport,
    /// secretkey) where M is the 4 microsecond timer, and F() is a
    /// pseudorandom function (PRF) of the connection-id".  F is SipHash-2-4
    /// keyed with the per-boot secret, cut to 32 bits.  Within one 4-tuple
    /// the ISNs advance with the clock (so a new incarnation's sequence
    /// numbers follow the old one's, RFC 9293 3.4.1); across 4-tuples they
    /// are unrelated.
    pub fn isn(&self, now: Instant, local: SocketAddr, remote: SocketAddr) -> u32 {
        // The 4 µs clock, wrapping in 2^32 ticks (about 4.77 hours).
        let m = (now.total_micros() / 4) as u32;
        let f = HashInput::new(TAG_ISN)
            .addr(local)
            .addr(remote)
            .hash(&self.secret) as u32;
        m.wrapping_add(f)
    }
}

/// Counters of RFC 6056 algorithm 4's `table` (a power of two).
const PORT_TABLE_LEN: usize = 256;

/// RFC 6056 ephemeral port selection.
#[derive(Clone)]
pub struct PortAllocator {
    secret: KeyedState,
    first: u16,
    /// Ports in the range, 1..=65535.
    count: u32,
    /// RFC 6056 3.3.4: "table[]" of per-destination "next_ephemeral"
    /// counters, indexed by a hash of the destination.
    table: [u32; PORT_TABLE_LEN],
    /// With several engines: only ports whose flow hashes back to this
    /// engine are given (one residue class modulo the engine count, or
    /// under RSS the ports whose Toeplitz hash the NIC sends here).
    steering: Option<FlowSteering>,
    /// Ports picked under RSS steering, and the hashes computed for them.
    rss_picks: u64,
    rss_evaluations: u64,
}

impl fmt::Debug for PortAllocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PortAllocator")
            .field("first", &self.first)
            .field("last", &self.last())
            .finish_non_exhaustive()
    }
}

impl PortAllocator {
    /// Ports `first..=last` (the two are swapped if reversed; port 0 is
    /// never given).  RFC 6056 3.3.4: "`table[i] = random() % 65536`" -- the
    /// counters start at values derived from the secret.
    pub fn new(secret: KeyedState, first: u16, last: u16) -> Self {
        let lo = first.min(last).max(1);
        let hi = first.max(last).max(1);
        let table = core::array::from_fn(|i| {
            HashInput::new(TAG_PORT_TABLE)
                .bytes(&(i as u32).to_be_bytes())
                .hash(&secret) as u32
        });
        PortAllocator {
            secret,
            first: lo,
            count: u32::from(hi - lo) + 1,
            table,
            steering: None,
            rss_picks: 0,
            rss_evaluations: 0,
        }
    }

    /// Gives only ports whose replies hash back to `steering.engine`
    /// ([`crate::steer`]): the ports of one residue class modulo the engine
    /// count, found by arithmetic, so picking stays O(1) per try.
    pub fn with_steering(mut self, steering: Option<FlowSteering>) -> Self {
        self.set_steering(steering);
        self
    }

    /// Which engine's flows the ports are drawn for from now on.
    pub fn set_steering(&mut self, steering: Option<FlowSteering>) {
        self.steering = steering.filter(|s| s.engines > 1);
    }

    fn last(&self) -> u16 {
        // count - 1 <= 65535 - first.
        self.first
            .saturating_add(u16::try_from(self.count - 1).unwrap_or(u16::MAX))
    }

    /// Ports picked under RSS steering, and the Toeplitz hashes computed
    /// to find them (a port's reply reaches its engine with probability
    /// about 1/engines, so about `engines` per pick).
    pub fn rss_effort(&self) -> (u64, u64) {
        (self.rss_picks, self.rss_evaluations)
    }

    /// The range ports are taken from, inclusive.
    pub fn range(&self) -> (u16, u16) {
        (self.first, self.last())
    }

    /// A free port for a connection from `local_ip` to `remote`, or `None`
    /// if `in_use` says every port of the range is taken.
    pub fn pick(
        &mut self,
        local_ip: IpAddr,
        remote: SocketAddr,
        in_use: impl FnMut(u16) -> bool,
    ) -> Option<u16> {
        self.pick_where(local_ip, remote, in_use, |_| true)
    }

    /// As [`Self::pick`], but the port must also satisfy `accept` (an engine
    /// that must pick a port whose RSS hash lands on its own queue).
    ///
    /// RFC 6056 3.3.4, algorithm 4 ("Double-Hash Port Selection"):
    ///
    /// ```text
    /// offset = F(local_IP, remote_IP, remote_port, secret_key1);
    /// index = G(local_IP, remote_IP, remote_port, secret_key2);
    /// count = num_ephemeral;
    /// do {
    ///     port = min_ephemeral + (offset + table[index]) % num_ephemeral;
    ///     table[index]++;
    ///     if(check_suitable_port(port))
    ///         return port;
    ///     count--;
    /// } while (count > 0);
    /// return ERROR;
    /// ```
    ///
    /// F and G are the
    /// two halves of one keyed hash.  The sequence for one destination is
    /// unpredictable from outside and moves on at each use (algorithm 3's
    /// `next_ephemeral`, but per destination, so that other destinations'
    /// connections do not reveal it).
    pub fn pick_where(
        &mut self,
        local_ip: IpAddr,
        remote: SocketAddr,
        mut in_use: impl FnMut(u16) -> bool,
        mut accept: impl FnMut(u16) -> bool,
    ) -> Option<u16> {
        let h = HashInput::new(TAG_PORT)
            .ip(local_ip)
            .ip(remote.ip())
            .bytes(&remote.port().to_be_bytes())
            .hash(&self.secret);
        let offset = u64::from(h as u32);
        let index = (h >> 32) as usize % PORT_TABLE_LEN;
        // The candidates: every port of the range, or with steering those
        // whose `port >> 1` is in the engine's residue class: `2q` and
        // `2q + 1` for `q = q0 + j * engines` (two per step of `q`).
        let first = u32::from(self.first);
        let last = first + self.count - 1;
        // Under RSS the NIC's hash has no arithmetic shortcut: candidates
        // come from the whole range, each tried with the hash (expected
        // `engines` of them, whatever the range's size).
        let rss = self.steering.clone().filter(|s| s.rss.is_some());
        let (q0, stride, num) = match &self.steering {
            None => (first, 1, self.count),
            Some(_) if rss.is_some() => (first, 1, self.count),
            Some(s) => {
                let stride = u32::from(s.engines);
                let residue = u32::from(s.port_residue(local_ip, remote.ip(), remote.port()));
                let lo = first >> 1;
                let q0 = lo + (residue + stride - lo % stride) % stride;
                if q0 > last >> 1 {
                    return None;
                }
                (q0, stride, ((last >> 1) - q0) / stride * 2 + 2)
            }
        };
        for _ in 0..num {
            let counter = self.table[index];
            self.table[index] = counter.wrapping_add(1);
            let step = ((offset + u64::from(counter)) % u64::from(num)) as u32;
            let port = if stride == 1 {
                q0 + step
            } else {
                2 * (q0 + step / 2 * stride) + step % 2
            };
            // The class's first and last pair may stick out of the range.
            if port < first || port > last {
                continue;
            }
            let port = port as u16;
            if let Some(r) = &rss {
                self.rss_evaluations += 1;
                if !r.reply_reaches_us(local_ip, port, remote.ip(), remote.port()) {
                    continue;
                }
            }
            if !in_use(port) && accept(port) {
                self.rss_picks += u64::from(rss.is_some());
                return Some(port);
            }
        }
        None
    }
}

/// The MSS values a SYN cookie can encode (3 bits): the common ones
/// (RFC 9293's 536 default, IPv6's minimum 1220, tunnels and PPPoE,
/// Ethernet's 1460 for IPv4 and 1440 for IPv6, jumbo frames).
pub const COOKIE_MSS: [u16; 8] = [536, 1220, 1300, 1400, 1440, 1452, 1460, 8960];

/// The cookie's time counter ticks every 64 seconds.
const COOKIE_PERIOD_US: u64 = 64_000_000;
/// Bits of the counter kept in the cookie.
const COOKIE_COUNTER_BITS: u32 = 5;
const COOKIE_COUNTER_MASK: u32 = (1 << COOKIE_COUNTER_BITS) - 1;
/// A cookie is accepted in the period it was made and the next one: it
/// lives between 64 and 128 seconds.
const COOKIE_MAX_AGE: u32 = 1;

/// Option bits in the low bits of a cookie connection's TSval: the window
/// scale (4 bits, 15 for none) and SACK-permitted (1 bit).
const TS_OPT_BITS: u32 = 5;
const TS_WSCALE_MASK: u32 = 0xf;
const TS_WSCALE_NONE: u32 = 0xf;
const TS_SACK: u32 = 1 << 4;
/// RFC 7323 2.3: "the shift count ... MUST be limited to 14".
const MAX_WSCALE: u8 = 14;

/// What a SYN cookie connection recovers from the handshake's last ACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CookieParams {
    pub mss: u16,
    pub wscale: Option<u8>,
    pub sack_permitted: bool,
}

/// SYN cookies: the listener answers a SYN without keeping state, putting
/// what it must remember into the ISN of its SYN-ACK (RFC 4987 3.6).
///
/// Our ISN, 32 bits: the high 24 bits are a MAC (keyed SipHash) over the
/// 4-tuple, the peer's ISN, the time counter and the MSS index; the low 8
/// bits are the counter mod 32 (5 bits) and the MSS index (3 bits), XORed
/// with a mask keyed on the 4-tuple and peer ISN so that they do not show.
/// A random ACK is accepted with probability 2/32 * 2^-24 (about 4e-9).
#[derive(Clone)]
pub struct SynCookies {
    secret: KeyedState,
}

impl fmt::Debug for SynCookies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SynCookies { .. }")
    }
}

impl SynCookies {
    pub fn new(secret: KeyedState) -> Self {
        SynCookies { secret }
    }

    fn counter(now: Instant) -> u64 {
        now.total_micros() / COOKIE_PERIOD_US
    }

    fn mask(&self, local: SocketAddr, remote: SocketAddr, peer_isn: u32) -> u32 {
        HashInput::new(TAG_COOKIE_MASK)
            .addr(local)
            .addr(remote)
            .bytes(&peer_isn.to_be_bytes())
            .hash(&self.secret) as u32
            & 0xff
    }

    fn mac(
        &self,
        local: SocketAddr,
        remote: SocketAddr,
        peer_isn: u32,
        counter: u64,
        mss_index: u32,
    ) -> u32 {
        let h = HashInput::new(TAG_COOKIE_MAC)
            .addr(local)
            .addr(remote)
            .bytes(&peer_isn.to_be_bytes())
            .bytes(&counter.to_be_bytes())
            .bytes(&[mss_index as u8])
            .hash(&self.secret);
        (h >> 32) as u32 & !0xff
    }

    /// The index of the largest table MSS not above `mss` (the smallest,
    /// 536, for anything below it).
    fn mss_index(mss: u16) -> u32 {
        COOKIE_MSS.iter().rposition(|&m| m <= mss).unwrap_or(0) as u32
    }

    /// Our ISN for a SYN from `remote` to `local` whose ISN is `peer_isn`,
    /// encoding the MSS we accept from the peer (`mss`, rounded down to
    /// [`COOKIE_MSS`]).
    pub fn make(
        &self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        peer_isn: u32,
        mss: u16,
    ) -> u32 {
        let counter = Self::counter(now);
        let index = Self::mss_index(mss);
        let low = ((counter as u32 & COOKIE_COUNTER_MASK) << 3) | index;
        let mask = self.mask(local, remote, peer_isn);
        self.mac(local, remote, peer_isn, counter, index) | ((low ^ mask) & 0xff)
    }

    /// Validates the ACK completing a cookie handshake: `ack` is its ACK
    /// field (our ISN + 1), `peer_seq` its SEQ (the peer's ISN + 1).
    /// Returns the MSS encoded if the MAC matches and the cookie was made in
    /// this counter period or the previous one.
    pub fn check(
        &self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        peer_seq: u32,
        ack: u32,
    ) -> Option<u16> {
        let cookie = ack.wrapping_sub(1);
        let peer_isn = peer_seq.wrapping_sub(1);
        let low = (cookie ^ self.mask(local, remote, peer_isn)) & 0xff;
        let index = low & 7;
        let counter = Self::counter(now);
        let age = (counter as u32).wrapping_sub(low >> 3) & COOKIE_COUNTER_MASK;
        if age > COOKIE_MAX_AGE {
            return None;
        }
        let made = counter.checked_sub(u64::from(age))?;
        if self.mac(local, remote, peer_isn, made, index) != cookie & !0xff {
            return None;
        }
        COOKIE_MSS.get(index as usize).copied()
    }

    /// [`Self::check`] and, if the ACK carried a timestamp option,
    /// [`Self::decode_ts`] of its TSecr (without timestamps, a cookie
    /// connection has neither window scaling nor SACK).
    pub fn check_params(
        &self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        peer_seq: u32,
        ack: u32,
        tsecr: Option<u32>,
    ) -> Option<CookieParams> {
        let mss = self.check(now, local, remote, peer_seq, ack)?;
        let (wscale, sack_permitted) = tsecr.map_or((None, false), Self::decode_ts);
        Some(CookieParams {
            mss,
            wscale,
            sack_permitted,
        })
    }

    /// The TSval of a cookie SYN-ACK: `now_ts` with its low 5 bits replaced
    /// by the peer's window scale (4 bits, `None` as 15, clamped to 14) and
    /// SACK-permitted (1 bit), as Linux does.  The peer echoes it in TSecr.
    /// If that makes it larger than `now_ts` it is moved back 32 ticks, so
    /// that the next TSval is not smaller (RFC 7323 5.4: TSval values are
    /// "monotonically non-decreasing").
    pub fn encode_ts(&self, now_ts: u32, wscale: Option<u8>, sack: bool) -> u32 {
        let ws = wscale.map_or(TS_WSCALE_NONE, |w| u32::from(w.min(MAX_WSCALE)));
        let opts = ws | if sack { TS_SACK } else { 0 };
        let ts = (now_ts & !((1 << TS_OPT_BITS) - 1)) | opts;
        if ts > now_ts {
            ts.wrapping_sub(1 << TS_OPT_BITS)
        } else {
            ts
        }
    }

    /// The window scale and SACK-permitted encoded by [`Self::encode_ts`],
    /// from the TSecr of the handshake's ACK.
    pub fn decode_ts(tsecr: u32) -> (Option<u8>, bool) {
        let ws = tsecr & TS_WSCALE_MASK;
        let wscale = if ws == TS_WSCALE_NONE {
            None
        } else {
            Some((ws as u8).min(MAX_WSCALE))
        };
        (wscale, tsecr & TS_SACK != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rand::Rng;
    use core::net::{Ipv4Addr, Ipv6Addr};

    fn key(seed: u64) -> KeyedState {
        KeyedState::from_rng(&mut Rng::new(seed))
    }

    fn v4(a: u8, port: u16) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, a)), port)
    }

    fn v6(a: u16, port: u16) -> SocketAddr {
        SocketAddr::new(IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, a)), port)
    }

    #[test]
    fn rfc6528_3_isn_differs_per_connection_id() {
        let g = IsnGenerator::new(key(1));
        let now = Instant::from_secs(100);
        let base = g.isn(now, v4(1, 80), v4(2, 40000));
        assert_eq!(base, g.isn(now, v4(1, 80), v4(2, 40000)));
        for (l, r) in [
            (v4(1, 81), v4(2, 40000)),
            (v4(3, 80), v4(2, 40000)),
            (v4(1, 80), v4(2, 40001)),
            (v4(1, 80), v4(4, 40000)),
            (v4(2, 40000), v4(1, 80)),
            (v6(1, 80), v6(2, 40000)),
        ] {
            assert_ne!(base, g.isn(now, l, r), "{l} {r}");
        }
        // Another boot (another secret): another ISN.
        assert_ne!(
            base,
            IsnGenerator::new(key(2)).isn(now, v4(1, 80), v4(2, 40000))
        );
        // Over many tuples, no structure: the ISNs spread over the space.
        let mut high = [0u32; 16];
        for p in 0..16_000u16 {
            high[(g.isn(now, v4(1, 80), v4(2, p)) >> 28) as usize] += 1;
        }
        assert!(high.iter().all(|&n| (800..1200).contains(&n)), "{high:?}");
    }

    #[test]
    fn rfc6528_3_isn_advances_with_the_4us_clock() {
        let g = IsnGenerator::new(key(1));
        let (l, r) = (v4(1, 80), v4(2, 40000));
        let t = Instant::from_secs(7);
        let a = g.isn(t, l, r);
        assert_eq!(
            g.isn(t + core::time::Duration::from_micros(4), l, r),
            a.wrapping_add(1)
        );
        assert_eq!(
            g.isn(t + core::time::Duration::from_secs(1), l, r),
            a.wrapping_add(250_000)
        );
        // It wraps after 2^32 ticks of 4 µs.
        let wrap = core::time::Duration::from_micros(4 << 32);
        assert_eq!(g.isn(t + wrap, l, r), a);
        let _ = g.isn(Instant::from_micros(u64::MAX), l, r);
    }

    #[test]
    fn rfc6056_3_3_4_ports_spread_over_the_range() {
        let mut p = PortAllocator::new(key(3), 10_000, 65_535);
        assert_eq!(p.range(), (10_000, 65_535));
        let local = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let mut buckets = [0u32; 10];
        let mut seen = std::collections::HashSet::new();
        for i in 0..10_000u32 {
            let remote = SocketAddr::new(IpAddr::V4(Ipv4Addr::from(0x0b00_0000 + i)), 443);
            let port = p.pick(local, remote, |_| false).unwrap();
            assert!(port >= 10_000);
            buckets[usize::from(port - 10_000) * 10 / 55_536] += 1;
            seen.insert(port);
        }
        assert!(
            buckets.iter().all(|&n| (800..1200).contains(&n)),
            "{buckets:?}"
        );
        assert!(seen.len() > 8_500, "{}", seen.len());
    }

    #[test]
    fn rfc6056_3_3_4_same_destination_moves_on() {
        let mut p = PortAllocator::new(key(3), 10_000, 65_535);
        let local = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let a = p.pick(local, v4(9, 80), |_| false).unwrap();
        let b = p.pick(local, v4(9, 80), |_| false).unwrap();
        assert_ne!(a, b);
        // Another secret gives another sequence.
        let mut q = PortAllocator::new(key(4), 10_000, 65_535);
        assert_ne!(a, q.pick(local, v4(9, 80), |_| false).unwrap());
    }

    #[test]
    fn rfc6056_ports_in_use_are_skipped() {
        let mut p = PortAllocator::new(key(5), 5000, 5099);
        let local = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let mut used = [false; 65_536];
        for _ in 0..100 {
            let port = p
                .pick(local, v4(2, 80), |port| used[usize::from(port)])
                .unwrap();
            assert!((5000..=5099).contains(&port));
            assert!(!used[usize::from(port)]);
            used[usize::from(port)] = true;
        }
        // All 100 taken: none left.
        assert_eq!(
            p.pick(local, v4(2, 80), |port| used[usize::from(port)]),
            None
        );
        assert_eq!(
            p.pick(local, v4(3, 81), |port| used[usize::from(port)]),
            None
        );
    }

    #[test]
    fn rfc6056_pick_where_accepts_only_matching_ports() {
        let mut p = PortAllocator::new(key(6), 1024, 65_535);
        let local = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        for i in 0..1000u16 {
            let port = p
                .pick_where(local, v4(2, i), |_| false, |port| port % 8 == 3)
                .unwrap();
            assert_eq!(port % 8, 3);
        }
        assert_eq!(p.pick_where(local, v4(2, 1), |_| false, |_| false), None);
    }

    #[test]
    fn port_range_edges() {
        let local = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let mut p = PortAllocator::new(key(7), 0, 0);
        assert_eq!(p.range(), (1, 1));
        assert_eq!(p.pick(local, v4(1, 1), |_| false), Some(1));
        let mut p = PortAllocator::new(key(7), 65_535, 65_535);
        assert_eq!(p.pick(local, v4(1, 1), |_| false), Some(65_535));
        let mut p = PortAllocator::new(key(7), 60_000, 50_000);
        assert_eq!(p.range(), (50_000, 60_000));
        let port = p.pick(local, v6(1, 1), |_| false).unwrap();
        assert!((50_000..=60_000).contains(&port));
        let mut p = PortAllocator::new(key(7), 0, 65_535);
        assert_eq!(p.range(), (1, 65_535));
        let mut n = 0;
        assert_eq!(
            p.pick(local, v4(1, 1), |_| {
                n += 1;
                true
            }),
            None
        );
        assert_eq!(n, 65_535);
    }

    #[test]
    fn steered_ports_hash_back_to_their_engine() {
        use crate::steer::flow_hash;
        let local = IpAddr::V4(Ipv4Addr::new(10, 99, 1, 2));
        for engines in [2u16, 3, 4] {
            for engine in 0..engines {
                let steering = FlowSteering::new(engines, engine);
                let mut p =
                    PortAllocator::new(key(20), 10_000, 65_535).with_steering(Some(steering));
                let mut used = std::collections::HashSet::new();
                for i in 0..500u16 {
                    let remote = v4((i % 7) as u8, 80 + i % 3);
                    let port = p.pick(local, remote, |q| used.contains(&q)).unwrap();
                    assert!(port >= 10_000 && used.insert(port));
                    let h = flow_hash(remote.ip(), remote.port(), local, port);
                    assert_eq!(
                        FlowSteering::engine_of(h, engines),
                        engine,
                        "{engines} {port}"
                    );
                }
            }
        }
        // A range with only a few ports of the class: all of them, then none.
        let steering = FlowSteering::new(4, 1);
        let mut p = PortAllocator::new(key(21), 5000, 5009).with_steering(Some(steering));
        let mut used = std::collections::HashSet::new();
        while let Some(port) = p.pick(local, v4(9, 80), |q| used.contains(&q)) {
            assert!((5000..=5009).contains(&port) && used.insert(port));
        }
        let class = (5000..=5009u16)
            .filter(|&q| FlowSteering::engine_of(flow_hash(local, q, v4(9, 80).ip(), 80), 4) == 1)
            .count();
        assert_eq!(used.len(), class);
        assert!(class >= 2);
        // One engine: no constraint.
        let mut p =
            PortAllocator::new(key(22), 5000, 5000).with_steering(Some(FlowSteering::new(1, 0)));
        assert_eq!(p.pick(local, v4(9, 80), |_| false), Some(5000));
    }

    /// The flow hash is the same sum over IPv6 (the address part folds
    /// the XOR of the addresses' words), so the residue arithmetic that
    /// picks IPv4 ports picks IPv6 ones too: each reply, as the peer sends
    /// it, hashes to the engine that opened the connection.
    #[test]
    fn steered_ipv6_ports_hash_back_to_their_engine() {
        use crate::steer::flow_hash;
        let locals = [
            IpAddr::V6(Ipv6Addr::new(0xfd00, 0x99, 0, 2, 0, 0, 0, 2)),
            IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0x200, 0xff, 0xfe00, 0x202)),
        ];
        for engines in [2u16, 3, 4] {
            for engine in 0..engines {
                let steering = FlowSteering::new(engines, engine);
                let mut p =
                    PortAllocator::new(key(24), 10_000, 65_535).with_steering(Some(steering));
                let mut used = std::collections::HashSet::new();
                let mut per_remote = std::collections::HashMap::new();
                for i in 0..500u16 {
                    let local = locals[usize::from(i % 2)];
                    let remote = SocketAddr::new(
                        IpAddr::V6(Ipv6Addr::new(0xfd00, 0x99, i % 5, 0, 0, 0, i % 7, 1)),
                        [80, 443, 8080][usize::from(i % 3)],
                    );
                    let port = p.pick(local, remote, |q| used.contains(&q)).unwrap();
                    assert!(port >= 10_000 && used.insert(port));
                    let back = flow_hash(remote.ip(), remote.port(), local, port);
                    assert_eq!(
                        FlowSteering::engine_of(back, engines),
                        engine,
                        "{engines} engines: {local} port {port} to {remote}"
                    );
                    assert!(steering_of(&p).reply_reaches_us(
                        local,
                        port,
                        remote.ip(),
                        remote.port()
                    ));
                    *per_remote.entry((local, remote)).or_insert(0u32) += 1;
                }
                // Many destinations, each with several ports: not a
                // degenerate single choice.
                assert!(per_remote.len() > 20, "{}", per_remote.len());
            }
        }
    }

    fn steering_of(p: &PortAllocator) -> &FlowSteering {
        p.steering.as_ref().unwrap()
    }

    #[test]
    fn under_rss_ports_bring_replies_to_the_nic_queue_of_their_engine() {
        use crate::steer::{RssSteering, SYMMETRIC_KEY};
        use std::sync::Arc;
        let local4 = IpAddr::V4(Ipv4Addr::new(10, 99, 1, 2));
        let local6 = IpAddr::V6(std::net::Ipv6Addr::new(0xfd99, 0, 0, 1, 0, 0, 0, 2));
        for engines in [2u16, 4] {
            let rss = Arc::new(RssSteering::round_robin(&SYMMETRIC_KEY, 128, engines).unwrap());
            for engine in 0..engines {
                let steering = FlowSteering {
                    engines,
                    engine,
                    rss: Some(rss.clone()),
                };
                let mut p =
                    PortAllocator::new(key(23), 10_000, 65_535).with_steering(Some(steering));
                let mut used = std::collections::HashSet::new();
                for i in 0..500u16 {
                    let (local, remote) = if i % 2 == 0 {
                        (local4, v4((i % 7) as u8, 80 + i % 3))
                    } else {
                        (local6, v6(i % 7, 443))
                    };
                    let port = p.pick(local, remote, |q| used.contains(&q)).unwrap();
                    assert!(port >= 10_000 && used.insert(port));
                    // The NIC hashes the reply: from the remote to us.
                    assert_eq!(
                        rss.queue_of_flow(remote.ip(), remote.port(), local, port),
                        engine
                    );
                }
                let (picks, evaluations) = p.rss_effort();
                assert_eq!(picks, 500);
                // About `engines` per pick; far from a scan of the range.
                assert!(
                    evaluations < picks * u64::from(engines) * 2,
                    "{evaluations} hashes for {picks} ports over {engines} engines"
                );
            }
        }
    }

    const NOW: Instant = Instant::from_secs(1_000_000);

    #[test]
    fn rfc4987_3_6_cookie_round_trip() {
        let c = SynCookies::new(key(8));
        let (l, r) = (v4(1, 80), v4(2, 40000));
        for (mss, expect) in [
            (1460, 1460),
            (1459, 1452),
            (9000, 8960),
            (1220, 1220),
            (100, 536),
            (u16::MAX, 8960),
        ] {
            for peer_isn in [0, 1, 0xffff_ffff, 0x1234_5678] {
                let isn = c.make(NOW, l, r, peer_isn, mss);
                let got = c.check(NOW, l, r, peer_isn.wrapping_add(1), isn.wrapping_add(1));
                assert_eq!(got, Some(expect), "mss {mss} peer_isn {peer_isn}");
            }
        }
        let isn = c.make(NOW, v6(1, 443), v6(2, 5555), 7, 1440);
        assert_eq!(
            c.check(NOW, v6(1, 443), v6(2, 5555), 8, isn.wrapping_add(1)),
            Some(1440)
        );
    }

    #[test]
    fn rfc4987_3_6_cookie_fails_for_any_changed_field() {
        let c = SynCookies::new(key(9));
        let (l, r, peer_isn) = (v4(1, 80), v4(2, 40000), 0xdead_beef_u32);
        let isn = c.make(NOW, l, r, peer_isn, 1460);
        let (seq, ack) = (peer_isn.wrapping_add(1), isn.wrapping_add(1));
        assert!(c.check(NOW, l, r, seq, ack).is_some());
        assert_eq!(c.check(NOW, v4(1, 81), r, seq, ack), None);
        assert_eq!(c.check(NOW, v4(3, 80), r, seq, ack), None);
        assert_eq!(c.check(NOW, l, v4(2, 40001), seq, ack), None);
        assert_eq!(c.check(NOW, l, v4(4, 40000), seq, ack), None);
        assert_eq!(c.check(NOW, r, l, seq, ack), None);
        assert_eq!(c.check(NOW, l, r, seq.wrapping_add(1), ack), None);
        assert_eq!(c.check(NOW, l, r, seq, isn), None);
        for bit in 0..32 {
            assert_eq!(c.check(NOW, l, r, seq, ack ^ (1 << bit)), None, "bit {bit}");
        }
        // Another secret (another boot) does not accept it.
        assert_eq!(SynCookies::new(key(10)).check(NOW, l, r, seq, ack), None);
    }

    #[test]
    fn rfc4987_3_6_cookie_lifetime() {
        let c = SynCookies::new(key(11));
        let (l, r) = (v4(1, 80), v4(2, 40000));
        // Made at the start of a 64 s period: valid through the next one.
        let made = Instant::from_secs(64 * 1000);
        let isn = c.make(made, l, r, 5, 1460);
        let check = |secs: u64| {
            c.check(
                made + core::time::Duration::from_secs(secs),
                l,
                r,
                6,
                isn.wrapping_add(1),
            )
        };
        assert_eq!(check(0), Some(1460));
        assert_eq!(check(63), Some(1460));
        assert_eq!(check(127), Some(1460));
        assert_eq!(check(128), None);
        assert_eq!(check(1000), None);
        // 32 periods later the 5-bit counter is the same, the MAC is not.
        assert_eq!(check(32 * 64), None);
        // A check "before" it was made (clock origin, or a cookie from the
        // future) fails too.
        assert_eq!(
            c.check(
                made - core::time::Duration::from_secs(64),
                l,
                r,
                6,
                isn.wrapping_add(1)
            ),
            None
        );
        let isn0 = c.make(Instant::ZERO, l, r, 5, 1460);
        assert_eq!(
            c.check(Instant::ZERO, l, r, 6, isn0.wrapping_add(1)),
            Some(1460)
        );
    }

    #[test]
    fn rfc4987_3_6_forged_acks_do_not_validate() {
        let c = SynCookies::new(key(12));
        let (l, r) = (v4(1, 80), v4(2, 40000));
        let mut rng = Rng::new(13);
        let mut valid = 0;
        for _ in 0..1_000_000 {
            let x = rng.next_u64();
            if c.check(NOW, l, r, x as u32, (x >> 32) as u32).is_some() {
                valid += 1;
            }
        }
        assert!(valid < 2, "seed 13: {valid} forged ACKs validated");
    }

    #[test]
    fn cookie_isns_look_random() {
        // The low byte (counter and MSS index) is masked: over many
        // connections at the same time and MSS, it takes many values.
        let c = SynCookies::new(key(14));
        let mut low = std::collections::HashSet::new();
        for p in 0..2000 {
            low.insert(c.make(NOW, v4(1, 80), v4(2, p), 1, 1460) & 0xff);
        }
        assert!(low.len() > 200, "{}", low.len());
    }

    #[test]
    fn rfc7323_cookie_options_in_timestamps_round_trip() {
        let c = SynCookies::new(key(15));
        for now_ts in [0u32, 5, 31, 32, 1_000_000, 0xffff_ffe0, u32::MAX] {
            for ws in [None, Some(0), Some(7), Some(14), Some(15), Some(255)] {
                for sack in [false, true] {
                    let ts = c.encode_ts(now_ts, ws, sack);
                    // Not ahead of the clock, and at most 63 behind it.
                    assert!(now_ts.wrapping_sub(ts) < 64, "{now_ts} {ts}");
                    let (w, s) = SynCookies::decode_ts(ts);
                    assert_eq!(w, ws.map(|w| w.min(14)));
                    assert_eq!(s, sack);
                }
            }
        }
        let p = c.check_params(
            NOW,
            v4(1, 80),
            v4(2, 9),
            1,
            c.make(NOW, v4(1, 80), v4(2, 9), 0, 1460).wrapping_add(1),
            Some(c.encode_ts(12345, Some(7), true)),
        );
        assert_eq!(
            p,
            Some(CookieParams {
                mss: 1460,
                wscale: Some(7),
                sack_permitted: true
            })
        );
    }
}
