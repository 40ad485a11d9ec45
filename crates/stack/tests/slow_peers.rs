//! Slow and hostile peers cost bounded memory, and the timers reap those
//! that go silent: a peer that never reads (its window closes and stays
//! closed), one that vanishes mid-transfer (never ACKs), one that vanishes
//! behind a zero window, an idle one that vanishes (keep-alive), and a
//! slowloris that sends one byte a minute.  Two stacks over a wire the
//! test can cut, in virtual time.

use stack::{
    Duration, IfaceId, Instant, RxMeta, SocketError, SocketHandle, Stack, StackConfig, TcpState,
    VecSink,
};

mod common;
use common::addr;

const IF0: IfaceId = IfaceId(0);

/// What one connection may hold at most whatever its peer does: its
/// state plus its send and receive buffers at their ceilings (which only
/// a fast peer that reads, ACKs and opens its window lets them reach).
fn per_connection_bound(s: &Stack) -> usize {
    let cfg = &s.config().tcp;
    4096 + cfg.sendbuf_max + cfg.recvbuf_max
}

fn stack(last: u8) -> Stack {
    common::stack_on_subnet(
        last,
        StackConfig {
            seed: u64::from(last),
            ..StackConfig::default()
        },
    )
}

/// The server `a` and the hostile client `b`; `cut` drops every frame.
struct Net {
    a: Stack,
    b: Stack,
    sa: VecSink,
    sb: VecSink,
    now: Instant,
    cut: bool,
}

impl Net {
    fn new() -> Net {
        Net {
            a: stack(1),
            b: stack(2),
            sa: VecSink::default(),
            sb: VecSink::default(),
            now: Instant::from_secs(1),
            cut: false,
        }
    }

    /// `n` connections from b to a's port 80: (a's side, b's side) each.
    fn connect(&mut self, n: usize) -> Vec<(SocketHandle, SocketHandle)> {
        let l = self.a.tcp_listen(addr(1, 80), n.max(16)).unwrap();
        let bs: Vec<_> = (0..n)
            .map(|_| {
                self.b
                    .tcp_connect(self.now, addr(1, 80), None, &mut self.sb)
                    .unwrap()
            })
            .collect();
        // SYNs beyond what ARP holds for an unresolved neighbour go again
        // after the initial RTO.
        self.run_secs(3);
        bs.into_iter()
            .map(|b| (self.a.tcp_accept(l).unwrap().0, b))
            .collect()
    }

    fn deliver(&mut self) {
        for _ in 0..1000 {
            if self.sa.frames.is_empty() && self.sb.frames.is_empty() {
                return;
            }
            let (fa, fb) = (
                std::mem::take(&mut self.sa.frames),
                std::mem::take(&mut self.sb.frames),
            );
            if self.cut {
                continue;
            }
            for (_, f) in fa {
                self.b
                    .receive(self.now, IF0, &f, RxMeta::default(), &mut self.sb);
            }
            for (_, f) in fb {
                self.a
                    .receive(self.now, IF0, &f, RxMeta::default(), &mut self.sa);
            }
        }
    }

    /// Runs both stacks for `ms` milliseconds of virtual time.
    fn run_ms(&mut self, ms: u64) {
        for _ in 0..ms {
            self.deliver();
            self.now += Duration::from_millis(1);
            self.a.poll(self.now, &mut self.sa);
            self.b.poll(self.now, &mut self.sb);
        }
        self.deliver();
    }

    /// Runs for `secs` seconds in steps of 100 ms (timers of seconds).
    fn run_secs(&mut self, secs: u64) {
        for _ in 0..secs * 10 {
            self.deliver();
            self.now += Duration::from_millis(100);
            self.a.poll(self.now, &mut self.sa);
            self.b.poll(self.now, &mut self.sb);
        }
        self.deliver();
    }

    /// a's application writes to `c` until the stack says EAGAIN; returns
    /// how much it took.
    fn fill(&mut self, c: SocketHandle) -> usize {
        let chunk = vec![7u8; 16 << 10];
        let mut taken = 0;
        loop {
            match self.a.tcp_send(self.now, c, &chunk, &mut self.sa) {
                Ok(n) if n > 0 => taken += n,
                Ok(_) | Err(SocketError::WouldBlock) => return taken,
                Err(e) => panic!("send: {e:?}"),
            }
            self.run_ms(1);
        }
    }
}

/// A peer that never reads: its window closes and stays closed while it
/// answers the window probes.  The sender's buffer stops at its limit (the
/// application sees EAGAIN), the connection stays (RFC 1122 4.2.2.17) and
/// its memory stays flat for an hour of probes.
#[test]
fn a_peer_that_never_reads_costs_one_send_buffer_however_long() {
    let mut n = Net::new();
    let (a, b) = n.connect(1)[0];
    let mut taken = n.fill(a);
    assert!(taken > 0);
    n.run_secs(5);
    taken += n.fill(a);
    let (before, conns) = n.a.tcp_memory();
    assert_eq!(conns, 1);
    let probes = n.a.counters().tcp_window_probes;
    // An hour of probes, the application writing whenever it may.
    for _ in 0..60 {
        n.run_secs(60);
        taken += n.fill(a);
        let (bytes, _) = n.a.tcp_memory();
        assert!(
            bytes <= per_connection_bound(&n.a),
            "{bytes} bytes for one connection"
        );
    }
    assert!(n.a.counters().tcp_window_probes > probes + 50);
    assert_eq!(n.a.tcp_state(a), Ok(TcpState::Established));
    let (after, _) = n.a.tcp_memory();
    assert!(
        after <= before + 4096,
        "flat over an hour: {before} -> {after}"
    );
    // What left sits in the peer's receive buffer, which it never reads;
    // the rest waits in ours: each within its ceiling.
    let (a_cfg, b_cfg) = (n.a.config().tcp.clone(), n.b.config().tcp.clone());
    let at_peer = n.b.tcp_recv_queued(b).unwrap();
    assert!(at_peer <= b_cfg.recvbuf_max, "{at_peer} at the peer");
    assert!(
        taken - at_peer <= a_cfg.sendbuf_max,
        "{} bytes waiting here",
        taken - at_peer
    );
}

/// A peer that vanishes mid-transfer never ACKs: the retransmissions give
/// up after `max_retries` (ETIMEDOUT) and the connection's memory goes
/// with its close.
#[test]
fn a_peer_that_never_acks_is_given_up_and_its_memory_freed() {
    let mut n = Net::new();
    let (a, _b) = n.connect(1)[0];
    n.cut = true;
    assert!(n.fill(a) > 0);
    n.run_secs(3600);
    assert_eq!(n.a.tcp_take_error(a), Ok(Some(SocketError::TimedOut)));
    n.a.tcp_close(n.now, a, &mut n.sa).unwrap();
    n.run_secs(1);
    assert_eq!(n.a.tcp_memory(), (0, 0));
}

/// A peer that closes its window and then vanishes: the persist probes go
/// unanswered and the connection is reset after twice the largest RTO of
/// silence (as Linux's probe limit), not kept for ever.
#[test]
fn a_zero_window_peer_that_goes_silent_is_reaped_by_the_persist_timer() {
    let mut n = Net::new();
    let (a, _b) = n.connect(1)[0];
    n.fill(a);
    n.run_secs(30);
    assert_eq!(n.a.tcp_state(a), Ok(TcpState::Established));
    n.cut = true;
    let rto_max = n.a.config().tcp.rto_max;
    n.run_secs(rto_max.as_secs() * 2 + 2 * 60);
    assert_eq!(n.a.tcp_take_error(a), Ok(Some(SocketError::TimedOut)));
    assert_ne!(n.a.tcp_state(a), Ok(TcpState::Established));
}

/// An idle peer that vanishes: with SO_KEEPALIVE, after `keepidle` and
/// `keepcnt` unanswered probes `keepintvl` apart, the connection is reset.
#[test]
fn an_idle_peer_that_vanishes_is_reaped_by_keepalive() {
    let mut n = Net::new();
    let (a, _b) = n.connect(1)[0];
    let now = n.now;
    n.a.tcp_set_keepalive(now, a, true).unwrap();
    n.cut = true;
    let tcp = n.a.config().tcp.clone();
    let lifetime = tcp.keepidle + tcp.keepintvl * tcp.keepcnt;
    n.run_secs(lifetime.as_secs() - 60);
    assert_eq!(n.a.tcp_state(a), Ok(TcpState::Established));
    n.run_secs(120);
    assert_eq!(n.a.tcp_take_error(a), Ok(Some(SocketError::TimedOut)));
    assert!(n.a.counters().tcp_keepalive_timeouts >= 1);
}

/// A slowloris: one byte a minute that the application waits to read
/// whole.  The connection holds what came (its receive buffer at its
/// initial size: no auto-tuning for a trickle), and many of them together
/// hold no more than so many times one.
#[test]
fn slowloris_connections_hold_their_receive_buffer_and_no_more() {
    let mut n = Net::new();
    let conns = n.connect(50);
    let initial = n.a.tcp_memory().0;
    for _ in 0..30 {
        for &(_, b) in &conns {
            assert_eq!(n.b.tcp_send(n.now, b, b"x", &mut n.sb), Ok(1));
        }
        n.run_secs(60);
    }
    for &(a, _) in &conns {
        assert_eq!(n.a.tcp_recv_queued(a), Ok(30));
        assert_eq!(
            n.a.tcp_recv_buffer(a),
            Ok(n.a.config().tcp.recv_space),
            "no auto-tuning for a trickle"
        );
    }
    let (bytes, count) = n.a.tcp_memory();
    assert_eq!(count, 50);
    assert!(
        bytes <= 50 * per_connection_bound(&n.a),
        "{bytes} bytes for 50 connections"
    );
    // A trickle costs no more than what it brought: 30 bytes each, in
    // whatever granularity the receive buffer allocates.
    assert!(
        bytes <= initial + 50 * n.a.config().tcp.recv_space,
        "{initial} -> {bytes}"
    );
}
