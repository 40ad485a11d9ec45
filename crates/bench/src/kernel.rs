//! The kernel side: [`Net`] over Linux sockets and epoll (through `mio`),
//! on loopback.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream, UdpSocket};
use mio::{Events, Interest, Poll, Token};

use crate::net::{Family, Net};

/// Loopback.
pub const SERVER_IP: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// The server's address in `family`: loopback.
pub fn server_ip(family: Family) -> IpAddr {
    match family {
        Family::V4 => IpAddr::V4(SERVER_IP),
        Family::V6 => IpAddr::V6(Ipv6Addr::LOCALHOST),
    }
}

enum Sock {
    Listener(TcpListener),
    Stream(TcpStream),
    Udp(UdpSocket),
}

/// Kernel sockets in one epoll instance; a socket is its token.
pub struct KernelNet {
    poll: Poll,
    events: Events,
    socks: Vec<Option<Sock>>,
    free: Vec<usize>,
    start: Instant,
    /// How long `ready` may wait in `epoll_wait` when nothing is ready
    /// (zero: busy polling).
    timeout: Duration,
}

/// EBADF: the token names no socket of that kind.
fn bad_handle() -> io::Error {
    io::Error::from_raw_os_error(9)
}

impl KernelNet {
    pub fn new(timeout: Duration) -> io::Result<KernelNet> {
        Ok(KernelNet {
            poll: Poll::new()?,
            events: Events::with_capacity(1024),
            socks: Vec::new(),
            free: Vec::new(),
            start: Instant::now(),
            timeout,
        })
    }

    fn add(&mut self, mut sock: Sock) -> io::Result<usize> {
        let id = self.free.pop().unwrap_or(self.socks.len());
        let reg = self.poll.registry();
        let rw = Interest::READABLE | Interest::WRITABLE;
        match &mut sock {
            Sock::Listener(l) => reg.register(l, Token(id), Interest::READABLE)?,
            Sock::Stream(s) => reg.register(s, Token(id), rw)?,
            Sock::Udp(u) => reg.register(u, Token(id), Interest::READABLE)?,
        }
        if id == self.socks.len() {
            self.socks.push(Some(sock));
        } else {
            self.socks[id] = Some(sock);
        }
        Ok(id)
    }

    fn stream(&mut self, s: usize) -> io::Result<&mut TcpStream> {
        match self.socks.get_mut(s) {
            Some(Some(Sock::Stream(t))) => Ok(t),
            _ => Err(bad_handle()),
        }
    }

    fn udp(&mut self, s: usize) -> io::Result<&mut UdpSocket> {
        match self.socks.get_mut(s) {
            Some(Some(Sock::Udp(u))) => Ok(u),
            _ => Err(bad_handle()),
        }
    }
}

impl Net for KernelNet {
    type Sock = usize;

    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn tcp_listen(&mut self, at: SocketAddr) -> io::Result<usize> {
        let l = TcpListener::bind(at)?;
        self.add(Sock::Listener(l))
    }

    fn tcp_accept(&mut self, listener: usize) -> io::Result<usize> {
        let (s, _) = match self.socks.get_mut(listener) {
            Some(Some(Sock::Listener(l))) => l.accept()?,
            _ => return Err(bad_handle()),
        };
        s.set_nodelay(true)?;
        self.add(Sock::Stream(s))
    }

    fn tcp_connect(&mut self, to: SocketAddr) -> io::Result<usize> {
        let s = TcpStream::connect(to)?;
        s.set_nodelay(true)?;
        self.add(Sock::Stream(s))
    }

    fn tcp_send(&mut self, s: usize, data: &[u8]) -> io::Result<usize> {
        self.stream(s)?.write(data)
    }

    fn tcp_recv(&mut self, s: usize, buf: &mut [u8]) -> io::Result<usize> {
        self.stream(s)?.read(buf)
    }

    fn tcp_close(&mut self, s: usize) {
        if let Some(Some(Sock::Stream(mut t))) = self.socks.get_mut(s).map(Option::take) {
            let _ = self.poll.registry().deregister(&mut t);
            self.free.push(s);
        }
    }

    fn udp_bind(&mut self, at: SocketAddr) -> io::Result<usize> {
        let u = UdpSocket::bind(at)?;
        self.add(Sock::Udp(u))
    }

    fn udp_send_to(&mut self, s: usize, data: &[u8], to: SocketAddr) -> io::Result<usize> {
        self.udp(s)?.send_to(data, to)
    }

    fn udp_recv_from(&mut self, s: usize, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.udp(s)?.recv_from(buf)
    }

    fn ready(&mut self, out: &mut Vec<usize>) {
        match self.poll.poll(&mut self.events, Some(self.timeout)) {
            Ok(()) => out.extend(self.events.iter().map(|e| e.token().0)),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => panic!("epoll_wait: {e}"),
        }
    }
}
