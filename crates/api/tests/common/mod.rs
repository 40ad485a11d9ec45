//! Two engines on the test's thread, joined by an in-memory link: the
//! client at 10.99.1.1 and the server at 10.99.1.2.  Both belong to the
//! thread's worker, so a blocking call on either side drives both.

#![allow(dead_code)]

pub mod net;

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use link::MemoryLink;
use runtime::{Engine, EngineConfig};
use stack::{InterfaceConfig, Ipv6Config, Stack, StackConfig};

pub const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 99, 1, 1);
pub const SERVER: Ipv4Addr = Ipv4Addr::new(10, 99, 1, 2);
pub const CLIENT6: Ipv6Addr = Ipv6Addr::new(0xfd99, 1, 0, 0, 0, 0, 0, 1);
pub const SERVER6: Ipv6Addr = Ipv6Addr::new(0xfd99, 1, 0, 0, 0, 0, 0, 2);

fn stack(last: u8) -> Stack {
    let mut s = Stack::new(StackConfig {
        seed: u64::from(last) * 7919,
        // Addresses usable at once (no duplicate address detection), no
        // router to wait for.
        ip6_dad_count: 0,
        ip6_accept_rtadv: false,
        ..StackConfig::default()
    });
    let id = s
        .add_interface(&InterfaceConfig {
            name: format!("mem{last}"),
            mac: [2, 0, 0, 0, 5, last],
            mtu: 1500,
            addr: Ipv4Addr::new(10, 99, 1, last),
            prefix_len: 24,
            broadcast: None,
            gateway: None,
            extra_addrs: vec![],
        })
        .expect("interface");
    let v6 = Ipv6Config {
        addrs: vec![(Ipv6Addr::new(0xfd99, 1, 0, 0, 0, 0, 0, u16::from(last)), 64)],
        gateway: None,
    };
    s.enable_ipv6(stack::Instant::ZERO, id, &v6).expect("IPv6");
    s
}

/// Detaches the thread's worker when the test ends.
pub struct Engines;

impl Drop for Engines {
    fn drop(&mut self) {
        api::detach();
    }
}

/// Attaches a client and a server engine to this thread.
pub fn two_engines() -> Engines {
    let (mut a, mut b) = MemoryLink::pair(1500, 4096);
    a.set_mac([2, 0, 0, 0, 5, 1]);
    b.set_mac([2, 0, 0, 0, 5, 2]);
    let cfg = EngineConfig {
        idle_sleep: Duration::ZERO,
        pkt_tx_delay: Duration::ZERO,
        ..EngineConfig::default()
    };
    // The server's engine first: the one that takes sockets bound to an
    // any address (0.0.0.0, [::]), which serve the server's addresses.
    api::attach(Engine::new(stack(2), vec![b], cfg));
    api::attach(Engine::new(stack(1), vec![a], cfg));
    Engines
}

/// Runs the engines for `ms` milliseconds.
///
/// At least as many steps as an idle machine makes in that time: on a
/// loaded one (CI's two cores running other tests) the sleeps stretch, and
/// a settle counted in time alone left frames unprocessed.
pub fn settle_ms(ms: u64) {
    let end = Instant::now() + Duration::from_millis(ms);
    let min_steps = ms * 20;
    let mut steps = 0;
    while Instant::now() < end || steps < min_steps {
        api::step().expect("step");
        steps += 1;
        std::thread::sleep(Duration::from_micros(50));
    }
}

pub fn server(port: u16) -> SocketAddr {
    SocketAddr::from((SERVER, port))
}

pub fn server6(port: u16) -> SocketAddr {
    SocketAddr::from((SERVER6, port))
}
