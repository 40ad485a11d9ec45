//! The Linux kernel over loopback, in a network namespace of the calling
//! thread's own, with fresh ports for every sequence (a closed connection
//! leaves TIME-WAIT for a minute; a sequence must not find the last one's).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::time::Duration;

use api::{epoll_event, Errno, Result};

use crate::sys::Sys;
use crate::PORTS;

/// Below the kernel's ephemeral range (32768 and up), so a test port is
/// never one a connect picked.
const PORT_FIRST: u16 = 1024;
/// Sequences run in one namespace before the next: then every port has
/// been used once and a fresh namespace starts with none in TIME-WAIT.
const SEQUENCES_PER_NAMESPACE: u32 = (32768 - PORT_FIRST as u32) / PORTS as u32;

pub struct Kernel {
    sequences: u32,
    base: u16,
}

impl Kernel {
    /// Moves the calling thread into a new network namespace with `lo` up.
    /// Needs root (CAP_SYS_ADMIN); panics saying so otherwise.
    pub fn enter() -> Kernel {
        ignore_sigpipe();
        enter_new_namespace();
        Kernel {
            sequences: 0,
            base: PORT_FIRST,
        }
    }

    /// Starts a sequence: its ports are ones no earlier sequence used.
    pub fn begin(&mut self) {
        if self.sequences == SEQUENCES_PER_NAMESPACE {
            enter_new_namespace();
            self.sequences = 0;
        }
        self.base = PORT_FIRST + (self.sequences * PORTS as u32) as u16;
        self.sequences += 1;
    }
}

/// A send on a reset connection raises SIGPIPE without MSG_NOSIGNAL, on
/// both implementations; the sequences may do that.
pub(crate) fn ignore_sigpipe() {
    // SAFETY: setting a signal's disposition to SIG_IGN takes no pointers.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}

fn enter_new_namespace() {
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

fn cvt(r: isize) -> Result<isize> {
    if r < 0 {
        Err(Errno::last_os_error())
    } else {
        Ok(r)
    }
}

fn to_sa(a: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_storage is a valid value.
    let mut st: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
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

fn from_sa(s: &libc::sockaddr_storage) -> SocketAddr {
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

const SA_LEN: libc::socklen_t = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;

fn zero_sa() -> libc::sockaddr_storage {
    // SAFETY: an all-zero sockaddr_storage is a valid value.
    unsafe { std::mem::zeroed() }
}

// SAFETY (every unsafe block below): the pointers passed are to live
// locals or to the caller's slices, with their true lengths.
impl Sys for Kernel {
    fn server_ip(&self) -> Ipv4Addr {
        Ipv4Addr::LOCALHOST
    }
    fn client_ip(&self) -> Ipv4Addr {
        Ipv4Addr::LOCALHOST
    }
    fn server_ip6(&self) -> Ipv6Addr {
        Ipv6Addr::LOCALHOST
    }
    fn client_ip6(&self) -> Ipv6Addr {
        Ipv6Addr::LOCALHOST
    }
    fn port(&self, i: usize) -> u16 {
        self.base + i as u16
    }
    fn settle(&mut self, slow: bool) {
        if slow {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    fn socket(&mut self, d: i32, t: i32, p: i32) -> Result<i32> {
        cvt(unsafe { libc::socket(d, t, p) } as isize).map(|f| f as i32)
    }
    fn bind(&mut self, fd: i32, a: &SocketAddr) -> Result<()> {
        let (sa, len) = to_sa(a);
        cvt(unsafe { libc::bind(fd, (&sa as *const libc::sockaddr_storage).cast(), len) } as isize)
            .map(|_| ())
    }
    fn listen(&mut self, fd: i32, backlog: i32) -> Result<()> {
        cvt(unsafe { libc::listen(fd, backlog) } as isize).map(|_| ())
    }
    fn accept4(&mut self, fd: i32, flags: i32) -> Result<(i32, SocketAddr)> {
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
    fn connect(&mut self, fd: i32, a: &SocketAddr) -> Result<()> {
        let (sa, len) = to_sa(a);
        cvt(
            unsafe { libc::connect(fd, (&sa as *const libc::sockaddr_storage).cast(), len) }
                as isize,
        )
        .map(|_| ())
    }
    fn sendto(&mut self, fd: i32, b: &[u8], flags: i32, a: Option<&SocketAddr>) -> Result<usize> {
        let sa = a.map(to_sa);
        let (p, l) = match &sa {
            Some((s, len)) => ((s as *const libc::sockaddr_storage).cast(), *len),
            None => (std::ptr::null(), 0),
        };
        cvt(unsafe { libc::sendto(fd, b.as_ptr().cast(), b.len(), flags, p, l) })
            .map(|n| n as usize)
    }
    fn recvfrom(
        &mut self,
        fd: i32,
        b: &mut [u8],
        flags: i32,
    ) -> Result<(usize, Option<SocketAddr>)> {
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
    fn shutdown(&mut self, fd: i32, how: i32) -> Result<()> {
        cvt(unsafe { libc::shutdown(fd, how) } as isize).map(|_| ())
    }
    fn close(&mut self, fd: i32) -> Result<()> {
        cvt(unsafe { libc::close(fd) } as isize).map(|_| ())
    }
    fn getsockname(&mut self, fd: i32) -> Result<SocketAddr> {
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
    fn getpeername(&mut self, fd: i32) -> Result<SocketAddr> {
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
    fn getsockopt(&mut self, fd: i32, level: i32, name: i32, v: &mut [u8]) -> Result<usize> {
        let mut len = v.len() as libc::socklen_t;
        cvt(unsafe { libc::getsockopt(fd, level, name, v.as_mut_ptr().cast(), &mut len) } as isize)
            .map(|_| len as usize)
    }
    fn setsockopt(&mut self, fd: i32, level: i32, name: i32, v: &[u8]) -> Result<()> {
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
    fn ioctl(&mut self, fd: i32, req: u64, arg: &mut i32) -> Result<()> {
        cvt(unsafe { libc::ioctl(fd, req, arg as *mut i32) } as isize).map(|_| ())
    }
    fn fcntl(&mut self, fd: i32, cmd: i32, arg: i32) -> Result<i32> {
        cvt(unsafe { libc::fcntl(fd, cmd, arg) } as isize).map(|r| r as i32)
    }
    fn epoll_create1(&mut self, flags: i32) -> Result<i32> {
        cvt(unsafe { libc::epoll_create1(flags) } as isize).map(|f| f as i32)
    }
    fn epoll_ctl(&mut self, ep: i32, op: i32, fd: i32, ev: Option<&epoll_event>) -> Result<()> {
        let mut e = ev.copied();
        let p = e
            .as_mut()
            .map_or(std::ptr::null_mut(), |e| e as *mut epoll_event);
        cvt(unsafe { libc::epoll_ctl(ep, op, fd, p) } as isize).map(|_| ())
    }
    fn epoll_wait(&mut self, ep: i32, evs: &mut [epoll_event], timeout: i32) -> Result<usize> {
        cvt(unsafe { libc::epoll_wait(ep, evs.as_mut_ptr(), evs.len() as i32, timeout) } as isize)
            .map(|n| n as usize)
    }
    fn poll(&mut self, fds: &mut [libc::pollfd], timeout: i32) -> Result<usize> {
        cvt(unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) } as isize)
            .map(|n| n as usize)
    }
}
