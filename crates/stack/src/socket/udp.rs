//! UDP sockets and the table that finds them by local address.

use core::net::{IpAddr, SocketAddr};

use crate::iface::IfaceId;
use crate::rand::{KeyedMap, KeyedState, Rng};
use crate::socket::datagram_ring::DatagramRing;
use crate::socket::{SocketError, SocketHandle};

/// Where a received datagram came from and was sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpMeta {
    pub src: SocketAddr,
    /// The destination address (IP_PKTINFO / IP_RECVDSTADDR).
    pub dst: SocketAddr,
    pub iface: IfaceId,
}

/// What [`crate::Stack::udp_recv_from`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRecv {
    /// Bytes copied into the caller's buffer.
    pub len: usize,
    /// The datagram's length: more than `len` when it was truncated.
    pub datagram_len: usize,
    pub meta: UdpMeta,
}

/// One UDP socket.
#[derive(Debug)]
pub struct UdpSocket {
    pub(crate) local: SocketAddr,
    pub(crate) rx: DatagramRing<UdpMeta>,
    /// Datagrams dropped because the receive queue was full.
    pub rx_dropped: u64,
}

impl UdpSocket {
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Datagrams waiting.
    pub fn rx_queued(&self) -> usize {
        self.rx.len()
    }
}

#[derive(Debug)]
struct Slot {
    generation: u32,
    socket: Option<UdpSocket>,
}

/// The UDP sockets of a stack.
#[derive(Debug)]
pub struct UdpTable {
    slots: Vec<Slot>,
    free: Vec<u32>,
    by_local: KeyedMap<(IpAddr, u16), u32>,
    max_sockets: usize,
    recv_space: usize,
}

/// The ephemeral port range (RFC 6335 dynamic ports).
pub const EPHEMERAL_PORTS: core::ops::RangeInclusive<u16> = 49152..=65535;

impl UdpTable {
    pub fn new(hasher: KeyedState, max_sockets: usize, recv_space: usize) -> Self {
        UdpTable {
            slots: Vec::new(),
            free: Vec::new(),
            by_local: KeyedMap::with_hasher(hasher),
            max_sockets,
            recv_space,
        }
    }

    fn port_taken(&self, ip: IpAddr, port: u16) -> bool {
        let unspec = match ip {
            IpAddr::V4(_) => IpAddr::V4(core::net::Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(core::net::Ipv6Addr::UNSPECIFIED),
        };
        if ip.is_unspecified() {
            self.by_local
                .keys()
                .any(|&(a, p)| p == port && a.is_ipv4() == ip.is_ipv4())
        } else {
            self.by_local.contains_key(&(ip, port)) || self.by_local.contains_key(&(unspec, port))
        }
    }

    /// Opens a socket on `local`; port 0 picks a free ephemeral port.
    /// `local.ip()` must be unspecified or checked by the caller to be ours.
    pub fn bind(
        &mut self,
        mut local: SocketAddr,
        rng: &mut Rng,
    ) -> Result<SocketHandle, SocketError> {
        if self.by_local.len() >= self.max_sockets {
            return Err(SocketError::TooManySockets);
        }
        if local.port() == 0 {
            let span = u32::from(EPHEMERAL_PORTS.end() - EPHEMERAL_PORTS.start()) + 1;
            let start = rng.below(u64::from(span)) as u32;
            let port = (0..span)
                .map(|i| EPHEMERAL_PORTS.start() + ((start + i) % span) as u16)
                .find(|&p| !self.port_taken(local.ip(), p))
                .ok_or(SocketError::NoFreePort)?;
            local.set_port(port);
        } else if self.port_taken(local.ip(), local.port()) {
            return Err(SocketError::AddrInUse);
        }
        let rx = DatagramRing::new(self.recv_space, (self.recv_space / 64).max(16));
        let socket = UdpSocket {
            local,
            rx,
            rx_dropped: 0,
        };
        let index = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize].socket = Some(socket);
                i
            }
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    socket: Some(socket),
                });
                (self.slots.len() - 1) as u32
            }
        };
        self.by_local.insert((local.ip(), local.port()), index);
        Ok(SocketHandle {
            index,
            generation: self.slots[index as usize].generation,
        })
    }

    pub fn get(&self, h: SocketHandle) -> Result<&UdpSocket, SocketError> {
        self.slots
            .get(h.index as usize)
            .filter(|s| s.generation == h.generation)
            .and_then(|s| s.socket.as_ref())
            .ok_or(SocketError::BadHandle)
    }

    pub fn get_mut(&mut self, h: SocketHandle) -> Result<&mut UdpSocket, SocketError> {
        self.slots
            .get_mut(h.index as usize)
            .filter(|s| s.generation == h.generation)
            .and_then(|s| s.socket.as_mut())
            .ok_or(SocketError::BadHandle)
    }

    pub fn close(&mut self, h: SocketHandle) -> Result<(), SocketError> {
        let local = self.get(h)?.local;
        self.by_local.remove(&(local.ip(), local.port()));
        let slot = &mut self.slots[h.index as usize];
        slot.socket = None;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(h.index);
        Ok(())
    }

    /// The socket a datagram to `dst` goes to: an exact bind first, then a
    /// wildcard one.
    pub fn lookup_mut(&mut self, dst: SocketAddr) -> Option<&mut UdpSocket> {
        let unspec = match dst.ip() {
            IpAddr::V4(_) => IpAddr::V4(core::net::Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(core::net::Ipv6Addr::UNSPECIFIED),
        };
        let index = self
            .by_local
            .get(&(dst.ip(), dst.port()))
            .or_else(|| self.by_local.get(&(unspec, dst.port())))
            .copied()?;
        self.slots[index as usize].socket.as_mut()
    }

    pub fn len(&self) -> usize {
        self.by_local.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_local.is_empty()
    }

    /// Every open socket.
    pub fn iter(&self) -> impl Iterator<Item = (SocketHandle, &UdpSocket)> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    fn sa(ip: [u8; 4], port: u16) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port)
    }

    #[test]
    fn bind_lookup_close() {
        let mut t = UdpTable::new(KeyedState::new(0, 1), 8, 4096);
        let mut rng = Rng::new(1);
        let a = t.bind(sa([0, 0, 0, 0], 7), &mut rng).unwrap();
        assert_eq!(
            t.bind(sa([10, 99, 1, 2], 7), &mut rng),
            Err(SocketError::AddrInUse)
        );
        let b = t.bind(sa([10, 99, 1, 2], 8), &mut rng).unwrap();
        assert_eq!(
            t.bind(sa([0, 0, 0, 0], 8), &mut rng),
            Err(SocketError::AddrInUse)
        );
        assert_eq!(
            t.lookup_mut(sa([10, 99, 1, 2], 7))
                .unwrap()
                .local_addr()
                .port(),
            7
        );
        assert_eq!(
            t.lookup_mut(sa([10, 99, 1, 2], 8)).unwrap().local_addr(),
            sa([10, 99, 1, 2], 8)
        );
        assert!(t.lookup_mut(sa([10, 99, 1, 3], 8)).is_none());
        t.close(a).unwrap();
        assert_eq!(t.close(a), Err(SocketError::BadHandle));
        let c = t.bind(sa([0, 0, 0, 0], 0), &mut rng).unwrap();
        assert_eq!(c.index, a.index, "slot reused");
        assert_ne!(c, a, "with a new generation");
        assert!(EPHEMERAL_PORTS.contains(&t.get(c).unwrap().local_addr().port()));
        assert!(t.get(b).is_ok());
    }

    #[test]
    fn socket_limit() {
        let mut t = UdpTable::new(KeyedState::new(0, 1), 2, 1024);
        let mut rng = Rng::new(1);
        t.bind(sa([0, 0, 0, 0], 1), &mut rng).unwrap();
        t.bind(sa([0, 0, 0, 0], 2), &mut rng).unwrap();
        assert_eq!(
            t.bind(sa([0, 0, 0, 0], 3), &mut rng),
            Err(SocketError::TooManySockets)
        );
    }
}
