//! Every socket of a stack in one slab, with keyed maps that find them:
//! UDP and listening TCP sockets by local address, TCP connections by their
//! four-tuple.  A handle carries its slot's generation, so a handle to a
//! closed socket never reaches the socket that reused the slot.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::rand::{KeyedMap, KeyedState};
use crate::socket::udp::UdpSocket;
use crate::socket::{SocketError, SocketHandle};
use crate::tcp::conn::TcpConnection;
use crate::tcp::listen::TcpListener;

/// A socket of any kind.
#[derive(Debug)]
pub(crate) enum Socket {
    Udp(UdpSocket),
    Listener(TcpListener),
    Tcp(Box<TcpConnection>),
}

#[derive(Debug)]
struct Slot {
    generation: u32,
    /// The slot is on the ready list.
    queued: bool,
    socket: Option<Socket>,
}

pub(crate) fn unspecified(like: IpAddr) -> IpAddr {
    match like {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    }
}

#[derive(Debug)]
pub(crate) struct SocketTable {
    slots: Vec<Slot>,
    free: Vec<u32>,
    open: usize,
    max: usize,
    /// Sockets whose readiness may have changed since the application last
    /// looked (each once).
    ready: Vec<u32>,
    pub(crate) udp_by_local: KeyedMap<(IpAddr, u16), u32>,
    pub(crate) tcp_listeners: KeyedMap<(IpAddr, u16), u32>,
    pub(crate) tcp_conns: KeyedMap<(SocketAddr, SocketAddr), u32>,
}

impl SocketTable {
    pub(crate) fn new(max: usize, mut hasher: impl FnMut() -> KeyedState) -> Self {
        SocketTable {
            slots: Vec::new(),
            free: Vec::new(),
            open: 0,
            max,
            ready: Vec::new(),
            udp_by_local: KeyedMap::with_hasher(hasher()),
            tcp_listeners: KeyedMap::with_hasher(hasher()),
            tcp_conns: KeyedMap::with_hasher(hasher()),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.open
    }

    /// Puts a socket in a free slot.
    pub(crate) fn insert(&mut self, socket: Socket) -> Result<SocketHandle, SocketError> {
        if self.open >= self.max {
            return Err(SocketError::TooManySockets);
        }
        let index = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize].socket = Some(socket);
                i
            }
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    queued: false,
                    socket: Some(socket),
                });
                (self.slots.len() - 1) as u32
            }
        };
        self.open += 1;
        Ok(SocketHandle {
            index,
            generation: self.slots[index as usize].generation,
        })
    }

    /// Frees a slot, forgetting the socket's map entries.
    pub(crate) fn remove(&mut self, index: u32) -> Option<Socket> {
        let slot = self.slots.get_mut(index as usize)?;
        let socket = slot.socket.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(index);
        self.open -= 1;
        match &socket {
            Socket::Udp(u) => {
                self.udp_by_local.remove(&(u.local.ip(), u.local.port()));
            }
            Socket::Listener(l) => {
                self.tcp_listeners.remove(&(l.local.ip(), l.local.port()));
            }
            Socket::Tcp(c) => {
                if self.tcp_conns.get(&(c.local, c.remote)) == Some(&index) {
                    self.tcp_conns.remove(&(c.local, c.remote));
                }
            }
        }
        Some(socket)
    }

    /// Puts a socket on the ready list.
    pub(crate) fn notify(&mut self, index: u32) {
        if let Some(slot) = self.slots.get_mut(index as usize) {
            if !slot.queued && slot.socket.is_some() {
                slot.queued = true;
                self.ready.push(index);
            }
        }
    }

    /// Moves the ready list into `out` (handles of sockets still open).
    pub(crate) fn drain_ready(&mut self, out: &mut Vec<SocketHandle>) {
        for index in self.ready.drain(..) {
            let slot = &mut self.slots[index as usize];
            slot.queued = false;
            if slot.socket.is_some() {
                out.push(SocketHandle {
                    index,
                    generation: slot.generation,
                });
            }
        }
    }

    pub(crate) fn handle(&self, index: u32) -> SocketHandle {
        SocketHandle {
            index,
            generation: self.slots.get(index as usize).map_or(0, |s| s.generation),
        }
    }

    pub(crate) fn get(&self, h: SocketHandle) -> Option<&Socket> {
        self.slots
            .get(h.index as usize)
            .filter(|s| s.generation == h.generation)
            .and_then(|s| s.socket.as_ref())
    }

    pub(crate) fn get_mut(&mut self, h: SocketHandle) -> Option<&mut Socket> {
        self.slots
            .get_mut(h.index as usize)
            .filter(|s| s.generation == h.generation)
            .and_then(|s| s.socket.as_mut())
    }

    pub(crate) fn at_mut(&mut self, index: u32) -> Option<&mut Socket> {
        self.slots
            .get_mut(index as usize)
            .and_then(|s| s.socket.as_mut())
    }

    pub(crate) fn at(&self, index: u32) -> Option<&Socket> {
        self.slots
            .get(index as usize)
            .and_then(|s| s.socket.as_ref())
    }

    pub(crate) fn udp(&self, h: SocketHandle) -> Result<&UdpSocket, SocketError> {
        match self.get(h) {
            Some(Socket::Udp(u)) => Ok(u),
            _ => Err(SocketError::BadHandle),
        }
    }

    pub(crate) fn udp_mut(&mut self, h: SocketHandle) -> Result<&mut UdpSocket, SocketError> {
        match self.get_mut(h) {
            Some(Socket::Udp(u)) => Ok(u),
            _ => Err(SocketError::BadHandle),
        }
    }

    /// Whether a UDP socket holds `ip:port` (a wildcard bind holds the
    /// port on every address of its family).
    pub(crate) fn udp_port_taken(&self, ip: IpAddr, port: u16) -> bool {
        if ip.is_unspecified() {
            self.udp_by_local
                .keys()
                .any(|&(a, p)| p == port && a.is_ipv4() == ip.is_ipv4())
        } else {
            self.udp_by_local.contains_key(&(ip, port))
                || self.udp_by_local.contains_key(&(unspecified(ip), port))
        }
    }

    /// The UDP socket a datagram to `dst` goes to: an exact bind first,
    /// then a wildcard one.
    pub(crate) fn udp_lookup_index(&self, dst: SocketAddr) -> Option<u32> {
        self.udp_by_local
            .get(&(dst.ip(), dst.port()))
            .or_else(|| self.udp_by_local.get(&(unspecified(dst.ip()), dst.port())))
            .copied()
    }

    /// The listener a SYN to `dst` goes to.
    pub(crate) fn tcp_listener_index(&self, dst: SocketAddr) -> Option<u32> {
        self.tcp_listeners
            .get(&(dst.ip(), dst.port()))
            .or_else(|| self.tcp_listeners.get(&(unspecified(dst.ip()), dst.port())))
            .copied()
    }

    /// Whether a local TCP port is held by a listener or a connection.
    pub(crate) fn tcp_port_taken(&self, ip: IpAddr, port: u16) -> bool {
        if ip.is_unspecified() {
            self.tcp_listeners
                .keys()
                .any(|&(a, p)| p == port && a.is_ipv4() == ip.is_ipv4())
        } else {
            self.tcp_listeners.contains_key(&(ip, port))
                || self.tcp_listeners.contains_key(&(unspecified(ip), port))
        }
    }

    /// Every open socket (for netstat and tests).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (SocketHandle, &Socket)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| {
            s.socket.as_ref().map(|sock| {
                (
                    SocketHandle {
                        index: i as u32,
                        generation: s.generation,
                    },
                    sock,
                )
            })
        })
    }
}
