//! The Linux kernel over loopback, in a network namespace of the calling
//! thread's own, with fresh ports for every sequence (a closed connection
//! leaves TIME-WAIT for a minute; a sequence must not find the last one's).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use api::{epoll_event, Result};
use testnet::linux::{self, enter_new_namespace};

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
        linux::socket(d, t, p)
    }
    fn bind(&mut self, fd: i32, a: &SocketAddr) -> Result<()> {
        linux::bind(fd, &linux::to_sa(a))
    }
    fn listen(&mut self, fd: i32, backlog: i32) -> Result<()> {
        linux::listen(fd, backlog)
    }
    fn accept4(&mut self, fd: i32, flags: i32) -> Result<(i32, SocketAddr)> {
        linux::accept4(fd, flags)
    }
    fn connect(&mut self, fd: i32, a: &SocketAddr) -> Result<()> {
        linux::connect(fd, &linux::to_sa(a))
    }
    fn sendto(&mut self, fd: i32, b: &[u8], flags: i32, a: Option<&SocketAddr>) -> Result<usize> {
        linux::sendto(fd, b, flags, a.map(linux::to_sa).as_ref())
    }
    fn recvfrom(
        &mut self,
        fd: i32,
        b: &mut [u8],
        flags: i32,
    ) -> Result<(usize, Option<SocketAddr>)> {
        linux::recvfrom(fd, b, flags)
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
    fn poll(&mut self, fds: &mut [libc::pollfd], timeout: i32) -> Result<usize> {
        linux::poll(fds, timeout)
    }
}
