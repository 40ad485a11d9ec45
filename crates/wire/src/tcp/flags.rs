//! TCP control flags as a bitset, so any combination (FIN+ACK+PSH, ...) can
//! be written. Total: no operation here panics.

use core::{fmt, ops};

/// The control bits of a TCP header (including NS, RFC 3540).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(u16);

impl TcpFlags {
    pub const FIN: TcpFlags = TcpFlags(0x001);
    pub const SYN: TcpFlags = TcpFlags(0x002);
    pub const RST: TcpFlags = TcpFlags(0x004);
    pub const PSH: TcpFlags = TcpFlags(0x008);
    pub const ACK: TcpFlags = TcpFlags(0x010);
    pub const URG: TcpFlags = TcpFlags(0x020);
    pub const ECE: TcpFlags = TcpFlags(0x040);
    pub const CWR: TcpFlags = TcpFlags(0x080);
    pub const NS: TcpFlags = TcpFlags(0x100);

    const ALL: u16 = 0x1ff;

    /// No flag set.
    pub const fn empty() -> TcpFlags {
        TcpFlags(0)
    }

    /// From the low 9 bits of the flags field (other bits are dropped).
    pub const fn from_bits(bits: u16) -> TcpFlags {
        TcpFlags(bits & Self::ALL)
    }

    /// The bits, as in the low 9 bits of the header's flags field.
    pub const fn bits(self) -> u16 {
        self.0
    }

    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// True when every flag of `other` is set in `self`.
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// True when any flag of `other` is set in `self`.
    pub const fn intersects(self, other: TcpFlags) -> bool {
        self.0 & other.0 != 0
    }

    pub fn insert(&mut self, other: TcpFlags) {
        self.0 |= other.0;
    }

    pub fn remove(&mut self, other: TcpFlags) {
        self.0 &= !other.0;
    }

    /// Set or clear `other`.
    pub fn set(&mut self, other: TcpFlags, on: bool) {
        if on {
            self.insert(other)
        } else {
            self.remove(other)
        }
    }

    pub const fn union(self, other: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | other.0)
    }

    pub const fn without(self, other: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 & !other.0)
    }

    pub const fn fin(self) -> bool {
        self.contains(Self::FIN)
    }
    pub const fn syn(self) -> bool {
        self.contains(Self::SYN)
    }
    pub const fn rst(self) -> bool {
        self.contains(Self::RST)
    }
    pub const fn psh(self) -> bool {
        self.contains(Self::PSH)
    }
    pub const fn ack(self) -> bool {
        self.contains(Self::ACK)
    }
    pub const fn urg(self) -> bool {
        self.contains(Self::URG)
    }
    pub const fn ece(self) -> bool {
        self.contains(Self::ECE)
    }
    pub const fn cwr(self) -> bool {
        self.contains(Self::CWR)
    }
}

impl ops::BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        self.union(rhs)
    }
}

impl ops::BitOrAssign for TcpFlags {
    fn bitor_assign(&mut self, rhs: TcpFlags) {
        self.insert(rhs)
    }
}

impl ops::BitAnd for TcpFlags {
    type Output = TcpFlags;
    fn bitand(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 & rhs.0)
    }
}

impl ops::Not for TcpFlags {
    type Output = TcpFlags;
    fn not(self) -> TcpFlags {
        TcpFlags(!self.0 & Self::ALL)
    }
}

impl fmt::Debug for TcpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// `SYN|ACK` style; `-` when empty.
impl fmt::Display for TcpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(TcpFlags, &str); 9] = [
            (TcpFlags::SYN, "SYN"),
            (TcpFlags::FIN, "FIN"),
            (TcpFlags::RST, "RST"),
            (TcpFlags::PSH, "PSH"),
            (TcpFlags::ACK, "ACK"),
            (TcpFlags::URG, "URG"),
            (TcpFlags::ECE, "ECE"),
            (TcpFlags::CWR, "CWR"),
            (TcpFlags::NS, "NS"),
        ];
        if self.is_empty() {
            return f.write_str("-");
        }
        let mut first = true;
        for (flag, name) in NAMES {
            if self.contains(flag) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;

    #[test]
    fn combinations() {
        let f = TcpFlags::FIN | TcpFlags::ACK | TcpFlags::PSH;
        assert!(f.fin() && f.ack() && f.psh() && !f.syn());
        assert!(f.contains(TcpFlags::FIN | TcpFlags::ACK));
        assert!(!f.contains(TcpFlags::SYN | TcpFlags::ACK));
        assert!(f.intersects(TcpFlags::SYN | TcpFlags::ACK));
        assert_eq!(format!("{f}"), "FIN|PSH|ACK");
        assert_eq!(format!("{}", TcpFlags::empty()), "-");
        let mut g = f;
        g.remove(TcpFlags::PSH);
        g.set(TcpFlags::RST, true);
        assert_eq!(g.bits(), 0x015);
        assert_eq!((!g).bits(), 0x1ea);
        assert_eq!(TcpFlags::from_bits(0xffff).bits(), 0x1ff);
    }
}
