//! AF_INET6 through the C entry points: `sockaddr_in6` in and out, the
//! length rules, and F-Stack's `ff_*` conventions (an IPv6 listener beside
//! an IPv4 one on the same port, as F-Stack's INET6 example opens them).
//! Two engines on the test's thread, joined in memory: 10.99.6.1 /
//! fd99:6::1 (client) and 10.99.6.2 / fd99:6::2 (server).

use std::mem::size_of;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use libc::{sockaddr, sockaddr_in, sockaddr_in6, socklen_t};
use link::MemoryLink;
use runtime::{Engine, EngineConfig};
use stack::{InterfaceConfig, Ipv6Config, Stack, StackConfig};
use ustack::fstack::{ff_accept, ff_bind, ff_getsockopt, ff_listen, ff_socket};
use ustack::{ustack_bind, ustack_connect, ustack_getsockname};

fn stack(last: u8) -> Stack {
    let mut s = Stack::new(StackConfig {
        seed: u64::from(last),
        ip6_dad_count: 0,
        ip6_accept_rtadv: false,
        ..StackConfig::default()
    });
    let id = s
        .add_interface(&InterfaceConfig::new(
            format!("mem{last}"),
            [2, 0, 0, 0, 6, last],
            Ipv4Addr::new(10, 99, 6, last),
            24,
        ))
        .unwrap();
    let v6 = Ipv6Config {
        addrs: vec![(ip6(last), 64)],
        gateway: None,
    };
    s.enable_ipv6(stack::Instant::ZERO, id, &v6).unwrap();
    s
}

fn ip6(last: u8) -> Ipv6Addr {
    Ipv6Addr::new(0xfd99, 6, 0, 0, 0, 0, 0, u16::from(last))
}

fn sin6(ip: Ipv6Addr, port: u16) -> sockaddr_in6 {
    // SAFETY: plain data; all zeroes is valid.
    let mut s: sockaddr_in6 = unsafe { std::mem::zeroed() };
    s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    s.sin6_port = port.to_be();
    s.sin6_addr.s6_addr = ip.octets();
    s
}

fn sin(ip: Ipv4Addr, port: u16) -> sockaddr_in {
    // SAFETY: plain data; all zeroes is valid.
    let mut s: sockaddr_in = unsafe { std::mem::zeroed() };
    s.sin_family = libc::AF_INET as libc::sa_family_t;
    s.sin_port = port.to_be();
    s.sin_addr.s_addr = u32::from(ip).to_be();
    s
}

fn sa<T>(v: &T) -> *const sockaddr {
    (v as *const T).cast()
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

const SIN6_LEN: socklen_t = size_of::<sockaddr_in6>() as socklen_t;
const SIN_LEN: socklen_t = size_of::<sockaddr_in>() as socklen_t;

/// Steps the engines until `f` says it is done (at most 2 s).
fn until(mut f: impl FnMut() -> bool) {
    for _ in 0..2000 {
        if f() {
            return;
        }
        api::step().unwrap();
        std::thread::sleep(Duration::from_micros(500));
    }
    panic!("timed out");
}

#[test]
fn ipv6_through_the_c_and_fstack_calls() {
    let (mut a, mut b) = MemoryLink::pair(1500, 4096);
    a.set_mac([2, 0, 0, 0, 6, 1]);
    b.set_mac([2, 0, 0, 0, 6, 2]);
    let cfg = EngineConfig {
        idle_sleep: Duration::ZERO,
        pkt_tx_delay: Duration::ZERO,
        ..EngineConfig::default()
    };
    // The server's engine first: it takes the sockets on [::] and 0.0.0.0.
    api::attach(Engine::new(stack(2), vec![b], cfg));
    api::attach(Engine::new(stack(1), vec![a], cfg));

    // SAFETY (the block): every pointer is to a live local of the length
    // given, or null where the call allows it.
    unsafe {
        // F-Stack's INET6 example: an IPv4 listener on port 80, then an
        // IPv6 one on the same port, without IPV6_V6ONLY: ff_socket's
        // AF_INET6 sockets are v6-only as FreeBSD's are.
        let l4 = ff_socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        let any4 = sin(Ipv4Addr::UNSPECIFIED, 80);
        assert_eq!(ff_bind(l4, sa(&any4), SIN_LEN), 0);
        assert_eq!(ff_listen(l4, 16), 0);
        let l6 = ff_socket(libc::AF_INET6, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        assert!(l6 >= 0);
        let mut v = 0i32;
        let mut vlen = 4 as socklen_t;
        let r = ff_getsockopt(
            l6,
            libc::IPPROTO_IPV6,
            libc::IPV6_V6ONLY,
            (&mut v as *mut i32).cast(),
            &mut vlen,
        );
        assert_eq!((r, v), (0, 1), "v6-only by default");
        let any6 = sin6(Ipv6Addr::UNSPECIFIED, 80);
        // Lengths: RFC 2133's 24 bytes are enough, 23 are not.
        assert_eq!(ff_bind(l6, sa(&any6), 23), -1);
        assert_eq!(errno(), libc::EINVAL);
        // A sockaddr_in to an AF_INET6 socket is short before it is
        // the wrong family.
        assert_eq!(ff_bind(l6, sa(&any4), SIN_LEN), -1);
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(ff_bind(l6, sa(&any6), 24), 0);
        assert_eq!(ff_listen(l6, 16), 0);
        // An AF_INET socket given a sockaddr_in6 cut to 16 bytes: the
        // family is wrong, the length enough.
        let x4 = ustack::ustack_socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert_eq!(ustack_bind(x4, sa(&any6), SIN_LEN), -1);
        assert_eq!(errno(), libc::EAFNOSUPPORT);
        assert_eq!(ustack_bind(x4, sa(&any6), SIN6_LEN), -1);
        assert_eq!(errno(), libc::EAFNOSUPPORT);

        // An IPv6 client reaches the IPv6 listener, an IPv4 one the IPv4
        // listener.
        let c6 = ustack::ustack_socket(libc::AF_INET6, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        let to6 = sin6(ip6(2), 80);
        assert_eq!(ustack_connect(c6, sa(&to6), SIN6_LEN), -1);
        assert_eq!(errno(), libc::EINPROGRESS);
        let c4 = ustack::ustack_socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        let to4 = sin(Ipv4Addr::new(10, 99, 6, 2), 80);
        assert_eq!(ustack_connect(c4, sa(&to4), SIN_LEN), -1);
        assert_eq!(errno(), libc::EINPROGRESS);

        let mut peer: libc::sockaddr_storage = std::mem::zeroed();
        let mut plen = size_of::<libc::sockaddr_storage>() as socklen_t;
        let p = (&mut peer as *mut libc::sockaddr_storage).cast::<sockaddr>();
        let mut a6 = -1;
        until(|| {
            a6 = ff_accept(l6, p, &mut plen);
            a6 >= 0
        });
        assert_eq!(plen, SIN6_LEN);
        let got = &*(p as *const sockaddr_in6);
        assert_eq!(i32::from(got.sin6_family), libc::AF_INET6);
        assert_eq!(Ipv6Addr::from(got.sin6_addr.s6_addr), ip6(1));
        let mut a4 = -1;
        plen = size_of::<libc::sockaddr_storage>() as socklen_t;
        until(|| {
            a4 = ff_accept(l4, p, &mut plen);
            a4 >= 0
        });
        assert_eq!(plen, SIN_LEN);

        // getsockname of an AF_INET6 socket into a sockaddr_in's room:
        // cut to 16 bytes, the length says 28.
        let mut small = [0u8; 16];
        let mut slen = 16 as socklen_t;
        assert_eq!(
            ustack_getsockname(a6, small.as_mut_ptr().cast(), &mut slen),
            0
        );
        assert_eq!(slen, SIN6_LEN);
        assert_eq!(
            u16::from_ne_bytes([small[0], small[1]]),
            libc::AF_INET6 as u16
        );
        assert_eq!(u16::from_be_bytes([small[2], small[3]]), 80);
        for fd in [a6, a4, c6, c4, x4, l6, l4] {
            assert_eq!(ustack::ustack_close(fd), 0);
        }
    }
    api::detach();
}
