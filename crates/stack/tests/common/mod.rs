//! What the stack's two-stack tests share: a stack with one interface on
//! the test subnet 10.99.1.0/24, and addresses on it.  (Each test file is
//! its own crate and uses part of this.)
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use stack::{InterfaceConfig, Stack, StackConfig};

/// A stack made with `config`, with one interface: host `last` of
/// 10.99.1.0/24, MAC 02:00:00:00:00:`last`, MTU 1500.
pub fn stack_on_subnet(last: u8, config: StackConfig) -> Stack {
    let mut s = Stack::new(config);
    s.add_interface(&InterfaceConfig::new(
        format!("p{last}"),
        [2, 0, 0, 0, 0, last],
        Ipv4Addr::new(10, 99, 1, last),
        24,
    ))
    .unwrap();
    s
}

/// Host `last` of the test subnet, port `port`.
pub fn addr(last: u8, port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 99, 1, last)), port)
}
