//! The stack calls whose meaning depends on the address family, in one
//! place: which addresses are ours, which source reaches a destination,
//! and binding with or without IPV6_V6ONLY.
//!
//! The stack answers these for IPv4 today; its IPv6 half (NDP, IPv6 in
//! and out, `Stack::is_local_ip`, `Stack::tcp_listen_v6only`,
//! `Stack::udp_bind_v6only`) is being built beside this layer.  Until it
//! is here an IPv6 address is never ours, no IPv6 destination has a
//! source, and the stack refuses an IPv6 bind (EAFNOSUPPORT): AF_INET6
//! sockets then work for IPv4-mapped peers only.

use std::net::{IpAddr, SocketAddr};

use stack::{SocketError, SocketHandle, Stack};

/// Whether `ip` is one of the stack's addresses.
pub(crate) fn is_local_ip(stack: &Stack, ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => stack.is_local_addr(v4),
        IpAddr::V6(_) => false,
    }
}

/// The source address the stack's routes pick for `dst` (`None`: no route).
pub(crate) fn source_for(stack: &Stack, dst: IpAddr) -> Option<IpAddr> {
    match dst {
        IpAddr::V4(v4) => stack.ipv4_source_for(v4).map(IpAddr::V4),
        IpAddr::V6(_) => None,
    }
}

/// A TCP listener on `local`; on `[::]` it takes IPv4 too unless `v6only`.
pub(crate) fn tcp_listen(
    stack: &mut Stack,
    local: SocketAddr,
    backlog: usize,
    v6only: bool,
) -> Result<SocketHandle, SocketError> {
    match local {
        SocketAddr::V4(_) => stack.tcp_listen(local, backlog),
        SocketAddr::V6(_) => {
            let _dual = !v6only;
            stack.tcp_listen(local, backlog)
        }
    }
}

/// A UDP socket bound to `local`; on `[::]` it takes IPv4 too unless
/// `v6only`.
pub(crate) fn udp_bind(
    stack: &mut Stack,
    local: SocketAddr,
    v6only: bool,
) -> Result<SocketHandle, SocketError> {
    match local {
        SocketAddr::V4(_) => stack.udp_bind(local),
        SocketAddr::V6(_) => {
            let _dual = !v6only;
            stack.udp_bind(local)
        }
    }
}
