//! Address families as the socket layer sees them.
//!
//! A socket is AF_INET or AF_INET6 (its domain, fixed at socket()); the
//! stack knows only IPv4 and IPv6 addresses.  An AF_INET6 socket reaches
//! IPv4 peers through IPv4-mapped addresses (`::ffff:a.b.c.d`, RFC 4291
//! 2.5.5.2): what the application gives is unmapped before the stack sees
//! it, and what the stack reports in IPv4 is shown mapped.  The rules
//! follow Linux's (`net/ipv6/af_inet6.c`, `tcp_ipv6.c`, `datagram.c`,
//! `udp.c`), errno for errno.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use crate::consts::{AF_INET, AF_INET6};
use crate::errno::{Errno, Result};

/// A socket's domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Domain {
    V4,
    V6,
}

impl Domain {
    pub(crate) fn of(domain: i32) -> Result<Domain> {
        match domain {
            AF_INET => Ok(Domain::V4),
            AF_INET6 => Ok(Domain::V6),
            _ => Err(Errno::EAFNOSUPPORT),
        }
    }

    pub(crate) fn af(self) -> i32 {
        match self {
            Domain::V4 => AF_INET,
            Domain::V6 => AF_INET6,
        }
    }

    /// The any address of the domain, port `port`: what an unbound socket
    /// is bound to when it needs a port.
    pub(crate) fn any(self, port: u16) -> SocketAddr {
        match self {
            Domain::V4 => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port),
            Domain::V6 => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
        }
    }
}

/// The IPv4 address inside an IPv4-mapped one (`::ffff:a.b.c.d` only; the
/// deprecated IPv4-compatible `::a.b.c.d` is a plain IPv6 address, as in
/// Linux).
pub(crate) fn mapped_v4(ip: &Ipv6Addr) -> Option<Ipv4Addr> {
    ip.to_ipv4_mapped()
}

/// An address of the stack as an AF_INET6 socket shows it: IPv4 mapped.
/// An AF_INET socket sees the stack's own.
pub(crate) fn present(domain: Domain, a: SocketAddr) -> SocketAddr {
    match (domain, a) {
        (Domain::V6, SocketAddr::V4(v4)) => {
            SocketAddr::V6(SocketAddrV6::new(v4.ip().to_ipv6_mapped(), v4.port(), 0, 0))
        }
        _ => a,
    }
}

/// An address the application gave, as the stack takes it: an
/// IPv4-mapped address is IPv4.
pub(crate) fn unmap_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => mapped_v4(&v6).map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

/// Whether an IPv6 address needs an interface to mean something (link
/// local, RFC 4007): bind refuses one without a scope id.
fn needs_scope(ip: &Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    first & 0xffc0 == 0xfe80 || (ip.is_multicast() && matches!(first & 0xf, 1 | 2))
}

/// The local address bind() gives the stack, checked for the socket's
/// domain (inet_bind, inet6_bind): EAFNOSUPPORT for the other family,
/// EINVAL for a mapped address on a v6-only socket, a multicast address on
/// a stream socket or a link-local address without its interface.
pub(crate) fn bind_addr(
    domain: Domain,
    stream: bool,
    v6only: bool,
    a: SocketAddr,
) -> Result<SocketAddr> {
    match (domain, a) {
        (Domain::V4, SocketAddr::V4(_)) => Ok(a),
        (Domain::V4, SocketAddr::V6(_)) | (Domain::V6, SocketAddr::V4(_)) => {
            Err(Errno::EAFNOSUPPORT)
        }
        (Domain::V6, SocketAddr::V6(v6)) => {
            let ip = v6.ip();
            if ip.is_multicast() && stream {
                return Err(Errno::EINVAL);
            }
            if let Some(v4) = mapped_v4(ip) {
                if v6only {
                    return Err(Errno::EINVAL);
                }
                return Ok(SocketAddr::V4(SocketAddrV4::new(v4, v6.port())));
            }
            if needs_scope(ip) && v6.scope_id() == 0 {
                return Err(Errno::EINVAL);
            }
            Ok(a)
        }
    }
}

/// What the destination of a call is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Use {
    /// connect() of a TCP socket.
    TcpConnect,
    /// connect() of a UDP socket.
    UdpConnect,
    /// A UDP datagram's destination (sendto, sendmsg).
    UdpSend,
}

/// The remote address a call gives the stack, checked for the socket's
/// domain: an AF_INET socket takes IPv4 only (EAFNOSUPPORT); an AF_INET6
/// one takes IPv6, and IPv4 as mapped addresses unless it is v6-only
/// (ENETUNREACH, as tcp_v6_connect and udpv6_sendmsg say).  A UDP
/// AF_INET6 socket also takes a plain AF_INET address (Linux's
/// ip6_datagram_connect and udpv6_sendmsg pass it to their IPv4 twin),
/// which a v6-only one refuses with EAFNOSUPPORT (connect) or ENETUNREACH
/// (send).
pub(crate) fn remote_addr(
    domain: Domain,
    v6only: bool,
    use_: Use,
    a: SocketAddr,
) -> Result<SocketAddr> {
    match (domain, a) {
        (Domain::V4, SocketAddr::V4(_)) => Ok(a),
        (Domain::V4, SocketAddr::V6(_)) => Err(Errno::EAFNOSUPPORT),
        (Domain::V6, SocketAddr::V4(_)) => match use_ {
            Use::TcpConnect => Err(Errno::EAFNOSUPPORT),
            _ if !v6only => Ok(a),
            Use::UdpConnect => Err(Errno::EAFNOSUPPORT),
            Use::UdpSend => Err(Errno::ENETUNREACH),
        },
        (Domain::V6, SocketAddr::V6(v6)) => match mapped_v4(v6.ip()) {
            Some(_) if v6only => Err(Errno::ENETUNREACH),
            Some(v4) => Ok(SocketAddr::V4(SocketAddrV4::new(v4, v6.port()))),
            None => Ok(a),
        },
    }
}

/// The local address a connection to `remote` starts from, given what the
/// socket is bound to (`None`: nothing, the stack picks).  A dual-stack
/// socket bound to `[::]:p` reaches an IPv4 peer from `0.0.0.0:p`; a
/// socket bound to an address of one family cannot reach the other
/// (ENETUNREACH: Linux finds no route from such a source).
pub(crate) fn local_for(
    bound: Option<SocketAddr>,
    remote: SocketAddr,
) -> Result<Option<SocketAddr>> {
    let Some(b) = bound else { return Ok(None) };
    match (b, remote) {
        (SocketAddr::V6(b6), SocketAddr::V4(_)) if b6.ip().is_unspecified() => Ok(Some(
            SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, b6.port())),
        )),
        (b, r) if b.is_ipv4() != r.is_ipv4() => Err(Errno::ENETUNREACH),
        (b, _) => Ok(Some(b)),
    }
}

/// A socket's binding as the bind-conflict rules see it: its address (as
/// the stack has it) and whether it also takes IPv4 (an AF_INET6 socket
/// on `[::]` without IPV6_V6ONLY).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Binding {
    pub addr: SocketAddr,
    pub dual: bool,
}

impl Binding {
    /// The IPv4 addresses it takes: `Some(0.0.0.0)` for all of them.
    fn v4(&self) -> Option<Ipv4Addr> {
        match self.addr {
            SocketAddr::V4(a) => Some(*a.ip()),
            SocketAddr::V6(_) if self.dual => Some(Ipv4Addr::UNSPECIFIED),
            SocketAddr::V6(_) => None,
        }
    }

    /// Whether two bindings of one port take some address in common
    /// (Linux's inet_rcv_saddr_equal / ipv6_rcv_saddr_equal).
    pub(crate) fn overlaps(&self, other: &Binding) -> bool {
        let same = |a: IpAddr, b: IpAddr| a.is_unspecified() || b.is_unspecified() || a == b;
        if let (Some(a), Some(b)) = (self.v4(), other.v4()) {
            if same(IpAddr::V4(a), IpAddr::V4(b)) {
                return true;
            }
        }
        match (self.addr, other.addr) {
            (SocketAddr::V6(a), SocketAddr::V6(b)) => {
                same(IpAddr::V6(*a.ip()), IpAddr::V6(*b.ip()))
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn mapped_addresses_are_ipv4_to_the_stack_and_mapped_to_the_socket() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(unmap_ip(ip("::ffff:10.0.0.1")), ip("10.0.0.1"));
        assert_eq!(unmap_ip(ip("fd99::1")), ip("fd99::1"));
        // IPv4-compatible (deprecated) is not mapped.
        assert_eq!(unmap_ip(ip("::10.0.0.1")), ip("::10.0.0.1"));
        assert_eq!(
            present(Domain::V6, sa("10.0.0.1:80")),
            sa("[::ffff:10.0.0.1]:80")
        );
        assert_eq!(present(Domain::V4, sa("10.0.0.1:80")), sa("10.0.0.1:80"));
        assert_eq!(present(Domain::V6, sa("[fd99::1]:9")), sa("[fd99::1]:9"));
    }

    #[test]
    fn bind_takes_the_sockets_family() {
        let e = |r: Result<SocketAddr>| r.err();
        assert_eq!(
            e(bind_addr(Domain::V4, true, false, sa("[::]:1"))),
            Some(Errno::EAFNOSUPPORT)
        );
        assert_eq!(
            e(bind_addr(Domain::V6, true, false, sa("0.0.0.0:1"))),
            Some(Errno::EAFNOSUPPORT)
        );
        assert_eq!(
            bind_addr(Domain::V6, true, false, sa("[::ffff:10.0.0.1]:1")),
            Ok(sa("10.0.0.1:1"))
        );
        assert_eq!(
            e(bind_addr(Domain::V6, true, true, sa("[::ffff:10.0.0.1]:1"))),
            Some(Errno::EINVAL)
        );
        assert_eq!(
            e(bind_addr(Domain::V6, true, false, sa("[ff02::1]:1"))),
            Some(Errno::EINVAL)
        );
        assert_eq!(
            e(bind_addr(Domain::V6, false, false, sa("[fe80::1]:1"))),
            Some(Errno::EINVAL)
        );
        assert_eq!(
            bind_addr(Domain::V6, false, false, sa("[fe80::1%2]:1")),
            Ok(sa("[fe80::1%2]:1"))
        );
        assert_eq!(
            bind_addr(Domain::V6, true, true, sa("[::]:1")),
            Ok(sa("[::]:1"))
        );
    }

    #[test]
    fn remote_addresses_follow_linux() {
        use Use::*;
        let mapped = sa("[::ffff:10.0.0.1]:7");
        assert_eq!(
            remote_addr(Domain::V6, false, TcpConnect, mapped),
            Ok(sa("10.0.0.1:7"))
        );
        assert_eq!(
            remote_addr(Domain::V6, true, TcpConnect, mapped),
            Err(Errno::ENETUNREACH)
        );
        assert_eq!(
            remote_addr(Domain::V6, true, UdpSend, mapped),
            Err(Errno::ENETUNREACH)
        );
        let v4 = sa("10.0.0.1:7");
        assert_eq!(
            remote_addr(Domain::V6, false, TcpConnect, v4),
            Err(Errno::EAFNOSUPPORT)
        );
        assert_eq!(remote_addr(Domain::V6, false, UdpConnect, v4), Ok(v4));
        assert_eq!(remote_addr(Domain::V6, false, UdpSend, v4), Ok(v4));
        assert_eq!(
            remote_addr(Domain::V6, true, UdpConnect, v4),
            Err(Errno::EAFNOSUPPORT)
        );
        assert_eq!(
            remote_addr(Domain::V6, true, UdpSend, v4),
            Err(Errno::ENETUNREACH)
        );
        assert_eq!(
            remote_addr(Domain::V4, false, UdpSend, sa("[fd99::1]:7")),
            Err(Errno::EAFNOSUPPORT)
        );
        assert_eq!(
            remote_addr(Domain::V6, true, UdpSend, sa("[fd99::1]:7")),
            Ok(sa("[fd99::1]:7"))
        );
    }

    #[test]
    fn a_dual_stack_binding_reaches_ipv4_from_the_ipv4_any_address() {
        assert_eq!(
            local_for(Some(sa("[::]:5000")), sa("10.0.0.1:80")),
            Ok(Some(sa("0.0.0.0:5000")))
        );
        assert_eq!(
            local_for(Some(sa("[fd99::2]:5000")), sa("10.0.0.1:80")),
            Err(Errno::ENETUNREACH)
        );
        assert_eq!(
            local_for(Some(sa("10.0.0.2:5000")), sa("[fd99::1]:80")),
            Err(Errno::ENETUNREACH)
        );
        assert_eq!(local_for(None, sa("[fd99::1]:80")), Ok(None));
    }

    #[test]
    fn bindings_overlap_as_in_linux() {
        let b = |s: &str, dual: bool| Binding { addr: sa(s), dual };
        let any4 = b("0.0.0.0:80", false);
        let dual = b("[::]:80", true);
        let v6only = b("[::]:80", false);
        // [::] without V6ONLY takes IPv4 too.
        assert!(dual.overlaps(&any4) && any4.overlaps(&dual));
        assert!(dual.overlaps(&b("10.0.0.1:80", false)));
        // With it, IPv4 is free for another socket.
        assert!(!v6only.overlaps(&any4) && !any4.overlaps(&v6only));
        // Two any addresses of IPv6 always meet.
        assert!(v6only.overlaps(&dual) && v6only.overlaps(&v6only));
        assert!(v6only.overlaps(&b("[fd99::1]:80", false)));
        assert!(!b("[fd99::1]:80", false).overlaps(&b("[fd99::2]:80", false)));
        assert!(!b("[fd99::1]:80", false).overlaps(&any4));
        assert!(!b("10.0.0.1:80", false).overlaps(&b("10.0.0.2:80", false)));
    }
}
