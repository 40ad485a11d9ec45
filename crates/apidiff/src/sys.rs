//! The calls a sequence makes, as one trait over the two implementations
//! compared: the Linux kernel (`kernel.rs`) and ustack (`ustack.rs`).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use api::{epoll_event, Result};

/// Socket, epoll and poll calls with Linux's arguments and errno values.
/// Every socket the runner makes is non-blocking, so no call waits
/// longer than the timeout it is given.
pub trait Sys {
    /// The address a socket binds to be the server, and clients connect to.
    fn server_ip(&self) -> Ipv4Addr;
    /// The local address of a client socket (the server's on loopback).
    fn client_ip(&self) -> Ipv4Addr;
    /// The IPv6 addresses of the server and of a client.
    fn server_ip6(&self) -> Ipv6Addr;
    fn client_ip6(&self) -> Ipv6Addr;
    /// The port number of the sequence's `i`th port (0..PORTS).
    fn port(&self, i: usize) -> u16;
    /// Lets what the last call sent arrive: nothing for the kernel, whose
    /// loopback delivers inside the call; engine steps until quiet for
    /// ustack.  `slow` waits as well (the re-run that tells timing from
    /// behaviour, see `lib.rs`).
    fn settle(&mut self, slow: bool);
    fn socket(&mut self, domain: i32, ty: i32, proto: i32) -> Result<i32>;
    fn bind(&mut self, fd: i32, a: &SocketAddr) -> Result<()>;
    fn listen(&mut self, fd: i32, backlog: i32) -> Result<()>;
    fn accept4(&mut self, fd: i32, flags: i32) -> Result<(i32, SocketAddr)>;
    fn connect(&mut self, fd: i32, a: &SocketAddr) -> Result<()>;
    fn sendto(&mut self, fd: i32, b: &[u8], flags: i32, a: Option<&SocketAddr>) -> Result<usize>;
    fn recvfrom(
        &mut self,
        fd: i32,
        b: &mut [u8],
        flags: i32,
    ) -> Result<(usize, Option<SocketAddr>)>;
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
    fn poll(&mut self, fds: &mut [libc::pollfd], timeout: i32) -> Result<usize>;
}
