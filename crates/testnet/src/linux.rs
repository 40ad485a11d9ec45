//! The Linux kernel's side: its socket, epoll and poll calls through
//! libc, in api's types (an `Errno` for a failure), and the network
//! namespace of the calling thread's own they run in (so ports and
//! TIME-WAITs of other runs do not interfere).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use api::{epoll_event, Errno, Result};

/// A socket address as C takes it: a sockaddr_in or sockaddr_in6 in a
/// sockaddr_storage, and the length given with it.
pub type CAddr = (libc::sockaddr_storage, libc::socklen_t);

/// Moves the calling thread into a new network namespace with `lo` up.
/// Needs root (CAP_SYS_ADMIN); panics saying so otherwise.
pub fn enter_new_namespace() {
    // SAFETY: unshare takes no pointers; it changes this thread only.
    let r = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    assert_eq!(
        r,
        0,
        "unshare(CLONE_NEWNET) needs root: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: a socket call takes no pointers.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
    // SAFETY: an all-zero ifreq is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(b"lo\0") {
        *d = *s as libc::c_char;
    }
    // SAFETY: `ifr` is a live ifreq with the name set; the union field
    // written is the flags one SIOCSIFFLAGS reads.
    unsafe {
        assert_eq!(
            libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut ifr),
            0,
            "SIOCGIFFLAGS lo"
        );
        ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        assert_eq!(
            libc::ioctl(fd, libc::SIOCSIFFLAGS, &mut ifr),
            0,
            "SIOCSIFFLAGS lo"
        );
        libc::close(fd);
    }
}

/// A libc return value: negative is the thread's errno.
pub fn cvt(r: isize) -> Result<isize> {
    if r < 0 {
        Err(Errno::last_os_error())
    } else {
        Ok(r)
    }
}

/// `a` in C, with its own family's length.
pub fn to_sa(a: &SocketAddr) -> CAddr {
    let mut st = zero_sa();
    let len = match a {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: a sockaddr_storage is larger than and aligned for a sockaddr_in.
            unsafe { std::ptr::write((&mut st as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo().to_be(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: a sockaddr_storage is larger than and aligned for a sockaddr_in6.
            unsafe { std::ptr::write((&mut st as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (st, len as libc::socklen_t)
}

/// `a` in C for kernel socket `fd`.  The Rust calls have no length: an
/// IPv4 address to an AF_INET6 socket goes as a program holding it in a
/// sockaddr_storage would give it (a sockaddr_in6's length), so the kernel
/// looks at its family rather than finding it short.
pub fn to_sa_for(fd: i32, a: &SocketAddr) -> CAddr {
    let (st, len) = to_sa(a);
    let mut domain = 0i32;
    let mut dlen = 4 as libc::socklen_t;
    // SAFETY: `domain` and `dlen` are live locals, `dlen` its true size.
    unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_DOMAIN,
            (&mut domain as *mut i32).cast(),
            &mut dlen,
        )
    };
    if domain == libc::AF_INET6 && a.is_ipv4() {
        (
            st,
            std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
        )
    } else {
        (st, len)
    }
}

/// The address C wrote into `s` (by its family; zeros read as 0.0.0.0:0).
pub fn from_sa(s: &libc::sockaddr_storage) -> SocketAddr {
    if i32::from(s.ss_family) == libc::AF_INET6 {
        // SAFETY: the family says the storage holds a sockaddr_in6.
        let s = unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
        SocketAddr::V6(SocketAddrV6::new(
            Ipv6Addr::from(s.sin6_addr.s6_addr),
            u16::from_be(s.sin6_port),
            u32::from_be(s.sin6_flowinfo),
            s.sin6_scope_id,
        ))
    } else {
        // SAFETY: the storage holds a sockaddr_in (or zeros, read as one).
        let s = unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
        SocketAddr::V4(SocketAddrV4::new(
            Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)),
            u16::from_be(s.sin_port),
        ))
    }
}

/// The size of a sockaddr_storage, for a call that writes an address.
pub const SA_LEN: libc::socklen_t =
    std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;

pub fn zero_sa() -> libc::sockaddr_storage {
    // SAFETY: an all-zero sockaddr_storage is a valid value.
    unsafe { std::mem::zeroed() }
}

// SAFETY (every unsafe block below): the pointers passed are to live
// locals or to the caller's slices, with their true lengths.

pub fn socket(d: i32, t: i32, p: i32) -> Result<i32> {
    cvt(unsafe { libc::socket(d, t, p) } as isize).map(|f| f as i32)
}

pub fn bind(fd: i32, (sa, len): &CAddr) -> Result<()> {
    cvt(unsafe { libc::bind(fd, (sa as *const libc::sockaddr_storage).cast(), *len) } as isize)
        .map(|_| ())
}

pub fn listen(fd: i32, backlog: i32) -> Result<()> {
    cvt(unsafe { libc::listen(fd, backlog) } as isize).map(|_| ())
}

pub fn accept4(fd: i32, flags: i32) -> Result<(i32, SocketAddr)> {
    let mut sa = zero_sa();
    let mut len = SA_LEN;
    let r = unsafe {
        libc::accept4(
            fd,
            (&mut sa as *mut libc::sockaddr_storage).cast(),
            &mut len,
            flags,
        )
    };
    cvt(r as isize).map(|f| (f as i32, from_sa(&sa)))
}

pub fn connect(fd: i32, (sa, len): &CAddr) -> Result<()> {
    cvt(unsafe { libc::connect(fd, (sa as *const libc::sockaddr_storage).cast(), *len) } as isize)
        .map(|_| ())
}

pub fn sendto(fd: i32, b: &[u8], flags: i32, to: Option<&CAddr>) -> Result<usize> {
    let (p, l) = match to {
        Some((s, len)) => ((s as *const libc::sockaddr_storage).cast(), *len),
        None => (std::ptr::null(), 0),
    };
    cvt(unsafe { libc::sendto(fd, b.as_ptr().cast(), b.len(), flags, p, l) }).map(|n| n as usize)
}

pub fn recvfrom(fd: i32, b: &mut [u8], flags: i32) -> Result<(usize, Option<SocketAddr>)> {
    let mut sa = zero_sa();
    let mut len = SA_LEN;
    let r = unsafe {
        libc::recvfrom(
            fd,
            b.as_mut_ptr().cast(),
            b.len(),
            flags,
            (&mut sa as *mut libc::sockaddr_storage).cast(),
            &mut len,
        )
    };
    cvt(r).map(|n| (n as usize, (len > 0).then(|| from_sa(&sa))))
}

pub fn shutdown(fd: i32, how: i32) -> Result<()> {
    cvt(unsafe { libc::shutdown(fd, how) } as isize).map(|_| ())
}

pub fn close(fd: i32) -> Result<()> {
    cvt(unsafe { libc::close(fd) } as isize).map(|_| ())
}

pub fn getsockname(fd: i32) -> Result<SocketAddr> {
    let mut sa = zero_sa();
    let mut len = SA_LEN;
    cvt(unsafe {
        libc::getsockname(
            fd,
            (&mut sa as *mut libc::sockaddr_storage).cast(),
            &mut len,
        )
    } as isize)
    .map(|_| from_sa(&sa))
}

pub fn getpeername(fd: i32) -> Result<SocketAddr> {
    let mut sa = zero_sa();
    let mut len = SA_LEN;
    cvt(unsafe {
        libc::getpeername(
            fd,
            (&mut sa as *mut libc::sockaddr_storage).cast(),
            &mut len,
        )
    } as isize)
    .map(|_| from_sa(&sa))
}

pub fn getsockopt(fd: i32, level: i32, name: i32, v: &mut [u8]) -> Result<usize> {
    let mut len = v.len() as libc::socklen_t;
    cvt(unsafe { libc::getsockopt(fd, level, name, v.as_mut_ptr().cast(), &mut len) } as isize)
        .map(|_| len as usize)
}

pub fn setsockopt(fd: i32, level: i32, name: i32, v: &[u8]) -> Result<()> {
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            v.as_ptr().cast(),
            v.len() as libc::socklen_t,
        )
    } as isize)
    .map(|_| ())
}

pub fn ioctl(fd: i32, req: u64, arg: &mut i32) -> Result<()> {
    cvt(unsafe { libc::ioctl(fd, req, arg as *mut i32) } as isize).map(|_| ())
}

pub fn fcntl(fd: i32, cmd: i32, arg: i32) -> Result<i32> {
    cvt(unsafe { libc::fcntl(fd, cmd, arg) } as isize).map(|r| r as i32)
}

pub fn epoll_create1(flags: i32) -> Result<i32> {
    cvt(unsafe { libc::epoll_create1(flags) } as isize).map(|f| f as i32)
}

pub fn epoll_ctl(ep: i32, op: i32, fd: i32, ev: Option<&epoll_event>) -> Result<()> {
    let mut e = ev.copied();
    let p = e
        .as_mut()
        .map_or(std::ptr::null_mut(), |e| e as *mut epoll_event);
    cvt(unsafe { libc::epoll_ctl(ep, op, fd, p) } as isize).map(|_| ())
}

pub fn epoll_wait(ep: i32, evs: &mut [epoll_event], timeout: i32) -> Result<usize> {
    cvt(unsafe { libc::epoll_wait(ep, evs.as_mut_ptr(), evs.len() as i32, timeout) } as isize)
        .map(|n| n as usize)
}

pub fn poll(fds: &mut [libc::pollfd], timeout: i32) -> Result<usize> {
    cvt(unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) } as isize)
        .map(|n| n as usize)
}
