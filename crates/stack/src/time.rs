//! Time as an input.  The stack never reads a clock: every entry point takes
//! `now`, so a simulation can replay a run exactly.

use core::ops::{Add, AddAssign, Sub};
pub use core::time::Duration;

/// A point in time, in microseconds since an arbitrary origin chosen by the
/// caller (the engine's start, or zero in a simulation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    pub const ZERO: Instant = Instant(0);

    pub const fn from_micros(us: u64) -> Self {
        Instant(us)
    }

    pub const fn from_millis(ms: u64) -> Self {
        Instant(ms.saturating_mul(1000))
    }

    pub const fn from_secs(s: u64) -> Self {
        Instant(s.saturating_mul(1_000_000))
    }

    pub const fn total_micros(self) -> u64 {
        self.0
    }

    pub const fn total_millis(self) -> u64 {
        self.0 / 1000
    }

    /// `us` microseconds later (the end of time at most).
    #[inline]
    pub const fn add_micros(self, us: u64) -> Instant {
        Instant(self.0.saturating_add(us))
    }

    /// Microseconds since `earlier`, or zero if `earlier` is later.
    #[inline]
    pub const fn micros_since(self, earlier: Instant) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    /// The time since `earlier`, or zero if `earlier` is later.
    #[inline]
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }
}

/// `d` in whole microseconds, `u64::MAX` at most (in 64-bit arithmetic:
/// `Duration::as_micros` works in 128 bits, on every timer armed).
#[inline]
pub(crate) fn duration_micros(d: Duration) -> u64 {
    d.as_secs()
        .saturating_mul(1_000_000)
        .saturating_add(u64::from(d.subsec_micros()))
}

impl Add<Duration> for Instant {
    type Output = Instant;
    #[inline]
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(duration_micros(d)))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(duration_micros(d)))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, other: Instant) -> Duration {
        self.saturating_since(other)
    }
}

impl core::fmt::Display for Instant {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}.{:06}s", self.0 / 1_000_000, self.0 % 1_000_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Instant::from_millis(5);
        assert_eq!(t + Duration::from_millis(1), Instant::from_micros(6000));
        assert_eq!(t - Duration::from_secs(1), Instant::ZERO);
        assert_eq!(Instant::ZERO - t, Duration::ZERO);
        assert_eq!(t - Instant::from_millis(2), Duration::from_millis(3));
        assert_eq!(
            Instant::from_micros(u64::MAX) + Duration::from_secs(1),
            Instant::from_micros(u64::MAX)
        );
    }
}
