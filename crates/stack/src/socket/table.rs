//! Every socket of a stack in one slab, with keyed maps that find them:
//! UDP and listening TCP sockets by local address, TCP connections by their
//! four-tuple.  A handle carries its slot's generation, so a handle to a
//! closed socket never reaches the socket that reused the slot.

use core::hash::{Hash, Hasher};
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::rand::{KeyedMap, KeyedState};
use crate::socket::conn_table::ConnTable;
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

/// A live socket's place on the ready list, borrowed beside the socket
/// itself.
pub(crate) struct ReadyMark<'a> {
    queued: &'a mut bool,
    ready: &'a mut Vec<u32>,
    index: u32,
}

impl ReadyMark<'_> {
    /// [`SocketTable::notify`] of this socket.
    #[inline(always)]
    pub(crate) fn notify(self) {
        if !*self.queued {
            *self.queued = true;
            self.ready.push(self.index);
        }
    }
}

/// A TCP connection's key in the table: its local and remote ends, as
/// plain words (the addresses' bits, both ports in one, the family).
///
/// Compared and hashed as those few words (two for IPv4) rather than
/// through `SocketAddr`'s derived `Eq` and `Hash`, which go through an enum
/// tag, the address and the port of each end separately: this lookup runs
/// once per received segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnKey {
    local: u128,
    remote: u128,
    /// Local port in the high half, remote in the low.
    ports: u32,
    v6: bool,
}

impl ConnKey {
    #[inline]
    pub(crate) fn new(local: SocketAddr, remote: SocketAddr) -> Self {
        let v6 = local.is_ipv6() || remote.is_ipv6();
        ConnKey {
            local: ip_bits(local.ip()),
            remote: ip_bits(remote.ip()),
            ports: u32::from(local.port()) << 16 | u32::from(remote.port()),
            v6,
        }
    }
}

impl ConnKey {
    /// An IPv4 key as two words: both addresses (local in the high half),
    /// and both ports; `None` for IPv6.
    #[inline(always)]
    pub(crate) fn v4_words(&self) -> Option<(u64, u32)> {
        if self.v6 {
            return None;
        }
        Some(((self.local as u64) << 32 | self.remote as u64, self.ports))
    }

    /// [`ConnKey::new`] of IPv4 ends, from their parts.
    #[inline]
    pub(crate) fn v4(local: (Ipv4Addr, u16), remote: (Ipv4Addr, u16)) -> Self {
        ConnKey {
            local: u128::from(local.0.to_bits()),
            remote: u128::from(remote.0.to_bits()),
            ports: u32::from(local.1) << 16 | u32::from(remote.1),
            v6: false,
        }
    }
}

#[inline]
fn ip_bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u128::from(a.to_bits()),
        IpAddr::V6(a) => a.to_bits(),
    }
}

impl Hash for ConnKey {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        if self.v6 {
            state.write_u128(self.local);
            state.write_u128(self.remote);
            // The family is part of the key: a v4 pair and a v6 pair
            // with the same bits are different connections.
            state.write_u64(u64::from(self.ports) | 1 << 32);
        } else {
            state.write_u64((self.local as u64) << 32 | self.remote as u64);
            state.write_u32(self.ports);
        }
    }
}

/// A local address and port: the key of listeners and UDP sockets,
/// hashed as one word for IPv4 (see [`ConnKey`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LocalKey {
    pub(crate) ip: IpAddr,
    pub(crate) port: u16,
}

impl LocalKey {
    pub(crate) fn new(ip: IpAddr, port: u16) -> Self {
        LocalKey { ip, port }
    }
}

impl Hash for LocalKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self.ip {
            IpAddr::V4(a) => state.write_u64(u64::from(a.to_bits()) << 16 | u64::from(self.port)),
            IpAddr::V6(a) => {
                state.write_u128(a.to_bits());
                state.write_u32(u32::from(self.port) | 1 << 16);
            }
        }
    }
}

pub(crate) fn unspecified(like: IpAddr) -> IpAddr {
    match like {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    }
}

/// A slot's bytes in the tables: the slot, and its place on the free list
/// and on the ready list.
const SLOT_BYTES: usize = core::mem::size_of::<Slot>() + 2 * core::mem::size_of::<u32>();

#[derive(Debug)]
pub(crate) struct SocketTable {
    slots: Vec<Slot>,
    free: Vec<u32>,
    open: usize,
    /// TCP connections among the open sockets.
    tcp_open: usize,
    max: usize,
    /// Sockets whose readiness may have changed since the application last
    /// looked (each once).
    ready: Vec<u32>,
    pub(crate) udp_by_local: KeyedMap<LocalKey, u32>,
    pub(crate) tcp_listeners: KeyedMap<LocalKey, u32>,
    pub(crate) tcp_conns: ConnTable,
}

impl SocketTable {
    pub(crate) fn new(max: usize, mut hasher: impl FnMut() -> KeyedState) -> Self {
        SocketTable {
            slots: Vec::new(),
            free: Vec::new(),
            open: 0,
            tcp_open: 0,
            max,
            ready: Vec::new(),
            udp_by_local: KeyedMap::with_hasher(hasher()),
            tcp_listeners: KeyedMap::with_hasher(hasher()),
            tcp_conns: ConnTable::new(hasher(), hasher()),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.open
    }

    /// TCP connections open (any state but freed).
    pub(crate) fn tcp_len(&self) -> usize {
        self.tcp_open
    }

    /// Bytes the tables take (the engine's TCP memory budget counts them):
    /// each slot with its places on the free and ready lists (which hold
    /// at most one entry a slot, and grow after the slots, not when a
    /// socket is put in), used or not, and the connection lookup.
    pub(crate) fn table_bytes(&self) -> usize {
        self.slots.capacity() * SLOT_BYTES + self.tcp_conns.bytes()
    }

    /// What [`SocketTable::table_bytes`] grows by when one more socket is
    /// put in (at most): the slots double when full and none is free, and
    /// the connection lookup as it grows.
    pub(crate) fn table_growth_for_one_more(&self) -> usize {
        let slots = if self.free.is_empty() && self.slots.len() == self.slots.capacity() {
            // A full Vec doubles (to at least four).
            self.slots.capacity().max(4) * SLOT_BYTES
        } else {
            0
        };
        slots + self.tcp_conns.growth_for_one_more()
    }

    /// Puts a socket in a free slot.
    /// Whether [`SocketTable::insert`] would refuse (`kern.ipc.maxsockets`).
    pub(crate) fn is_full(&self) -> bool {
        self.open >= self.max
    }

    pub(crate) fn insert(&mut self, socket: Socket) -> Result<SocketHandle, SocketError> {
        if self.open >= self.max {
            return Err(SocketError::TooManySockets);
        }
        if matches!(socket, Socket::Tcp(_)) {
            self.tcp_open += 1;
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
                self.udp_by_local
                    .remove(&LocalKey::new(u.local.ip(), u.local.port()));
            }
            Socket::Listener(l) => {
                self.tcp_listeners
                    .remove(&LocalKey::new(l.local.ip(), l.local.port()));
            }
            Socket::Tcp(c) => {
                self.tcp_open -= 1;
                let key = ConnKey::new(c.local, c.remote);
                if self.tcp_conns.get(&key) == Some(index) {
                    self.tcp_conns.remove(&key);
                }
            }
        }
        Some(socket)
    }

    /// The socket at `index` with its place on the ready list, so that
    /// an event can be handled and told with one lookup.
    #[inline(always)]
    pub(crate) fn at_mut_with_ready(&mut self, index: u32) -> Option<(&mut Socket, ReadyMark<'_>)> {
        let slot = self.slots.get_mut(index as usize)?;
        let socket = slot.socket.as_mut()?;
        let mark = ReadyMark {
            queued: &mut slot.queued,
            ready: &mut self.ready,
            index,
        };
        Some((socket, mark))
    }

    /// Puts a socket on the ready list.
    #[inline(always)]
    pub(crate) fn notify(&mut self, index: u32) {
        if let Some(slot) = self.slots.get_mut(index as usize) {
            if !slot.queued && slot.socket.is_some() {
                slot.queued = true;
                self.ready.push(index);
            }
        }
    }

    /// Whether the ready list holds any socket.
    pub(crate) fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Moves the ready list into `out` (handles of sockets still open).
    #[inline]
    pub(crate) fn drain_ready(&mut self, out: &mut Vec<SocketHandle>) {
        for &index in &self.ready {
            let Some(slot) = self.slots.get_mut(index as usize) else {
                continue;
            };
            slot.queued = false;
            if slot.socket.is_some() {
                out.push(SocketHandle {
                    index,
                    generation: slot.generation,
                });
            }
        }
        self.ready.clear();
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
                .any(|k| k.port == port && k.ip.is_ipv4() == ip.is_ipv4())
        } else {
            self.udp_by_local.contains_key(&LocalKey::new(ip, port))
                || self
                    .udp_by_local
                    .contains_key(&LocalKey::new(unspecified(ip), port))
        }
    }

    /// The UDP socket a datagram to `dst` goes to: an exact bind first,
    /// then a wildcard one.
    pub(crate) fn udp_lookup_index(&self, dst: SocketAddr) -> Option<u32> {
        self.udp_by_local
            .get(&LocalKey::new(dst.ip(), dst.port()))
            .or_else(|| {
                self.udp_by_local
                    .get(&LocalKey::new(unspecified(dst.ip()), dst.port()))
            })
            .copied()
            .or_else(|| self.dual_stack(&self.udp_by_local, dst))
    }

    /// For IPv4 `dst`: the socket on `[::]` and its port that takes IPv4
    /// too (not IPV6_V6ONLY), as Linux's dual-stack sockets do.
    fn dual_stack(&self, map: &KeyedMap<LocalKey, u32>, dst: SocketAddr) -> Option<u32> {
        if !dst.is_ipv4() {
            return None;
        }
        let index = *map.get(&LocalKey::new(
            IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            dst.port(),
        ))?;
        (!self.v6only(index)).then_some(index)
    }

    /// Whether socket `index` refuses IPv4 (IPV6_V6ONLY).
    fn v6only(&self, index: u32) -> bool {
        match self.at(index) {
            Some(Socket::Udp(u)) => u.v6only,
            Some(Socket::Listener(l)) => l.v6only,
            _ => true,
        }
    }

    /// Whether binding `ip`:`port` (with `v6only` for `[::]`) would take
    /// what a socket of the other family holds: `[::]` without v6only
    /// takes IPv4 too, and so clashes with any IPv4 socket on the port.
    fn dual_stack_clash(
        &self,
        map: &KeyedMap<LocalKey, u32>,
        ip: IpAddr,
        port: u16,
        v6only: bool,
    ) -> bool {
        match ip {
            IpAddr::V4(_) => self.dual_stack(map, SocketAddr::new(ip, port)).is_some(),
            IpAddr::V6(a) if a.is_unspecified() && !v6only => {
                map.keys().any(|k| k.port == port && k.ip.is_ipv4())
            }
            IpAddr::V6(_) => false,
        }
    }

    /// Whether a UDP socket may not bind `ip`:`port`.
    pub(crate) fn udp_bind_clash(&self, ip: IpAddr, port: u16, v6only: bool) -> bool {
        self.udp_port_taken(ip, port) || self.dual_stack_clash(&self.udp_by_local, ip, port, v6only)
    }

    /// Whether a TCP listener may not bind `ip`:`port`.
    pub(crate) fn tcp_bind_clash(&self, ip: IpAddr, port: u16, v6only: bool) -> bool {
        self.tcp_port_taken(ip, port)
            || self.dual_stack_clash(&self.tcp_listeners, ip, port, v6only)
    }

    /// The listener a SYN to `dst` goes to.
    pub(crate) fn tcp_listener_index(&self, dst: SocketAddr) -> Option<u32> {
        self.tcp_listeners
            .get(&LocalKey::new(dst.ip(), dst.port()))
            .or_else(|| {
                self.tcp_listeners
                    .get(&LocalKey::new(unspecified(dst.ip()), dst.port()))
            })
            .copied()
            .or_else(|| self.dual_stack(&self.tcp_listeners, dst))
    }

    /// Whether a local TCP port is held by a listener or a connection.
    pub(crate) fn tcp_port_taken(&self, ip: IpAddr, port: u16) -> bool {
        if ip.is_unspecified() {
            self.tcp_listeners
                .keys()
                .any(|k| k.port == port && k.ip.is_ipv4() == ip.is_ipv4())
        } else {
            self.tcp_listeners.contains_key(&LocalKey::new(ip, port))
                || self
                    .tcp_listeners
                    .contains_key(&LocalKey::new(unspecified(ip), port))
        }
    }

    /// Every open socket with its slot's index, writable.
    pub(crate) fn indexed_sockets_mut(&mut self) -> impl Iterator<Item = (u32, &mut Socket)> {
        self.slots
            .iter_mut()
            .enumerate()
            .filter_map(|(i, s)| s.socket.as_mut().map(|sock| (i as u32, sock)))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conn_key_of_ipv4_parts_is_the_key_of_the_addresses() {
        let (a, b) = (Ipv4Addr::new(10, 99, 0, 1), Ipv4Addr::new(10, 99, 0, 2));
        let local = SocketAddr::new(IpAddr::V4(a), 7);
        let remote = SocketAddr::new(IpAddr::V4(b), 40000);
        assert_eq!(ConnKey::v4((a, 7), (b, 40000)), ConnKey::new(local, remote));
        assert_ne!(ConnKey::v4((b, 40000), (a, 7)), ConnKey::new(local, remote));
        // The same bits as IPv6 are another connection.
        let mapped = SocketAddr::new(IpAddr::V6(a.to_ipv6_mapped()), 7);
        assert_ne!(
            ConnKey::v4((a, 7), (b, 40000)),
            ConnKey::new(mapped, remote)
        );
    }
}
