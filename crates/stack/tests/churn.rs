//! Connection churn through one stack: many short connections, the server
//! closing first so that each leaves a TIME-WAIT behind.  With a socket
//! table far smaller than the connections, TIME-WAIT stays bounded: a full
//! table ends the oldest TIME-WAIT early (counted) instead of refusing new
//! connections for 2 MSL, and no port or byte of memory is left behind.

use stack::{Duration, IfaceId, Instant, RxMeta, Shutdown, Stack, StackConfig, TcpState, VecSink};

mod common;
use common::addr;

const IF0: IfaceId = IfaceId(0);

fn stack(last: u8, max_sockets: usize) -> Stack {
    common::stack_on_subnet(
        last,
        StackConfig {
            seed: u64::from(last),
            max_sockets,
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
}

impl Net {
    fn step(&mut self) {
        for _ in 0..100 {
            if self.sc.frames.is_empty() && self.ss.frames.is_empty() {
                break;
            }
            for (_, f) in std::mem::take(&mut self.sc.frames) {
                self.server
                    .receive(self.now, IF0, &f, RxMeta::default(), &mut self.ss);
            }
            for (_, f) in std::mem::take(&mut self.ss.frames) {
                self.client
                    .receive(self.now, IF0, &f, RxMeta::default(), &mut self.sc);
            }
        }
        self.now += Duration::from_millis(1);
        self.client.poll(self.now, &mut self.sc);
        self.server.poll(self.now, &mut self.ss);
    }
}

#[test]
fn churn_through_a_small_table_recycles_time_wait_and_refuses_nothing() {
    churn(16, 2000);
}

/// `make soak`: ten million connections through a table of 4096, the
/// client's ports wrapping around many times.
#[test]
#[ignore = "minutes long: make soak runs it"]
fn churn_ten_million_connections() {
    let start = std::time::Instant::now();
    churn(4096, 10_000_000);
    println!(
        "10,000,000 connections through one stack in {:.0} s of wall time",
        start.elapsed().as_secs_f64()
    );
}

fn churn(table: usize, connections: usize) {
    let mut n = Net {
        client: stack(1, 1 << 16),
        server: stack(2, table),
        sc: VecSink::default(),
        ss: VecSink::default(),
        now: Instant::from_secs(1),
    };
    let l = n.server.tcp_listen(addr(2, 80), 64).unwrap();
    let mut buf = [0u8; 64];
    for i in 0..connections {
        let c = n
            .client
            .tcp_connect(n.now, addr(2, 80), None, &mut n.sc)
            .unwrap();
        let mut steps = 0;
        let s = loop {
            n.step();
            steps += 1;
            if let Ok((s, _)) = n.server.tcp_accept(l) {
                break s;
            }
            assert!(
                steps < 100,
                "connection {i} not accepted: {:?}",
                n.server.counters()
            );
        };
        // A request, a response, and the server closes first.
        assert_eq!(n.client.tcp_send(n.now, c, b"GET", &mut n.sc), Ok(3));
        n.step();
        assert_eq!(n.server.tcp_recv(n.now, s, &mut buf, &mut n.ss), Ok(3));
        assert_eq!(n.server.tcp_send(n.now, s, b"200", &mut n.ss), Ok(3));
        n.server.tcp_close(n.now, s, &mut n.ss).unwrap();
        n.step();
        assert_eq!(n.client.tcp_recv(n.now, c, &mut buf, &mut n.sc), Ok(3));
        n.client.tcp_close(n.now, c, &mut n.sc).unwrap();
        for _ in 0..3 {
            n.step();
        }
        assert_eq!(
            n.client.tcp_state(c).unwrap_or(TcpState::Closed),
            TcpState::Closed
        );
    }
    let sc = n.server.counters();
    assert_eq!(sc.rx_drop_tcp_table_full, 0, "no handshake refused");
    assert_eq!(sc.tcp_passive_opens, connections as u64);
    // All but the table's worth of TIME-WAITs ended early.
    assert!(
        sc.tcp_time_wait_recycled >= (connections - table) as u64,
        "{} recycled",
        sc.tcp_time_wait_recycled
    );
    let (_, conns) = n.server.tcp_memory();
    assert!(conns < table, "{conns} connections held");
    // The client, which closed second, holds nothing.
    assert_eq!(n.client.tcp_memory(), (0, 0));
    // TIME-WAIT ends by itself after 2 MSL.
    for _ in 0..70 {
        n.now += Duration::from_secs(1);
        n.server.poll(n.now, &mut n.ss);
    }
    assert_eq!(n.server.tcp_memory(), (0, 0));
}

/// The timer wheel under churn as ustack-http makes it (the server shuts
/// its side after the response, reads to the client's FIN, closes), for
/// longer than 2 MSL, through a table too small for 2 MSL of TIME-WAITs,
/// so that every slot of the table is taken again as soon as it is free:
/// the wheel holds about the entries of the last 2 MSL, not one or more
/// of every connection ever made.  (An entry left by a slot's earlier
/// connection used to arm its new one and live on as a new entry, for
/// ever, when it fired: ustack-http's RSS grew with every connection in
/// `make soak`.)
#[test]
fn timer_wheel_holds_only_recent_entries_under_churn() {
    // One connection per 100 ms and a few: at most 600 in 2 MSL (60 s),
    // 3,000 in all, through 256 slots.
    const GAP: Duration = Duration::from_millis(100);
    const CONNECTIONS: usize = 3000;
    const PER_2MSL: usize = 600;
    const TABLE: usize = 256;
    let mut n = Net {
        client: stack(1, 1 << 16),
        server: stack(2, TABLE),
        sc: VecSink::default(),
        ss: VecSink::default(),
        now: Instant::from_secs(1),
    };
    let l = n.server.tcp_listen(addr(2, 80), 64).unwrap();
    let mut buf = [0u8; 64];
    let mut samples = Vec::new();
    for i in 0..CONNECTIONS {
        let c = n
            .client
            .tcp_connect(n.now, addr(2, 80), None, &mut n.sc)
            .unwrap();
        n.step();
        let (s, _) = n.server.tcp_accept(l).expect("accepted");
        assert_eq!(n.client.tcp_send(n.now, c, b"GET", &mut n.sc), Ok(3));
        n.step();
        assert_eq!(n.server.tcp_recv(n.now, s, &mut buf, &mut n.ss), Ok(3));
        assert_eq!(n.server.tcp_send(n.now, s, b"200", &mut n.ss), Ok(3));
        n.server
            .tcp_shutdown(n.now, s, Shutdown::Write, &mut n.ss)
            .unwrap();
        n.step();
        assert_eq!(n.client.tcp_recv(n.now, c, &mut buf, &mut n.sc), Ok(3));
        assert_eq!(n.client.tcp_recv(n.now, c, &mut buf, &mut n.sc), Ok(0));
        n.client.tcp_close(n.now, c, &mut n.sc).unwrap();
        n.step();
        assert_eq!(n.server.tcp_recv(n.now, s, &mut buf, &mut n.ss), Ok(0));
        n.server.tcp_close(n.now, s, &mut n.ss).unwrap();
        n.now += GAP;
        n.step();
        if (i + 1) % PER_2MSL == 0 {
            samples.push(n.server.tcp_timer_wheel().0);
        }
    }
    let sc = n.server.counters();
    assert_eq!(sc.tcp_passive_opens, CONNECTIONS as u64);
    assert!(
        sc.tcp_time_wait_recycled >= (CONNECTIONS - PER_2MSL) as u64,
        "{} TIME-WAITs recycled: the table was not full",
        sc.tcp_time_wait_recycled
    );
    // A level, the same at the end as after two minutes: about one entry
    // per connection of the last 2 MSL (the 2 MSL ones of those recycled
    // early among them).
    println!("timer wheel entries every 60 s: {samples:?}");
    for (k, &entries) in samples.iter().enumerate() {
        assert!(
            entries <= 2 * PER_2MSL,
            "{entries} entries in the wheel after {} connections: {samples:?}",
            (k + 1) * PER_2MSL
        );
    }
    // Nothing left once every TIME-WAIT has ended.
    for _ in 0..70 {
        n.now += Duration::from_secs(1);
        n.server.poll(n.now, &mut n.ss);
    }
    assert_eq!(n.server.tcp_memory(), (0, 0));
    assert_eq!(n.server.tcp_timer_wheel().0, 0);
}
