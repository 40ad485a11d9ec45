//! An offered segment waits for the group's other members to answer: a
//! member busy in its program for longer than any fixed wait does not get
//! its connection reset behind its back; once every member has declined,
//! the segment is answered at once (a reset for a SYN nobody listens
//! for).  A client engine and the offering engine over an in-memory link;
//! the other member is a bare handoff channel this test answers for.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use link::handoff::Message;
use link::{FlowHandoff, MemoryLink};
use runtime::{AppContext, Application, Engine, EngineConfig};
use stack::{SocketHandle, TcpState};

mod common;
use common::{engines, pair};

/// Opens one connection to the server's port 80 on its first turn.
struct Connect(Option<SocketHandle>);

impl Application for Connect {
    fn poll(&mut self, ctx: &mut AppContext<'_>) -> bool {
        if self.0.is_none() {
            let to: SocketAddr = "10.99.2.2:80".parse().unwrap();
            self.0 = Some(ctx.stack.tcp_connect(ctx.now, to, None, ctx.sink).unwrap());
            return true;
        }
        false
    }
}

struct Nothing;

impl Application for Nothing {
    fn poll(&mut self, _: &mut AppContext<'_>) -> bool {
        false
    }
}

/// Every offer waiting on `member`'s channel, declined.
fn decline_all(member: &mut FlowHandoff) -> usize {
    let mut senders = Vec::new();
    while let Some(d) = member.receive().unwrap() {
        for m in d {
            if let Ok(Message::Offer { from, .. }) = m {
                senders.push(from);
            }
        }
    }
    for from in &senders {
        member.decline(from);
    }
    member.flush();
    senders.len()
}

#[test]
fn an_offer_waits_for_a_busy_member_and_is_answered_once_all_decline() {
    let group = 30_000 + (std::process::id() % 5000) as u16;
    let (lc, ls) = pair();
    let cfg = EngineConfig {
        pkt_tx_delay: Duration::ZERO,
        ..EngineConfig::default()
    };
    let (mut client, mut server) = engines(lc, ls, cfg);
    // The server's engine shares its port with one other member, which
    // is busy: it reads nothing until the test says.
    server.set_flow_handoff(FlowHandoff::open(group, 0).unwrap());
    let mut busy = FlowHandoff::open(group, 1).unwrap();
    client.announce();
    server.announce();
    let mut conn = Connect(None);
    let turn =
        |client: &mut Engine<MemoryLink>, server: &mut Engine<MemoryLink>, conn: &mut Connect| {
            client.turn(conn);
            server.turn(&mut Nothing);
            std::thread::sleep(Duration::from_millis(1));
        };

    // Longer than the 250 ms a fixed wait allowed, well under the SYN's
    // retransmission: the SYN the server has no listener for waits on
    // the busy member's answer, unanswered.
    let end = Instant::now() + Duration::from_millis(400);
    while Instant::now() < end {
        turn(&mut client, &mut server, &mut conn);
    }
    let d = server.dispatcher().unwrap().counters().clone();
    assert_eq!(d.handoff_offered, 1, "the SYN was offered to the group");
    assert_eq!(
        d.handoff_expired, 0,
        "answered without the busy member's word"
    );
    assert_eq!(server.stack.counters().tcp_resets_sent, 0);
    let h = conn.0.unwrap();
    assert_eq!(client.stack.tcp_state(h).unwrap(), TcpState::SynSent);

    // The member declines: nobody has the flow, and the server answers
    // at once with a reset.
    assert_eq!(decline_all(&mut busy), 1);
    let end = Instant::now() + Duration::from_secs(1);
    while server.stack.counters().tcp_resets_sent == 0 && Instant::now() < end {
        turn(&mut client, &mut server, &mut conn);
    }
    for _ in 0..5 {
        turn(&mut client, &mut server, &mut conn);
    }
    let d = server.dispatcher().unwrap().counters().clone();
    assert_eq!(
        (d.handoff_declined, d.handoff_expired, d.handoff_unanswered),
        (1, 1, 0)
    );
    assert_eq!(server.stack.counters().tcp_resets_sent, 1);
    assert!(
        client.stack.tcp_state(h).is_err()
            || client.stack.tcp_state(h).unwrap() == TcpState::Closed,
        "the client's connect was refused"
    );
}
