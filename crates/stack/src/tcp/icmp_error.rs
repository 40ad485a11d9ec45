//! ICMP errors about our segments (RFC 9293 3.9.2.2, RFC 1122 4.2.3.9,
//! RFC 5927): which connection sent the quoted segment, whether the error
//! could be about a segment it has in flight, and what it does to it.

use core::net::{IpAddr, SocketAddr};

use wire::tcp::SeqNumber;

use crate::iface::IfaceId;
use crate::sink::FrameSink;
use crate::socket::table::{ConnKey, Socket};
use crate::socket::SocketError;
use crate::stack::Stack;
use crate::tcp::input::InputEvents;
use crate::tcp::types::TcpState;
use crate::time::Instant;

/// What an ICMP or ICMPv6 error says about the path of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IcmpErrorKind {
    /// Port or protocol unreachable (ICMPv6: port unreachable, or an
    /// unrecognized next header): the destination refuses TCP there.
    Refused,
    /// Any other unreachable, time exceeded: the path may heal, so this is
    /// what the application hears if the connection times out meanwhile.
    Soft(SocketError),
    /// Fragmentation needed (IPv4) or packet too big (IPv6): the path
    /// takes datagrams of at most this size.
    PathMtu(usize),
}

/// The part of an error's quote TCP reads: the addresses of the quoted
/// IP header (ours first) and the bytes of the TCP header that follow it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QuotedSegment<'a> {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub tcp: &'a [u8],
}

/// RFC 1191 7's plateaus, for a fragmentation needed from a router too old
/// to say the next-hop MTU: the largest below the quoted datagram's size.
fn plateau_below(size: usize) -> usize {
    const PLATEAUS: [usize; 10] = [32000, 17914, 8166, 4352, 2002, 1492, 1006, 508, 296, 68];
    PLATEAUS.into_iter().find(|&p| p < size).unwrap_or(68)
}

/// The next-hop MTU a fragmentation needed means: its own figure, or (when
/// 0, RFC 1191 5) the plateau below the quoted datagram's total length.
pub(crate) fn frag_needed_mtu(next_hop_mtu: u16, quoted_total_len: u16) -> usize {
    match next_hop_mtu {
        0 => plateau_below(usize::from(quoted_total_len)),
        m => usize::from(m),
    }
}

impl Stack {
    /// An ICMP error (arrived on `iface`) quoting a TCP segment: finds the
    /// connection that sent it and acts on it if the quoted sequence number
    /// lies in SND.UNA..SND.NXT, the only segments an error can truly be
    /// about (RFC 5927 4.1: this check makes blind attacks guess it).
    ///
    /// - Refused: a connection still in SYN-SENT fails with ECONNREFUSED
    ///   (RFC 1122 4.2.3.9 and RFC 9293 SHLD-26 abort on these); once
    ///   synchronized it becomes a soft error instead (RFC 5927 4.2, as
    ///   Linux and FreeBSD: a forged error must not reset a connection).
    /// - Soft: remembered; reported (SO_ERROR) in place of ETIMEDOUT if the
    ///   connection times out before the peer is heard again (MUST-56:
    ///   never an abort; SHLD-25: the application is told).
    /// - Path MTU (fragmentation needed, packet too big): the path MTU
    ///   goes down (never below `PMTU4_MIN`, or 1280 for IPv6) and the
    ///   connections there send smaller segments (RFC 5927 7.2: only
    ///   about a segment in flight, so a forged error cannot shrink an
    ///   idle connection's segments).
    pub(crate) fn tcp_icmp_error(
        &mut self,
        now: Instant,
        iface: IfaceId,
        kind: IcmpErrorKind,
        quoted: QuotedSegment<'_>,
        sink: &mut dyn FrameSink,
    ) {
        // RFC 792: the quote holds at least the first 8 bytes: both ports
        // and the sequence number.
        let Some(head) = quoted.tcp.get(..8) else {
            self.ip.counters.tcp_icmp_errors_ignored += 1;
            return;
        };
        let port = |at: usize| u16::from_be_bytes([head[at], head[at + 1]]);
        let seq = SeqNumber::new(u32::from_be_bytes([head[4], head[5], head[6], head[7]]));
        let local = SocketAddr::new(quoted.src, port(0));
        let remote = SocketAddr::new(quoted.dst, port(2));
        let Some(index) = self.sockets.tcp_conns.get(&ConnKey::new(local, remote)) else {
            self.ip.counters.tcp_icmp_errors_ignored += 1;
            return;
        };
        let Some(Socket::Tcp(conn)) = self.sockets.at_mut(index) else {
            self.ip.counters.tcp_icmp_errors_ignored += 1;
            return;
        };
        if conn.state == TcpState::TimeWait || seq < conn.snd_una || seq >= conn.snd_max {
            self.ip.counters.tcp_icmp_errors_out_of_window += 1;
            return;
        }
        match kind {
            IcmpErrorKind::Refused if conn.state == TcpState::SynSent => {
                self.ip.counters.tcp_icmp_connects_refused += 1;
                conn.fail(SocketError::ConnectionRefused);
                self.tcp_after_event(now, index, InputEvents::default());
            }
            IcmpErrorKind::Refused => {
                self.ip.counters.tcp_icmp_soft_errors += 1;
                conn.soft_error = Some((SocketError::ConnectionRefused, now));
            }
            IcmpErrorKind::Soft(e) => {
                self.ip.counters.tcp_icmp_soft_errors += 1;
                conn.soft_error = Some((e, now));
            }
            IcmpErrorKind::PathMtu(mtu) => {
                let link = self.ip.interface(iface).map_or(0, |i| i.mtu);
                let pmtu = match quoted.dst {
                    IpAddr::V4(dst) => {
                        if self.ip.pmtu4.lower(dst, mtu, link, now) {
                            self.ip.counters.ipv4_path_mtu_lowered += 1;
                        }
                        self.ip.ipv4_path_mtu(iface, dst, now)
                    }
                    IpAddr::V6(dst) => {
                        if self.ip.pmtu6.lower(dst, mtu, link, now) {
                            self.ip.counters.ipv6_path_mtu_lowered += 1;
                        }
                        self.ip.ipv6_path_mtu(iface, dst, now)
                    }
                };
                // Also when the MTU was known: a connection opened before
                // it was may still send larger segments.
                self.tcp_path_mtu_changed(now, quoted.dst, pmtu, sink);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frag_needed_without_a_figure_takes_the_plateau_below() {
        assert_eq!(frag_needed_mtu(1400, 1500), 1400);
        assert_eq!(frag_needed_mtu(0, 1500), 1492);
        assert_eq!(frag_needed_mtu(0, 1492), 1006);
        assert_eq!(frag_needed_mtu(0, 40), 68);
    }
}
