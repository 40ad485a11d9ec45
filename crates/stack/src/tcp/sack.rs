//! The sender's SACK scoreboard (RFC 6675): which bytes above SND.UNA the
//! receiver holds, which are deemed lost, and how much is in the network.

use wire::tcp::SeqNumber;

/// RFC 6675 section 2: DupThresh.
pub const DUP_THRESH: usize = 3;

/// SACKed ranges kept at most (a peer reports at most a few per ACK; older
/// ones merge).
pub const MAX_RANGES: usize = 64;

#[derive(Debug, Clone, Default)]
pub struct Scoreboard {
    /// SACKed ranges above SND.UNA, sorted, not touching.
    ranges: Vec<(SeqNumber, SeqNumber)>,
    sacked: usize,
}

impl Scoreboard {
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn clear(&mut self) {
        self.ranges.clear();
        self.sacked = 0;
    }

    /// Bytes SACKed above SND.UNA.
    pub fn sacked_bytes(&self) -> usize {
        self.sacked
    }

    /// Takes in an ACK: forgets what is below `snd_una`, adds the blocks
    /// that lie in `(snd_una, snd_max]` (others are ignored: RFC 2883
    /// D-SACKs and forged blocks).  Returns whether new bytes were SACKed.
    pub fn update(
        &mut self,
        snd_una: SeqNumber,
        snd_max: SeqNumber,
        blocks: &[Option<(u32, u32)>],
    ) -> bool {
        self.ranges.retain_mut(|r| {
            if r.1 <= snd_una {
                return false;
            }
            r.0 = r.0.max(snd_una);
            true
        });
        let before = self.recount();
        for &(l, r) in blocks.iter().flatten() {
            let (l, r) = (SeqNumber(l as i32), SeqNumber(r as i32));
            if l >= r || l < snd_una || r > snd_max {
                continue;
            }
            self.insert(l, r);
        }
        self.recount() > before
    }

    fn insert(&mut self, start: SeqNumber, end: SeqNumber) {
        let at = self.ranges.partition_point(|&(_, e)| e < start);
        let (mut lo, mut hi) = (start, end);
        let mut to = at;
        while to < self.ranges.len() && self.ranges[to].0 <= hi {
            lo = lo.min(self.ranges[to].0);
            hi = hi.max(self.ranges[to].1);
            to += 1;
        }
        self.ranges.splice(at..to, core::iter::once((lo, hi)));
        if self.ranges.len() > MAX_RANGES {
            // Merge the two lowest ranges: over-reporting a hole as SACKed
            // is avoided by dropping the lowest instead.
            self.ranges.remove(0);
        }
    }

    fn recount(&mut self) -> usize {
        self.sacked = self.ranges.iter().map(|&(s, e)| e - s).sum();
        self.sacked
    }

    /// RFC 6675 IsLost: `seq` is lost if DupThresh discontiguous SACKed
    /// ranges, or more than (DupThresh - 1) * SMSS bytes, lie above it.
    pub fn is_lost(&self, seq: SeqNumber, mss: usize) -> bool {
        let mut count = 0;
        let mut bytes = 0;
        for &(s, e) in self.ranges.iter().rev() {
            if e <= seq {
                break;
            }
            count += 1;
            bytes += e - s.max(seq);
            if count >= DUP_THRESH || bytes > (DUP_THRESH - 1) * mss {
                return true;
            }
        }
        false
    }

    /// The highest point below which every unSACKed byte is lost.
    fn loss_boundary(&self, snd_una: SeqNumber, mss: usize) -> SeqNumber {
        let mut count = 0;
        let mut bytes = 0;
        for &(s, e) in self.ranges.iter().rev() {
            count += 1;
            bytes += e - s;
            if count >= DUP_THRESH || bytes > (DUP_THRESH - 1) * mss {
                return s;
            }
        }
        snd_una
    }

    /// Unsacked bytes in `[from, to)`.
    fn unsacked_between(&self, from: SeqNumber, to: SeqNumber) -> usize {
        if to <= from {
            return 0;
        }
        let covered: usize = self
            .ranges
            .iter()
            .map(|&(s, e)| {
                let (s, e) = (s.max(from), e.min(to));
                if e > s {
                    e - s
                } else {
                    0
                }
            })
            .sum();
        (to - from).saturating_sub(covered)
    }

    /// RFC 6675 SetPipe: bytes believed in the network.  `high_rxt` is the
    /// highest byte retransmitted in this recovery.
    pub fn pipe(
        &self,
        snd_una: SeqNumber,
        snd_max: SeqNumber,
        high_rxt: SeqNumber,
        mss: usize,
    ) -> usize {
        let outstanding = snd_max - snd_una;
        let boundary = self.loss_boundary(snd_una, mss);
        let lost = self.unsacked_between(snd_una, boundary);
        let retransmitted_lost = self.unsacked_between(snd_una, high_rxt.min(boundary));
        outstanding.saturating_sub(self.sacked).saturating_sub(lost) + retransmitted_lost
    }

    /// RFC 6675 NextSeg rule 1: the first unSACKed, lost byte at or above
    /// `from` (usually HighRxt), with how many bytes from it to retransmit
    /// (up to `mss`, stopping at the next SACKed range).
    pub fn next_lost(
        &self,
        from: SeqNumber,
        snd_max: SeqNumber,
        mss: usize,
    ) -> Option<(SeqNumber, usize)> {
        let mut seq = from;
        for &(s, e) in &self.ranges {
            if e <= seq {
                continue;
            }
            if s > seq {
                // A hole [seq, s).
                if self.is_lost(seq, mss) {
                    return Some((seq, (s - seq).min(mss)));
                }
                return None;
            }
            seq = e;
        }
        let _ = snd_max;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(n: i32) -> SeqNumber {
        SeqNumber(n)
    }

    #[test]
    fn rfc6675_is_lost_and_pipe() {
        let mss = 100;
        let mut sb = Scoreboard::default();
        // Segments 0..1000 sent; 0..100 lost; 100..400 SACKed in one range.
        assert!(sb.update(s(0), s(1000), &[Some((100, 400))]));
        assert_eq!(sb.sacked_bytes(), 300);
        assert!(sb.is_lost(s(0), mss), "300 bytes > 2 * SMSS above it");
        assert!(!sb.is_lost(s(400), mss));
        // Pipe: 1000 outstanding - 300 SACKed - 100 lost = 600.
        assert_eq!(sb.pipe(s(0), s(1000), s(0), mss), 600);
        // After retransmitting the lost segment, it counts again.
        assert_eq!(sb.pipe(s(0), s(1000), s(100), mss), 700);
        assert_eq!(sb.next_lost(s(0), s(1000), mss), Some((s(0), 100)));
        assert_eq!(sb.next_lost(s(100), s(1000), mss), None);
        // Cumulative ACK past the range clears it.
        sb.update(s(400), s(1000), &[]);
        assert!(sb.is_empty());
    }

    #[test]
    fn three_discontiguous_blocks_mark_loss() {
        let mut sb = Scoreboard::default();
        sb.update(
            s(0),
            s(10_000),
            &[Some((1000, 1010)), Some((2000, 2010)), Some((3000, 3010))],
        );
        assert!(sb.is_lost(s(0), 1460));
        assert!(!sb.is_lost(s(1010), 1460));
        assert_eq!(sb.next_lost(s(0), s(10_000), 1460), Some((s(0), 1000)));
    }

    #[test]
    fn forged_and_old_blocks_are_ignored() {
        let mut sb = Scoreboard::default();
        assert!(!sb.update(
            s(1000),
            s(2000),
            &[Some((500, 900)), Some((1500, 2500)), Some((1900, 1800))]
        ));
        assert!(sb.is_empty());
    }
}
