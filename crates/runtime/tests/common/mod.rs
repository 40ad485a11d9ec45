//! Setup shared by the tests that drive two engines over an in-memory
//! link pair (`engine.rs`, `handoff_wait.rs`): a client stack at
//! 10.99.2.1 and a server stack at 10.99.2.2.

use std::net::Ipv4Addr;

use link::{Link, MemoryLink};
use runtime::{Engine, EngineConfig};
use stack::{InterfaceConfig, Stack, StackConfig};

pub const CLIENT_MAC: [u8; 6] = [2, 0, 0, 0, 2, 1];
pub const SERVER_MAC: [u8; 6] = [2, 0, 0, 0, 2, 2];

/// A stack at 10.99.2.`last`/24 with `mac`, seeded by `last`.
pub fn stack(last: u8, mac: [u8; 6]) -> Stack {
    let mut s = Stack::new(StackConfig {
        seed: u64::from(last),
        ..StackConfig::default()
    });
    s.add_interface(&InterfaceConfig::new(
        format!("mem{last}"),
        mac,
        Ipv4Addr::new(10, 99, 2, last),
        24,
    ))
    .unwrap();
    s
}

/// An in-memory link pair: the client's end, the server's end.
pub fn pair() -> (MemoryLink, MemoryLink) {
    let (mut a, mut b) = MemoryLink::pair(1500, 1024);
    a.set_mac(CLIENT_MAC);
    b.set_mac(SERVER_MAC);
    (a, b)
}

/// The client's engine on `la` and the server's on `lb`, both with `cfg`.
pub fn engines<A: Link, B: Link>(la: A, lb: B, cfg: EngineConfig) -> (Engine<A>, Engine<B>) {
    (
        Engine::new(stack(1, CLIENT_MAC), vec![la], cfg),
        Engine::new(stack(2, SERVER_MAC), vec![lb], cfg),
    )
}
