//! Urgent data (RFC 9293 3.8.5) as Linux and the BSDs give it (RFC 6093):
//! the urgent pointer points at the octet after the urgent data (MUST-62),
//! and of the urgent data only its last octet is special. Without
//! SO_OOBINLINE that octet is taken out of the stream, for
//! `recv(MSG_OOB)`; with it, it stays in line. Either way reads stop at
//! the mark (the octet), which SIOCATMARK reports.
//!
//! Sending: `send(MSG_OOB)` makes the last octet queued urgent (SND.UP is
//! the sequence number after it); every segment sent before SND.UP, new
//! or retransmitted, carries URG and the pointer, until SND.UNA passes it.
//! Receiving: a pointer past what was received gives a new mark (a newer
//! one replaces an older one, whose octet then stays in the stream); the
//! octet is captured from whichever segment carries it.

use wire::tcp::{SeqNumber, TcpFlags, TcpRepr};

use crate::ip::IpLayer;
use crate::lend::FrameLending;
use crate::socket::SocketError;
use crate::tcp::buffer_cache::BufferCache;
use crate::tcp::conn::TcpConnection;
use crate::tcp::types::TcpState;

/// The urgent octet of a mark, as Linux's `urg_data` tracks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UrgentOctet {
    /// The pointer came; the octet has not.
    Awaited,
    /// The octet came and waits for `recv(MSG_OOB)`.
    Arrived(u8),
    /// `recv(MSG_OOB)` took it (or it is in line).
    Taken,
}

/// The receive side's urgent mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UrgentMark {
    /// The sequence number of the urgent octet (the pointer minus one).
    pub seq: SeqNumber,
    /// Octets the application reads before it reaches the mark.
    pub ahead: usize,
    pub octet: UrgentOctet,
}

/// What `recv(MSG_OOB)` finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OobRead {
    /// The urgent octet.
    Octet(u8),
    /// No octet will come: the connection is closed or the read side shut
    /// (Linux's zero-length read).
    End,
}

impl TcpConnection {
    /// Urgent mode (RFC 9293 3.8.5): SND.UP is ahead of SND.UNA.
    #[inline(always)]
    pub(crate) fn urgent_mode(&self) -> bool {
        self.snd_up.is_some()
    }

    /// `send(MSG_OOB)` queued data: its last octet is urgent.
    pub(crate) fn mark_urgent_sent(&mut self) {
        self.snd_up = Some(self.data_end());
    }

    /// Urgent mode ends when SND.UNA reaches SND.UP.
    pub(crate) fn urgent_acked(&mut self) {
        if self.snd_up.is_some_and(|up| up <= self.snd_una) {
            self.snd_up = None;
        }
    }

    /// URG and the pointer for a segment from `seq`, in urgent mode and
    /// before SND.UP; a pointer too far for 16 bits is the farthest one
    /// (the BSDs'; the peer learns the rest from later segments).
    pub(crate) fn set_urgent_fields(&self, repr: &mut TcpRepr<'_>) {
        if let Some(up) = self.snd_up {
            if repr.seq_number < up {
                repr.flags |= TcpFlags::URG;
                repr.urgent_pointer = (up - repr.seq_number).min(0xffff) as u16;
            }
        }
    }

    /// Step six of RFC 9293 3.10.7.4, before the text of `seg` (whose
    /// first data octet is `data_seq`) goes in: a new urgent pointer
    /// (Linux's `tcp_check_urg`), and the awaited octet if the segment
    /// carries it (`tcp_urg`).
    pub(crate) fn urgent_input(
        &mut self,
        seg: &TcpRepr<'_>,
        data_seq: SeqNumber,
        ip: &mut IpLayer,
        cache: &mut BufferCache,
        lend: &mut FrameLending,
    ) {
        if seg.flags.urg() && self.can_receive() && !self.read_shut {
            self.urgent_pointer(seg, ip, cache, lend);
        }
        if let Some(m) = &mut self.urgent {
            if m.octet == UrgentOctet::Awaited
                && m.seq >= data_seq
                && m.seq < data_seq + seg.payload.len()
            {
                m.octet = UrgentOctet::Arrived(seg.payload[m.seq - data_seq]);
            }
        }
    }

    fn urgent_pointer(
        &mut self,
        seg: &TcpRepr<'_>,
        ip: &mut IpLayer,
        cache: &mut BufferCache,
        lend: &mut FrameLending,
    ) {
        if seg.urgent_pointer == 0 {
            // Points at the segment's own first octet: no urgent data
            // (the BSDs ignore it too).
            ip.counters.tcp_urgent_pointer_zero += 1;
            return;
        }
        let seq = seg.seq_number + (usize::from(seg.urgent_pointer) - 1);
        // Octets received already (or read) are not made urgent again, and
        // a pointer no newer than the mark is a repeat.
        if seq < self.rcv_nxt || self.urgent.is_some_and(|m| seq <= m.seq) {
            return;
        }
        let mut read_at = self.rcv_nxt - self.recv.readable();
        // The old urgent octet, at the read position and out of line,
        // would otherwise become in-line data: it leaves the stream.
        if let Some(m) = self.urgent {
            if m.ahead == 0 && !self.oob_inline && self.recv.readable() > 0 {
                self.recv.read(&mut [0u8; 1], cache, lend);
                read_at += 1;
            }
        }
        ip.counters.tcp_urgent_marks_received += 1;
        self.urgent_notices = self.urgent_notices.wrapping_add(1);
        self.urgent = Some(UrgentMark {
            seq,
            ahead: seq - read_at,
            octet: UrgentOctet::Awaited,
        });
    }

    /// The urgent octet is the next to read and is not in line: a read
    /// does not count it, poll does not call it readable.
    pub(crate) fn urgent_octet_next(&self) -> bool {
        !self.oob_inline && self.urgent.is_some_and(|m| m.ahead == 0)
    }

    /// Readable octets as poll counts them (Linux's `tcp_poll`).
    pub(crate) fn readable_for_poll(&self) -> usize {
        self.recv
            .readable()
            .saturating_sub(usize::from(self.urgent_octet_next()))
    }

    /// FIONREAD as Linux's `tcp_inq` counts: out of line, once the urgent
    /// octet has come (waiting for `recv(MSG_OOB)` or taken by it), the
    /// octets before the mark only; else every readable octet.
    pub(crate) fn readable_to_mark(&self) -> usize {
        match self.urgent {
            Some(m) if !self.oob_inline && !matches!(m.octet, UrgentOctet::Awaited) => m.ahead,
            _ => self.recv.readable(),
        }
    }

    /// The urgent octet arrived and was not taken (EPOLLPRI; in line too,
    /// until read past, as Linux's `tcp_poll`).
    pub(crate) fn urgent_pending(&self) -> bool {
        matches!(
            self.urgent,
            Some(UrgentMark {
                octet: UrgentOctet::Arrived(_),
                ..
            })
        )
    }

    /// SIOCATMARK: the read position is at the mark.
    pub(crate) fn at_mark(&self) -> bool {
        self.urgent.is_some_and(|m| m.ahead == 0)
    }

    /// A read while a mark is set (Linux's `tcp_recvmsg`): up to the mark;
    /// at the mark, past it (the octet skipped when out of line), and the
    /// mark is gone.
    pub(crate) fn read_around_mark(
        &mut self,
        buf: &mut [u8],
        cache: &mut BufferCache,
        lend: &mut FrameLending,
    ) -> usize {
        let Some(mut m) = self.urgent else {
            return self.recv.read(buf, cache, lend);
        };
        if m.ahead > 0 {
            let k = buf.len().min(m.ahead);
            let n = self.recv.read(&mut buf[..k], cache, lend);
            m.ahead -= n;
            self.urgent = Some(m);
            return n;
        }
        if self.recv.readable() == 0 {
            return 0;
        }
        if !self.oob_inline {
            self.recv.read(&mut [0u8; 1], cache, lend);
        }
        self.urgent = None;
        self.recv.read(buf, cache, lend)
    }

    /// How many octets a read may take now without passing the mark, and
    /// whether the (out-of-line) urgent octet must first be skipped: for
    /// reads in place. The mark is passed (cleared) when at it.
    pub(crate) fn prepare_read_at_mark(
        &mut self,
        cache: &mut BufferCache,
        lend: &mut FrameLending,
    ) -> usize {
        match self.urgent {
            Some(m) if m.ahead > 0 => m.ahead,
            Some(_) if self.recv.readable() > 0 => {
                if !self.oob_inline {
                    self.recv.read(&mut [0u8; 1], cache, lend);
                }
                self.urgent = None;
                usize::MAX
            }
            _ => usize::MAX,
        }
    }

    /// Counts `n` octets read in place toward the mark.
    pub(crate) fn read_toward_mark(&mut self, n: usize) {
        if let Some(m) = &mut self.urgent {
            m.ahead = m.ahead.saturating_sub(n);
        }
    }

    /// `recv(MSG_OOB)` (Linux's `tcp_recv_urg`): the octet, once; EINVAL
    /// in line, with no mark, or once taken; EWOULDBLOCK while it is on
    /// its way.
    pub(crate) fn read_urgent(&mut self, peek: bool) -> Result<OobRead, SocketError> {
        if self.oob_inline {
            return Err(SocketError::InvalidArgument);
        }
        match self.urgent {
            Some(UrgentMark {
                octet: UrgentOctet::Arrived(c),
                ..
            }) => {
                if !peek {
                    if let Some(m) = &mut self.urgent {
                        m.octet = UrgentOctet::Taken;
                    }
                }
                Ok(OobRead::Octet(c))
            }
            Some(UrgentMark {
                octet: UrgentOctet::Awaited,
                ..
            }) => {
                if self.state == TcpState::Closed || self.peer_closed() || self.read_shut {
                    Ok(OobRead::End)
                } else {
                    Err(SocketError::WouldBlock)
                }
            }
            _ => Err(SocketError::InvalidArgument),
        }
    }

    /// The peek of `buf.len()` octets with a mark set, from what
    /// `peek` copied into `buf` (`n` octets): up to the mark, or past the
    /// out-of-line urgent octet at it.
    pub(crate) fn peek_around_mark(&self, buf: &mut [u8], n: usize) -> usize {
        match self.urgent {
            Some(m) if m.ahead > 0 => n.min(m.ahead),
            Some(_) if !self.oob_inline && n > 0 => {
                buf.copy_within(1..n, 0);
                n - 1
            }
            _ => n,
        }
    }
}
