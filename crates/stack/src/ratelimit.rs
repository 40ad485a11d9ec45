//! A token bucket, for ICMP errors (`net.inet.icmp.icmplim`).

use crate::time::Instant;

#[derive(Debug, Clone)]
pub struct TokenBucket {
    per_second: u32,
    tokens: u32,
    last_refill: Instant,
}

impl TokenBucket {
    /// A bucket of `per_second` tokens that refills fully each second; zero
    /// means no limit.
    pub fn new(per_second: u32) -> Self {
        TokenBucket {
            per_second,
            tokens: per_second,
            last_refill: Instant::ZERO,
        }
    }

    /// Takes a token if one is left.
    pub fn take(&mut self, now: Instant) -> bool {
        if self.per_second == 0 {
            return true;
        }
        let elapsed = now.saturating_since(self.last_refill);
        if elapsed.as_micros() > 0 {
            let add = (elapsed.as_micros() * u128::from(self.per_second) / 1_000_000) as u64;
            if add > 0 {
                self.tokens = (u64::from(self.tokens) + add).min(u64::from(self.per_second)) as u32;
                self.last_refill = now;
            }
        }
        if self.tokens > 0 {
            self.tokens -= 1;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;

    #[test]
    fn limits_then_refills() {
        let mut b = TokenBucket::new(10);
        let t = Instant::from_secs(5);
        assert_eq!((0..20).filter(|_| b.take(t)).count(), 10);
        assert!(!b.take(t + Duration::from_millis(50)));
        assert!(b.take(t + Duration::from_millis(100)));
        assert_eq!(
            (0..20)
                .filter(|_| b.take(t + Duration::from_secs(3)))
                .count(),
            10
        );
        let mut unlimited = TokenBucket::new(0);
        assert!((0..1000).all(|_| unlimited.take(t)));
    }
}
