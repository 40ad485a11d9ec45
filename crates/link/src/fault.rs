//! A link wrapper that loses, duplicates, corrupts, reorders and delays
//! frames, deterministically from a seed.
//!
//! Faults apply to each direction on its own: frames the inner link receives
//! pass the receive impairer before `rx_burst` hands them out; frames given
//! to `tx_burst` pass the transmit impairer before the inner link sends them.
//! Each direction has its own generator (SplitMix64), so a run replays bit
//! for bit from the seed and the order of calls.
//!
//! A frame's way through one direction:
//! 1. loss: dropped (recycled into the inner link's pool);
//! 2. duplicate: a copy is made in a fresh buffer of the inner link (counted
//!    as `dup_no_buffer` when the pool is empty), before corruption;
//! 3. corrupt: one random bit of one random byte is flipped;
//! 4. delay: each copy is held until `now + delay_us + U[0, jitter_us]`
//!    (jitter can reorder, as in netem);
//! 5. reorder: a released frame may be held back until the next frame has
//!    gone out, or at most [`REORDER_MAX_HOLD`] if none follows.
//!
//! Time comes from `Instant::now()` unless a simulation sets it with
//! [`FaultLink::set_time`]. Held frames are released when the link is
//! called (`rx_burst`, `tx_burst`, [`FaultLink::poll`]); [`FaultLink::next_event`]
//! tells when to call next. Every frame held is eventually released, dropped
//! and counted, or recycled when the link is dropped.

use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use crate::{Link, LinkInfo, LinkStats, PacketBuffer, MAX_BURST};

/// The longest a frame is held back for reordering when no frame follows it.
pub const REORDER_MAX_HOLD: Duration = Duration::from_millis(2);

/// Frames each direction may hold (delayed, held back, ready) by default.
pub const DEFAULT_HOLD_LIMIT: usize = 4096;

/// A small, fast, seedable generator (SplitMix64). Not for secrets.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [0, n); 0 when n is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// True with probability `p` (clamped to [0, 1]; NaN is 0). Always
    /// draws, so the stream's position does not depend on `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        let x = self.next_f64();
        p > 0.0 && x < p
    }
}

/// What to do to the frames of one direction (or both, with
/// [`FaultLink::new`]). All zero, the default, passes frames unchanged.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FaultConfig {
    /// Probability that a frame is dropped.
    pub loss: f64,
    /// Probability that a frame is sent twice.
    pub duplicate: f64,
    /// Probability that a frame is held back behind the next one.
    pub reorder: f64,
    /// Probability that one bit of a frame is flipped.
    pub corrupt: f64,
    /// Fixed delay of every frame, microseconds.
    pub delay_us: u64,
    /// Extra random delay, uniform in [0, jitter_us] microseconds.
    pub jitter_us: u64,
    /// The generator's seed.
    pub seed: u64,
}

/// Counters of one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultDirStats {
    /// Frames that entered the impairer.
    pub frames_in: u64,
    /// Frames that left it (to the engine on rx, to the inner link on tx).
    pub frames_out: u64,
    pub lost: u64,
    pub duplicated: u64,
    /// Duplicates not made for want of a buffer.
    pub dup_no_buffer: u64,
    pub corrupted: u64,
    /// Of those, frames whose partial checksum was finished before the
    /// flip.
    pub completed_before_corrupt: u64,
    /// Frames held for a delay (`delay_us` or jitter above zero).
    pub delayed: u64,
    /// Frames held back and released after the frame behind them.
    pub reordered: u64,
    /// Frames held back but released by [`REORDER_MAX_HOLD`], no frame
    /// having followed.
    pub reorder_timeouts: u64,
    /// Frames dropped because the direction already held its limit.
    pub hold_overflow: u64,
}

/// Counters of both directions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultStats {
    pub rx: FaultDirStats,
    pub tx: FaultDirStats,
}

/// One direction's impairments and the frames it holds.
struct Impairer<B> {
    cfg: FaultConfig,
    rng: SplitMix64,
    /// Delayed frames, sorted by release time (ties in arrival order).
    held: VecDeque<(Instant, B)>,
    /// A frame held back for reordering, and when it must go at the latest.
    stash: Option<(Instant, B)>,
    /// Released frames, in the order they leave.
    ready: VecDeque<B>,
    limit: usize,
    stats: FaultDirStats,
}

impl<B: PacketBuffer> Impairer<B> {
    fn new(cfg: FaultConfig, salt: u64, limit: usize) -> Impairer<B> {
        // Mix the salt in through the generator, so seeds 0 and 1 on rx and
        // tx do not give overlapping streams.
        let seed = SplitMix64::new(cfg.seed ^ salt).next_u64();
        Impairer {
            cfg,
            rng: SplitMix64::new(seed),
            held: VecDeque::with_capacity(limit),
            stash: None,
            ready: VecDeque::with_capacity(limit),
            limit,
            stats: FaultDirStats::default(),
        }
    }

    /// Frames held in any stage.
    fn queued(&self) -> usize {
        self.held.len() + self.ready.len() + usize::from(self.stash.is_some())
    }

    /// Takes a frame in.
    fn push<L: Link<Buf = B>>(&mut self, inner: &mut L, mut buf: B, now: Instant) {
        self.stats.frames_in += 1;
        if self.rng.chance(self.cfg.loss) {
            self.stats.lost += 1;
            inner.recycle(buf);
            return;
        }
        let mut copy = None;
        if self.rng.chance(self.cfg.duplicate) {
            match inner.alloc_tx() {
                Some(mut c) if c.capacity() >= buf.data().len() => {
                    c.set_len(buf.data().len());
                    c.data_mut().copy_from_slice(buf.data());
                    // A copy of a frame with a partial checksum is one too.
                    c.set_csum_partial(buf.csum_partial());
                    self.stats.duplicated += 1;
                    copy = Some(c);
                }
                Some(c) => {
                    inner.recycle(c);
                    self.stats.dup_no_buffer += 1;
                }
                None => self.stats.dup_no_buffer += 1,
            }
        }
        if self.rng.chance(self.cfg.corrupt) {
            let len = buf.data().len() as u64;
            if len > 0 {
                // A wire carries whole checksums: one left for an offload
                // (a veth peer's, or ours on transmit) is finished first,
                // so the flip is one a receiver can catch, as on a wire.
                if buf.csum_partial() && wire::partial_checksum::complete(buf.data_mut()) {
                    buf.set_csum_partial(false);
                    self.stats.completed_before_corrupt += 1;
                }
                let byte = self.rng.below(len) as usize;
                let bit = self.rng.below(8);
                buf.data_mut()[byte] ^= 1 << bit;
                self.stats.corrupted += 1;
            }
        }
        self.schedule(inner, buf, now);
        if let Some(c) = copy {
            self.schedule(inner, c, now);
        }
    }

    /// Holds a frame for its delay, or releases it now.
    fn schedule<L: Link<Buf = B>>(&mut self, inner: &mut L, buf: B, now: Instant) {
        let mut delay = self.cfg.delay_us;
        if self.cfg.jitter_us > 0 {
            delay += self.rng.below(self.cfg.jitter_us + 1);
        }
        if delay == 0 {
            self.release(buf, now);
            return;
        }
        if self.queued() >= self.limit {
            self.stats.hold_overflow += 1;
            inner.recycle(buf);
            return;
        }
        let at = now + Duration::from_micros(delay);
        let pos = self.held.partition_point(|(t, _)| *t <= at);
        self.held.insert(pos, (at, buf));
        self.stats.delayed += 1;
    }

    /// A frame's delay is over: it leaves, unless held back for reordering.
    fn release(&mut self, buf: B, now: Instant) {
        if self.stash.is_none() && self.rng.chance(self.cfg.reorder) {
            self.stash = Some((now + REORDER_MAX_HOLD, buf));
            return;
        }
        self.ready.push_back(buf);
        if let Some((_, held_back)) = self.stash.take() {
            self.stats.reordered += 1;
            self.ready.push_back(held_back);
        }
    }

    /// Releases every frame whose time has come.
    fn poll(&mut self, now: Instant) {
        while self.held.front().is_some_and(|(t, _)| *t <= now) {
            let (_, buf) = self.held.pop_front().expect("front checked above");
            self.release(buf, now);
        }
        if self.stash.as_ref().is_some_and(|(t, _)| *t <= now) {
            let (_, buf) = self.stash.take().expect("checked above");
            self.stats.reorder_timeouts += 1;
            self.ready.push_back(buf);
        }
    }

    /// When the next held frame is due.
    fn next_due(&self) -> Option<Instant> {
        let held = self.held.front().map(|(t, _)| *t);
        let stash = self.stash.as_ref().map(|(t, _)| *t);
        match (held, stash) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Hands every frame held to `f`.
    fn drain_all(&mut self, mut f: impl FnMut(B)) {
        self.held.drain(..).for_each(|(_, b)| f(b));
        if let Some((_, b)) = self.stash.take() {
            f(b);
        }
        self.ready.drain(..).for_each(&mut f);
    }
}

/// Where the fault link's time comes from.
#[derive(Debug, Clone, Copy)]
enum Clock {
    Real,
    Manual(Instant),
}

/// A link that impairs the frames of the link it wraps.
pub struct FaultLink<L: Link> {
    inner: L,
    rx: Impairer<L::Buf>,
    tx: Impairer<L::Buf>,
    /// Frames the tx impairer released that the inner link has not taken.
    tx_pending: Vec<L::Buf>,
    /// Frames just received from the inner link.
    rx_scratch: Vec<L::Buf>,
    clock: Clock,
}

impl<L: Link> FaultLink<L> {
    /// Wraps `inner`, applying `config` to both directions (each with its
    /// own generator stream from `config.seed`).
    pub fn new(inner: L, config: FaultConfig) -> FaultLink<L> {
        FaultLink::with_directions(inner, config.clone(), config)
    }

    /// Wraps `inner` with different impairments on receive and transmit.
    pub fn with_directions(inner: L, rx: FaultConfig, tx: FaultConfig) -> FaultLink<L> {
        FaultLink::with_limit(inner, rx, tx, DEFAULT_HOLD_LIMIT)
    }

    /// Like [`FaultLink::with_directions`], holding at most `limit` frames
    /// per direction (beyond it, rx frames are dropped and counted and
    /// `tx_burst` leaves frames with the caller).
    pub fn with_limit(inner: L, rx: FaultConfig, tx: FaultConfig, limit: usize) -> FaultLink<L> {
        let limit = limit.max(1);
        FaultLink {
            inner,
            rx: Impairer::new(rx, 0x7278_0000_0000_0001, limit),
            tx: Impairer::new(tx, 0x7478_0000_0000_0002, limit),
            tx_pending: Vec::with_capacity(MAX_BURST),
            rx_scratch: Vec::with_capacity(MAX_BURST),
            clock: Clock::Real,
        }
    }

    /// Uses `now` as the time from here on (virtual time for simulation),
    /// until [`FaultLink::use_real_clock`].
    pub fn set_time(&mut self, now: Instant) {
        self.clock = Clock::Manual(now);
    }

    /// Goes back to `Instant::now()`.
    pub fn use_real_clock(&mut self) {
        self.clock = Clock::Real;
    }

    fn now(&self) -> Instant {
        match self.clock {
            Clock::Real => Instant::now(),
            Clock::Manual(t) => t,
        }
    }

    /// The link wrapped.
    pub fn inner(&self) -> &L {
        &self.inner
    }

    /// The link wrapped, mutably (frames sent through it skip the faults).
    pub fn inner_mut(&mut self) -> &mut L {
        &mut self.inner
    }

    /// Counters of both directions.
    pub fn fault_stats(&self) -> FaultStats {
        FaultStats {
            rx: self.rx.stats,
            tx: self.tx.stats,
        }
    }

    /// Frames held in either direction now.
    pub fn held(&self) -> usize {
        self.rx.queued() + self.tx.queued() + self.tx_pending.len()
    }

    /// When the link next has something to do without new input: now, if
    /// frames are ready; else when the next held frame is due; `None` when
    /// nothing is held.
    pub fn next_event(&self) -> Option<Instant> {
        if !self.rx.ready.is_empty() || !self.tx.ready.is_empty() || !self.tx_pending.is_empty() {
            return Some(self.now());
        }
        match (self.rx.next_due(), self.tx.next_due()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Releases what is due and sends what the tx side released.
    pub fn poll(&mut self) -> io::Result<()> {
        let now = self.now();
        self.rx.poll(now);
        self.flush_tx(now)
    }

    fn flush_tx(&mut self, now: Instant) -> io::Result<()> {
        self.tx.poll(now);
        loop {
            while self.tx_pending.len() < MAX_BURST {
                let Some(b) = self.tx.ready.pop_front() else {
                    break;
                };
                self.tx_pending.push(b);
            }
            if self.tx_pending.is_empty() {
                return Ok(());
            }
            let before = self.tx_pending.len();
            self.inner.tx_burst(&mut self.tx_pending)?;
            let sent = before - self.tx_pending.len();
            self.tx.stats.frames_out += sent as u64;
            if !self.tx_pending.is_empty() || sent == 0 {
                return Ok(());
            }
        }
    }
}

impl<L: Link> Link for FaultLink<L> {
    type Buf = L::Buf;

    fn lend_budget(&self) -> usize {
        self.inner().lend_budget()
    }

    fn rx_burst(&mut self, out: &mut Vec<L::Buf>, max: usize) -> io::Result<usize> {
        let max = max.min(MAX_BURST);
        let now = self.now();
        self.rx.poll(now);
        let mut result = Ok(());
        if self.rx.ready.len() < max {
            let mut scratch = std::mem::take(&mut self.rx_scratch);
            result = self
                .inner
                .rx_burst(&mut scratch, max - self.rx.ready.len())
                .map(|_| ());
            for b in scratch.drain(..) {
                self.rx.push(&mut self.inner, b, now);
            }
            self.rx_scratch = scratch;
        }
        let n = self.rx.ready.len().min(max);
        out.extend(self.rx.ready.drain(..n));
        self.rx.stats.frames_out += n as u64;
        // Frames delayed on tx go out even if the engine sends nothing new.
        let tx_result = self.flush_tx(now);
        if n == 0 {
            result?;
            tx_result?;
        }
        Ok(n)
    }

    fn alloc_tx(&mut self) -> Option<L::Buf> {
        self.inner.alloc_tx()
    }

    fn alloc_tx_reserved(&mut self) -> Option<L::Buf> {
        self.inner.alloc_tx_reserved()
    }

    fn tx_burst(&mut self, bufs: &mut Vec<L::Buf>) -> io::Result<usize> {
        let now = self.now();
        self.flush_tx(now)?;
        let room = self
            .tx
            .limit
            .saturating_sub(self.tx.queued() + self.tx_pending.len());
        let take = bufs.len().min(room);
        for b in bufs.drain(..take) {
            self.tx.push(&mut self.inner, b, now);
        }
        self.flush_tx(now)?;
        Ok(take)
    }

    fn recycle(&mut self, buf: L::Buf) {
        self.inner.recycle(buf);
    }

    fn info(&self) -> &LinkInfo {
        self.inner.info()
    }

    fn stats(&self) -> LinkStats {
        self.inner.stats()
    }

    fn service(&mut self) -> io::Result<()> {
        self.inner.service()?;
        self.poll()
    }

    fn next_event(&self) -> Option<Instant> {
        let mine = FaultLink::next_event(self);
        match (mine, self.inner.next_event()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn rx_fd(&self) -> Option<RawFd> {
        self.inner.rx_fd()
    }

    fn droppable_in_fork_child(&self) -> bool {
        self.inner.droppable_in_fork_child()
    }

    fn serve_addresses(
        &self,
        v4: &[std::net::Ipv4Addr],
        v6: &[std::net::Ipv6Addr],
    ) -> io::Result<bool> {
        self.inner.serve_addresses(v4, v6)
    }

    fn serve_kernel_ports(
        &self,
        mode: crate::KernelPorts,
        tcp: &[u16],
        udp: &[u16],
    ) -> std::io::Result<bool> {
        self.inner.serve_kernel_ports(mode, tcp, udp)
    }
}

impl<L: Link> Drop for FaultLink<L> {
    fn drop(&mut self) {
        let inner = &mut self.inner;
        self.rx.drain_all(|b| inner.recycle(b));
        self.tx.drain_all(|b| inner.recycle(b));
        for b in self.tx_pending.drain(..) {
            inner.recycle(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{MemoryConfig, MemoryLink};

    fn pair() -> (MemoryLink, MemoryLink) {
        let mut cfg = MemoryConfig::new(1500, 4096);
        cfg.queue_len = 2048;
        MemoryLink::pair_with(&cfg)
    }

    fn frame(link: &mut impl Link<Buf = crate::PoolBuf>, seq: u32) -> crate::PoolBuf {
        let mut b = link.alloc_tx().expect("pool has room");
        b.set_len(64);
        b.data_mut().fill(0);
        b.data_mut()[..4].copy_from_slice(&seq.to_be_bytes());
        b
    }

    fn seq_of(b: &[u8]) -> u32 {
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Sends `n` frames one at a time through the faulty side and returns
    /// the frames as the other side saw them.
    fn run_tx(cfg: FaultConfig, n: u32) -> (Vec<Vec<u8>>, FaultStats) {
        let (a, mut b) = pair();
        let mut f = FaultLink::with_directions(a, FaultConfig::default(), cfg);
        let t0 = Instant::now();
        f.set_time(t0);
        let mut seen = Vec::new();
        let mut out = Vec::new();
        for i in 0..n {
            f.set_time(t0 + Duration::from_micros(u64::from(i) * 10));
            let fr = frame(&mut f, i);
            let mut v = vec![fr];
            f.tx_burst(&mut v).unwrap();
            assert!(v.is_empty());
            while b.rx_burst(&mut out, MAX_BURST).unwrap() > 0 {
                for x in out.drain(..) {
                    seen.push(x.data().to_vec());
                    b.recycle(x);
                }
            }
        }
        // Let everything held go.
        f.set_time(t0 + Duration::from_secs(10));
        f.poll().unwrap();
        while b.rx_burst(&mut out, MAX_BURST).unwrap() > 0 {
            for x in out.drain(..) {
                seen.push(x.data().to_vec());
                b.recycle(x);
            }
        }
        assert_eq!(f.held(), 0);
        let stats = f.fault_stats();
        (seen, stats)
    }

    #[test]
    fn splitmix_is_uniform_enough() {
        let mut r = SplitMix64::new(42);
        let mut buckets = [0u32; 10];
        for _ in 0..100_000 {
            buckets[r.below(10) as usize] += 1;
        }
        for b in buckets {
            assert!((9_000..11_000).contains(&b), "{buckets:?}");
        }
        let mean: f64 = (0..100_000).map(|_| r.next_f64()).sum::<f64>() / 100_000.0;
        assert!((mean - 0.5).abs() < 0.01);
    }

    #[test]
    fn all_zero_passes_frames_unchanged_in_order() {
        let (seen, stats) = run_tx(FaultConfig::default(), 1000);
        assert_eq!(seen.len(), 1000);
        for (i, f) in seen.iter().enumerate() {
            assert_eq!(seq_of(f), i as u32);
            assert!(f[4..].iter().all(|&x| x == 0));
        }
        assert_eq!(stats.tx.frames_in, 1000);
        assert_eq!(stats.tx.frames_out, 1000);
        assert_eq!(stats.tx.lost + stats.tx.duplicated + stats.tx.corrupted, 0);
    }

    #[test]
    fn loss_is_near_its_rate_and_replays_from_the_seed() {
        let cfg = FaultConfig {
            loss: 0.1,
            seed: 7,
            ..FaultConfig::default()
        };
        let (seen1, s1) = run_tx(cfg.clone(), 10_000);
        let (seen2, s2) = run_tx(cfg.clone(), 10_000);
        assert!((900..=1100).contains(&s1.tx.lost), "lost {}", s1.tx.lost);
        assert_eq!(seen1.len() as u64, 10_000 - s1.tx.lost);
        assert_eq!(seen1, seen2, "same seed, same run");
        assert_eq!(s1, s2);
        let (seen3, _) = run_tx(FaultConfig { seed: 8, ..cfg }, 10_000);
        assert_ne!(seen1, seen3, "another seed, another run");
    }

    #[test]
    fn duplicate_is_observable() {
        let cfg = FaultConfig {
            duplicate: 0.2,
            seed: 1,
            ..FaultConfig::default()
        };
        let (seen, s) = run_tx(cfg, 1000);
        assert!(s.tx.duplicated > 100 && s.tx.duplicated < 300);
        assert_eq!(seen.len() as u64, 1000 + s.tx.duplicated);
        let dups = seen.windows(2).filter(|w| w[0] == w[1]).count() as u64;
        assert_eq!(dups, s.tx.duplicated);
    }

    #[test]
    fn corrupt_flips_one_bit() {
        let cfg = FaultConfig {
            corrupt: 0.3,
            seed: 2,
            ..FaultConfig::default()
        };
        let (seen, s) = run_tx(cfg, 1000);
        assert_eq!(seen.len(), 1000);
        let mut flipped = 0;
        for (i, f) in seen.iter().enumerate() {
            let mut want = vec![0u8; 64];
            want[..4].copy_from_slice(&(i as u32).to_be_bytes());
            let bits: u32 = f.iter().zip(&want).map(|(a, b)| (a ^ b).count_ones()).sum();
            assert!(bits <= 1);
            flipped += bits;
        }
        assert_eq!(u64::from(flipped), s.tx.corrupted);
        assert!(flipped > 200 && flipped < 400);
    }

    /// A UDP datagram 10.99.0.1 -> 10.99.0.2 whose checksum field holds
    /// the partial form (the pseudo-header's sum), as a veth peer with
    /// offload sends it.
    fn partial_udp(link: &mut impl Link<Buf = crate::PoolBuf>, seq: u32) -> crate::PoolBuf {
        let mut b = link.alloc_tx().expect("pool has room");
        b.set_len(14 + 20 + 8 + 32);
        let f = b.data_mut();
        f.fill(0);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&60u16.to_be_bytes());
        f[22] = 64;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 99, 0, 1]);
        f[30..34].copy_from_slice(&[10, 99, 0, 2]);
        f[34..36].copy_from_slice(&4000u16.to_be_bytes());
        f[36..38].copy_from_slice(&7u16.to_be_bytes());
        f[38..40].copy_from_slice(&40u16.to_be_bytes());
        f[42..46].copy_from_slice(&seq.to_be_bytes());
        f[46..].fill(0x5a);
        let pseudo = wire::checksum::pseudo_header_v4(
            &[10, 99, 0, 1].into(),
            &[10, 99, 0, 2].into(),
            wire::ip::IpProtocol::Udp,
            40,
        );
        f[40..42].copy_from_slice(&pseudo.to_be_bytes());
        assert!(wire::partial_checksum::holds_partial_form(f));
        b.set_csum_partial(true);
        b
    }

    #[test]
    fn corrupt_finishes_a_partial_checksum_first_so_the_flip_is_caught() {
        let (a, mut b) = pair();
        let cfg = FaultConfig {
            corrupt: 1.0,
            seed: 5,
            ..FaultConfig::default()
        };
        let mut f = FaultLink::with_directions(a, FaultConfig::default(), cfg);
        f.set_time(Instant::now());
        let mut out = Vec::new();
        let (mut in_segment, mut caught) = (0, 0);
        for i in 0..500 {
            let mut v = vec![partial_udp(&mut f, i)];
            f.tx_burst(&mut v).unwrap();
            while b.rx_burst(&mut out, MAX_BURST).unwrap() > 0 {
                for x in out.drain(..) {
                    assert!(!x.csum_partial(), "the injector finished the checksum");
                    let d = x.data();
                    // A flip in the UDP segment or the addresses (the
                    // pseudo-header) must fail the whole checksum.
                    let pseudo = wire::checksum::pseudo_header_v4(
                        &[d[26], d[27], d[28], d[29]].into(),
                        &[d[30], d[31], d[32], d[33]].into(),
                        wire::ip::IpProtocol::Udp,
                        40,
                    );
                    let ok = wire::checksum::combine(&[pseudo, wire::checksum::data(&d[34..74])])
                        == 0xffff;
                    let clean = partial_udp(&mut b, i);
                    // The checksum field differs anyway (finished).
                    let flipped = d
                        .iter()
                        .zip(clean.data())
                        .enumerate()
                        .position(|(at, (p, q))| p != q && !(40..42).contains(&at));
                    b.recycle(clean);
                    if let Some(at) = flipped {
                        if (26..74).contains(&at) {
                            in_segment += 1;
                            caught += usize::from(!ok);
                        }
                    }
                    b.recycle(x);
                }
            }
        }
        let s = f.fault_stats();
        assert_eq!(s.tx.corrupted, 500);
        assert_eq!(s.tx.completed_before_corrupt, 500);
        assert!(in_segment > 300, "{in_segment} flips in the segment");
        assert_eq!(caught, in_segment, "every flip in the segment is caught");
    }

    #[test]
    fn reorder_swaps_neighbours() {
        let cfg = FaultConfig {
            reorder: 0.1,
            seed: 3,
            ..FaultConfig::default()
        };
        let (seen, s) = run_tx(cfg, 1000);
        assert_eq!(seen.len(), 1000);
        let seqs: Vec<u32> = seen.iter().map(|f| seq_of(f)).collect();
        let inversions = seqs.windows(2).filter(|w| w[0] > w[1]).count() as u64;
        assert!(s.tx.reordered > 50, "{s:?}");
        assert_eq!(inversions, s.tx.reordered);
        let mut sorted = seqs.clone();
        sorted.sort();
        assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn reorder_without_follower_times_out() {
        let (a, mut b) = pair();
        let cfg = FaultConfig {
            reorder: 1.0,
            ..FaultConfig::default()
        };
        let mut f = FaultLink::with_directions(a, FaultConfig::default(), cfg);
        let t0 = Instant::now();
        f.set_time(t0);
        let fr = frame(&mut f, 5);
        f.tx_burst(&mut vec![fr]).unwrap();
        assert_eq!(f.held(), 1);
        assert_eq!(f.next_event(), Some(t0 + REORDER_MAX_HOLD));
        f.set_time(t0 + REORDER_MAX_HOLD);
        f.poll().unwrap();
        assert_eq!(f.held(), 0);
        assert_eq!(b.rx_pending(), 1);
        assert_eq!(f.fault_stats().tx.reorder_timeouts, 1);
        let mut out = Vec::new();
        b.rx_burst(&mut out, 1).unwrap();
        assert_eq!(seq_of(out[0].data()), 5);
    }

    #[test]
    fn delay_holds_frames_until_due() {
        let (mut a, b) = pair();
        let cfg = FaultConfig {
            delay_us: 1000,
            jitter_us: 500,
            seed: 4,
            ..FaultConfig::default()
        };
        // Impair the receive side of `b`.
        let mut f = FaultLink::with_directions(b, cfg, FaultConfig::default());
        let t0 = Instant::now();
        f.set_time(t0);
        for i in 0..20 {
            let fr = frame(&mut a, i);
            a.tx_burst(&mut vec![fr]).unwrap();
        }
        let mut out = Vec::new();
        assert_eq!(f.rx_burst(&mut out, MAX_BURST).unwrap(), 0);
        assert_eq!(f.held(), 20);
        let due = f.next_event().unwrap();
        assert!(due >= t0 + Duration::from_micros(1000));
        assert!(due <= t0 + Duration::from_micros(1500));
        f.set_time(t0 + Duration::from_micros(999));
        assert_eq!(f.rx_burst(&mut out, MAX_BURST).unwrap(), 0);
        f.set_time(t0 + Duration::from_micros(1500));
        assert_eq!(f.rx_burst(&mut out, MAX_BURST).unwrap(), 20);
        assert_eq!(f.fault_stats().rx.delayed, 20);
        let mut seqs: Vec<u32> = out.iter().map(|b| seq_of(b.data())).collect();
        seqs.sort();
        assert_eq!(seqs, (0..20).collect::<Vec<_>>());
        for x in out {
            f.recycle(x);
        }
    }

    #[test]
    fn real_clock_delay_works() {
        let (mut a, b) = pair();
        let cfg = FaultConfig {
            delay_us: 2000,
            ..FaultConfig::default()
        };
        let mut f = FaultLink::with_directions(b, cfg, FaultConfig::default());
        let fr = frame(&mut a, 1);
        a.tx_burst(&mut vec![fr]).unwrap();
        let start = Instant::now();
        let mut out = Vec::new();
        while f.rx_burst(&mut out, 1).unwrap() == 0 {
            assert!(start.elapsed() < Duration::from_secs(2));
            std::thread::sleep(Duration::from_micros(200));
        }
        assert!(start.elapsed() >= Duration::from_micros(2000));
    }

    #[test]
    fn dropping_the_link_recycles_held_frames() {
        let mut mc = MemoryConfig::new(1500, 16);
        mc.pool_reserve = 0;
        mc.queue_len = 16;
        let (a, mut b) = MemoryLink::pair_with(&mc);
        let cfg = FaultConfig {
            delay_us: 1_000_000,
            ..FaultConfig::default()
        };
        let mut f = FaultLink::with_directions(a, FaultConfig::default(), cfg);
        for i in 0..10 {
            let fr = frame(&mut f, i);
            f.tx_burst(&mut vec![fr]).unwrap();
        }
        assert_eq!(f.held(), 10);
        assert_eq!(f.inner().pool_stats().available, 6);
        drop(f);
        // All 16 of a's buffers are back: b can fill them all.
        for i in 0..16 {
            let fr = frame(&mut b, i);
            b.tx_burst(&mut vec![fr]).unwrap();
        }
        assert_eq!(b.stats().tx_frames, 16);
        assert_eq!(b.stats().tx_dropped, 0);
    }

    #[test]
    fn tx_backpressure_leaves_frames_with_caller() {
        let (a, _b) = pair();
        let cfg = FaultConfig {
            delay_us: 1_000_000,
            ..FaultConfig::default()
        };
        let mut f = FaultLink::with_limit(a, FaultConfig::default(), cfg, 4);
        let mut v: Vec<_> = (0..6).map(|i| frame(&mut f, i)).collect();
        assert_eq!(f.tx_burst(&mut v).unwrap(), 4);
        assert_eq!(v.len(), 2);
        for x in v {
            f.recycle(x);
        }
    }
}
