//! The constants the calls take, with Linux's values (socket types, flags,
//! option names, epoll bits), and FreeBSD's for kqueue, which Linux lacks.
//! Options that Linux does not have (FreeBSD's `IP_RECVDSTADDR` and
//! `IP_SENDSRCADDR`) get numbers outside Linux's range, so a Linux option
//! number never means something else here.

pub use libc::{
    AF_INET, AF_INET6, AF_UNIX, AF_UNSPEC, EPOLLERR, EPOLLET, EPOLLEXCLUSIVE, EPOLLHUP, EPOLLIN,
    EPOLLMSG, EPOLLONESHOT, EPOLLOUT, EPOLLPRI, EPOLLRDBAND, EPOLLRDHUP, EPOLLRDNORM, EPOLLWAKEUP,
    EPOLLWRBAND, EPOLLWRNORM, EPOLL_CLOEXEC, EPOLL_CTL_ADD, EPOLL_CTL_DEL, EPOLL_CTL_MOD,
    FD_CLOEXEC, FIONBIO, FIONREAD, F_DUPFD, F_DUPFD_CLOEXEC, F_GETFD, F_GETFL, F_GETOWN, F_SETFD,
    F_SETFL, F_SETOWN, IPPROTO_IP, IPPROTO_IPV6, IPPROTO_TCP, IPPROTO_UDP, IPV6_PKTINFO,
    IPV6_RECVPKTINFO, IPV6_TCLASS, IPV6_UNICAST_HOPS, IPV6_V6ONLY, IP_PKTINFO, IP_TOS, IP_TTL,
    MSG_CTRUNC, MSG_DONTWAIT, MSG_NOSIGNAL, MSG_OOB, MSG_PEEK, MSG_TRUNC, MSG_WAITALL, O_CLOEXEC,
    O_NONBLOCK, O_RDWR, SHUT_RD, SHUT_RDWR, SHUT_WR, SOCK_CLOEXEC, SOCK_DGRAM, SOCK_NONBLOCK,
    SOCK_RAW, SOCK_SEQPACKET, SOCK_STREAM, SOL_SOCKET, SO_ACCEPTCONN, SO_BROADCAST, SO_DOMAIN,
    SO_ERROR, SO_KEEPALIVE, SO_LINGER, SO_MARK, SO_OOBINLINE, SO_PROTOCOL, SO_RCVBUF, SO_RCVTIMEO,
    SO_REUSEADDR, SO_REUSEPORT, SO_SNDBUF, SO_SNDTIMEO, SO_TYPE, TCP_CORK, TCP_INFO, TCP_KEEPCNT,
    TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_MAXSEG, TCP_NODELAY, TCP_SYNCNT, TCP_USER_TIMEOUT,
};

/// The ioctl that says whether the read position is at the urgent mark
/// (Linux's value; libc does not export it).
pub const SIOCATMARK: u64 = 0x8905;

/// FreeBSD's `IP_RECVDSTADDR` (level `IPPROTO_IP`): a UDP socket's
/// `recvmsg` reports each datagram's destination address.
pub const IP_RECVDSTADDR: i32 = 0x7500_0007;
/// FreeBSD's `IP_SENDSRCADDR`: the ancillary data of `sendmsg` that picks
/// a datagram's source address (see [`crate::SendMsg::src`]).
pub const IP_SENDSRCADDR: i32 = IP_RECVDSTADDR;

// kqueue (FreeBSD's values).
pub const EVFILT_READ: i16 = -1;
pub const EVFILT_WRITE: i16 = -2;
pub const EV_ADD: u16 = 0x0001;
pub const EV_DELETE: u16 = 0x0002;
pub const EV_ENABLE: u16 = 0x0004;
pub const EV_DISABLE: u16 = 0x0008;
pub const EV_ONESHOT: u16 = 0x0010;
pub const EV_CLEAR: u16 = 0x0020;
pub const EV_RECEIPT: u16 = 0x0040;
pub const EV_DISPATCH: u16 = 0x0080;
pub const EV_ERROR: u16 = 0x4000;
pub const EV_EOF: u16 = 0x8000;
/// Returned by EVFILT_READ on a TCP socket with an urgent byte waiting for
/// `recv(MSG_OOB)`: Darwin's EV_OOBAND (its EV_FLAG1); FreeBSD's kqueue
/// has no such report.
pub const EV_OOBAND: u16 = 0x2000;
