//! The stack calls whose meaning depends on the address family, in one
//! place: which addresses are ours, which source reaches a destination,
//! and binding with or without IPV6_V6ONLY.

use std::net::{IpAddr, SocketAddr};

use stack::{SocketError, SocketHandle, Stack};

/// Whether `ip` is one of the stack's (usable) addresses.
pub(crate) fn is_local_ip(stack: &Stack, ip: IpAddr) -> bool {
    stack.is_local_ip(ip)
}

/// The source address the stack's routes pick for `dst` (`None`: no route).
pub(crate) fn source_for(stack: &Stack, dst: IpAddr) -> Option<IpAddr> {
    match dst {
        IpAddr::V4(v4) => stack.ipv4_source_for(v4).map(IpAddr::V4),
        IpAddr::V6(v6) => stack.ipv6_source_for(v6).map(IpAddr::V6),
    }
}

/// A TCP listener on `local`; on `[::]` it takes IPv4 too unless `v6only`.
pub(crate) fn tcp_listen(
    stack: &mut Stack,
    local: SocketAddr,
    backlog: usize,
    v6only: bool,
) -> Result<SocketHandle, SocketError> {
    stack.tcp_listen_v6only(local, backlog, v6only)
}

/// A UDP socket bound to `local`; on `[::]` it takes IPv4 too unless
/// `v6only`.
pub(crate) fn udp_bind(
    stack: &mut Stack,
    local: SocketAddr,
    v6only: bool,
) -> Result<SocketHandle, SocketError> {
    stack.udp_bind_v6only(local, v6only)
}
