//! A drained packet pool: the engine keeps answering ARP and ICMP from the
//! link's reserve, the application sees ENOBUFS (never a hang), and
//! everything works again once the buffers come back.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use link::{Link, LinkInfo, LinkStats, MemoryLink, PoolBuf};
use runtime::{AppContext, Application, Engine, EngineConfig};
use stack::{InterfaceConfig, SocketError, Stack, StackConfig};

fn stack(last: u8) -> Stack {
    let mut s = Stack::new(StackConfig {
        seed: u64::from(last),
        ..StackConfig::default()
    });
    s.add_interface(&InterfaceConfig::new(
        format!("mem{last}"),
        [2, 0, 0, 0, 3, last],
        ip(last),
        24,
    ))
    .unwrap();
    s
}

fn ip(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 99, 3, last)
}

/// A memory link whose pool something else (socket buffers, frames in
/// flight) has drained down to its reserve while `squeezed` is set: the
/// buffers are taken at each call and given back once it is cleared.
struct Squeezed {
    inner: MemoryLink,
    squeezed: Arc<AtomicBool>,
    held: Vec<PoolBuf>,
}

impl Squeezed {
    fn squeeze(&mut self) {
        if self.squeezed.load(Ordering::Relaxed) {
            while let Some(b) = self.inner.alloc_tx() {
                self.held.push(b);
            }
        } else {
            for b in self.held.drain(..) {
                self.inner.recycle(b);
            }
        }
    }
}

impl Link for Squeezed {
    type Buf = PoolBuf;

    fn rx_burst(&mut self, out: &mut Vec<PoolBuf>, max: usize) -> io::Result<usize> {
        self.squeeze();
        self.inner.rx_burst(out, max)
    }

    fn alloc_tx(&mut self) -> Option<PoolBuf> {
        self.squeeze();
        self.inner.alloc_tx()
    }

    fn alloc_tx_reserved(&mut self) -> Option<PoolBuf> {
        self.inner.alloc_tx_reserved()
    }

    fn tx_burst(&mut self, bufs: &mut Vec<PoolBuf>) -> io::Result<usize> {
        self.inner.tx_burst(bufs)
    }

    fn recycle(&mut self, buf: PoolBuf) {
        self.inner.recycle(buf)
    }

    fn info(&self) -> &LinkInfo {
        self.inner.info()
    }

    fn stats(&self) -> LinkStats {
        self.inner.stats()
    }
}

struct Idle;

impl Application for Idle {
    fn poll(&mut self, _ctx: &mut AppContext<'_>) -> bool {
        false
    }
}

fn turns<A: Link, B: Link>(a: &mut Engine<A>, b: &mut Engine<B>, n: usize) {
    for _ in 0..n {
        a.turn(&mut Idle);
        b.turn(&mut Idle);
    }
}

#[test]
fn a_drained_pool_still_answers_arp_and_icmp_and_recovers() {
    let (mut la, mut lb) = MemoryLink::pair(1500, 64);
    la.set_mac([2, 0, 0, 0, 3, 1]);
    lb.set_mac([2, 0, 0, 0, 3, 2]);
    let cfg = EngineConfig {
        pkt_tx_delay: std::time::Duration::ZERO,
        ..EngineConfig::default()
    };
    let squeezed = Arc::new(AtomicBool::new(true));
    let mut a = Engine::new(stack(1), vec![la], cfg);
    let mut b = Engine::new(
        stack(2),
        vec![Squeezed {
            inner: lb,
            squeezed: Arc::clone(&squeezed),
            held: Vec::new(),
        }],
        cfg,
    );
    let b_udp = b
        .stack
        .udp_bind(SocketAddr::new(IpAddr::V4(ip(2)), 7))
        .unwrap();
    turns(&mut a, &mut b, 5);
    assert!(b.ports().next().unwrap().held.len() > 40, "drained");

    // A resolves B (ARP) and hits a closed port (ICMP port unreachable):
    // both answers leave B from its reserve.
    let a_udp = a
        .stack
        .udp_bind(SocketAddr::new(IpAddr::V4(ip(1)), 5000))
        .unwrap();
    a.with_context(|ctx| {
        ctx.stack
            .udp_send_to(
                ctx.now,
                a_udp,
                SocketAddr::new(IpAddr::V4(ip(2)), 9),
                None,
                b"closed",
                ctx.sink,
            )
            .unwrap()
    });
    turns(&mut a, &mut b, 50);
    assert_eq!(a.stack.counters().rx_accept_arp_reply, 1);
    assert_eq!(a.stack.counters().rx_accept_icmp_error, 1);
    assert!(b.counters().tx_control_from_reserve >= 2);

    // B forgets A's MAC: its next ICMP answer waits for ARP, and leaving
    // the hold it still takes the reserve (it was lost there before).
    b.stack.flush_neighbors(false);
    a.with_context(|ctx| {
        ctx.stack
            .udp_send_to(
                ctx.now,
                a_udp,
                SocketAddr::new(IpAddr::V4(ip(2)), 9),
                None,
                b"closed again",
                ctx.sink,
            )
            .unwrap()
    });
    turns(&mut a, &mut b, 50);
    assert_eq!(b.stack.counters().arp_held, 1, "the answer waited for ARP");
    assert_eq!(a.stack.counters().rx_accept_icmp_error, 2);

    // B's application meets backpressure, at once.
    let to_a = SocketAddr::new(IpAddr::V4(ip(1)), 5000);
    let r = b.with_context(|ctx| {
        ctx.stack
            .udp_send_to(ctx.now, b_udp, to_a, None, b"data", ctx.sink)
    });
    assert_eq!(r, Err(SocketError::NoBufferSpace));

    // The buffers come back: data flows again.
    squeezed.store(false, Ordering::Relaxed);
    turns(&mut a, &mut b, 5);
    let r = b.with_context(|ctx| {
        ctx.stack
            .udp_send_to(ctx.now, b_udp, to_a, None, b"data", ctx.sink)
    });
    assert_eq!(r, Ok(4));
    turns(&mut a, &mut b, 20);
    let mut buf = [0u8; 16];
    let got = a.stack.udp_recv_from(a_udp, &mut buf).unwrap();
    assert_eq!(&buf[..got.len], b"data");
}
