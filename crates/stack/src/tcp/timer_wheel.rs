//! A hashed timing wheel (Varghese and Lauck, "Hashed and Hierarchical
//! Timing Wheels", scheme 6) for many connections with a few timers each.
//!
//! Time is cut into ticks; a timer due in tick `n` lives in slot
//! `n % slots`, whatever its lap, so scheduling is a push onto a `Vec`.
//! Advancing visits the slots of the ticks that passed, fires the entries
//! that are due and leaves the others (later laps) where they are.  An
//! advance over a gap longer than one turn visits every slot once and
//! stops: an hour of idle costs one turn, not millions of ticks.
//!
//! Nothing is ever removed early.  Cancellation is the caller's: it keeps,
//! per key, the deadline it wants, and ignores a fired `(key, deadline)`
//! that is no longer it (or re-schedules for the later time it wants now).
//! A connection that pushes its retransmission deadline forward on every
//! ACK should not schedule every time: keep the entry already in the wheel
//! and, when it fires early, schedule again for the deadline now wanted.
//! Each key then has at most a few entries in the wheel.
//!
//! The slot `Vec`s keep their capacity after being emptied, so a steady
//! state allocates nothing.

use core::{fmt, mem};

use crate::time::{Duration, Instant};

/// At most this many slots (16 M entries of 24 bytes of `Vec` header).
const MAX_SLOTS: usize = 1 << 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    key: u32,
    deadline: Instant,
}

/// A hashed timing wheel of `(key, deadline)` entries.
#[derive(Clone)]
pub struct TimerWheel {
    tick_us: u64,
    mask: u64,
    slots: Vec<Vec<Entry>>,
    /// The tick of the last advance: every earlier tick's slot has been
    /// visited; this one is visited again first by the next advance (its
    /// entries due later in the tick are still there).
    cursor: u64,
    /// The time of the last advance (time never goes back).
    now: Instant,
    /// Entries, including those in `pending`.
    len: usize,
    /// A lower bound of the deadlines in the wheel (`None` when empty).
    earliest: Option<Instant>,
    /// Entries scheduled by `fire` during an advance, inserted after it.
    pending: Vec<Entry>,
    advancing: bool,
    /// Slots visited by all advances (for tests and statistics).
    slot_visits: u64,
}

impl fmt::Debug for TimerWheel {
    /// A summary: the slots themselves would be thousands of lines.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerWheel")
            .field("tick", &Duration::from_micros(self.tick_us))
            .field("slots", &self.slots.len())
            .field("now", &self.now)
            .field("len", &self.len)
            .field("next_deadline", &self.next_deadline())
            .finish()
    }
}

impl TimerWheel {
    /// A wheel of `slots` slots (rounded up to a power of two, at least 1,
    /// at most 2^24) of `tick` each (at least 1 µs), whose time starts at
    /// `start`.  One turn is `slots * tick`.
    pub fn new(tick: Duration, slots: usize, start: Instant) -> Self {
        let tick_us = u64::try_from(tick.as_micros()).unwrap_or(u64::MAX).max(1);
        let n = slots.clamp(1, MAX_SLOTS).next_power_of_two();
        TimerWheel {
            tick_us,
            mask: n as u64 - 1,
            slots: (0..n).map(|_| Vec::new()).collect(),
            cursor: start.total_micros() / tick_us,
            now: start,
            len: 0,
            earliest: None,
            pending: Vec::new(),
            advancing: false,
            slot_visits: 0,
        }
    }

    fn tick_of(&self, t: Instant) -> u64 {
        t.total_micros() / self.tick_us
    }

    fn slot_of(&self, tick: u64) -> usize {
        // The mask is below 2^24: the cast cannot truncate.
        (tick & self.mask) as usize
    }

    /// Schedules `key` at `deadline`.  A deadline in the past (before the
    /// last advance) fires at the next advance.  Scheduling a key again adds
    /// another entry; both fire (see the module documentation).
    pub fn schedule(&mut self, key: u32, deadline: Instant) {
        let e = Entry { key, deadline };
        self.len += 1;
        self.earliest = Some(self.earliest.map_or(deadline, |t| t.min(deadline)));
        if self.advancing {
            self.pending.push(e);
        } else {
            self.insert(e);
        }
    }

    fn insert(&mut self, e: Entry) {
        let tick = self.tick_of(e.deadline).max(self.cursor);
        let slot = self.slot_of(tick);
        self.slots[slot].push(e);
    }

    /// Moves time to `now` and calls `fire(key, deadline)` for every entry
    /// whose deadline is `<= now`, each entry once.
    ///
    /// Entries fire in the order of their ticks when `now` is less than one
    /// turn after the previous advance; within a tick, and over a longer
    /// gap, in no particular order.  A `now` earlier than the previous
    /// advance is taken as the previous advance.
    pub fn advance(&mut self, now: Instant, mut fire: impl FnMut(u32, Instant)) {
        self.advance_with(now, |_, key, deadline| fire(key, deadline));
    }

    /// As [`Self::advance`], but `fire` is also given the wheel, so that it
    /// can schedule.  Entries scheduled from inside `fire` never fire in the
    /// same call: they are inserted after it, and one due by `now` fires at
    /// the next advance.  (So a timer that always re-arms itself for `now`
    /// cannot loop forever.)  `advance` called from inside `fire` does
    /// nothing.
    pub fn advance_with(&mut self, now: Instant, mut fire: impl FnMut(&mut Self, u32, Instant)) {
        if self.advancing {
            return;
        }
        let now = now.max(self.now);
        self.now = now;
        let target = self.tick_of(now);
        // From the cursor's slot to the target's, at most one full turn.
        let span = target
            .saturating_sub(self.cursor)
            .saturating_add(1)
            .min(self.mask + 1);
        let walk_past_due = self.earliest.is_some_and(|e| e <= now);
        if walk_past_due {
            self.advancing = true;
            for step in 0..span {
                let slot = self.slot_of(self.cursor.wrapping_add(step));
                self.slot_visits += 1;
                let mut i = 0;
                while let Some(&e) = self.slots[slot].get(i) {
                    if e.deadline <= now {
                        self.slots[slot].swap_remove(i);
                        self.len -= 1;
                        fire(self, e.key, e.deadline);
                    } else {
                        i += 1;
                    }
                }
            }
            self.advancing = false;
        }
        self.cursor = target;
        if walk_past_due {
            self.earliest = self.scan_earliest();
        }
        let mut pending = mem::take(&mut self.pending);
        for e in pending.drain(..) {
            self.earliest = Some(self.earliest.map_or(e.deadline, |t| t.min(e.deadline)));
            self.insert(e);
        }
        self.pending = pending;
    }

    /// The earliest deadline in the slots: walks forward from the cursor
    /// and stops once a slot's first possible time is not before the best
    /// deadline found (entries of slot `cursor + i` are due no earlier than
    /// tick `cursor + i`), so it usually looks at a few slots.
    fn scan_earliest(&mut self) -> Option<Instant> {
        let in_slots = self.len - self.pending.len();
        if in_slots == 0 {
            return None;
        }
        let mut best: Option<Instant> = None;
        let mut seen = 0;
        for step in 0..=self.mask {
            let first = self
                .cursor
                .saturating_add(step)
                .saturating_mul(self.tick_us);
            if best.is_some_and(|b| Instant::from_micros(first) >= b) || seen == in_slots {
                break;
            }
            let slot = self.slot_of(self.cursor.wrapping_add(step));
            self.slot_visits += 1;
            for e in &self.slots[slot] {
                best = Some(best.map_or(e.deadline, |b| b.min(e.deadline)));
            }
            seen += self.slots[slot].len();
        }
        best
    }

    /// A lower bound of the earliest deadline scheduled: exact after an
    /// advance that fired something, possibly early otherwise (it may be an
    /// entry that already fired, or one the caller no longer wants), never
    /// late.  `None` when the wheel is empty.
    pub fn next_deadline(&self) -> Option<Instant> {
        if self.len == 0 {
            None
        } else {
            self.earliest
        }
    }

    /// The entries in the wheel (stale ones included).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes the slots hold room for (their capacity, used or not).
    pub fn capacity_bytes(&self) -> usize {
        self.slots.iter().map(Vec::capacity).sum::<usize>() * mem::size_of::<Entry>()
            + self.slots.capacity() * mem::size_of::<Vec<Entry>>()
            + self.pending.capacity() * mem::size_of::<Entry>()
    }

    /// The time of the last advance (or the start).
    pub fn now(&self) -> Instant {
        self.now
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rand::Rng;

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    fn wheel() -> TimerWheel {
        TimerWheel::new(Duration::from_millis(1), 64, Instant::ZERO)
    }

    fn collect(w: &mut TimerWheel, now: Instant) -> Vec<(u32, Instant)> {
        let mut v = Vec::new();
        w.advance(now, |k, d| v.push((k, d)));
        v
    }

    #[test]
    fn fires_in_order_and_only_when_due() {
        let mut w = wheel();
        w.schedule(3, ms(30));
        w.schedule(1, ms(10));
        w.schedule(2, Instant::from_micros(20_500));
        assert_eq!(w.len(), 3);
        assert_eq!(w.next_deadline(), Some(ms(10)));
        assert!(collect(&mut w, Instant::from_micros(9_999)).is_empty());
        assert_eq!(collect(&mut w, ms(10)), vec![(1, ms(10))]);
        assert_eq!(w.next_deadline(), Some(Instant::from_micros(20_500)));
        // Within a tick: 20.4 ms is not yet 20.5 ms.
        assert!(collect(&mut w, Instant::from_micros(20_400)).is_empty());
        assert_eq!(
            collect(&mut w, ms(40)),
            vec![(2, Instant::from_micros(20_500)), (3, ms(30))]
        );
        assert!(w.is_empty());
        assert_eq!(w.next_deadline(), None);
    }

    #[test]
    fn past_deadlines_fire_at_next_advance() {
        let mut w = wheel();
        collect(&mut w, ms(100));
        w.schedule(7, ms(5));
        assert_eq!(w.next_deadline(), Some(ms(5)));
        assert_eq!(collect(&mut w, ms(100)), vec![(7, ms(5))]);
        // Time going back is taken as no time passing.
        w.schedule(8, ms(100));
        assert_eq!(collect(&mut w, ms(50)), vec![(8, ms(100))]);
    }

    #[test]
    fn far_future_timers_wait_their_lap() {
        // 64 slots of 1 ms: 1000 ms is 15 turns and a bit ahead.
        let mut w = wheel();
        w.schedule(1, ms(1000));
        w.schedule(2, ms(1000 - 64));
        let mut t = 0;
        let mut fired = Vec::new();
        while t < 2000 {
            t += 1;
            w.advance(ms(t), |k, d| fired.push((t, k, d)));
        }
        assert_eq!(fired, vec![(936, 2, ms(936)), (1000, 1, ms(1000))]);
    }

    #[test]
    fn many_timers_in_one_slot() {
        let mut w = wheel();
        for k in 0..10_000u32 {
            // Same slot: ticks 5, 69, 133, ... (64 apart), several per tick.
            w.schedule(k, ms(5 + 64 * u64::from(k % 10)));
        }
        let mut fired = Vec::new();
        for t in 1..=700 {
            w.advance(ms(t), |k, d| {
                assert_eq!(d, ms(t));
                fired.push(k)
            });
        }
        assert_eq!(fired.len(), 10_000);
        fired.sort_unstable();
        fired.dedup();
        assert_eq!(fired.len(), 10_000);
        assert!(w.is_empty());
    }

    #[test]
    fn big_jump_walks_at_most_one_turn() {
        let mut w = TimerWheel::new(Duration::from_millis(1), 4096, Instant::ZERO);
        let hour = 3_600_000;
        w.schedule(1, ms(10));
        w.schedule(2, ms(hour));
        w.schedule(3, ms(2 * hour));
        w.schedule(4, ms(3 * hour));
        let before = w.slot_visits;
        let mut fired = collect(&mut w, ms(2 * hour + 1));
        fired.sort_unstable();
        assert_eq!(fired, vec![(1, ms(10)), (2, ms(hour)), (3, ms(2 * hour))]);
        // One turn, plus the scan for the next deadline.
        assert!(
            w.slot_visits - before <= 2 * 4096,
            "{}",
            w.slot_visits - before
        );
        assert_eq!(w.next_deadline(), Some(ms(3 * hour)));
        // A jump to the far end of time does not overflow.
        let fired = collect(&mut w, Instant::from_micros(u64::MAX));
        assert_eq!(fired, vec![(4, ms(3 * hour))]);
        w.schedule(5, Instant::from_micros(u64::MAX));
        assert_eq!(collect(&mut w, Instant::from_micros(u64::MAX)).len(), 1);
    }

    #[test]
    fn idle_advances_do_not_walk() {
        let mut w = TimerWheel::new(Duration::from_millis(1), 4096, Instant::ZERO);
        w.schedule(1, ms(7_200_000));
        let before = w.slot_visits;
        for t in (0..3_600_000).step_by(1000) {
            collect(&mut w, ms(t));
        }
        assert_eq!(w.slot_visits, before);
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn schedule_during_fire_fires_next_call() {
        let mut w = wheel();
        w.schedule(1, ms(10));
        let mut fired = Vec::new();
        w.advance_with(ms(10), |w, k, d| {
            fired.push((k, d));
            // Re-arm for now (fires next call) and for later.
            w.schedule(k + 10, d);
            w.schedule(k + 20, d + Duration::from_millis(5));
            // A nested advance is ignored.
            w.advance(ms(1000), |_, _| panic!("nested advance fired"));
        });
        assert_eq!(fired, vec![(1, ms(10))]);
        assert_eq!(w.len(), 2);
        assert_eq!(w.next_deadline(), Some(ms(10)));
        assert_eq!(collect(&mut w, ms(10)), vec![(11, ms(10))]);
        assert_eq!(collect(&mut w, ms(20)), vec![(21, ms(15))]);
    }

    #[test]
    fn lazy_cancellation_by_deadline() {
        // The caller's pattern: it wants one deadline per key, keeps what it
        // wants, and re-arms when an early entry fires.
        let mut w = wheel();
        let mut want = [Some(ms(10)), Some(ms(10))];
        w.schedule(0, ms(10));
        w.schedule(1, ms(10));
        want[0] = Some(ms(25)); // pushed back without rescheduling
        want[1] = None; // cancelled
        let mut handled = Vec::new();
        for t in 1..=30 {
            w.advance_with(ms(t), |w, k, _| match want[k as usize] {
                Some(d) if d <= ms(t) => {
                    want[k as usize] = None;
                    handled.push((k, t));
                }
                Some(d) => w.schedule(k, d),
                None => {}
            });
        }
        assert_eq!(handled, vec![(0, 25)]);
        assert!(w.is_empty());
    }

    #[test]
    fn random_schedule_matches_a_model() {
        let mut rng = Rng::new(42);
        let mut w = TimerWheel::new(Duration::from_millis(1), 16, Instant::ZERO);
        let mut model: Vec<(u32, Instant)> = Vec::new();
        let mut now = 0u64;
        for step in 0..3000u32 {
            for _ in 0..rng.below(4) {
                let d = Instant::from_micros(now + rng.below(100_000));
                w.schedule(step, d);
                model.push((step, d));
            }
            now += rng.below(if step % 100 == 0 { 200_000 } else { 3_000 });
            let t = Instant::from_micros(now);
            if let Some(nd) = w.next_deadline() {
                let min = model.iter().map(|e| e.1).min().unwrap();
                assert!(nd <= min, "seed 42 step {step}: next_deadline late");
            }
            let mut fired = collect(&mut w, t);
            let mut due: Vec<_> = model.iter().copied().filter(|e| e.1 <= t).collect();
            model.retain(|e| e.1 > t);
            fired.sort_unstable();
            due.sort_unstable();
            assert_eq!(fired, due, "seed 42 step {step}");
            assert_eq!(w.len(), model.len());
        }
    }

    #[test]
    fn debug_is_a_summary() {
        let mut w = TimerWheel::new(Duration::from_millis(1), 4096, Instant::ZERO);
        w.schedule(1, ms(5));
        let s = format!("{w:?}");
        assert!(s.len() < 200, "{s}");
        assert!(s.contains("len: 1"), "{s}");
    }

    #[test]
    fn odd_parameters() {
        let mut w = TimerWheel::new(Duration::ZERO, 0, Instant::ZERO);
        w.schedule(1, Instant::from_micros(3));
        assert_eq!(collect(&mut w, Instant::from_micros(3)).len(), 1);
        let mut w = TimerWheel::new(Duration::MAX, 1000, Instant::from_micros(u64::MAX));
        w.schedule(1, Instant::ZERO);
        assert_eq!(collect(&mut w, Instant::ZERO).len(), 1);
        let w = TimerWheel::new(Duration::from_millis(1), 1000, Instant::ZERO);
        assert_eq!(w.slots.len(), 1024);
    }
}
