//! ustack through its socket layer (the calls the C ABI, `ff_*` and the
//! LD_PRELOAD library wrap): two engines on the calling thread joined by
//! an in-memory link, the client at 10.99.1.1 and the server at
//! 10.99.1.2, made afresh for every sequence.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use api::{epoll_event, Result};
use stack::TcpConfig;
use testnet::engines::{self, CLIENT, CLIENT6, SERVER, SERVER6};

use crate::sys::Sys;

const PORT_FIRST: u16 = 7100;
const LINUX_KEEPCNT: u32 = 9;
/// Each link end's buffers: a sequence has at most 64 calls of a few
/// frames each in flight; a pool made for every sequence is most of its
/// cost, so no larger than that needs.
const POOL_BUFFERS: usize = 256;
/// Steps in a row that found nothing to do before the network is taken
/// as quiet (one engine's answer is the other's next step's work).
const QUIET_STEPS: u32 = 2;
/// A settle that never gets quiet is a bug of its own (an engine that
/// always has work): reported, not waited on forever.
const MAX_SETTLE_STEPS: u32 = 100_000;

pub struct Ustack {
    _private: (),
}

impl Ustack {
    /// Attaches a server engine (first: the one sockets bound to the any
    /// address live on) and a client engine to the calling thread.
    pub fn begin() -> Ustack {
        crate::kernel::ignore_sigpipe();
        // Linux's TCP_KEEPCNT default (net.ipv4.tcp_keepalive_probes);
        // ustack's is FreeBSD's 8 (`net.inet.tcp.keepcnt`), a setting, not
        // a behaviour.  Loopback's TCP acknowledges at once at the start
        // of a connection (quick-ACK mode): a second small write is not
        // held by Nagle waiting for a delayed ACK there.  Here it would
        // be, for the delayed-ACK timeout: timing, not behaviour, so none.
        let tcp = TcpConfig {
            keepcnt: LINUX_KEEPCNT,
            delayed_ack: false,
            ..TcpConfig::default()
        };
        engines::attach_two(POOL_BUFFERS, tcp);
        Ustack { _private: () }
    }
}

impl Drop for Ustack {
    fn drop(&mut self) {
        api::detach();
    }
}

impl Sys for Ustack {
    fn server_ip(&self) -> Ipv4Addr {
        SERVER
    }
    fn client_ip(&self) -> Ipv4Addr {
        CLIENT
    }
    fn server_ip6(&self) -> Ipv6Addr {
        SERVER6
    }
    fn client_ip6(&self) -> Ipv6Addr {
        CLIENT6
    }
    fn port(&self, i: usize) -> u16 {
        PORT_FIRST + i as u16
    }
    fn settle(&mut self, slow: bool) {
        let end = slow.then(|| Instant::now() + Duration::from_millis(2));
        let mut quiet = 0;
        let mut steps = 0;
        while quiet < QUIET_STEPS || end.is_some_and(|e| Instant::now() < e) {
            if api::step().expect("the thread's worker") {
                quiet = 0;
            } else {
                quiet += 1;
            }
            steps += 1;
            assert!(
                steps < MAX_SETTLE_STEPS,
                "ustack's engines never went quiet"
            );
        }
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
    fn poll(&mut self, fds: &mut [libc::pollfd], timeout: i32) -> Result<usize> {
        api::poll(fds, timeout)
    }
}
