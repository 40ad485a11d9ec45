//! The scenarios: what the hosts do, with sizes, timings and options
//! drawn from the seed.

use std::fmt::Write as _;

use stack::rand::Rng;
use stack::{CcAlgorithm, Duration, EcnMode, Instant, SocketError, StackConfig, TcpConfig};

use crate::app::{AbortHow, AfterSend, Connect, Endpoint, Expect, Flows, Listener};
use crate::net::{addr, Impair, Net};

/// The stacks and the link of one run.
pub struct Params {
    pub cfgs: [StackConfig; 2],
    pub mtus: [usize; 2],
    pub imps: [Impair; 2],
    /// The link dies at this time (both ways, for good).
    pub cut: Option<Instant>,
}

impl Params {
    pub fn describe(&self) -> String {
        let mut s = String::new();
        for h in 0..2 {
            let t = &self.cfgs[h].tcp;
            let _ = writeln!(
                s,
                "    {}: mtu {} sack {} rfc1323 {} cc {} delayed_ack {} send_space {} recv_space {} msl {:?} syncookies {} ecn {:?}",
                if h == 0 { 'a' } else { 'b' },
                self.mtus[h],
                t.sack,
                t.rfc1323,
                t.cc.name(),
                t.delayed_ack,
                t.send_space,
                t.recv_space,
                t.msl,
                t.syncookies,
                t.ecn
            );
        }
        for d in 0..2 {
            let _ = writeln!(
                s,
                "    {}: {}",
                if d == 0 { "a>b" } else { "b>a" },
                self.imps[d]
            );
        }
        if let Some(t) = self.cut {
            let _ = writeln!(s, "    the link dies at {t}");
        }
        s
    }

    /// No impairment but delay and jitter, both ways.
    pub fn clean(&self) -> bool {
        self.imps.iter().all(Impair::is_clean) && self.cut.is_none()
    }
}

pub struct R<'a>(pub &'a mut Rng);

impl R<'_> {
    pub fn chance(&mut self, percent: u64) -> bool {
        self.0.below(100) < percent
    }

    /// A value in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.0.below(hi - lo + 1)
    }

    /// Log-uniform in `lo..=hi` (small and large values alike).
    pub fn log_range(&mut self, lo: u64, hi: u64) -> u64 {
        let (l, h) = ((lo.max(1) as f64).ln(), (hi as f64).ln());
        let x = l + (h - l) * (self.0.below(1 << 30) as f64 / (1u64 << 30) as f64);
        (x.exp() as u64).clamp(lo, hi)
    }

    pub fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_micros(self.range(lo * 1000, hi * 1000))
    }

    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.0.below(xs.len() as u64) as usize]
    }
}

fn impair(r: &mut R) -> Impair {
    let mut i = Impair::default();
    if r.chance(80) {
        i.delay = r.ms(0, 50);
    }
    if r.chance(12) {
        return i;
    }
    if r.chance(60) {
        i.loss = r.range(0, 100_000) as u32;
    }
    if r.chance(40) {
        i.dup = r.range(0, 50_000) as u32;
    }
    if r.chance(40) {
        i.reorder = r.range(0, 100_000) as u32;
        i.reorder_gap = r.ms(1, 20) + i.delay;
    }
    if r.chance(30) {
        i.corrupt = r.range(0, 20_000) as u32;
    }
    if r.chance(50) {
        i.jitter = r.ms(0, 10);
    }
    if r.chance(30) {
        i.rate = Some(r.log_range(1_000_000, 100_000_000));
        if r.chance(70) {
            i.queue = Some(r.range(8, 256) as usize * 1514);
        }
    }
    i
}

fn stack_config(r: &mut R, seed: u64) -> StackConfig {
    StackConfig {
        seed,
        tcp: TcpConfig {
            sack: r.chance(80),
            rfc1323: r.chance(80),
            syncookies: true,
            cc: if r.chance(35) {
                CcAlgorithm::NewReno
            } else {
                CcAlgorithm::Cubic
            },
            delayed_ack: r.chance(80),
            msl: Duration::from_secs(r.range(1, 30)),
            // Keep-alive finds half-open connections (only the backlog's
            // servers and connections made again by late duplicates use it).
            keepidle: r.ms(10_000, 30_000),
            keepintvl: r.ms(2000, 5000),
            keepcnt: r.range(4, 8) as u32,
            send_space: r.pick(&[32 << 10, 32 << 10, 8 << 10, 128 << 10, 1 << 10]),
            recv_space: r.pick(&[64 << 10, 64 << 10, 4 << 10, 16 << 10, 256 << 10, 1 << 10]),
            ..TcpConfig::default()
        },
        ..StackConfig::default()
    }
}

pub fn draw_params(rng: &mut Rng, seed: u64) -> Params {
    let mut r = R(rng);
    let cfgs = [
        stack_config(&mut r, seed.wrapping_mul(2).wrapping_add(1)),
        stack_config(&mut r, seed.wrapping_mul(2).wrapping_add(2)),
    ];
    let mtus = [
        r.pick(&[1500, 1500, 1500, 9000, 1280, 576]),
        r.pick(&[1500, 1500, 1500, 9000, 1280, 576]),
    ];
    let mut a = impair(&mut r);
    let mut b = if r.chance(40) { a } else { impair(&mut r) };
    // ECN from the seed itself, not the generator (the draws above stay
    // what they were): every pairing of the three modes, and in a fifth
    // of the runs a link that marks ECN-capable frames.
    let modes = [EcnMode::AcceptOnly, EcnMode::On, EcnMode::Off];
    let mut cfgs = cfgs;
    cfgs[0].tcp.ecn = modes[(seed % 3) as usize];
    cfgs[1].tcp.ecn = modes[(seed / 3 % 3) as usize];
    if seed.is_multiple_of(5) {
        a.ce_mark = 20_000;
        b.ce_mark = 20_000;
    }
    Params {
        cfgs,
        mtus,
        imps: [a, b],
        cut: None,
    }
}

/// A scenario: builds the application from the seed.
pub struct Scenario {
    pub name: &'static str,
    pub build: fn(&mut R, &mut Params) -> Flows,
    /// Every segment must arrive (no aborts, no refusals): losses must
    /// show up as retransmissions, and a clean link must need none (but
    /// for this many: a simultaneous open sends each SYN again with ACK).
    pub check_retransmissions: bool,
    pub clean_retransmissions: u64,
    /// Seeds per run of `make test` (scaled by `USTACK_SIM_SEEDS`).
    pub seeds: u64,
}

pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "bulk",
        build: bulk,
        check_retransmissions: true,
        clean_retransmissions: 0,
        seeds: 800,
    },
    Scenario {
        name: "bidir",
        build: bidir,
        check_retransmissions: true,
        clean_retransmissions: 0,
        seeds: 600,
    },
    Scenario {
        name: "echo",
        build: echo,
        check_retransmissions: true,
        clean_retransmissions: 0,
        seeds: 1500,
    },
    Scenario {
        name: "multi",
        build: multi,
        check_retransmissions: true,
        clean_retransmissions: 0,
        seeds: 1500,
    },
    Scenario {
        name: "halfclose",
        build: halfclose,
        check_retransmissions: true,
        clean_retransmissions: 0,
        seeds: 1500,
    },
    Scenario {
        name: "refused",
        build: refused,
        check_retransmissions: false,
        clean_retransmissions: 0,
        seeds: 800,
    },
    Scenario {
        name: "abort",
        build: abort,
        check_retransmissions: false,
        clean_retransmissions: 0,
        seeds: 1500,
    },
    Scenario {
        name: "simopen",
        build: simopen,
        check_retransmissions: true,
        clean_retransmissions: 2,
        seeds: 800,
    },
    Scenario {
        name: "vanish",
        build: vanish,
        check_retransmissions: false,
        clean_retransmissions: 0,
        seeds: 500,
    },
    Scenario {
        name: "reuse",
        build: reuse,
        check_retransmissions: true,
        // Without timestamps a SYN whose ISN is not past the TIME-WAIT's
        // sequence space draws an ACK, the client resets the TIME-WAIT and
        // sends its SYN again (RFC 1122 4.2.2.13, as Linux).
        clean_retransmissions: 12,
        seeds: 1000,
    },
    Scenario {
        name: "ecn",
        build: ecn,
        check_retransmissions: true,
        clean_retransmissions: 0,
        seeds: 200,
    },
    Scenario {
        name: "backlog",
        build: backlog,
        check_retransmissions: false,
        clean_retransmissions: 0,
        seeds: 1500,
    },
];

const T0: Instant = Instant::from_secs(1);

/// A connection from `client` (host) to `server` (host, port) with its
/// two endpoints; returns their indexes.
fn connection(
    f: &mut Flows,
    r: &mut R,
    name: &str,
    client: usize,
    server: usize,
    port: u16,
    at: Instant,
) -> (usize, usize) {
    let mut c = Endpoint::new(format!("{name}.client"), client);
    let mut s = Endpoint::new(format!("{name}.server"), server);
    c.tx_key = r.0.next_u64();
    s.tx_key = r.0.next_u64();
    c.rx_key = s.tx_key;
    s.rx_key = c.tx_key;
    let ci = f.add(c);
    let si = f.add(s);
    f.eps[ci].peer = Some(si);
    f.eps[si].peer = Some(ci);
    f.connects.push(Connect {
        at,
        ep: ci,
        remote: addr(server, port),
        local: None,
        server: Some(si),
        after: None,
        done: false,
    });
    (ci, si)
}

/// Sets the bytes `from` sends to `to`.
fn volume(f: &mut Flows, from: usize, to: usize, bytes: u64) {
    f.eps[from].tx_total = bytes;
    f.eps[to].rx_total = bytes;
}

fn maybe_slow_reader(f: &mut Flows, r: &mut R, ep: usize, percent: u64) {
    if r.chance(percent) {
        let bytes = r.log_range(512, 65536);
        let pause = r.ms(1, 200);
        f.eps[ep].set_read_budget(bytes, pause);
    }
}

/// One way, 1 KB to 2 MB; the sender shuts down (and sees TIME_WAIT) or
/// closes at once with the data queued.
fn bulk(r: &mut R, _p: &mut Params) -> Flows {
    let mut f = Flows::default();
    f.listeners.push(Listener::new(1, 80, 16));
    let (c, s) = connection(&mut f, r, "bulk", 0, 1, 80, T0);
    let (tx, rx) = if r.chance(30) { (s, c) } else { (c, s) };
    f.eps[rx].send_after_eof = true;
    let n = if r.chance(80) {
        r.range(200_000, 2_000_000)
    } else {
        r.log_range(1, 200_000)
    };
    volume(&mut f, tx, rx, n);
    if r.chance(30) {
        f.eps[tx].after_send = AfterSend::Close;
    } else {
        f.eps[tx].expect_time_wait = true;
    }
    maybe_slow_reader(&mut f, r, rx, 25);
    f
}

/// A bulk transfer with ECN agreed over a link that only delays and marks
/// ECN-capable frames CE (2-5%): the marks must reach the receiver, come
/// back as ECE and reduce the sender's window, and never cost a
/// retransmission (`check`).
fn ecn(r: &mut R, p: &mut Params) -> Flows {
    p.cfgs[0].tcp.ecn = EcnMode::On;
    p.cfgs[1].tcp.ecn = r.pick(&[EcnMode::On, EcnMode::AcceptOnly]);
    for d in 0..2 {
        p.imps[d] = Impair {
            delay: r.ms(1, 30),
            ce_mark: r.range(20_000, 50_000) as u32,
            ..Impair::default()
        };
    }
    let mut f = Flows::default();
    f.listeners.push(Listener::new(1, 80, 16));
    let (c, s) = connection(&mut f, r, "ecn", 0, 1, 80, T0);
    let (tx, rx) = if r.chance(30) { (s, c) } else { (c, s) };
    f.eps[rx].send_after_eof = true;
    volume(&mut f, tx, rx, r.range(200_000, 1_000_000));
    f.eps[tx].expect_time_wait = true;
    f
}

/// Both ways at once; both shut down, so either may end in CLOSING.
fn bidir(r: &mut R, _p: &mut Params) -> Flows {
    let mut f = Flows::default();
    f.listeners.push(Listener::new(1, 80, 16));
    let (c, s) = connection(&mut f, r, "bidir", 0, 1, 80, T0);
    let n = r.range(50_000, 1_000_000);
    volume(&mut f, c, s, n);
    let n = r.range(50_000, 1_000_000);
    volume(&mut f, s, c, n);
    maybe_slow_reader(&mut f, r, c, 15);
    maybe_slow_reader(&mut f, r, s, 15);
    f
}

/// Request/response: many small messages echoed back one at a time.
fn echo(r: &mut R, _p: &mut Params) -> Flows {
    let mut f = Flows::default();
    f.listeners.push(Listener::new(1, 7, 16));
    let (c, s) = connection(&mut f, r, "echo", 0, 1, 7, T0);
    let messages = r.range(20, 150);
    let big = r.chance(20);
    let mut total = 0;
    for _ in 0..messages {
        total += if big {
            r.log_range(1, 40_000)
        } else {
            r.log_range(1, 3000)
        };
        f.eps[c].tx_gates.push(total);
    }
    volume(&mut f, c, s, total);
    volume(&mut f, s, c, total);
    // The echo comes back as the same stream.
    f.eps[c].rx_key = f.eps[c].tx_key;
    f.eps[s].echo = true;
    f.eps[c].expect_time_wait = true;
    f.eps[c].nodelay = r.chance(50);
    f.eps[s].nodelay = r.chance(50);
    f
}

/// Several connections at once, opened from both sides.
fn multi(r: &mut R, _p: &mut Params) -> Flows {
    let mut f = Flows::default();
    f.listeners.push(Listener::new(0, 80, 16));
    f.listeners.push(Listener::new(1, 80, 16));
    for k in 0..r.range(2, 8) {
        let client = r.range(0, 1) as usize;
        let at = T0 + r.ms(0, 500);
        let (c, s) = connection(&mut f, r, &format!("c{k}"), client, 1 - client, 80, at);
        for (from, to) in [(c, s), (s, c)] {
            let n = if r.chance(20) {
                0
            } else {
                r.log_range(1, 300_000)
            };
            volume(&mut f, from, to, n);
        }
        f.eps[c].nodelay = r.chance(30);
        maybe_slow_reader(&mut f, r, c, 10);
        maybe_slow_reader(&mut f, r, s, 10);
    }
    f
}

/// a sends and shuts down; b reads to the end (CLOSE_WAIT), then sends
/// its answer and closes; a reads it in FIN_WAIT_2 and ends in TIME_WAIT.
fn halfclose(r: &mut R, _p: &mut Params) -> Flows {
    let mut f = Flows::default();
    f.listeners.push(Listener::new(1, 80, 16));
    let (c, s) = connection(&mut f, r, "half", 0, 1, 80, T0);
    let n = r.log_range(1, 500_000);
    volume(&mut f, c, s, n);
    let n = r.log_range(1, 500_000);
    volume(&mut f, s, c, n);
    f.eps[s].send_after_eof = true;
    f.eps[c].expect_time_wait = true;
    if r.chance(50) {
        f.eps[s].after_send = AfterSend::Close;
    }
    maybe_slow_reader(&mut f, r, c, 20);
    f
}

/// A connect to a port nobody listens on is refused; sometimes beside a
/// working connection.
fn refused(r: &mut R, _p: &mut Params) -> Flows {
    let mut f = Flows::default();
    f.listeners.push(Listener::new(1, 80, 16));
    let mut e = Endpoint::new("refused", 0);
    e.expect = Expect::Refused;
    let ep = f.add(e);
    f.connects.push(Connect {
        at: T0 + r.ms(0, 100),
        ep,
        remote: addr(1, 81),
        local: None,
        server: None,
        after: None,
        done: false,
    });
    if r.chance(50) {
        let (c, s) = connection(&mut f, r, "ok", 0, 1, 80, T0);
        let n = r.log_range(1, 100_000);
        volume(&mut f, c, s, n);
        f.eps[s].send_after_eof = true;
        f.eps[c].expect_time_wait = true;
    }
    f
}

/// Both sides stream without end; one aborts mid-transfer.  The other
/// must get ECONNRESET after a correct prefix of the data.
fn abort(r: &mut R, _p: &mut Params) -> Flows {
    let mut f = Flows::default();
    f.listeners.push(Listener::new(1, 80, 16));
    let (c, s) = connection(&mut f, r, "abort", 0, 1, 80, T0);
    for (from, to) in [(c, s), (s, c)] {
        volume(&mut f, from, to, u64::MAX);
    }
    let (aborter, survivor) = if r.chance(50) { (c, s) } else { (s, c) };
    f.eps[aborter].abort_after = Some((r.ms(0, 2000), r.log_range(1, 2_000_000)));
    f.eps[aborter].abort_how =
        r.pick(&[AbortHow::Abort, AbortHow::LingerZero, AbortHow::CloseUnread]);
    f.eps[survivor].expect = Expect::Reset;
    maybe_slow_reader(&mut f, r, survivor, 20);
    maybe_slow_reader(&mut f, r, aborter, 20);
    f
}

/// Both ends connect to each other's fixed port at once, with no
/// listener: the SYNs cross (RFC 9293 3.5, figure 8).
fn simopen(r: &mut R, _p: &mut Params) -> Flows {
    let mut f = Flows::default();
    let ports = [r.range(1024, 60_000) as u16, r.range(1024, 60_000) as u16];
    let eps = [0, 1].map(|h| {
        let mut e = Endpoint::new(format!("sim.{}", if h == 0 { 'a' } else { 'b' }), h);
        e.tx_key = r.0.next_u64();
        f.add(e)
    });
    for h in 0..2 {
        let (me, other) = (eps[h], eps[1 - h]);
        f.eps[me].rx_key = f.eps[other].tx_key;
        f.eps[me].peer = Some(other);
        let n = r.log_range(1, 300_000);
        volume(&mut f, me, other, n);
        f.connects.push(Connect {
            at: T0,
            ep: me,
            remote: addr(1 - h, ports[1 - h]),
            local: Some(addr(h, ports[h])),
            server: None,
            after: None,
            done: false,
        });
    }
    f
}

/// The peer vanishes in the middle of a transfer (the link dies both ways,
/// no reset ever comes): every connection must still end, with ETIMEDOUT,
/// whether it was sending (retransmissions, or window probes if the
/// window was closed), or idle (keep-alive).
fn vanish(r: &mut R, p: &mut Params) -> Flows {
    let mut f = Flows::default();
    f.listeners.push(Listener::new(1, 80, 16));
    let (c, s) = connection(&mut f, r, "vanish", 0, 1, 80, T0);
    let (tx, rx) = if r.chance(50) { (c, s) } else { (s, c) };
    volume(&mut f, tx, rx, u64::MAX);
    // A slow reader often closes its window before the link dies.
    maybe_slow_reader(&mut f, r, rx, 50);
    for e in [tx, rx] {
        f.eps[e].keepalive = true;
        f.eps[e].tolerate.push(SocketError::TimedOut);
    }
    p.cut = Some(T0 + r.ms(100, 3000));
    // At most 10 Mbit/s, so that the seconds before the cut are not
    // thousands of segments.
    for imp in &mut p.imps {
        imp.rate = Some(imp.rate.unwrap_or(u64::MAX).min(10_000_000));
    }
    f
}

/// One connection after another from the same client port; the server
/// answers and closes first, so each new SYN finds its TIME-WAIT (RFC
/// 6191: a newer SYN may open a new incarnation).
fn reuse(r: &mut R, _p: &mut Params) -> Flows {
    let mut f = Flows::default();
    f.listeners.push(Listener::new(1, 80, 16));
    let local = addr(0, r.range(1024, 60_000) as u16);
    let mut previous = None;
    for k in 0..r.range(2, 6) {
        let at = T0 + r.ms(0, 100);
        let (c, s) = connection(&mut f, r, &format!("c{k}"), 0, 1, 80, at);
        let n = r.log_range(1, 20_000);
        volume(&mut f, c, s, n);
        let n = r.log_range(1, 100_000);
        volume(&mut f, s, c, n);
        f.eps[c].after_send = AfterSend::Wait;
        f.eps[s].send_after_rx = true;
        f.eps[s].expect_time_wait = true;
        let last = f.connects.len() - 1;
        f.connects[last].local = Some(local);
        f.connects[last].after = previous;
        previous = Some(c);
    }
    f
}

/// A small backlog and a burst of connects; a slow accepter sometimes.
fn backlog(r: &mut R, p: &mut Params) -> Flows {
    let mut f = Flows::default();
    let cookies = r.chance(50);
    p.cfgs[1].tcp.syncookies = cookies;
    let mut l = Listener::new(1, 80, r.range(1, 4) as usize);
    if r.chance(50) {
        l.accept_every = Some(r.ms(1, 50));
    }
    f.listeners.push(l);
    for k in 0..r.range(4, 24) {
        let at = T0 + r.ms(0, 20);
        let (c, s) = connection(&mut f, r, &format!("c{k}"), 0, 1, 80, at);
        let n = r.log_range(1, 2000);
        volume(&mut f, c, s, n);
        let n = r.log_range(1, 20_000);
        volume(&mut f, s, c, n);
        f.eps[s].send_after_eof = true;
        f.eps[c].expect_time_wait = true;
        if r.chance(50) {
            f.eps[s].after_send = AfterSend::Close;
        }
        if cookies {
            // A cookie stands for the first segment only: a later one
            // that arrives first is reset (as Linux does).
            f.eps[c].tolerate.push(SocketError::ConnectionReset);
            f.eps[s].tolerate.push(SocketError::ConnectionReset);
            f.eps[s].tolerate.push(SocketError::TimedOut);
            f.eps[s].keepalive = true;
        }
        // SYNs to a full accept queue (or SYN queue, without cookies) are
        // dropped; synchronized retries may lose every round.
        f.eps[c].tolerate.push(SocketError::TimedOut);
    }
    f
}

/// Checks after a run that ended: counters and timers that must agree.
pub fn check(sc: &Scenario, f: &Flows, net: &Net, p: &Params) -> Result<(), String> {
    let c = [net.stack(0).counters(), net.stack(1).counters()];
    let retrans: u64 = c
        .iter()
        .map(|c| c.tcp_retransmitted_segments + c.tcp_rto_timeouts)
        .sum();
    if sc.check_retransmissions {
        let lost: u64 = (0..2).map(|d| net.stats(d).lost_segments).sum();
        if lost > 0 && retrans == 0 {
            return Err(format!(
                "{lost} segments never arrived, yet nothing was retransmitted"
            ));
        }
        if p.clean() && retrans > sc.clean_retransmissions {
            return Err(format!(
                "a clean link, yet {retrans} retransmissions and timeouts"
            ));
        }
    }
    if sc.name == "ecn" {
        let marked: u64 = (0..2).map(|d| net.stats(d).ce_marked).sum();
        let echoed: u64 = c.iter().map(|c| c.tcp_ecn_ce_received).sum();
        let reduced: u64 = c.iter().map(|c| c.tcp_ecn_reductions).sum();
        if marked == 0 || echoed == 0 || reduced == 0 {
            return Err(format!(
                "ECN: {marked} frames marked CE, {echoed} marks taken, {reduced} reductions"
            ));
        }
        if retrans > 0 {
            return Err(format!("ECN marks cost {retrans} retransmissions"));
        }
    }
    let failed = |e: SocketError| {
        f.eps
            .iter()
            .filter(|x| x.error == Some(e) && !x.ghost)
            .count()
    };
    let resets = failed(SocketError::ConnectionReset);
    if sc.name == "backlog" && resets > 0 && c[1].tcp_syncookies_sent == 0 {
        return Err(format!(
            "{resets} connections reset, yet no SYN cookie was sent"
        ));
    }
    let timeouts = f
        .eps
        .iter()
        .filter(|e| e.error == Some(SocketError::TimedOut) && e.established_at.is_none())
        .count();
    if sc.name == "backlog" && timeouts > 0 && c[1].rx_drop_tcp_listen_overflow == 0 {
        return Err(format!(
            "{timeouts} connects timed out, yet no SYN was dropped"
        ));
    }
    for (h, c) in c.iter().enumerate() {
        if c.rx_outcomes() != c.rx_frames {
            return Err(format!(
                "host {h}: {} frames received, {} outcomes counted",
                c.rx_frames,
                c.rx_outcomes()
            ));
        }
    }
    if sc.name == "vanish" {
        if let Some(e) = f
            .eps
            .iter()
            .find(|e| e.sock.is_some() && e.error != Some(SocketError::TimedOut))
        {
            return Err(format!(
                "{}: ended with {:?}, not ETIMEDOUT",
                e.name, e.error
            ));
        }
    }
    if sc.name == "refused" && c[1].rx_drop_tcp_no_socket == 0 {
        return Err("refused, yet b counted no segment for no socket".into());
    }
    // TIME_WAIT lasts 2 * MSL after the FIN that entered it, unless a
    // reset ends it (RFC 9293 3.10.7.4; Linux without tcp_rfc1337).
    for e in &f.eps {
        let (Some(tw), None) = (e.time_wait_at, e.read_budget) else {
            continue;
        };
        if c[e.host].tcp_resets_received > 0 {
            continue;
        }
        let quiet = f.quiet_at[e.host].expect("done");
        let msl2 = p.cfgs[e.host].tcp.msl * 2;
        if quiet < tw + msl2 {
            return Err(format!(
                "{}: TIME_WAIT from {tw} ended by {quiet}, before 2*MSL ({msl2:?})",
                e.name
            ));
        }
        if p.clean() && f.eps.len() == 2 && quiet > tw + msl2 + Duration::from_secs(1) {
            return Err(format!(
                "{}: TIME_WAIT from {tw} lasted until {quiet}, 2*MSL is {msl2:?}",
                e.name
            ));
        }
    }
    Ok(())
}
