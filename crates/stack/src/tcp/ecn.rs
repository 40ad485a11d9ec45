//! Explicit Congestion Notification (RFC 3168 6.1) for TCP.
//!
//! Negotiated in the handshake: the active side asks with ECE and CWR on
//! its SYN (only with `net.inet.tcp.ecn.enable=1`), the passive side
//! agrees with ECE on its SYN-ACK (with 1 or 2, accept only, the default,
//! as Linux's `tcp_ecn=2` and FreeBSD's `ecn.enable=2`). On a connection
//! that agreed, new data goes out ECT(0); a data segment that arrives
//! Congestion Experienced makes every segment we send carry ECE until the
//! peer's CWR; an ECE that comes back reduces the congestion window once
//! per window of data (as a loss would, without a retransmission), and
//! the next new data segment carries CWR.

use wire::tcp::{SeqNumber, TcpFlags, TcpRepr};

use crate::ip::IpLayer;
use crate::tcp::cc::CongestionControl;
use crate::tcp::conn::TcpConnection;
use crate::tcp::shared::TcpShared;
use crate::tcp::types::{EcnMode, TcpState};
use crate::time::Instant;

/// The IP header's ECN field: ECT(0), and Congestion Experienced.
pub(crate) const ECT0: u8 = 0b10;
pub(crate) const CE: u8 = 0b11;

/// ECN state of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ecn {
    /// Negotiated (before the handshake ends: asked for, or agreed to).
    pub on: bool,
    /// A CE mark arrived: our segments carry ECE until the peer's CWR.
    pub echo: bool,
    /// The window was reduced for an ECE: the next new data carries CWR.
    pub cwr_due: bool,
    /// ECEs are not acted on again until SND.UNA passes this (SND.MAX at
    /// the last reduction): one response per window of data.
    pub recover: SeqNumber,
}

impl Ecn {
    /// A connection's start: a connect asks for ECN with `enable=1`.
    pub(crate) fn new(mode: EcnMode, state: TcpState, iss: SeqNumber) -> Ecn {
        Ecn {
            on: state == TcpState::SynSent && mode == EcnMode::On,
            echo: false,
            cwr_due: false,
            recover: iss,
        }
    }
}

impl TcpConnection {
    /// The ECN flags of our SYN (ECE and CWR: asking) or SYN-ACK (ECE:
    /// agreeing).
    pub(crate) fn ecn_syn_flags(&self) -> TcpFlags {
        match (self.ecn.on, self.state) {
            (true, TcpState::SynSent) => TcpFlags::ECE | TcpFlags::CWR,
            (true, _) => TcpFlags::ECE,
            _ => TcpFlags::empty(),
        }
    }

    /// Takes the ECN answer of the peer's SYN (RFC 3168 6.1.1): a SYN
    /// asks with ECE and CWR; a SYN-ACK agrees with ECE alone.
    pub(crate) fn ecn_negotiate(&mut self, shared: &TcpShared, syn: &TcpRepr<'_>) {
        let (ece, cwr) = (syn.flags.ece(), syn.flags.cwr());
        self.ecn.on = if syn.ack_number.is_some() {
            self.ecn.on && ece && !cwr
        } else {
            // A SYN: passive open (a simultaneous open does not use ECN).
            self.state == TcpState::SynReceived && shared.cfg.ecn != EcnMode::Off && ece && cwr
        };
    }

    /// RFC 3168 6.1.2 and 6.1.3 for an acceptable segment `seg` of a
    /// synchronized connection (its ACK taken), `ce` its IP mark.
    pub(crate) fn ecn_input(
        &mut self,
        now: Instant,
        seg: &TcpRepr<'_>,
        ce: bool,
        ip: &mut IpLayer,
    ) {
        let flags = seg.flags;
        if flags.cwr() {
            self.ecn.echo = false;
        }
        if ce && !seg.payload.is_empty() {
            ip.counters.tcp_ecn_ce_received += 1;
            if !self.ecn.echo {
                // The sender hears of it at once.
                self.ack_now = true;
            }
            self.ecn.echo = true;
        }
        if flags.ece()
            && !flags.syn()
            && self.snd_una > self.ecn.recover
            && self.recovery_point.is_none()
        {
            ip.counters.tcp_ecn_reductions += 1;
            self.cc.on_congestion_event(now, self.flight());
            // A reduction, not a recovery: nothing is retransmitted.
            self.cc.on_recovery_exit(now);
            self.ecn.recover = self.snd_max;
            self.ecn.cwr_due = true;
        }
    }

    /// ECE on every segment while a CE mark waits for the peer's CWR.
    pub(crate) fn ecn_flags(&self) -> TcpFlags {
        if self.ecn.echo {
            TcpFlags::ECE
        } else {
            TcpFlags::empty()
        }
    }

    /// CWR on the first new data after a reduction.
    pub(crate) fn ecn_cwr(&mut self, seq: SeqNumber, len: usize) -> TcpFlags {
        if self.ecn.cwr_due && len > 0 && seq >= self.snd_max {
            self.ecn.cwr_due = false;
            TcpFlags::CWR
        } else {
            TcpFlags::empty()
        }
    }

    /// The IP header's ECN field for a segment from `seq` with `len`
    /// bytes: ECT(0) on new data of a connection that agreed; nothing on
    /// retransmissions, pure ACKs, probes and SYNs (RFC 3168 6.1.5,
    /// 6.1.4, 6.1.1).
    pub(crate) fn ecn_codepoint(&self, seq: SeqNumber, len: usize, flags: TcpFlags) -> u8 {
        if self.ecn.on && len > 0 && seq >= self.snd_max && !flags.syn() && self.synchronized() {
            ECT0
        } else {
            0
        }
    }
}
