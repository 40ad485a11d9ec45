//! A connection's deadlines, and what the timer wheel must hear of them.
//!
//! The wheel holds one entry per connection, at or before the connection's
//! earliest deadline (`TcpConnection::wheel_at`).  A deadline that is
//! cleared or moved later leaves that entry early, which is harmless: the
//! wheel fires, finds nothing due, and the entry moves on.  An entry that
//! is not `wheel_at` (superseded by an earlier one, or left by a connection
//! that had the same slot of the table before) is dropped when it fires,
//! so the wheel holds at most the entries scheduled in the last 2 MSL or
//! so, however many connections came and went.  Only a deadline
//! set earlier than the entry needs the wheel told, so each setter keeps
//! the earliest deadline set since the wheel last heard
//! ([`Timers::take_armed`]): after an ordinary event, one compare of it
//! with the entry says whether anything needs doing, instead of finding
//! the minimum of every deadline.

use crate::time::Instant;

/// Microseconds of a deadline that is not set: the end of time, when no
/// deadline fires anyway.  (A word each, where an `Option<Instant>` takes
/// two and a test of its tag.)
const UNSET: u64 = u64::MAX;

/// The deadlines a connection may have, each in microseconds or [`UNSET`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timers {
    /// Retransmission (RFC 6298), also for SYN and SYN-ACK.
    rtx: u64,
    /// A delayed ACK is due (RFC 9293 3.8.6.3).
    delack: u64,
    /// Zero-window probe (RFC 9293 3.8.6.1).
    persist: u64,
    /// Keep-alive probe (RFC 9293 3.8.4).
    keepalive: u64,
    /// TIME_WAIT's 2*MSL, or the FIN_WAIT_2 limit of a closed socket.
    close: u64,
    /// The earliest deadline set since [`Timers::take_armed`], in
    /// microseconds; `u64::MAX` for none.
    armed: u64,
}

impl Default for Timers {
    fn default() -> Self {
        Timers {
            rtx: UNSET,
            delack: UNSET,
            persist: UNSET,
            keepalive: UNSET,
            close: UNSET,
            armed: u64::MAX,
        }
    }
}

macro_rules! deadline {
    ($get:ident, $set:ident) => {
        #[inline(always)]
        pub fn $get(&self) -> Option<Instant> {
            (self.$get != UNSET).then_some(Instant::from_micros(self.$get))
        }

        /// Sets (or with `None` clears) this deadline.
        #[inline(always)]
        pub fn $set(&mut self, at: Option<Instant>) {
            let at = at.map_or(UNSET, Instant::total_micros);
            self.$get = at;
            self.armed = self.armed.min(at);
        }
    };
}

impl Timers {
    deadline!(rtx, set_rtx);
    deadline!(delack, set_delack);
    deadline!(persist, set_persist);
    deadline!(keepalive, set_keepalive);
    deadline!(close, set_close);

    /// Only the 2*MSL (or FIN-WAIT-2) deadline, at `at`.
    pub fn closing_at(at: Instant) -> Timers {
        let mut t = Timers::default();
        t.set_close(Some(at));
        t
    }

    #[inline(always)]
    pub fn earliest(&self) -> Option<Instant> {
        // Called on every event of every connection that set a deadline:
        // five plain minimums, an unset deadline being the end of time.
        let first = self
            .rtx
            .min(self.delack)
            .min(self.persist)
            .min(self.keepalive)
            .min(self.close);
        (first != UNSET).then_some(Instant::from_micros(first))
    }

    /// Counts every deadline as newly set, for a connection the wheel no
    /// longer holds an entry for.
    pub fn rearm(&mut self) {
        self.armed = 0;
    }

    /// The earliest deadline set since the last call (`u64::MAX`, in
    /// microseconds, for none), forgotten.
    #[inline(always)]
    pub fn take_armed(&mut self) -> u64 {
        core::mem::replace(&mut self.armed, u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn armed_is_the_earliest_set_since_taken() {
        let mut t = Timers::default();
        assert_eq!(t.take_armed(), u64::MAX);
        t.set_rtx(Some(Instant::from_micros(500)));
        t.set_delack(Some(Instant::from_micros(300)));
        t.set_persist(None);
        assert_eq!(t.take_armed(), 300);
        assert_eq!(t.take_armed(), u64::MAX);
        // Clearing arms nothing; the earliest is what is left.
        t.set_delack(None);
        assert_eq!(t.take_armed(), u64::MAX);
        assert_eq!(t.earliest(), Some(Instant::from_micros(500)));
        // A connection the wheel dropped counts everything as new.
        t.rearm();
        assert_eq!(t.take_armed(), 0);
        let c = Timers::closing_at(Instant::from_micros(9));
        assert_eq!(c.earliest(), Some(Instant::from_micros(9)));
        assert_eq!(c.close(), Some(Instant::from_micros(9)));
        assert_eq!(c.rtx(), None);
    }
}
