//! One set of socket calls over two implementations: ustack (two engines
//! on this thread) and the Linux kernel (libc over loopback).  A scenario
//! written against [`Net`] runs on both and records each call's result;
//! the test compares the two records line by line.

use std::fmt::Debug;
use std::io::{IoSlice, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use api::{epoll_event, Pkt6Info, PktInfo, RecvMsg, Result, SendMsg};
use testnet::linux::{self, cvt, from_sa, to_sa_for, zero_sa, SA_LEN};

pub trait Net {
    /// The address servers bind.
    fn server_ip(&self) -> Ipv4Addr;
    /// The local address of a client socket.
    fn client_ip(&self) -> Ipv4Addr;
    /// The server's IPv6 address.
    fn server_ip6(&self) -> Option<Ipv6Addr>;
    /// The local IPv6 address of a client socket.
    fn client_ip6(&self) -> Option<Ipv6Addr> {
        self.server_ip6()
    }
    /// Lets the network deliver what is in flight.
    fn settle(&mut self);
    fn socket(&mut self, d: i32, t: i32, p: i32) -> Result<i32>;
    fn bind(&mut self, fd: i32, a: &SocketAddr) -> Result<()>;
    fn listen(&mut self, fd: i32, backlog: i32) -> Result<()>;
    fn accept4(&mut self, fd: i32, flags: i32) -> Result<(i32, SocketAddr)>;
    fn connect(&mut self, fd: i32, a: &SocketAddr) -> Result<()>;
    fn send(&mut self, fd: i32, b: &[u8], flags: i32) -> Result<usize>;
    fn recv(&mut self, fd: i32, b: &mut [u8], flags: i32) -> Result<usize>;
    fn sendto(&mut self, fd: i32, b: &[u8], flags: i32, a: Option<&SocketAddr>) -> Result<usize>;
    fn recvfrom(
        &mut self,
        fd: i32,
        b: &mut [u8],
        flags: i32,
    ) -> Result<(usize, Option<SocketAddr>)>;
    fn readv(&mut self, fd: i32, bufs: &mut [IoSliceMut<'_>]) -> Result<usize>;
    fn writev(&mut self, fd: i32, bufs: &[IoSlice<'_>]) -> Result<usize>;
    fn recvmsg(&mut self, fd: i32, b: &mut [u8], flags: i32) -> Result<RecvMsg>;
    fn sendmsg(&mut self, fd: i32, b: &[u8], flags: i32, m: &SendMsg) -> Result<usize>;
    fn shutdown(&mut self, fd: i32, how: i32) -> Result<()>;
    fn close(&mut self, fd: i32) -> Result<()>;
    fn getsockname(&mut self, fd: i32) -> Result<SocketAddr>;
    fn getpeername(&mut self, fd: i32) -> Result<SocketAddr>;
    fn getsockopt(&mut self, fd: i32, level: i32, name: i32, v: &mut [u8]) -> Result<usize>;
    fn setsockopt(&mut self, fd: i32, level: i32, name: i32, v: &[u8]) -> Result<()>;
    fn ioctl(&mut self, fd: i32, req: u64, arg: &mut i32) -> Result<()>;
    fn fcntl(&mut self, fd: i32, cmd: i32, arg: i32) -> Result<i32>;
    fn epoll_create1(&mut self, flags: i32) -> Result<i32>;
    fn epoll_ctl(&mut self, ep: i32, op: i32, fd: i32, ev: Option<&epoll_event>) -> Result<()>;
    fn epoll_wait(&mut self, ep: i32, evs: &mut [epoll_event], timeout: i32) -> Result<usize>;
}

/// The calls of a scenario and what each returned, in a form both
/// implementations share (fds, our addresses and ephemeral ports are
/// replaced by names).
#[derive(Default)]
pub struct Trace {
    pub lines: Vec<String>,
    pub names: Names,
}

/// Names our addresses and ephemeral ports.
#[derive(Default)]
pub struct Names {
    pub local: Vec<Ipv4Addr>,
    pub local6: Vec<Ipv6Addr>,
}

pub use testnet::errno_name;

impl Trace {
    pub fn new(net: &dyn Net) -> Trace {
        Trace {
            lines: Vec::new(),
            names: Names {
                local: vec![net.server_ip(), net.client_ip()],
                local6: net
                    .server_ip6()
                    .into_iter()
                    .chain(net.client_ip6())
                    .collect(),
            },
        }
    }

    /// Records a call's result, formatted by `show`.
    pub fn rec<T>(&mut self, what: &str, r: &Result<T>, show: impl Fn(&Names, &T) -> String) {
        let s = match r {
            Ok(v) => format!("{what} = {}", show(&self.names, v)),
            Err(e) => format!("{what} = {}", errno_name(e.0)),
        };
        self.lines.push(s);
    }

    /// Records a call whose value needs no naming.
    pub fn val<T: Debug>(&mut self, what: &str, r: &Result<T>) {
        self.rec(what, r, |_, v| format!("{v:?}"));
    }

    /// Records only success or the errno (an fd, say).
    pub fn ok<T>(&mut self, what: &str, r: &Result<T>) {
        self.rec(what, r, |_, _| "ok".to_string());
    }

    pub fn note(&mut self, s: String) {
        self.lines.push(s);
    }
}

impl Names {
    /// An address as both implementations can agree on it (IPv6 ones in
    /// brackets; IPv4-mapped ones of ours as `[::ffff:LOCAL]`).
    pub fn addr(&self, a: &SocketAddr) -> String {
        let v4 = |ip: &Ipv4Addr| {
            if self.local.contains(ip) {
                "LOCAL".to_string()
            } else {
                ip.to_string()
            }
        };
        let ip = match a {
            SocketAddr::V4(a) => v4(a.ip()),
            SocketAddr::V6(a) => match a.ip().to_ipv4_mapped() {
                Some(m) => format!("[::ffff:{}]", v4(&m)),
                None if self.local6.contains(a.ip()) => "[LOCAL6]".to_string(),
                None => format!("[{}]", a.ip()),
            },
        };
        // Test ports are below 10000; ephemeral ones are not.
        let port = if a.port() >= 10000 {
            "EPH".to_string()
        } else {
            a.port().to_string()
        };
        format!("{ip}:{port}")
    }
}

/// Fails with both records side by side at the first difference.
pub fn compare(ustack: &Trace, linux: &Trace) {
    let n = ustack.lines.len().max(linux.lines.len());
    let mut report = String::new();
    let mut differ = false;
    for i in 0..n {
        let u = ustack.lines.get(i).map_or("(none)", |s| s.as_str());
        let l = linux.lines.get(i).map_or("(none)", |s| s.as_str());
        let mark = if u == l { "  " } else { "!!" };
        differ |= u != l;
        report.push_str(&format!("{mark} ustack: {u:<60} linux: {l}\n"));
    }
    assert!(!differ, "ustack and Linux differ:\n{report}");
    if std::env::var_os("USTACK_SHOW_TRACE").is_some() {
        eprintln!("{report}");
    }
}

fn int(v: i32) -> Vec<u8> {
    v.to_ne_bytes().to_vec()
}

pub fn set_int(n: &mut dyn Net, fd: i32, level: i32, name: i32, v: i32) -> Result<()> {
    n.setsockopt(fd, level, name, &int(v))
}

pub fn get_int(n: &mut dyn Net, fd: i32, level: i32, name: i32) -> Result<i32> {
    let mut b = [0u8; 4];
    let len = n.getsockopt(fd, level, name, &mut b)?;
    assert_eq!(len, 4);
    Ok(i32::from_ne_bytes(b))
}

/// ustack through the crate's calls.
pub struct Ustack;

impl Net for Ustack {
    fn server_ip(&self) -> Ipv4Addr {
        super::SERVER
    }
    fn client_ip(&self) -> Ipv4Addr {
        super::CLIENT
    }
    fn server_ip6(&self) -> Option<Ipv6Addr> {
        Some(super::SERVER6)
    }
    fn client_ip6(&self) -> Option<Ipv6Addr> {
        Some(super::CLIENT6)
    }
    fn settle(&mut self) {
        super::settle_ms(30);
    }
    fn socket(&mut self, d: i32, t: i32, p: i32) -> Result<i32> {
        api::socket(d, t, p)
    }
    fn bind(&mut self, fd: i32, a: &SocketAddr) -> Result<()> {
        api::bind(fd, a)
    }
    fn listen(&mut self, fd: i32, backlog: i32) -> Result<()> {
        api::listen(fd, backlog)
    }
    fn accept4(&mut self, fd: i32, flags: i32) -> Result<(i32, SocketAddr)> {
        api::accept4(fd, flags)
    }
    fn connect(&mut self, fd: i32, a: &SocketAddr) -> Result<()> {
        api::connect(fd, a)
    }
    fn send(&mut self, fd: i32, b: &[u8], flags: i32) -> Result<usize> {
        api::send(fd, b, flags)
    }
    fn recv(&mut self, fd: i32, b: &mut [u8], flags: i32) -> Result<usize> {
        api::recv(fd, b, flags)
    }
    fn sendto(&mut self, fd: i32, b: &[u8], flags: i32, a: Option<&SocketAddr>) -> Result<usize> {
        api::sendto(fd, b, flags, a)
    }
    fn recvfrom(
        &mut self,
        fd: i32,
        b: &mut [u8],
        flags: i32,
    ) -> Result<(usize, Option<SocketAddr>)> {
        api::recvfrom(fd, b, flags)
    }
    fn readv(&mut self, fd: i32, bufs: &mut [IoSliceMut<'_>]) -> Result<usize> {
        api::readv(fd, bufs)
    }
    fn writev(&mut self, fd: i32, bufs: &[IoSlice<'_>]) -> Result<usize> {
        api::writev(fd, bufs)
    }
    fn recvmsg(&mut self, fd: i32, b: &mut [u8], flags: i32) -> Result<RecvMsg> {
        api::recvmsg(fd, &mut [IoSliceMut::new(b)], flags)
    }
    fn sendmsg(&mut self, fd: i32, b: &[u8], flags: i32, m: &SendMsg) -> Result<usize> {
        api::sendmsg(fd, &[IoSlice::new(b)], flags, m)
    }
    fn shutdown(&mut self, fd: i32, how: i32) -> Result<()> {
        api::shutdown(fd, how)
    }
    fn close(&mut self, fd: i32) -> Result<()> {
        api::close(fd)
    }
    fn getsockname(&mut self, fd: i32) -> Result<SocketAddr> {
        api::getsockname(fd)
    }
    fn getpeername(&mut self, fd: i32) -> Result<SocketAddr> {
        api::getpeername(fd)
    }
    fn getsockopt(&mut self, fd: i32, level: i32, name: i32, v: &mut [u8]) -> Result<usize> {
        api::getsockopt(fd, level, name, v)
    }
    fn setsockopt(&mut self, fd: i32, level: i32, name: i32, v: &[u8]) -> Result<()> {
        api::setsockopt(fd, level, name, v)
    }
    fn ioctl(&mut self, fd: i32, req: u64, arg: &mut i32) -> Result<()> {
        api::ioctl(fd, req, arg)
    }
    fn fcntl(&mut self, fd: i32, cmd: i32, arg: i32) -> Result<i32> {
        api::fcntl(fd, cmd, arg)
    }
    fn epoll_create1(&mut self, flags: i32) -> Result<i32> {
        api::epoll_create1(flags)
    }
    fn epoll_ctl(&mut self, ep: i32, op: i32, fd: i32, ev: Option<&epoll_event>) -> Result<()> {
        api::epoll_ctl(ep, op, fd, ev)
    }
    fn epoll_wait(&mut self, ep: i32, evs: &mut [epoll_event], timeout: i32) -> Result<usize> {
        api::epoll_wait(ep, evs, timeout)
    }
}

/// The Linux kernel over loopback, in a network namespace of the test's
/// own thread (so ports and TIME-WAITs of other runs do not interfere).
pub struct Kernel;

impl Kernel {
    /// Moves the calling thread into a new network namespace with `lo` up
    /// (root, as `make test` runs).
    pub fn new() -> Kernel {
        linux::enter_new_namespace();
        Kernel
    }
}

// SAFETY (for every call below): the pointers passed are to live locals or
// to the caller's slices, with their true lengths.
impl Net for Kernel {
    fn server_ip(&self) -> Ipv4Addr {
        Ipv4Addr::LOCALHOST
    }
    fn client_ip(&self) -> Ipv4Addr {
        Ipv4Addr::LOCALHOST
    }
    fn server_ip6(&self) -> Option<Ipv6Addr> {
        Some(Ipv6Addr::LOCALHOST)
    }
    fn settle(&mut self) {
        std::thread::sleep(Duration::from_millis(30));
    }
    fn socket(&mut self, d: i32, t: i32, p: i32) -> Result<i32> {
        linux::socket(d, t, p)
    }
    fn bind(&mut self, fd: i32, a: &SocketAddr) -> Result<()> {
        linux::bind(fd, &to_sa_for(fd, a))
    }
    fn listen(&mut self, fd: i32, backlog: i32) -> Result<()> {
        linux::listen(fd, backlog)
    }
    fn accept4(&mut self, fd: i32, flags: i32) -> Result<(i32, SocketAddr)> {
        linux::accept4(fd, flags)
    }
    fn connect(&mut self, fd: i32, a: &SocketAddr) -> Result<()> {
        linux::connect(fd, &to_sa_for(fd, a))
    }
    fn send(&mut self, fd: i32, b: &[u8], flags: i32) -> Result<usize> {
        cvt(unsafe { libc::send(fd, b.as_ptr().cast(), b.len(), flags) }).map(|n| n as usize)
    }
    fn recv(&mut self, fd: i32, b: &mut [u8], flags: i32) -> Result<usize> {
        cvt(unsafe { libc::recv(fd, b.as_mut_ptr().cast(), b.len(), flags) }).map(|n| n as usize)
    }
    fn sendto(&mut self, fd: i32, b: &[u8], flags: i32, a: Option<&SocketAddr>) -> Result<usize> {
        linux::sendto(fd, b, flags, a.map(|a| to_sa_for(fd, a)).as_ref())
    }
    fn recvfrom(
        &mut self,
        fd: i32,
        b: &mut [u8],
        flags: i32,
    ) -> Result<(usize, Option<SocketAddr>)> {
        linux::recvfrom(fd, b, flags)
    }
    fn readv(&mut self, fd: i32, bufs: &mut [IoSliceMut<'_>]) -> Result<usize> {
        cvt(unsafe { libc::readv(fd, bufs.as_ptr().cast(), bufs.len() as i32) }).map(|n| n as usize)
    }
    fn writev(&mut self, fd: i32, bufs: &[IoSlice<'_>]) -> Result<usize> {
        cvt(unsafe { libc::writev(fd, bufs.as_ptr().cast(), bufs.len() as i32) })
            .map(|n| n as usize)
    }
    fn recvmsg(&mut self, fd: i32, b: &mut [u8], flags: i32) -> Result<RecvMsg> {
        let mut sa = zero_sa();
        let mut iov = libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: b.len(),
        };
        let mut control = [0u64; 16];
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = (&mut sa as *mut libc::sockaddr_storage).cast();
        msg.msg_namelen = SA_LEN;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        let n = cvt(unsafe { libc::recvmsg(fd, &mut msg, flags) })? as usize;
        let mut out = RecvMsg {
            len: n,
            addr: (msg.msg_namelen > 0).then(|| from_sa(&sa)),
            flags: msg.msg_flags & (libc::MSG_TRUNC | libc::MSG_OOB),
            ..RecvMsg::default()
        };
        let mut c = unsafe { libc::CMSG_FIRSTHDR(&msg) };
        while !c.is_null() {
            let h = unsafe { &*c };
            if h.cmsg_level == libc::IPPROTO_IPV6 && h.cmsg_type == libc::IPV6_PKTINFO {
                let p = unsafe { &*(libc::CMSG_DATA(c) as *const libc::in6_pktinfo) };
                out.pktinfo6 = Some(Pkt6Info {
                    ifindex: p.ipi6_ifindex,
                    addr: Ipv6Addr::from(p.ipi6_addr.s6_addr),
                });
            }
            if h.cmsg_level == libc::IPPROTO_IP && h.cmsg_type == libc::IP_PKTINFO {
                let p = unsafe { &*(libc::CMSG_DATA(c) as *const libc::in_pktinfo) };
                out.pktinfo = Some(PktInfo {
                    ifindex: p.ipi_ifindex as u32,
                    spec_dst: Ipv4Addr::from(u32::from_be(p.ipi_spec_dst.s_addr)),
                    addr: Ipv4Addr::from(u32::from_be(p.ipi_addr.s_addr)),
                });
            }
            c = unsafe { libc::CMSG_NXTHDR(&msg, c) };
        }
        Ok(out)
    }
    fn sendmsg(&mut self, fd: i32, b: &[u8], flags: i32, m: &SendMsg) -> Result<usize> {
        let mut sa = m.addr.map(|a| to_sa_for(fd, &a));
        let mut iov = libc::iovec {
            iov_base: b.as_ptr() as *mut _,
            iov_len: b.len(),
        };
        let mut control = [0u64; 8];
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        if let Some((s, len)) = sa.as_mut() {
            msg.msg_name = (s as *mut libc::sockaddr_storage).cast();
            msg.msg_namelen = *len;
        }
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        match m.src {
            Some(IpAddr::V4(src)) => {
                msg.msg_control = control.as_mut_ptr().cast();
                msg.msg_controllen =
                    unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::in_pktinfo>() as u32) }
                        as usize;
                let c = unsafe { libc::CMSG_FIRSTHDR(&msg) };
                unsafe {
                    (*c).cmsg_level = libc::IPPROTO_IP;
                    (*c).cmsg_type = libc::IP_PKTINFO;
                    (*c).cmsg_len =
                        libc::CMSG_LEN(std::mem::size_of::<libc::in_pktinfo>() as u32) as usize;
                    let p = libc::CMSG_DATA(c) as *mut libc::in_pktinfo;
                    (*p).ipi_ifindex = 0;
                    (*p).ipi_spec_dst.s_addr = u32::from(src).to_be();
                    (*p).ipi_addr.s_addr = 0;
                }
            }
            Some(IpAddr::V6(src)) => {
                msg.msg_control = control.as_mut_ptr().cast();
                msg.msg_controllen =
                    unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::in6_pktinfo>() as u32) }
                        as usize;
                let c = unsafe { libc::CMSG_FIRSTHDR(&msg) };
                unsafe {
                    (*c).cmsg_level = libc::IPPROTO_IPV6;
                    (*c).cmsg_type = libc::IPV6_PKTINFO;
                    (*c).cmsg_len =
                        libc::CMSG_LEN(std::mem::size_of::<libc::in6_pktinfo>() as u32) as usize;
                    let p = libc::CMSG_DATA(c) as *mut libc::in6_pktinfo;
                    (*p).ipi6_ifindex = 0;
                    (*p).ipi6_addr.s6_addr = src.octets();
                }
            }
            None => {}
        }
        cvt(unsafe { libc::sendmsg(fd, &msg, flags) }).map(|n| n as usize)
    }
    fn shutdown(&mut self, fd: i32, how: i32) -> Result<()> {
        linux::shutdown(fd, how)
    }
    fn close(&mut self, fd: i32) -> Result<()> {
        linux::close(fd)
    }
    fn getsockname(&mut self, fd: i32) -> Result<SocketAddr> {
        linux::getsockname(fd)
    }
    fn getpeername(&mut self, fd: i32) -> Result<SocketAddr> {
        linux::getpeername(fd)
    }
    fn getsockopt(&mut self, fd: i32, level: i32, name: i32, v: &mut [u8]) -> Result<usize> {
        linux::getsockopt(fd, level, name, v)
    }
    fn setsockopt(&mut self, fd: i32, level: i32, name: i32, v: &[u8]) -> Result<()> {
        linux::setsockopt(fd, level, name, v)
    }
    fn ioctl(&mut self, fd: i32, req: u64, arg: &mut i32) -> Result<()> {
        linux::ioctl(fd, req, arg)
    }
    fn fcntl(&mut self, fd: i32, cmd: i32, arg: i32) -> Result<i32> {
        linux::fcntl(fd, cmd, arg)
    }
    fn epoll_create1(&mut self, flags: i32) -> Result<i32> {
        linux::epoll_create1(flags)
    }
    fn epoll_ctl(&mut self, ep: i32, op: i32, fd: i32, ev: Option<&epoll_event>) -> Result<()> {
        linux::epoll_ctl(ep, op, fd, ev)
    }
    fn epoll_wait(&mut self, ep: i32, evs: &mut [epoll_event], timeout: i32) -> Result<usize> {
        linux::epoll_wait(ep, evs, timeout)
    }
}
