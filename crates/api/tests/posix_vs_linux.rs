//! The same calls against ustack and against the Linux kernel, compared
//! result by result and errno by errno: TCP and UDP calls, options, epoll.
//! ustack runs as two engines on the test's thread (client 10.99.1.1,
//! server 10.99.1.2, fd99:1::1 and fd99:1::2, joined in memory); Linux
//! over loopback (127.0.0.1, ::1).

mod common;

use std::io::{IoSlice, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use api::consts::*;
use api::{epoll_event, SendMsg};
use common::net::{compare, get_int, set_int, Kernel, Net, Trace, Ustack};

/// Runs `scenario` on Linux and on ustack and compares the records.
fn both(scenario: fn(&mut dyn Net, &mut Trace)) {
    let mut k = Kernel::new();
    let mut linux = Trace::new(&k);
    scenario(&mut k, &mut linux);
    let ustack = {
        let _engines = common::two_engines();
        let mut u = Ustack;
        let mut t = Trace::new(&u);
        scenario(&mut u, &mut t);
        t
    };
    compare(&ustack, &linux);
}

fn at(n: &dyn Net, port: u16) -> SocketAddr {
    SocketAddr::from((n.server_ip(), port))
}

fn at6(n: &dyn Net, port: u16) -> SocketAddr {
    SocketAddr::from((n.server_ip6().expect("an IPv6 address"), port))
}

/// The server's IPv4 address as an AF_INET6 socket gives it.
fn mapped(n: &dyn Net, port: u16) -> SocketAddr {
    SocketAddr::from((n.server_ip().to_ipv6_mapped(), port))
}

fn any6(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv6Addr::UNSPECIFIED, port))
}

/// A connected pair: (client, accepted server side); `l` listens.
fn pair(n: &mut dyn Net, t: &mut Trace, l: i32, port: u16, nonblock: bool) -> (i32, i32) {
    let flags = if nonblock { SOCK_NONBLOCK } else { 0 };
    let c = n.socket(AF_INET, SOCK_STREAM | flags, 0).expect("socket");
    let r = n.connect(c, &at(n, port));
    if nonblock {
        t.val("pair: connect", &r);
    } else {
        t.val("pair: connect (blocking)", &r);
    }
    n.settle();
    let r = n.accept4(l, flags);
    t.rec("pair: accept", &r, |nm, (_, a)| nm.addr(a));
    (c, r.map_or(-1, |(fd, _)| fd))
}

#[test]
fn tcp_calls_match_linux() {
    both(|n, t| {
        let s = at(n, 7101);
        t.val("socket: bad type", &n.socket(AF_INET, 12345, 0).map(|_| ()));
        t.val(
            "socket: stream with UDP",
            &n.socket(AF_INET, SOCK_STREAM, IPPROTO_UDP).map(|_| ()),
        );
        let l = n.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        let r = n.getsockname(l);
        t.rec("getsockname fresh", &r, |nm, a| nm.addr(a));
        t.val("getpeername fresh", &n.getpeername(l));
        let mut buf = [0u8; 64];
        t.val("recv fresh", &n.recv(l, &mut buf, 0));
        t.val("send fresh", &n.send(l, b"x", MSG_NOSIGNAL));
        t.val("accept not listening", &n.accept4(l, 0).map(|_| ()));
        let f = n.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        t.val("shutdown fresh", &n.shutdown(f, SHUT_RDWR));
        let _ = n.close(f);
        t.val("bind", &n.bind(l, &s));
        t.val("bind again", &n.bind(l, &at(n, 7102)));
        let other = n.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        t.val(
            "bind not local",
            &n.bind(
                other,
                &SocketAddr::from((Ipv4Addr::new(10, 99, 1, 77), 7102)),
            ),
        );
        t.val("bind taken", &n.bind(other, &s));
        t.val("listen", &n.listen(l, 16));
        let r = n.getsockname(l);
        t.rec("getsockname listening", &r, |nm, a| nm.addr(a));
        t.val("accept4 bad flags", &n.accept4(l, 0x1234).map(|_| ()));
        t.val("fcntl O_NONBLOCK", &n.fcntl(l, F_SETFL, O_NONBLOCK));
        t.val("accept empty", &n.accept4(l, 0).map(|_| ()));
        let c = n.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        t.val(
            "connect closed port (blocking)",
            &n.connect(c, &at(n, 7199)),
        );
        t.val("connect again after refusal", &n.connect(c, &s));
        t.val("connect connected", &n.connect(c, &s));
        let r = n.getpeername(c);
        t.rec("getpeername", &r, |nm, a| nm.addr(a));
        let r = n.getsockname(c);
        t.rec("getsockname client", &r, |nm, a| nm.addr(a));
        t.val("listen connected", &n.listen(c, 1));
        let _ = n.close(c);
        n.settle();
        // The connection above was accepted by nobody: take it.
        let r = n.accept4(l, 0);
        t.rec("accept queued", &r, |nm, (_, a)| nm.addr(a));
        let _ = r.map(|(fd, _)| n.close(fd));

        let (c, a) = pair(n, t, l, 7101, false);
        t.val(
            "recv empty, MSG_DONTWAIT",
            &n.recv(a, &mut buf, MSG_DONTWAIT),
        );
        t.val("send", &n.send(c, b"hello", 0));
        n.settle();
        let mut avail = -1;
        t.val("ioctl FIONREAD", &n.ioctl(a, FIONREAD, &mut avail));
        t.note(format!("FIONREAD -> {avail}"));
        let r = n.recv(a, &mut buf[..3], MSG_PEEK);
        t.val("recv MSG_PEEK", &r);
        t.note(format!("peeked {:?}", &buf[..3]));
        t.val("recv", &n.recv(a, &mut buf, 0));
        t.val(
            "writev",
            &n.writev(c, &[IoSlice::new(b"ab"), IoSlice::new(b"cdef")]),
        );
        n.settle();
        let (mut x, mut y) = ([0u8; 2], [0u8; 10]);
        let r = n.readv(a, &mut [IoSliceMut::new(&mut x), IoSliceMut::new(&mut y)]);
        t.val("readv", &r);
        t.note(format!("readv got {:?} {:?}", x, &y[..4]));
        t.val("shutdown bad how", &n.shutdown(c, 9));
        t.val("shutdown SHUT_WR", &n.shutdown(c, SHUT_WR));
        t.val("send after SHUT_WR", &n.send(c, b"x", MSG_NOSIGNAL));
        t.val("send after SHUT_WR, SIGPIPE ignored", &n.send(c, b"x", 0));
        n.settle();
        t.val("recv EOF", &n.recv(a, &mut buf, 0));
        t.val("send on half-closed", &n.send(a, b"z", 0));
        n.settle();
        t.val("recv on half-closed", &n.recv(c, &mut buf, 0));
        t.val("close", &n.close(c));
        t.val("recv closed fd", &n.recv(c, &mut buf, 0));
        t.val("close closed fd", &n.close(c));
        let _ = n.close(a);

        // A reset: SO_LINGER {1, 0} makes close send RST.
        let (c, a) = pair(n, t, l, 7101, false);
        let linger: Vec<u8> = [1i32, 0].iter().flat_map(|v| v.to_ne_bytes()).collect();
        t.val(
            "SO_LINGER {1,0}",
            &n.setsockopt(c, SOL_SOCKET, SO_LINGER, &linger),
        );
        t.val("close with linger 0", &n.close(c));
        n.settle();
        t.val("recv after reset", &n.recv(a, &mut buf, 0));
        t.val("recv after reset, again", &n.recv(a, &mut buf, 0));
        t.val("send after reset", &n.send(a, b"x", MSG_NOSIGNAL));
        t.val("SO_ERROR after reset", &get_int(n, a, SOL_SOCKET, SO_ERROR));
        t.val("getpeername after reset", &n.getpeername(a).map(|_| ()));
        t.val("shutdown after reset", &n.shutdown(a, SHUT_WR));
        let _ = n.close(a);
        let _ = n.close(l);
        let _ = n.close(other);

        let u = n.socket(AF_INET, SOCK_DGRAM, 0).unwrap();
        t.val("listen UDP", &n.listen(u, 1));
        t.val("accept UDP", &n.accept4(u, 0).map(|_| ()));
        let _ = n.close(u);
    });
}

#[test]
fn nonblocking_connect_matches_linux() {
    both(|n, t| {
        let c = n.socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0).unwrap();
        t.val("connect closed port", &n.connect(c, &at(n, 7299)));
        n.settle();
        t.val("SO_ERROR", &get_int(n, c, SOL_SOCKET, SO_ERROR));
        t.val("SO_ERROR again", &get_int(n, c, SOL_SOCKET, SO_ERROR));
        t.val("connect after SO_ERROR", &n.connect(c, &at(n, 7299)));
        t.val("connect anew", &n.connect(c, &at(n, 7299)));
        n.settle();
        t.val("connect reports the refusal", &n.connect(c, &at(n, 7299)));
        let _ = n.close(c);

        let l = n.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        n.bind(l, &at(n, 7201)).unwrap();
        n.listen(l, 4).unwrap();
        let c = n.socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0).unwrap();
        t.val("connect", &n.connect(c, &at(n, 7201)));
        n.settle();
        t.val("connect once established", &n.connect(c, &at(n, 7201)));
        t.val("connect again", &n.connect(c, &at(n, 7201)));
        t.val("SO_ERROR", &get_int(n, c, SOL_SOCKET, SO_ERROR));
        let mut info = [0u8; 104];
        let r = n.getsockopt(c, IPPROTO_TCP, TCP_INFO, &mut info);
        t.val("TCP_INFO length", &r);
        t.note(format!(
            "TCP_INFO state {} mss>0 {}",
            info[0],
            u32::from_ne_bytes(info[16..20].try_into().unwrap()) > 0
        ));
        let _ = n.close(c);
        let _ = n.close(l);
    });
}

/// SO_MARK on TCP (before and after connect, on a listener and what it
/// accepts) and UDP: values, sizes and errors as Linux's.  Linux asks for
/// CAP_NET_ADMIN, so the comparison needs root.
#[test]
fn so_mark_matches_linux() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "SO_MARK on a kernel socket needs CAP_NET_ADMIN: run as root"
    );
    both(|n, t| {
        let s = n.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        t.val("SO_MARK default", &get_int(n, s, SOL_SOCKET, SO_MARK));
        t.val("SO_MARK set 7", &set_int(n, s, SOL_SOCKET, SO_MARK, 7));
        t.val("SO_MARK get", &get_int(n, s, SOL_SOCKET, SO_MARK));
        t.val("SO_MARK set -1", &set_int(n, s, SOL_SOCKET, SO_MARK, -1));
        t.val("SO_MARK get -1", &get_int(n, s, SOL_SOCKET, SO_MARK));
        t.val(
            "SO_MARK short value",
            &n.setsockopt(s, SOL_SOCKET, SO_MARK, &[1, 0]),
        );
        let l = n.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        t.val("SO_MARK listener", &set_int(n, l, SOL_SOCKET, SO_MARK, 5));
        t.val("bind", &n.bind(l, &at(n, 7171)));
        t.val("listen", &n.listen(l, 4));
        t.val("SO_MARK listening", &get_int(n, l, SOL_SOCKET, SO_MARK));
        let (c, a) = pair(n, t, l, 7171, false);
        t.val("SO_MARK accepted", &get_int(n, a, SOL_SOCKET, SO_MARK));
        t.val("SO_MARK client", &get_int(n, c, SOL_SOCKET, SO_MARK));
        t.val(
            "SO_MARK set connected",
            &set_int(n, c, SOL_SOCKET, SO_MARK, 3),
        );
        t.val("SO_MARK get connected", &get_int(n, c, SOL_SOCKET, SO_MARK));
        let u = n.socket(AF_INET, SOCK_DGRAM, 0).unwrap();
        t.val("SO_MARK udp set", &set_int(n, u, SOL_SOCKET, SO_MARK, 9));
        t.val("SO_MARK udp get", &get_int(n, u, SOL_SOCKET, SO_MARK));
        for fd in [s, l, c, a, u] {
            let _ = n.close(fd);
        }
    });
}

#[test]
fn socket_options_match_linux() {
    both(|n, t| {
        let s = n.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        t.val("SO_TYPE", &get_int(n, s, SOL_SOCKET, SO_TYPE));
        t.val("SO_ERROR", &get_int(n, s, SOL_SOCKET, SO_ERROR));
        t.val("SO_ACCEPTCONN", &get_int(n, s, SOL_SOCKET, SO_ACCEPTCONN));
        for (name, opt) in [
            ("SO_REUSEADDR", SO_REUSEADDR),
            ("SO_REUSEPORT", SO_REUSEPORT),
            ("SO_KEEPALIVE", SO_KEEPALIVE),
        ] {
            t.val(&format!("{name} default"), &get_int(n, s, SOL_SOCKET, opt));
            t.val(&format!("{name} set"), &set_int(n, s, SOL_SOCKET, opt, 1));
            t.val(&format!("{name} get"), &get_int(n, s, SOL_SOCKET, opt));
        }
        t.val(
            "SO_REUSEADDR short value",
            &n.setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &[1, 0]),
        );
        for (name, opt, v) in [
            ("SO_RCVBUF", SO_RCVBUF, 65536),
            ("SO_SNDBUF", SO_SNDBUF, 100_000),
            ("SO_RCVBUF tiny", SO_RCVBUF, 1),
            ("SO_SNDBUF tiny", SO_SNDBUF, 1),
        ] {
            t.val(&format!("{name} set"), &set_int(n, s, SOL_SOCKET, opt, v));
            t.val(&format!("{name} get"), &get_int(n, s, SOL_SOCKET, opt));
        }
        let linger: Vec<u8> = [1i32, 5].iter().flat_map(|v| v.to_ne_bytes()).collect();
        t.val(
            "SO_LINGER set",
            &n.setsockopt(s, SOL_SOCKET, SO_LINGER, &linger),
        );
        let mut b = [0u8; 8];
        t.val(
            "SO_LINGER get",
            &n.getsockopt(s, SOL_SOCKET, SO_LINGER, &mut b),
        );
        t.note(format!("SO_LINGER = {b:?}"));
        t.val(
            "SO_LINGER short",
            &n.setsockopt(s, SOL_SOCKET, SO_LINGER, &linger[..4]),
        );
        let tv = |sec: i64, usec: i64| -> Vec<u8> {
            [sec, usec].iter().flat_map(|v| v.to_ne_bytes()).collect()
        };
        t.val(
            "SO_RCVTIMEO bad usec",
            &n.setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv(0, 2_000_000)),
        );
        t.val(
            "SO_RCVTIMEO set",
            &n.setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv(1, 500_000)),
        );
        let mut b = [0u8; 16];
        t.val(
            "SO_RCVTIMEO get",
            &n.getsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &mut b),
        );
        t.note(format!("SO_RCVTIMEO = {b:?}"));
        t.val(
            "SO_SNDTIMEO short",
            &n.setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv(1, 0)[..8]),
        );
        t.val(
            "unknown SOL_SOCKET set",
            &set_int(n, s, SOL_SOCKET, 9999, 1),
        );
        t.val("unknown SOL_SOCKET get", &get_int(n, s, SOL_SOCKET, 9999));
        t.val("unknown level", &set_int(n, s, 9999, 1, 1));
        t.val(
            "TCP_NODELAY default",
            &get_int(n, s, IPPROTO_TCP, TCP_NODELAY),
        );
        t.val(
            "TCP_NODELAY set",
            &set_int(n, s, IPPROTO_TCP, TCP_NODELAY, 1),
        );
        t.val("TCP_NODELAY get", &get_int(n, s, IPPROTO_TCP, TCP_NODELAY));
        for (name, opt, bad, good) in [
            ("TCP_KEEPIDLE", TCP_KEEPIDLE, 0, 30),
            ("TCP_KEEPINTVL", TCP_KEEPINTVL, 40000, 5),
            ("TCP_KEEPCNT", TCP_KEEPCNT, 200, 3),
            ("TCP_SYNCNT", TCP_SYNCNT, 200, 3),
            ("TCP_USER_TIMEOUT", TCP_USER_TIMEOUT, -1, 5000),
        ] {
            t.val(
                &format!("{name} bad"),
                &set_int(n, s, IPPROTO_TCP, opt, bad),
            );
            t.val(
                &format!("{name} set"),
                &set_int(n, s, IPPROTO_TCP, opt, good),
            );
            t.val(&format!("{name} get"), &get_int(n, s, IPPROTO_TCP, opt));
        }
        let mut info = [0u8; 104];
        t.val(
            "TCP_INFO fresh",
            &n.getsockopt(s, IPPROTO_TCP, TCP_INFO, &mut info),
        );
        t.note(format!("TCP_INFO state {}", info[0]));
        t.val("IP_TTL default", &get_int(n, s, IPPROTO_IP, IP_TTL));
        t.val("IP_TTL 0", &set_int(n, s, IPPROTO_IP, IP_TTL, 0));
        t.val("IP_TTL 300", &set_int(n, s, IPPROTO_IP, IP_TTL, 300));
        t.val("IP_TTL 32", &set_int(n, s, IPPROTO_IP, IP_TTL, 32));
        t.val("IP_TTL get", &get_int(n, s, IPPROTO_IP, IP_TTL));
        t.val("IP_TTL -1", &set_int(n, s, IPPROTO_IP, IP_TTL, -1));
        t.val("IP_TTL back to default", &get_int(n, s, IPPROTO_IP, IP_TTL));
        t.val("IP_TOS 0x10", &set_int(n, s, IPPROTO_IP, IP_TOS, 0x10));
        t.val("IP_TOS get", &get_int(n, s, IPPROTO_IP, IP_TOS));
        t.val(
            "IP_TOS 0x13 (TCP keeps ECN)",
            &set_int(n, s, IPPROTO_IP, IP_TOS, 0x13),
        );
        t.val("IP_TOS get", &get_int(n, s, IPPROTO_IP, IP_TOS));
        t.val("F_GETFL", &n.fcntl(s, F_GETFL, 0));
        t.val("F_SETFL", &n.fcntl(s, F_SETFL, O_NONBLOCK));
        t.val("F_GETFL nonblocking", &n.fcntl(s, F_GETFL, 0));
        let mut off = 0;
        t.val("FIONBIO 0", &n.ioctl(s, FIONBIO, &mut off));
        t.val("F_GETFL blocking", &n.fcntl(s, F_GETFL, 0));
        t.val("F_GETFD", &n.fcntl(s, F_GETFD, 0));
        let _ = n.close(s);
        let s = n.socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0).unwrap();
        t.val("F_GETFD with SOCK_CLOEXEC", &n.fcntl(s, F_GETFD, 0));
        let _ = n.close(s);

        let u = n.socket(AF_INET, SOCK_DGRAM, 0).unwrap();
        t.val("UDP SO_TYPE", &get_int(n, u, SOL_SOCKET, SO_TYPE));
        t.val(
            "UDP TCP_NODELAY",
            &set_int(n, u, IPPROTO_TCP, TCP_NODELAY, 1),
        );
        t.val("UDP TCP_INFO", &get_int(n, u, IPPROTO_TCP, TCP_INFO));
        t.val("UDP IP_TOS 0x13", &set_int(n, u, IPPROTO_IP, IP_TOS, 0x13));
        t.val("UDP IP_TOS get", &get_int(n, u, IPPROTO_IP, IP_TOS));
        t.val("UDP IP_PKTINFO", &set_int(n, u, IPPROTO_IP, IP_PKTINFO, 1));
        t.val("UDP IP_PKTINFO get", &get_int(n, u, IPPROTO_IP, IP_PKTINFO));
        let _ = n.close(u);

        // SO_REUSEADDR lets two sockets bind one port, but not both listen.
        let a = n.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        let b = n.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        set_int(n, a, SOL_SOCKET, SO_REUSEADDR, 1).unwrap();
        set_int(n, b, SOL_SOCKET, SO_REUSEADDR, 1).unwrap();
        t.val("reuseaddr bind a", &n.bind(a, &at(n, 7301)));
        t.val("reuseaddr bind b", &n.bind(b, &at(n, 7301)));
        t.val("reuseaddr listen a", &n.listen(a, 1));
        t.val("reuseaddr listen b", &n.listen(b, 1));
        let _ = n.close(a);
        let _ = n.close(b);
        // SO_REUSEPORT lets both listen.
        let a = n.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        let b = n.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        set_int(n, a, SOL_SOCKET, SO_REUSEPORT, 1).unwrap();
        set_int(n, b, SOL_SOCKET, SO_REUSEPORT, 1).unwrap();
        t.val("reuseport bind a", &n.bind(a, &at(n, 7302)));
        t.val("reuseport bind b", &n.bind(b, &at(n, 7302)));
        t.val("reuseport listen a", &n.listen(a, 1));
        t.val("reuseport listen b", &n.listen(b, 1));
        let _ = n.close(a);
        let _ = n.close(b);
    });
}

#[test]
fn udp_calls_match_linux() {
    both(|n, t| {
        let srv_addr = at(n, 7401);
        let u = n.socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0).unwrap();
        let mut buf = [0u8; 64];
        t.val("recvfrom unbound", &n.recvfrom(u, &mut buf, 0).map(|_| ()));
        t.val("send without address", &n.send(u, b"x", 0));
        let v = n.socket(AF_INET, SOCK_DGRAM, 0).unwrap();
        t.val("shutdown unconnected", &n.shutdown(v, SHUT_RDWR));
        let _ = n.close(v);
        let srv = n.socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0).unwrap();
        t.val("bind", &n.bind(srv, &srv_addr));
        let w = n.socket(AF_INET, SOCK_DGRAM, 0).unwrap();
        t.val("bind taken", &n.bind(w, &srv_addr));
        let _ = n.close(w);
        t.val("sendto 10", &n.sendto(u, &[1; 10], 0, Some(&srv_addr)));
        t.val("sendto 20", &n.sendto(u, &[2; 20], 0, Some(&srv_addr)));
        t.val(
            "sendto too big",
            &n.sendto(u, &vec![0; 70000], 0, Some(&srv_addr)),
        );
        let r = n.getsockname(u);
        t.rec("getsockname after sendto", &r, |nm, a| nm.addr(a));
        n.settle();
        let mut avail = -1;
        t.val("FIONREAD", &n.ioctl(srv, FIONREAD, &mut avail));
        t.note(format!("FIONREAD -> {avail}"));
        let r = n.recvfrom(srv, &mut buf[..4], MSG_PEEK);
        t.rec("recvfrom MSG_PEEK", &r, |nm, (len, a)| {
            format!("{len} from {}", nm.addr(&a.unwrap()))
        });
        let r = n.recvmsg(srv, &mut buf[..4], 0);
        t.rec("recvmsg truncated", &r, |_, m| {
            format!("len {} flags {:#x}", m.len, m.flags)
        });
        let r = n.recvmsg(srv, &mut buf[..5], MSG_TRUNC);
        t.rec("recvmsg MSG_TRUNC", &r, |_, m| {
            format!("len {} flags {:#x}", m.len, m.flags)
        });
        t.val("recvfrom empty", &n.recvfrom(srv, &mut buf, 0).map(|_| ()));

        t.val("IP_PKTINFO on", &set_int(n, srv, IPPROTO_IP, IP_PKTINFO, 1));
        t.val("sendto", &n.sendto(u, b"info", 0, Some(&srv_addr)));
        n.settle();
        let r = n.recvmsg(srv, &mut buf, 0);
        t.rec("recvmsg with IP_PKTINFO", &r, |nm, m| {
            let p = m.pktinfo.unwrap();
            format!(
                "len {} spec_dst {} addr {} ifindex>0 {}",
                m.len,
                nm.addr(&SocketAddr::from((p.spec_dst, 1))),
                nm.addr(&SocketAddr::from((p.addr, 1))),
                p.ifindex > 0
            )
        });
        let client = r.unwrap().addr.unwrap();

        t.val("connect", &n.connect(u, &srv_addr));
        let r = n.getpeername(u);
        t.rec("getpeername", &r, |nm, a| nm.addr(a));
        let r = n.getsockname(u);
        t.rec("getsockname connected", &r, |nm, a| nm.addr(a));
        t.val("send connected", &n.send(u, b"abc", 0));
        n.settle();
        t.val("recv", &n.recvfrom(srv, &mut buf, 0).map(|(l, _)| l));
        let msg = SendMsg {
            addr: Some(client),
            src: Some(IpAddr::V4(n.server_ip())),
            ifindex: None,
        };
        t.val(
            "sendmsg with a source address",
            &n.sendmsg(srv, b"reply", 0, &msg),
        );
        n.settle();
        t.val("recv reply", &n.recv(u, &mut buf, 0));
        // A connected socket takes datagrams from its peer only.
        let x = n.socket(AF_INET, SOCK_DGRAM, 0).unwrap();
        t.val(
            "sendto from a stranger",
            &n.sendto(x, b"no", 0, Some(&client)),
        );
        n.settle();
        t.val("recv ignores the stranger", &n.recv(u, &mut buf, 0));
        let _ = n.close(x);
        t.val("shutdown SHUT_WR connected", &n.shutdown(u, SHUT_WR));
        t.val("send after SHUT_WR", &n.send(u, b"x", MSG_NOSIGNAL));
        let _ = n.close(u);
        let _ = n.close(srv);
    });
}

fn ev(events: i32, data: u64) -> epoll_event {
    epoll_event {
        events: events as u32,
        u64: data,
    }
}

/// epoll_wait(0) as "data=events" lines.
fn wait(n: &mut dyn Net, t: &mut Trace, what: &str, ep: i32) {
    let mut evs = [ev(0, 0); 8];
    let r = n.epoll_wait(ep, &mut evs, 0);
    t.rec(what, &r, |_, &k| {
        let mut v: Vec<String> = evs[..k]
            .iter()
            .map(|e| {
                let (d, m) = (e.u64, e.events);
                format!("{d}={m:#x}")
            })
            .collect();
        v.sort();
        v.join(" ")
    });
}

#[test]
fn epoll_matches_linux() {
    both(|n, t| {
        let l = n.socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0).unwrap();
        n.bind(l, &at(n, 7501)).unwrap();
        n.listen(l, 8).unwrap();
        t.val(
            "epoll_create1 bad flags",
            &n.epoll_create1(12345).map(|_| ()),
        );
        let ep = n.epoll_create1(0).unwrap();
        let fresh = n.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        let e = ev(EPOLLIN | EPOLLOUT, 1);
        t.val(
            "ctl bad fd",
            &n.epoll_ctl(ep, EPOLL_CTL_ADD, 9999, Some(&e)),
        );
        t.val(
            "ctl epoll in itself",
            &n.epoll_ctl(ep, EPOLL_CTL_ADD, ep, Some(&e)),
        );
        t.val(
            "ctl on a socket",
            &n.epoll_ctl(fresh, EPOLL_CTL_ADD, l, Some(&e)),
        );
        t.val("ctl bad op", &n.epoll_ctl(ep, 99, fresh, Some(&e)));
        t.val(
            "ctl MOD unknown",
            &n.epoll_ctl(ep, EPOLL_CTL_MOD, fresh, Some(&e)),
        );
        t.val(
            "ctl DEL unknown",
            &n.epoll_ctl(ep, EPOLL_CTL_DEL, fresh, None),
        );
        t.val(
            "ctl ADD fresh socket",
            &n.epoll_ctl(ep, EPOLL_CTL_ADD, fresh, Some(&e)),
        );
        t.val(
            "ctl ADD twice",
            &n.epoll_ctl(ep, EPOLL_CTL_ADD, fresh, Some(&e)),
        );
        wait(n, t, "fresh socket: OUT|HUP", ep);
        t.val("ctl DEL", &n.epoll_ctl(ep, EPOLL_CTL_DEL, fresh, None));
        let _ = n.close(fresh);
        t.val("wait, no room", &n.epoll_wait(ep, &mut [], 0));

        t.val(
            "ctl ADD listener",
            &n.epoll_ctl(ep, EPOLL_CTL_ADD, l, Some(&ev(EPOLLIN, 2))),
        );
        wait(n, t, "listener idle", ep);
        let c = n.socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0).unwrap();
        t.val("connect", &n.connect(c, &at(n, 7501)));
        n.settle();
        wait(n, t, "listener with a connection", ep);
        let (a, _) = n.accept4(l, SOCK_NONBLOCK).unwrap();
        wait(n, t, "listener drained", ep);
        t.val(
            "ctl ADD client OUT",
            &n.epoll_ctl(ep, EPOLL_CTL_ADD, c, Some(&ev(EPOLLOUT | EPOLLET, 3))),
        );
        wait(n, t, "client writable", ep);
        wait(n, t, "client writable, edge reported", ep);

        // Level triggered.
        t.val(
            "ctl ADD accepted IN",
            &n.epoll_ctl(ep, EPOLL_CTL_ADD, a, Some(&ev(EPOLLIN, 4))),
        );
        wait(n, t, "LT nothing", ep);
        set_int(n, c, IPPROTO_TCP, TCP_NODELAY, 1).unwrap();
        n.send(c, &[9; 100], 0).unwrap();
        n.settle();
        wait(n, t, "LT data", ep);
        wait(n, t, "LT data again", ep);
        let mut buf = [0u8; 1000];
        t.val("read part", &n.recv(a, &mut buf[..10], 0));
        wait(n, t, "LT after partial read", ep);
        t.val("read rest", &n.recv(a, &mut buf, 0));
        wait(n, t, "LT drained", ep);

        // Edge triggered with partial reads.
        t.val(
            "MOD IN|ET",
            &n.epoll_ctl(ep, EPOLL_CTL_MOD, a, Some(&ev(EPOLLIN | EPOLLET, 4))),
        );
        wait(n, t, "ET nothing", ep);
        n.send(c, &[8; 100], 0).unwrap();
        n.settle();
        wait(n, t, "ET data", ep);
        wait(n, t, "ET no new data", ep);
        t.val("read part", &n.recv(a, &mut buf[..10], 0));
        wait(n, t, "ET after partial read", ep);
        n.send(c, &[7; 50], 0).unwrap();
        n.settle();
        wait(n, t, "ET new data", ep);
        t.val("read all", &n.recv(a, &mut buf, 0));

        // One shot, re-armed by MOD.
        t.val(
            "MOD IN|ONESHOT",
            &n.epoll_ctl(ep, EPOLL_CTL_MOD, a, Some(&ev(EPOLLIN | EPOLLONESHOT, 5))),
        );
        n.send(c, &[6; 10], 0).unwrap();
        n.settle();
        wait(n, t, "oneshot fires", ep);
        wait(n, t, "oneshot disarmed", ep);
        n.send(c, &[6; 10], 0).unwrap();
        n.settle();
        wait(n, t, "oneshot disarmed, new data", ep);
        t.val(
            "MOD re-arms",
            &n.epoll_ctl(ep, EPOLL_CTL_MOD, a, Some(&ev(EPOLLIN | EPOLLONESHOT, 6))),
        );
        wait(n, t, "re-armed", ep);
        t.val("read", &n.recv(a, &mut buf, 0));

        // EOF with data pending.
        t.val(
            "MOD IN|RDHUP",
            &n.epoll_ctl(ep, EPOLL_CTL_MOD, a, Some(&ev(EPOLLIN | EPOLLRDHUP, 7))),
        );
        n.send(c, b"tail", 0).unwrap();
        n.shutdown(c, SHUT_WR).unwrap();
        n.settle();
        wait(n, t, "data and FIN", ep);
        t.val("read the data", &n.recv(a, &mut buf, 0));
        t.val("read EOF", &n.recv(a, &mut buf, 0));
        wait(n, t, "after EOF", ep);

        // A reset: EPOLLERR and EPOLLHUP without asking.
        t.val(
            "MOD client IN|OUT|RDHUP",
            &n.epoll_ctl(
                ep,
                EPOLL_CTL_MOD,
                c,
                Some(&ev(EPOLLIN | EPOLLOUT | EPOLLRDHUP, 8)),
            ),
        );
        t.val("DEL accepted", &n.epoll_ctl(ep, EPOLL_CTL_DEL, a, None));
        let linger: Vec<u8> = [1i32, 0].iter().flat_map(|v| v.to_ne_bytes()).collect();
        n.setsockopt(a, SOL_SOCKET, SO_LINGER, &linger).unwrap();
        let _ = n.close(a);
        n.settle();
        wait(n, t, "reset", ep);
        t.val("SO_ERROR", &get_int(n, c, SOL_SOCKET, SO_ERROR));
        wait(n, t, "reset, error taken", ep);
        t.val("close watched socket", &n.close(c));
        wait(n, t, "closed socket left the set", ep);

        // A refused non-blocking connect.
        let r = n.socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0).unwrap();
        t.val("connect closed port", &n.connect(r, &at(n, 7599)));
        n.settle();
        t.val(
            "ctl ADD refused",
            &n.epoll_ctl(ep, EPOLL_CTL_ADD, r, Some(&ev(EPOLLIN | EPOLLOUT, 9))),
        );
        wait(n, t, "refused", ep);
        let _ = n.close(r);
        let _ = n.close(l);
        let _ = n.close(ep);
    });
}

/// An edge-triggered writer fills its socket, hears nothing while the
/// peer does not read, and hears EPOLLOUT once the peer has read all:
/// the edge needs the readiness seen after the filling send, which the
/// socket layer takes itself (the stack's ready list does not name a
/// socket for its own application's send).
#[test]
fn epoll_edge_triggered_writer_matches_linux() {
    both(|n, t| {
        let l = n.socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0).unwrap();
        n.bind(l, &at(n, 7521)).unwrap();
        n.listen(l, 8).unwrap();
        let c = n.socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0).unwrap();
        t.val("connect", &n.connect(c, &at(n, 7521)));
        n.settle();
        let (a, _) = n.accept4(l, SOCK_NONBLOCK).unwrap();
        let ep = n.epoll_create1(0).unwrap();
        t.val(
            "ctl ADD client OUT|ET",
            &n.epoll_ctl(ep, EPOLL_CTL_ADD, c, Some(&ev(EPOLLOUT | EPOLLET, 3))),
        );
        wait(n, t, "writable", ep);
        wait(n, t, "writable, edge reported", ep);
        // Fill the client's socket (and the peer's window): the amounts
        // differ between the stacks, so only the end is recorded.
        let chunk = vec![5u8; 16 * 1024];
        let mut written = 0usize;
        let mut last = Ok(0);
        for _ in 0..10_000 {
            last = n.send(c, &chunk, 0);
            match last {
                Ok(k) => written += k,
                Err(_) => {
                    n.settle();
                    last = n.send(c, &chunk, 0);
                    match last {
                        Ok(k) => written += k,
                        Err(_) => break,
                    }
                }
            }
        }
        t.val("full", &last.map(|_| ()));
        assert!(written > 0);
        n.settle();
        wait(n, t, "full: no edge", ep);
        // The peer reads everything: the space comes back.
        let mut buf = vec![0u8; 64 * 1024];
        let mut read = 0usize;
        for _ in 0..100_000 {
            if read == written {
                break;
            }
            match n.recv(a, &mut buf, 0) {
                Ok(k) => read += k,
                Err(_) => n.settle(),
            }
        }
        assert_eq!(read, written, "the peer read every byte");
        n.settle();
        wait(n, t, "drained: OUT edge", ep);
        wait(n, t, "drained, edge reported", ep);
        let _ = n.close(a);
        let _ = n.close(c);
        let _ = n.close(l);
        let _ = n.close(ep);
    });
}

#[test]
fn ipv6_tcp_calls_match_linux() {
    both(|n, t| {
        t.val(
            "socket AF_INET6 stream with UDP",
            &n.socket(AF_INET6, SOCK_STREAM, IPPROTO_UDP).map(|_| ()),
        );
        let l = n.socket(AF_INET6, SOCK_STREAM, 0).unwrap();
        t.val("SO_DOMAIN", &get_int(n, l, SOL_SOCKET, SO_DOMAIN));
        let r = n.getsockname(l);
        t.rec("getsockname fresh", &r, |nm, a| nm.addr(a));
        t.val("getpeername fresh", &n.getpeername(l).map(|_| ()));
        t.val("IPV6_V6ONLY", &get_int(n, l, IPPROTO_IPV6, IPV6_V6ONLY));
        let hops = get_int(n, l, IPPROTO_IPV6, IPV6_UNICAST_HOPS);
        t.val("IPV6_UNICAST_HOPS", &hops);
        t.val("IPV6_TCLASS", &get_int(n, l, IPPROTO_IPV6, IPV6_TCLASS));
        t.val(
            "IPV6_TCLASS 0x2f",
            &set_int(n, l, IPPROTO_IPV6, IPV6_TCLASS, 0x2f),
        );
        t.val("IPV6_TCLASS set", &get_int(n, l, IPPROTO_IPV6, IPV6_TCLASS));
        t.val(
            "IPV6_TCLASS 256",
            &set_int(n, l, IPPROTO_IPV6, IPV6_TCLASS, 256),
        );
        t.val(
            "IPV6_TCLASS -1",
            &set_int(n, l, IPPROTO_IPV6, IPV6_TCLASS, -1),
        );
        t.val(
            "IPV6_TCLASS after -1",
            &get_int(n, l, IPPROTO_IPV6, IPV6_TCLASS),
        );
        t.val(
            "IPV6_UNICAST_HOPS 300",
            &set_int(n, l, IPPROTO_IPV6, IPV6_UNICAST_HOPS, 300),
        );
        t.val(
            "IPV6_UNICAST_HOPS 7",
            &set_int(n, l, IPPROTO_IPV6, IPV6_UNICAST_HOPS, 7),
        );
        t.val(
            "IPV6_UNICAST_HOPS set",
            &get_int(n, l, IPPROTO_IPV6, IPV6_UNICAST_HOPS),
        );
        t.val(
            "IPV6_UNICAST_HOPS -1",
            &set_int(n, l, IPPROTO_IPV6, IPV6_UNICAST_HOPS, -1),
        );
        t.val(
            "IPV6_UNICAST_HOPS back to the default",
            &Ok::<_, api::Errno>(get_int(n, l, IPPROTO_IPV6, IPV6_UNICAST_HOPS) == hops),
        );
        t.val(
            "IPV6_V6ONLY one byte",
            &n.setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &[1]),
        );
        t.val("IPv6 option unknown", &set_int(n, l, IPPROTO_IPV6, 9999, 1));
        let mut b4 = [0u8; 4];
        t.val(
            "getsockopt IPv6 option unknown",
            &n.getsockopt(l, IPPROTO_IPV6, 9999, &mut b4),
        );
        t.val(
            "getsockopt level unknown",
            &n.getsockopt(l, 9999, 1, &mut b4),
        );
        t.val("IP_TTL on AF_INET6", &get_int(n, l, IPPROTO_IP, IP_TTL));
        let f4 = n.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        t.val(
            "IPV6_V6ONLY on AF_INET",
            &set_int(n, f4, IPPROTO_IPV6, IPV6_V6ONLY, 1),
        );
        t.val(
            "getsockopt IPV6_V6ONLY on AF_INET",
            &n.getsockopt(f4, IPPROTO_IPV6, IPV6_V6ONLY, &mut b4),
        );
        t.val("AF_INET bind IPv6", &n.bind(f4, &any6(7601)));
        t.val("AF_INET connect IPv6", &n.connect(f4, &at6(n, 7601)));
        let _ = n.close(f4);

        // Bind: the family, v6-only and scope rules.
        t.val("bind AF_INET address", &n.bind(l, &at(n, 7601)));
        let b = n.socket(AF_INET6, SOCK_STREAM, 0).unwrap();
        t.val("V6ONLY on", &set_int(n, b, IPPROTO_IPV6, IPV6_V6ONLY, 1));
        t.val("bind mapped, v6-only", &n.bind(b, &mapped(n, 7601)));
        t.val("connect mapped, v6-only", &n.connect(b, &mapped(n, 7601)));
        t.val(
            "bind link-local without scope",
            &n.bind(b, &"[fe80::1]:7601".parse().unwrap()),
        );
        t.val(
            "bind multicast",
            &n.bind(b, &"[ff02::1]:7601".parse().unwrap()),
        );
        t.val(
            "bind not local",
            &n.bind(b, &"[fd99:1::77]:7601".parse().unwrap()),
        );
        let _ = n.close(b);

        // [::] takes IPv4 too unless v6-only.
        t.val("bind [::]", &n.bind(l, &any6(7602)));
        t.val(
            "IPV6_V6ONLY after bind",
            &set_int(n, l, IPPROTO_IPV6, IPV6_V6ONLY, 1),
        );
        let a4 = n.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        t.val(
            "AF_INET bind 0.0.0.0 beside [::]",
            &n.bind(a4, &SocketAddr::from((Ipv4Addr::UNSPECIFIED, 7602))),
        );
        let _ = n.close(a4);
        let only = n.socket(AF_INET6, SOCK_STREAM, 0).unwrap();
        t.val("V6ONLY", &set_int(n, only, IPPROTO_IPV6, IPV6_V6ONLY, 1));
        t.val("bind [::] v6-only", &n.bind(only, &any6(7603)));
        let a4 = n.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        t.val(
            "AF_INET bind 0.0.0.0 beside v6-only [::]",
            &n.bind(a4, &SocketAddr::from((Ipv4Addr::UNSPECIFIED, 7603))),
        );
        t.val("listen beside", &n.listen(a4, 4));
        t.val("listen v6-only", &n.listen(only, 4));
        let _ = n.close(a4);
        let _ = n.close(only);
        let s6 = n.socket(AF_INET6, SOCK_STREAM, 0).unwrap();
        t.val("bind one address", &n.bind(s6, &at6(n, 0)));
        t.val(
            "a bound address makes it v6-only",
            &get_int(n, s6, IPPROTO_IPV6, IPV6_V6ONLY),
        );
        let r = n.getsockname(s6);
        t.rec("getsockname bound", &r, |nm, a| nm.addr(a));
        let _ = n.close(s6);

        t.val("listen", &n.listen(l, 16));
        let r = n.getsockname(l);
        t.rec("getsockname listening", &r, |nm, a| nm.addr(a));

        // An IPv6 client.
        let c6 = n.socket(AF_INET6, SOCK_STREAM, 0).unwrap();
        t.val("connect AF_INET address", &n.connect(c6, &at(n, 7602)));
        t.val("connect IPv6 (blocking)", &n.connect(c6, &at6(n, 7602)));
        n.settle();
        let r = n.accept4(l, 0);
        t.rec("accept IPv6", &r, |nm, (_, a)| nm.addr(a));
        let a6 = r.map_or(-1, |(fd, _)| fd);
        let r = n.getpeername(c6);
        t.rec("getpeername IPv6", &r, |nm, a| nm.addr(a));
        let r = n.getsockname(a6);
        t.rec("getsockname accepted IPv6", &r, |nm, a| nm.addr(a));
        t.val("SO_DOMAIN accepted", &get_int(n, a6, SOL_SOCKET, SO_DOMAIN));
        t.val(
            "IPV6_UNICAST_HOPS 9 connected",
            &set_int(n, c6, IPPROTO_IPV6, IPV6_UNICAST_HOPS, 9),
        );
        t.val("send IPv6", &n.send(c6, b"over six", 0));
        n.settle();
        let mut buf = [0u8; 64];
        t.val("recv IPv6", &n.recv(a6, &mut buf, 0));

        // An IPv4 client of the dual-stack listener: shown mapped.
        let c4 = n.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        t.val("connect IPv4 to [::]", &n.connect(c4, &at(n, 7602)));
        n.settle();
        let r = n.accept4(l, 0);
        t.rec("accept IPv4 on [::]", &r, |nm, (_, a)| nm.addr(a));
        let a4 = r.map_or(-1, |(fd, _)| fd);
        let r = n.getsockname(a4);
        t.rec("getsockname accepted IPv4", &r, |nm, a| nm.addr(a));
        t.val("send IPv4", &n.send(c4, b"over four", 0));
        n.settle();
        t.val("recv IPv4", &n.recv(a4, &mut buf, 0));

        // An AF_INET6 client of an IPv4 server, through a mapped address.
        let cm = n.socket(AF_INET6, SOCK_STREAM, 0).unwrap();
        t.val("connect mapped", &n.connect(cm, &mapped(n, 7602)));
        let r = n.getsockname(cm);
        t.rec("getsockname mapped client", &r, |nm, a| nm.addr(a));
        let r = n.getpeername(cm);
        t.rec("getpeername mapped client", &r, |nm, a| nm.addr(a));
        n.settle();
        let r = n.accept4(l, 0);
        t.rec("accept mapped", &r, |nm, (_, a)| nm.addr(a));
        let am = r.map_or(-1, |(fd, _)| fd);
        for fd in [c6, a6, c4, a4, cm, am, l] {
            let _ = n.close(fd);
        }
    });
}

#[test]
fn ipv6_udp_calls_match_linux() {
    both(|n, t| {
        let srv = n.socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK, 0).unwrap();
        t.val("bind [::]", &n.bind(srv, &any6(7701)));
        t.val(
            "IPV6_V6ONLY after bind",
            &set_int(n, srv, IPPROTO_IPV6, IPV6_V6ONLY, 1),
        );
        t.val(
            "IPV6_RECVPKTINFO on",
            &set_int(n, srv, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1),
        );
        t.val(
            "IPV6_RECVPKTINFO",
            &get_int(n, srv, IPPROTO_IPV6, IPV6_RECVPKTINFO),
        );
        let u6 = n.socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK, 0).unwrap();
        let u4 = n.socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0).unwrap();
        t.val("sendto IPv6", &n.sendto(u6, b"six", 0, Some(&at6(n, 7701))));
        let r = n.getsockname(u6);
        t.rec("getsockname after sendto", &r, |nm, a| nm.addr(a));
        n.settle();
        t.val("sendto IPv4", &n.sendto(u4, b"four", 0, Some(&at(n, 7701))));
        t.val(
            "AF_INET sendto IPv6",
            &n.sendto(u4, b"x", 0, Some(&at6(n, 7701))),
        );
        n.settle();
        let mut buf = [0u8; 64];
        let show = |nm: &common::net::Names, m: &api::RecvMsg| {
            let p = m.pktinfo6.unwrap();
            format!(
                "len {} from {} to {} ifindex>0 {}",
                m.len,
                nm.addr(&m.addr.unwrap()),
                nm.addr(&SocketAddr::from((p.addr, 1))),
                p.ifindex > 0
            )
        };
        let r = n.recvmsg(srv, &mut buf, 0);
        t.rec("recvmsg IPv6", &r, show);
        let from6 = r.ok().and_then(|m| m.addr);
        let r = n.recvmsg(srv, &mut buf, 0);
        t.rec("recvmsg IPv4 on [::]", &r, show);
        let from4 = r.ok().and_then(|m| m.addr);
        t.val("recvmsg empty", &n.recvmsg(srv, &mut buf, 0).map(|_| ()));

        // Replies: to either family; an IPV6_PKTINFO source for IPv4 must
        // be mapped.
        t.val("reply IPv6", &n.sendto(srv, b"r6", 0, from6.as_ref()));
        let msg = SendMsg {
            addr: from4,
            src: Some(IpAddr::V6(n.server_ip().to_ipv6_mapped())),
            ifindex: None,
        };
        t.val(
            "reply IPv4 from a mapped source",
            &n.sendmsg(srv, b"r4", 0, &msg),
        );
        let bad = SendMsg {
            src: Some(IpAddr::V6(n.server_ip6().unwrap())),
            ..msg
        };
        t.val(
            "reply IPv4 from an IPv6 source",
            &n.sendmsg(srv, b"x", 0, &bad),
        );
        n.settle();
        t.val("recv reply IPv6", &n.recv(u6, &mut buf, 0));
        t.val("recv reply IPv4", &n.recv(u4, &mut buf, 0));
        t.val("recv nothing more", &n.recv(u4, &mut buf, 0));

        // An AF_INET6 socket also sends to a plain AF_INET address.
        let v = n.socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK, 0).unwrap();
        t.val(
            "sendto AF_INET address",
            &n.sendto(v, b"plain", 0, Some(&at(n, 7701))),
        );
        n.settle();
        let r = n.recvfrom(srv, &mut buf, 0);
        t.rec("recvfrom", &r, |nm, (len, a)| {
            format!("{len} from {}", nm.addr(&a.unwrap()))
        });
        let _ = n.close(v);

        // v6-only: no IPv4 either way.
        let o = n.socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK, 0).unwrap();
        t.val("V6ONLY", &set_int(n, o, IPPROTO_IPV6, IPV6_V6ONLY, 1));
        t.val(
            "v6-only sendto mapped",
            &n.sendto(o, b"x", 0, Some(&mapped(n, 7701))),
        );
        t.val(
            "v6-only sendto AF_INET",
            &n.sendto(o, b"x", 0, Some(&at(n, 7701))),
        );
        t.val("v6-only connect AF_INET", &n.connect(o, &at(n, 7701)));
        t.val("v6-only connect mapped", &n.connect(o, &mapped(n, 7701)));
        let _ = n.close(o);

        // Connected: the source the route picks, in the peer's family.
        let c = n.socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK, 0).unwrap();
        t.val("connect mapped", &n.connect(c, &mapped(n, 7701)));
        let r = n.getsockname(c);
        t.rec("getsockname connected mapped", &r, |nm, a| nm.addr(a));
        let r = n.getpeername(c);
        t.rec("getpeername connected mapped", &r, |nm, a| nm.addr(a));
        let _ = n.close(c);
        let c = n.socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK, 0).unwrap();
        t.val("connect IPv6", &n.connect(c, &at6(n, 7701)));
        let r = n.getsockname(c);
        t.rec("getsockname connected IPv6", &r, |nm, a| nm.addr(a));
        t.val("send connected", &n.send(c, b"conn", 0));
        n.settle();
        let r = n.recvfrom(srv, &mut buf, 0);
        t.rec("recvfrom connected", &r, |nm, (len, a)| {
            format!("{len} from {}", nm.addr(&a.unwrap()))
        });
        let _ = n.close(c);

        // A socket bound to a mapped address is IPv4's.
        let m = n.socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK, 0).unwrap();
        t.val("bind mapped", &n.bind(m, &mapped(n, 7702)));
        let r = n.getsockname(m);
        t.rec("getsockname bound mapped", &r, |nm, a| nm.addr(a));
        t.val(
            "sendto IPv4 to it",
            &n.sendto(u4, b"m", 0, Some(&at(n, 7702))),
        );
        n.settle();
        let r = n.recvfrom(m, &mut buf, 0);
        t.rec("recvfrom on mapped", &r, |nm, (len, a)| {
            format!("{len} from {}", nm.addr(&a.unwrap()))
        });
        let _ = n.close(m);
        for fd in [u6, u4, srv] {
            let _ = n.close(fd);
        }
    });
}

/// An item removed while it waits on the ready list and added again (a
/// program that closes a connection and gets its number back for the
/// next one, with the same epoll) is reported once per wait, as Linux
/// reports it; so is an item whose socket was closed while it waited.
#[test]
fn epoll_item_added_again_is_reported_once_like_linux() {
    both(|n, t| {
        let l = n.socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0).unwrap();
        n.bind(l, &at(n, 7511)).unwrap();
        n.listen(l, 8).unwrap();
        let (c, s) = pair(n, t, l, 7511, true);
        let ep = n.epoll_create1(0).unwrap();
        // Writable at once: on the ready list from the ADD.
        t.val(
            "ADD",
            &n.epoll_ctl(ep, EPOLL_CTL_ADD, c, Some(&ev(EPOLLOUT, 7))),
        );
        t.val("DEL while ready", &n.epoll_ctl(ep, EPOLL_CTL_DEL, c, None));
        t.val(
            "ADD again",
            &n.epoll_ctl(ep, EPOLL_CTL_ADD, c, Some(&ev(EPOLLOUT, 8))),
        );
        wait(n, t, "once, with the new data", ep);
        wait(n, t, "level-triggered: again, once", ep);
        // MOD while ready, then DEL and ADD again with other events.
        t.val(
            "MOD",
            &n.epoll_ctl(ep, EPOLL_CTL_MOD, c, Some(&ev(EPOLLOUT | EPOLLIN, 9))),
        );
        t.val("DEL", &n.epoll_ctl(ep, EPOLL_CTL_DEL, c, None));
        t.val(
            "ADD IN only",
            &n.epoll_ctl(ep, EPOLL_CTL_ADD, c, Some(&ev(EPOLLIN, 10))),
        );
        wait(n, t, "nothing to read: nothing", ep);
        t.val("send", &n.send(s, b"x", 0));
        n.settle();
        wait(n, t, "readable, once", ep);
        for fd in [c, s, l, ep] {
            let _ = n.close(fd);
        }
    });
}

/// SIGURGs this process received.
static SIGURGS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

extern "C" fn count_sigurg(_: i32) {
    SIGURGS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

/// Whether a SIGURG came since `before` was read (waiting up to a second
/// for the kernel's, which any thread of the process may take).
fn sigurg_since(before: usize) -> bool {
    for _ in 0..100 {
        if SIGURGS.load(std::sync::atomic::Ordering::SeqCst) > before {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    false
}

/// Urgent data (MSG_OOB, SO_OOBINLINE, SIOCATMARK, EPOLLPRI, SIGURG to the
/// F_SETOWN owner) as Linux gives it: reads stop at the mark, the octet
/// is read once out of band, a read past the mark loses it, in line it
/// stays in the stream.
#[test]
fn urgent_data_matches_linux() {
    // SAFETY: a handler that only touches an atomic; SIGURG is ignored by
    // default, so nothing else in the process relies on it.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = count_sigurg as extern "C" fn(i32) as usize;
        libc::sigaction(libc::SIGURG, &sa, std::ptr::null_mut());
    }
    both(|n, t| {
        let l = n.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        t.val("bind", &n.bind(l, &at(n, 7141)));
        t.val("listen", &n.listen(l, 4));
        let mut buf = [0u8; 64];
        let mut mark = -1;
        t.val("recv MSG_OOB on a listener", &n.recv(l, &mut buf, MSG_OOB));
        let (c, a) = pair(n, t, l, 7141, false);
        t.val(
            "recv MSG_OOB, no urgent data",
            &n.recv(a, &mut buf, MSG_OOB),
        );
        t.val("SIOCATMARK, no mark", &n.ioctl(a, SIOCATMARK, &mut mark));
        t.note(format!("SIOCATMARK -> {mark}"));
        t.val(
            "SO_OOBINLINE default",
            &get_int(n, a, SOL_SOCKET, SO_OOBINLINE),
        );
        let ep = n.epoll_create1(0).unwrap();
        let interest = ev(EPOLLIN | EPOLLPRI, 1);
        t.val(
            "epoll_ctl ADD",
            &n.epoll_ctl(ep, EPOLL_CTL_ADD, a, Some(&interest)),
        );
        wait(n, t, "epoll_wait: nothing", ep);

        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        t.val("F_SETOWN", &n.fcntl(a, F_SETOWN, pid));
        t.val(
            "F_GETOWN is the pid",
            &n.fcntl(a, F_GETOWN, 0).map(|o| o == pid),
        );
        let before = SIGURGS.load(std::sync::atomic::Ordering::SeqCst);
        t.val("send MSG_OOB", &n.send(c, b"abc", MSG_OOB));
        n.settle();
        t.note(format!("SIGURG to the owner: {}", sigurg_since(before)));
        wait(n, t, "epoll_wait: urgent data", ep);
        t.val("SIOCATMARK before", &n.ioctl(a, SIOCATMARK, &mut mark));
        t.note(format!("SIOCATMARK -> {mark}"));
        t.val("recv up to the mark", &n.recv(a, &mut buf, 0));
        t.note(format!("read {:?}", &buf[..2]));
        t.val("SIOCATMARK at the mark", &n.ioctl(a, SIOCATMARK, &mut mark));
        t.note(format!("SIOCATMARK -> {mark}"));
        wait(n, t, "epoll_wait: at the mark", ep);
        let r = n.recvmsg(a, &mut buf, MSG_OOB | MSG_PEEK);
        t.rec("recvmsg MSG_OOB|MSG_PEEK", &r, |_, m| {
            format!("{} flags {:#x}", m.len, m.flags)
        });
        let r = n.recvmsg(a, &mut buf, MSG_OOB);
        t.rec("recvmsg MSG_OOB", &r, |_, m| {
            format!("{} flags {:#x}", m.len, m.flags)
        });
        t.note(format!("urgent octet {:?}", buf[0]));
        t.val("recv MSG_OOB again", &n.recv(a, &mut buf, MSG_OOB));
        wait(n, t, "epoll_wait: octet taken", ep);
        t.val(
            "recv after the octet, MSG_DONTWAIT",
            &n.recv(a, &mut buf, MSG_DONTWAIT),
        );

        // A read past the mark skips the octet, which is then lost.
        t.val("send MSG_OOB again", &n.send(c, b"xyz", MSG_OOB));
        n.settle();
        t.val("send after it", &n.send(c, b"tail", 0));
        n.settle();
        t.val("recv up to the second mark", &n.recv(a, &mut buf, 0));
        t.val("recv past the mark", &n.recv(a, &mut buf, 0));
        t.note(format!("read {:?}", &buf[..4]));
        t.val("recv MSG_OOB after it", &n.recv(a, &mut buf, MSG_OOB));

        // In line the octet stays in the stream.
        t.val(
            "SO_OOBINLINE on",
            &set_int(n, a, SOL_SOCKET, SO_OOBINLINE, 1),
        );
        t.val("SO_OOBINLINE", &get_int(n, a, SOL_SOCKET, SO_OOBINLINE));
        t.val("send MSG_OOB, in line", &n.send(c, b"12", MSG_OOB));
        n.settle();
        wait(n, t, "epoll_wait: in line", ep);
        t.val("recv MSG_OOB in line", &n.recv(a, &mut buf, MSG_OOB));
        t.val("recv up to the mark, in line", &n.recv(a, &mut buf, 0));
        t.val("SIOCATMARK in line", &n.ioctl(a, SIOCATMARK, &mut mark));
        t.note(format!("SIOCATMARK -> {mark}"));
        t.val("recv the urgent octet in line", &n.recv(a, &mut buf, 0));
        t.note(format!("read {:?}", buf[0]));
        let u = n.socket(AF_INET, SOCK_DGRAM, 0).unwrap();
        t.val(
            "send MSG_OOB on UDP",
            &n.sendto(u, b"x", MSG_OOB, Some(&at(n, 7142))),
        );
        for fd in [u, ep, c, a, l] {
            let _ = n.close(fd);
        }
    });
}
