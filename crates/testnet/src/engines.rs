//! ustack's side: two engines on the calling thread joined by an
//! in-memory link, the client at 10.99.1.1 (fd99:1::1) and the server at
//! 10.99.1.2 (fd99:1::2).  Both belong to the thread's worker, so a call
//! on either drives both.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use link::MemoryLink;
use runtime::{Engine, EngineConfig};
use stack::{InterfaceConfig, Ipv6Config, Stack, StackConfig, TcpConfig};

pub const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 99, 1, 1);
pub const SERVER: Ipv4Addr = Ipv4Addr::new(10, 99, 1, 2);
pub const CLIENT6: Ipv6Addr = v6(1);
pub const SERVER6: Ipv6Addr = v6(2);

/// The IPv6 address of host `last` (1 the client, 2 the server).
const fn v6(last: u8) -> Ipv6Addr {
    Ipv6Addr::new(0xfd99, 1, 0, 0, 0, 0, 0, last as u16)
}

/// Host `last`'s stack with `tcp`: its IPv4 and IPv6 addresses usable at
/// once (no duplicate address detection), no router to wait for.
fn stack(last: u8, tcp: TcpConfig) -> Stack {
    let mut s = Stack::new(StackConfig {
        seed: u64::from(last) * 7919,
        ip6_dad_count: 0,
        ip6_accept_rtadv: false,
        tcp,
        ..StackConfig::default()
    });
    let id = s
        .add_interface(&InterfaceConfig::new(
            format!("mem{last}"),
            [2, 0, 0, 0, 5, last],
            Ipv4Addr::new(10, 99, 1, last),
            24,
        ))
        .expect("interface");
    let ipv6 = Ipv6Config {
        addrs: vec![(v6(last), 64)],
        gateway: None,
    };
    s.enable_ipv6(stack::Instant::ZERO, id, &ipv6)
        .expect("IPv6");
    s
}

/// Attaches the server's engine, then the client's, to the calling
/// thread's worker (the server's first: the engine that takes sockets
/// bound to an any address, which serve the server's addresses); each
/// link end has `buffers` buffers, each stack `tcp`.  `api::detach` ends
/// them.
pub fn attach_two(buffers: usize, tcp: TcpConfig) {
    let (mut a, mut b) = MemoryLink::pair(1500, buffers);
    a.set_mac([2, 0, 0, 0, 5, 1]);
    b.set_mac([2, 0, 0, 0, 5, 2]);
    let cfg = EngineConfig {
        idle_sleep: Duration::ZERO,
        pkt_tx_delay: Duration::ZERO,
        ..EngineConfig::default()
    };
    api::attach(Engine::new(stack(2, tcp.clone()), vec![b], cfg));
    api::attach(Engine::new(stack(1, tcp), vec![a], cfg));
}
