//! The application's frame hook (F-Stack's packet dispatcher): an engine on
//! one end of an in-memory link, frames written and read by hand on the
//! other.  The hook sees each frame before the stack and may take it,
//! answer it in place, or let it pass.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use link::{Link, MemoryLink, PacketBuffer, PoolBuf};
use runtime::engine::HookVerdict;
use runtime::{AppContext, Application, Engine, EngineConfig};
use stack::{InterfaceConfig, Stack, StackConfig};

const US: Ipv4Addr = Ipv4Addr::new(10, 99, 3, 2);
const PEER: Ipv4Addr = Ipv4Addr::new(10, 99, 3, 1);
const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x09];

struct Idle;

impl Application for Idle {
    fn poll(&mut self, _ctx: &mut AppContext<'_>) -> bool {
        false
    }
}

fn engine() -> (Engine<MemoryLink>, MemoryLink) {
    let (ours, mut peer) = MemoryLink::pair(1500, 64);
    peer.set_mac(PEER_MAC);
    let mut stack = Stack::new(StackConfig {
        seed: 3,
        ..StackConfig::default()
    });
    stack
        .add_interface(&InterfaceConfig::new("mem0", ours.info().mac, US, 24))
        .unwrap();
    (
        Engine::new(stack, vec![ours], EngineConfig::default()),
        peer,
    )
}

/// An ARP request from the peer for our address.
fn arp_request(marker: u8) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&[0xff; 6]);
    f.extend_from_slice(&PEER_MAC);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&PEER_MAC);
    f.extend_from_slice(&PEER.octets());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&US.octets());
    f.resize(59, 0);
    f.push(marker);
    f
}

fn send(peer: &mut MemoryLink, frame: &[u8]) {
    let mut b = peer.alloc_tx().unwrap();
    b.set_len(frame.len());
    b.data_mut().copy_from_slice(frame);
    let mut v = vec![b];
    peer.tx_burst(&mut v).unwrap();
    assert!(v.is_empty());
}

/// Turns the engine until the peer has received something or `wait`
/// passes; returns what it received.
fn turn_and_collect(
    e: &mut Engine<MemoryLink>,
    peer: &mut MemoryLink,
    wait: Duration,
) -> Vec<Vec<u8>> {
    let end = Instant::now() + wait;
    let mut got: Vec<PoolBuf> = Vec::new();
    loop {
        e.turn(&mut Idle);
        peer.rx_burst(&mut got, 32).unwrap();
        if !got.is_empty() || Instant::now() >= end {
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let out = got.iter().map(|b| b.data().to_vec()).collect();
    for b in got {
        peer.recycle(b);
    }
    out
}

fn counter(e: &Engine<MemoryLink>, name: &str) -> u64 {
    let mut v = None;
    e.dispatch_counters()
        .expect("the hook brings a dispatcher")
        .visit(|n, x| {
            if n == name {
                v = Some(x)
            }
        });
    v.unwrap_or_else(|| panic!("no counter {name}"))
}

fn stack_counter(e: &Engine<MemoryLink>, name: &str) -> u64 {
    let mut v = 0;
    e.stack.counters().visit(|n, x| {
        if n == name {
            v = x
        }
    });
    v
}

#[test]
fn hook_consumes_answers_and_passes() {
    let (mut e, mut peer) = engine();
    let seen = Arc::new(AtomicU64::new(0));
    let seen_in_hook = seen.clone();
    // The last byte of each test frame says what the hook does with it.
    e.set_frame_hook(Some(Box::new(
        move |port: u16, buf: &mut [u8], len: usize| {
            assert_eq!(port, 0);
            assert!(buf.len() >= len, "the hook gets the whole buffer");
            seen_in_hook.fetch_add(1, Ordering::Relaxed);
            match buf[len - 1] {
                1 => HookVerdict::Consume,
                2 => {
                    // Answer: the frame back to its sender, one byte longer.
                    let (dst, src) = buf.split_at_mut(6);
                    dst.swap_with_slice(&mut src[..6]);
                    buf[len] = 0xee;
                    HookVerdict::Answer(len + 1)
                }
                3 => HookVerdict::Answer(buf.len() + 1),
                _ => HookVerdict::Pass,
            }
        },
    )));
    let arp_in = |e: &Engine<MemoryLink>| stack_counter(e, "rx_accept_arp_request");

    // Consumed: the stack never sees it, nothing comes back.
    send(&mut peer, &arp_request(1));
    let got = turn_and_collect(&mut e, &mut peer, Duration::from_millis(20));
    assert!(
        got.is_empty(),
        "a consumed ARP request was answered: {got:?}"
    );
    assert_eq!(counter(&e, "hook_consumed"), 1);
    assert_eq!(arp_in(&e), 0);

    // Answered in place: the same bytes, addresses swapped, one longer.
    let req = arp_request(2);
    send(&mut peer, &req);
    let got = turn_and_collect(&mut e, &mut peer, Duration::from_millis(200));
    assert_eq!(got.len(), 1, "one answer");
    let a = &got[0];
    assert_eq!(a.len(), req.len() + 1);
    assert_eq!(&a[..6], &PEER_MAC);
    assert_eq!(&a[6..12], &[0xff; 6]);
    assert_eq!(&a[12..req.len()], &req[12..]);
    assert_eq!(a[req.len()], 0xee);
    assert_eq!(counter(&e, "hook_answered"), 1);
    assert_eq!(arp_in(&e), 0);

    // An answer longer than the buffer is dropped and counted.
    send(&mut peer, &arp_request(3));
    let got = turn_and_collect(&mut e, &mut peer, Duration::from_millis(20));
    assert!(got.is_empty());
    assert_eq!(counter(&e, "hook_answer_drops"), 1);

    // Passed: the stack answers the ARP request itself.
    send(&mut peer, &arp_request(0));
    let got = turn_and_collect(&mut e, &mut peer, Duration::from_millis(200));
    assert_eq!(got.len(), 1, "the stack's ARP reply");
    assert_eq!(&got[0][12..14], &[0x08, 0x06]);
    assert_eq!(&got[0][20..22], &[0, 2], "an ARP reply");
    assert_eq!(&got[0][28..32], &US.octets());
    assert_eq!(arp_in(&e), 1);
    assert_eq!(seen.load(Ordering::Relaxed), 4);
}
