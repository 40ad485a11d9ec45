//! Two engines on the test's thread, joined by an in-memory link: the
//! client at 10.99.1.1 and the server at 10.99.1.2.  Both belong to the
//! thread's worker, so a blocking call on either side drives both.

#![allow(dead_code)]

pub mod net;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use link::MemoryLink;
use runtime::{Engine, EngineConfig};
use stack::{InterfaceConfig, Stack, StackConfig};

pub const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 99, 1, 1);
pub const SERVER: Ipv4Addr = Ipv4Addr::new(10, 99, 1, 2);

fn stack(last: u8) -> Stack {
    let mut s = Stack::new(StackConfig {
        seed: u64::from(last) * 7919,
        ..StackConfig::default()
    });
    s.add_interface(&InterfaceConfig {
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
    api::attach(Engine::new(stack(1), vec![a], cfg));
    api::attach(Engine::new(stack(2), vec![b], cfg));
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
