//! TCP sequence numbers (RFC 9293 section 3.4): 32-bit values compared
//! modulo 2^32.
//!
//! All operations wrap and never panic.

use core::{cmp, fmt, ops};

/// A TCP sequence number. Arithmetic wraps modulo 2^32; comparisons use the
/// sign of the wrapping difference, so `a < b` means "b is less than 2^31
/// ahead of a". That order is not transitive over the whole circle, so
/// `SeqNumber` is `PartialOrd` only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SeqNumber(pub i32);

impl SeqNumber {
    /// From the raw 32-bit field value.
    pub const fn new(raw: u32) -> SeqNumber {
        SeqNumber(raw as i32)
    }

    /// The raw 32-bit field value.
    pub const fn to_u32(self) -> u32 {
        self.0 as u32
    }

    /// Signed distance from `other` to `self` (`self - other`), wrapping.
    pub const fn diff(self, other: SeqNumber) -> i32 {
        self.0.wrapping_sub(other.0)
    }

    /// The later of two numbers.
    pub fn max(self, other: SeqNumber) -> SeqNumber {
        if self.diff(other) > 0 {
            self
        } else {
            other
        }
    }

    /// The earlier of two numbers.
    pub fn min(self, other: SeqNumber) -> SeqNumber {
        if self.diff(other) < 0 {
            self
        } else {
            other
        }
    }

    /// `low <= self < high` in sequence space.
    pub fn in_range(self, low: SeqNumber, high: SeqNumber) -> bool {
        self.diff(low) >= 0 && self.diff(high) < 0
    }
}

impl From<u32> for SeqNumber {
    fn from(v: u32) -> Self {
        SeqNumber::new(v)
    }
}

impl From<SeqNumber> for u32 {
    fn from(v: SeqNumber) -> u32 {
        v.to_u32()
    }
}

impl fmt::Display for SeqNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_u32())
    }
}

/// Adds `rhs` modulo 2^32 (only the low 32 bits of `rhs` count).
impl ops::Add<usize> for SeqNumber {
    type Output = SeqNumber;
    fn add(self, rhs: usize) -> SeqNumber {
        SeqNumber(self.0.wrapping_add(rhs as u32 as i32))
    }
}

/// Subtracts `rhs` modulo 2^32 (only the low 32 bits of `rhs` count).
impl ops::Sub<usize> for SeqNumber {
    type Output = SeqNumber;
    fn sub(self, rhs: usize) -> SeqNumber {
        SeqNumber(self.0.wrapping_sub(rhs as u32 as i32))
    }
}

impl ops::AddAssign<usize> for SeqNumber {
    fn add_assign(&mut self, rhs: usize) {
        *self = *self + rhs;
    }
}

impl ops::SubAssign<usize> for SeqNumber {
    fn sub_assign(&mut self, rhs: usize) {
        *self = *self - rhs;
    }
}

/// The number of bytes from `rhs` up to `self`. Saturates at 0 when `self`
/// is before `rhs` (never panics); use [`SeqNumber::diff`] for a signed result.
impl ops::Sub<SeqNumber> for SeqNumber {
    type Output = usize;
    fn sub(self, rhs: SeqNumber) -> usize {
        let d = self.diff(rhs);
        if d < 0 {
            0
        } else {
            d as usize
        }
    }
}

impl PartialOrd for SeqNumber {
    #[inline]
    fn partial_cmp(&self, other: &SeqNumber) -> Option<cmp::Ordering> {
        Some(self.diff(*other).cmp(&0))
    }

    // Each comparison is one subtraction and a sign test; spelled out so
    // that none goes through an `Ordering`.
    #[inline]
    fn lt(&self, other: &SeqNumber) -> bool {
        self.diff(*other) < 0
    }

    #[inline]
    fn le(&self, other: &SeqNumber) -> bool {
        self.diff(*other) <= 0
    }

    #[inline]
    fn gt(&self, other: &SeqNumber) -> bool {
        self.diff(*other) > 0
    }

    #[inline]
    fn ge(&self, other: &SeqNumber) -> bool {
        self.diff(*other) >= 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_arithmetic() {
        let a = SeqNumber::new(u32::MAX - 1);
        let b = a + 4;
        assert_eq!(b.to_u32(), 2);
        assert_eq!(b - a, 4);
        assert_eq!(a - b, 0);
        assert_eq!(a.diff(b), -4);
        assert_eq!(b - 4, a);
        let mut c = a;
        c += 10;
        c -= 10;
        assert_eq!(c, a);
        assert_eq!(a + (1usize << 32), a);
    }

    #[test]
    fn comparisons_across_wrap() {
        let a = SeqNumber::new(0xffff_fff0);
        let b = SeqNumber::new(0x0000_0010);
        assert!(a < b);
        assert!(b > a);
        assert!(a <= a);
        assert_eq!(a.max(b), b);
        assert_eq!(a.min(b), a);
        assert!(SeqNumber::new(0).in_range(a, b));
        assert!(!b.in_range(a, b));
        assert!(a.in_range(a, b));
        // 2^31 - 1 ahead is still "after"
        assert!(a + 0x7fff_ffff > a);
    }
}
