//! TCP's memory budget (`TcpConfig::memory_budget`, the engine's
//! `net.inet.tcp.memory_budget_mb`): past it a handshake is refused
//! (dropped, counted) and a connect fails with ENOBUFS, while the
//! connections already made keep working; room made by closing lets the
//! refused peers' retransmitted SYNs in; what the budget counts follows
//! the connections' state, rings and tables exactly (and the statistics'
//! figures, kept without walking the connections, are what a walk finds).

use stack::{
    Duration, IfaceId, Instant, RxMeta, SocketError, SocketHandle, Stack, StackConfig, TcpConfig,
    TcpState, VecSink,
};

mod common;
use common::addr;

const IF0: IfaceId = IfaceId(0);
/// The server's budget: room for a few dozen idle connections.
const BUDGET: usize = 64 << 10;

fn stack(last: u8, memory_budget: usize) -> Stack {
    common::stack_on_subnet(
        last,
        StackConfig {
            seed: u64::from(last),
            tcp: TcpConfig {
                memory_budget,
                ..TcpConfig::default()
            },
            ..StackConfig::default()
        },
    )
}

struct Net {
    client: Stack,
    server: Stack,
    sc: VecSink,
    ss: VecSink,
    now: Instant,
    /// Frames each side received.
    to_server: u64,
    to_client: u64,
}

impl Net {
    fn new(client_budget: usize, server_budget: usize) -> Net {
        Net {
            client: stack(1, client_budget),
            server: stack(2, server_budget),
            sc: VecSink::default(),
            ss: VecSink::default(),
            now: Instant::from_secs(1),
            to_server: 0,
            to_client: 0,
        }
    }

    /// Delivers what both sides sent, then moves time on by `step`.
    fn run_for(&mut self, step: Duration) {
        for _ in 0..100 {
            if self.sc.frames.is_empty() && self.ss.frames.is_empty() {
                break;
            }
            for (_, f) in std::mem::take(&mut self.sc.frames) {
                self.to_server += 1;
                self.server
                    .receive(self.now, IF0, &f, RxMeta::default(), &mut self.ss);
            }
            for (_, f) in std::mem::take(&mut self.ss.frames) {
                self.to_client += 1;
                self.client
                    .receive(self.now, IF0, &f, RxMeta::default(), &mut self.sc);
            }
        }
        self.now += step;
        self.client.poll(self.now, &mut self.sc);
        self.server.poll(self.now, &mut self.ss);
    }

    fn step(&mut self) {
        self.run_for(Duration::from_millis(1));
    }
}

/// Sends `data` on client connection `c`, has the server echo it on `s`
/// and reads it back; any error fails the test.
fn echo(n: &mut Net, c: SocketHandle, s: SocketHandle, data: &[u8]) {
    let mut buf = vec![0u8; data.len()];
    assert_eq!(n.client.tcp_send(n.now, c, data, &mut n.sc), Ok(data.len()));
    n.step();
    assert_eq!(
        n.server.tcp_recv(n.now, s, &mut buf, &mut n.ss),
        Ok(data.len())
    );
    assert_eq!(n.server.tcp_send(n.now, s, &buf, &mut n.ss), Ok(data.len()));
    n.step();
    buf.fill(0);
    assert_eq!(
        n.client.tcp_recv(n.now, c, &mut buf, &mut n.sc),
        Ok(data.len())
    );
    assert_eq!(buf, data);
}

#[test]
fn past_the_budget_handshakes_are_refused_and_counted_and_made_connections_keep_working() {
    let mut n = Net::new(0, BUDGET);
    let l = n.server.tcp_listen(addr(2, 80), 1024).unwrap();
    let mut client = Vec::new();
    for _ in 0..100 {
        let c = n
            .client
            .tcp_connect(n.now, addr(2, 80), None, &mut n.sc)
            .unwrap();
        client.push(c);
        n.step();
    }
    for _ in 0..5 {
        n.step();
    }
    let mut server = Vec::new();
    while let Ok((s, _)) = n.server.tcp_accept(l) {
        server.push(s);
    }
    let made: Vec<SocketHandle> = client
        .iter()
        .copied()
        .filter(|&c| n.client.tcp_state(c) == Ok(TcpState::Established))
        .collect();
    let refused: Vec<SocketHandle> = client
        .iter()
        .copied()
        .filter(|&c| n.client.tcp_state(c) == Ok(TcpState::SynSent))
        .collect();
    let sc = n.server.counters().clone();
    assert!(
        made.len() >= 20,
        "{} connections made in {BUDGET} bytes",
        made.len()
    );
    assert_eq!(
        made.len() + refused.len(),
        100,
        "every one is made or waits"
    );
    assert_eq!(
        server.len(),
        made.len(),
        "the server made what the client sees"
    );
    // Each refused connection's one SYN so far, dropped without an answer:
    // no SYN-ACK, not even a cookie's, so none is established on the
    // client alone.
    assert_eq!(sc.rx_drop_tcp_memory_budget, refused.len() as u64);
    assert_eq!(sc.tcp_syncookies_sent, 0);
    assert_eq!(sc.rx_drop_tcp_table_full, 0);
    assert_eq!(sc.rx_outcomes(), n.to_server, "every frame has its outcome");
    assert!(n.server.tcp_memory_accounted() <= BUDGET);
    // The connections made keep working at the budget: each echoes.
    for (&c, &s) in made.iter().zip(&server) {
        echo(&mut n, c, s, b"still served");
    }
    assert!(n.server.tcp_memory_accounted() <= BUDGET + made.len() * 2048);
    // Ten connections close (the client first: the server keeps no
    // TIME-WAIT); the refused peers' SYNs, sent again, take their room.
    for (&c, &s) in made.iter().zip(&server).take(10) {
        n.client.tcp_close(n.now, c, &mut n.sc).unwrap();
        n.step();
        n.server.tcp_close(n.now, s, &mut n.ss).unwrap();
        n.step();
    }
    for _ in 0..80 {
        n.run_for(Duration::from_millis(100));
    }
    let now_made = refused
        .iter()
        .filter(|&&c| n.client.tcp_state(c) == Ok(TcpState::Established))
        .count();
    assert!(
        now_made >= 5,
        "{now_made} refused connections made after ten closed"
    );
    let mut accepted = 0;
    while n.server.tcp_accept(l).is_ok() {
        accepted += 1;
    }
    assert_eq!(accepted, now_made);
    assert!(n.server.tcp_memory_accounted() <= BUDGET);
    assert_eq!(
        n.server.counters().rx_outcomes(),
        n.to_server,
        "every frame has its outcome"
    );
}

#[test]
fn a_connect_past_the_budget_fails_with_enobufs_and_is_counted() {
    let mut n = Net::new(BUDGET, 0);
    let _l = n.server.tcp_listen(addr(2, 80), 1024).unwrap();
    let mut made = 0;
    let err = loop {
        match n.client.tcp_connect(n.now, addr(2, 80), None, &mut n.sc) {
            Ok(_) => made += 1,
            Err(e) => break e,
        }
        n.step();
        assert!(made < 1000, "no refusal within 1000 connects");
    };
    assert_eq!(err, SocketError::NoBufferSpace);
    assert!(made >= 20, "{made} connects in {BUDGET} bytes");
    assert_eq!(n.client.counters().tcp_connects_refused_memory_budget, 1);
    assert!(n.client.tcp_memory_accounted() <= BUDGET);
}

#[test]
fn a_time_wait_no_one_holds_makes_room_under_the_budget() {
    let mut n = Net::new(0, BUDGET);
    let l = n.server.tcp_listen(addr(2, 80), 1024).unwrap();
    // Fill the budget with connections the server closes first: each
    // leaves a TIME-WAIT on the server.
    let mut closed = 0;
    while n.server.counters().tcp_time_wait_recycled == 0 {
        let c = n
            .client
            .tcp_connect(n.now, addr(2, 80), None, &mut n.sc)
            .unwrap();
        n.step();
        let Ok((s, _)) = n.server.tcp_accept(l) else {
            panic!(
                "connection {closed} not accepted: client {:?}, server accounted {} of {BUDGET}, {:?}",
                n.client.tcp_state(c),
                n.server.tcp_memory_accounted(),
                n.server.counters()
            );
        };
        n.server.tcp_close(n.now, s, &mut n.ss).unwrap();
        n.step();
        n.client.tcp_close(n.now, c, &mut n.sc).unwrap();
        n.step();
        closed += 1;
        assert!(closed < 1000, "no TIME-WAIT was recycled");
    }
    let sc = n.server.counters();
    assert_eq!(sc.rx_drop_tcp_memory_budget, 0, "nothing refused");
    assert!(closed >= 20);
    assert!(n.server.tcp_memory_accounted() <= BUDGET);
}

#[test]
fn what_the_budget_counts_follows_the_rings_exactly() {
    let mut n = Net::new(0, 0);
    let l = n.server.tcp_listen(addr(2, 80), 1024).unwrap();
    let mut pairs = Vec::new();
    for _ in 0..20 {
        let c = n
            .client
            .tcp_connect(n.now, addr(2, 80), None, &mut n.sc)
            .unwrap();
        n.step();
        let (s, _) = n.server.tcp_accept(l).unwrap();
        pairs.push((c, s));
    }
    // Accounted = the walk (state and rings) + the tables; the tables do
    // not change while data flows, so the difference stays put.
    let tables = |s: &Stack| s.tcp_memory_accounted() - s.tcp_memory().0;
    let idle = tables(&n.server);
    assert_eq!(n.server.tcp_memory_held(), n.server.tcp_memory());
    assert!(idle > 0 && idle < 16 << 10, "tables {idle} B for 20");
    let big = vec![7u8; 20_000];
    for &(c, _) in &pairs {
        assert!(n.client.tcp_send(n.now, c, &big, &mut n.sc).unwrap() > 0);
    }
    n.step();
    let (walked, _) = n.server.tcp_memory();
    assert!(walked > 20 * 16_000, "the rings hold the data: {walked}");
    assert_eq!(tables(&n.server), idle, "the rings are counted exactly");
    assert_eq!(n.server.tcp_memory_held(), n.server.tcp_memory());
    assert_eq!(n.client.tcp_memory_held(), n.client.tcp_memory());
    // Everything closes and is freed: only the tables' capacity is left.
    for &(c, s) in &pairs {
        n.client.tcp_close(n.now, c, &mut n.sc).unwrap();
        n.server.tcp_close(n.now, s, &mut n.ss).unwrap();
    }
    for _ in 0..100 {
        n.run_for(Duration::from_secs(1));
    }
    assert_eq!(n.server.tcp_memory(), (0, 0));
    assert_eq!(n.server.tcp_memory_held(), (0, 0));
    // Only the tables are left (their free list grew by the twenty).
    let left = n.server.tcp_memory_accounted();
    assert!(
        left >= idle && left <= idle + 256,
        "{left} B left, tables {idle} B"
    );
    assert_eq!(n.client.tcp_memory(), (0, 0));
}
