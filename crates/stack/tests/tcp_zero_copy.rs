//! Zero-copy send (tcp_send_reserve / tcp_send_commit) between two stacks
//! over a perfect in-memory wire.

use stack::{Shutdown, SocketError, SocketHandle};

mod common;
use common::{addr, Net};

impl Net {
    /// Reads everything b has for `s`.
    fn drain_b(&mut self, s: SocketHandle, into: &mut Vec<u8>) {
        let mut buf = vec![0u8; 65536];
        loop {
            match self.b.tcp_recv(self.now, s, &mut buf, &mut self.sb) {
                Ok(0) => panic!("early EOF"),
                Ok(k) => into.extend_from_slice(&buf[..k]),
                Err(SocketError::WouldBlock) => return,
                Err(e) => panic!("recv: {e}"),
            }
        }
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len as u32).map(|i| (i * 13 + i / 251) as u8).collect()
}

/// Sends `data` through reserve/commit, asking for `want(i)` bytes at the
/// i-th reservation and committing all but `short(i)` of what was lent.
/// Returns how many reservations were shorter than both the ask and the
/// free room (the free room wrapped).
fn send_zero_copy(
    n: &mut Net,
    c: SocketHandle,
    s: SocketHandle,
    data: &[u8],
    want: impl Fn(usize) -> usize,
    short: impl Fn(usize) -> usize,
) -> usize {
    let mut sent = 0;
    let mut got = Vec::new();
    let mut wrapped = 0;
    let mut i = 0;
    for _ in 0..50_000 {
        while sent < data.len() {
            let ask = want(i).min(data.len() - sent);
            let space = n.a.tcp_send_space(c).unwrap();
            let region = match n.a.tcp_send_reserve(c, ask) {
                Ok(r) => r,
                Err(SocketError::WouldBlock) => {
                    assert_eq!(space, 0, "WouldBlock only when the buffer is full");
                    break;
                }
                Err(e) => panic!("reserve: {e}"),
            };
            assert!(!region.is_empty() && region.len() <= ask.min(space));
            if region.len() < ask.min(space) {
                wrapped += 1;
            }
            let k = region.len().saturating_sub(short(i)).max(1);
            region[..k].copy_from_slice(&data[sent..sent + k]);
            assert_eq!(n.a.tcp_send_commit(n.now, c, k, &mut n.sa), Ok(k));
            sent += k;
            i += 1;
        }
        n.run(1);
        n.drain_b(s, &mut got);
        if got.len() == data.len() {
            break;
        }
    }
    assert_eq!(got.len(), data.len());
    assert!(got == data, "bytes intact");
    wrapped
}

#[test]
fn reserved_and_committed_data_arrives_intact() {
    let mut n = Net::new();
    let (c, s) = n.connect(80);
    let data = pattern(2_000_000);
    send_zero_copy(&mut n, c, s, &data, |i| 1000 + (i * 7919) % 60_000, |_| 0);
    assert_eq!(n.a.counters().tcp_retransmitted_segments, 0);
}

#[test]
fn reserve_after_the_free_room_wraps() {
    let mut n = Net::new();
    let (c, s) = n.connect(80);
    // A small buffer, so the queued bytes sit anywhere in the ring and the
    // free room often runs past its end.
    n.a.tcp_set_send_buffer(c, 3000).unwrap();
    let data = pattern(300_000);
    let wrapped = send_zero_copy(&mut n, c, s, &data, |i| 700 + (i * 331) % 2500, |i| i % 5);
    assert!(wrapped > 0, "some reservations stopped at the wrap");
}

#[test]
fn commit_of_more_than_reserved_is_refused() {
    let mut n = Net::new();
    let (c, s) = n.connect(80);
    let region = n.a.tcp_send_reserve(c, 100).unwrap();
    assert_eq!(region.len(), 100);
    region.copy_from_slice(&[0xab; 100]);
    assert_eq!(
        n.a.tcp_send_commit(n.now, c, 101, &mut n.sa),
        Err(SocketError::InvalidArgument)
    );
    assert_eq!(
        n.a.tcp_send_queued(c).unwrap(),
        0,
        "nothing joined the stream"
    );
    assert_eq!(n.a.tcp_send_commit(n.now, c, 100, &mut n.sa), Ok(100));
    assert_eq!(
        n.a.tcp_send_commit(n.now, c, 1, &mut n.sa),
        Err(SocketError::InvalidArgument),
        "a commit ends the reservation"
    );
    // A copying send between reserve and commit ends the reservation too.
    n.a.tcp_send_reserve(c, 50).unwrap();
    assert_eq!(n.a.tcp_send(n.now, c, b"xyz", &mut n.sa), Ok(3));
    assert_eq!(
        n.a.tcp_send_commit(n.now, c, 1, &mut n.sa),
        Err(SocketError::InvalidArgument)
    );
    // Long enough for the delayed ACK that lets Nagle send the 3 bytes.
    n.run(500);
    let mut got = Vec::new();
    n.drain_b(s, &mut got);
    let mut want = vec![0xab; 100];
    want.extend_from_slice(b"xyz");
    assert_eq!(got, want);
}

#[test]
fn full_buffer_would_block_as_send_does() {
    let mut n = Net::new();
    let (c, _s) = n.connect(80);
    n.a.tcp_set_send_buffer(c, 2000).unwrap();
    let mut queued = 0;
    while queued < 2000 {
        let r = n.a.tcp_send_reserve(c, 2000 - queued).unwrap();
        let k = r.len();
        assert_eq!(n.a.tcp_send_commit(n.now, c, k, &mut n.sa), Ok(k));
        queued += k;
    }
    assert_eq!(
        n.a.tcp_send_reserve(c, 1).map(|r| r.len()),
        Err(SocketError::WouldBlock)
    );
    assert_eq!(
        n.a.tcp_send(n.now, c, b"x", &mut n.sa),
        Err(SocketError::WouldBlock)
    );
    assert_eq!(n.a.tcp_send_reserve(c, 0).map(|r| r.len()), Ok(0));
}

/// What tcp_send says on a connection set up by `setup`, and what the
/// zero-copy calls say on another one set up the same way.
fn errors_after(setup: impl Fn(&mut Net, SocketHandle, SocketHandle)) -> [SocketError; 3] {
    let mut n = Net::new();
    let (c, s) = n.connect(80);
    setup(&mut n, c, s);
    let send = n.a.tcp_send(n.now, c, b"x", &mut n.sa).unwrap_err();

    let mut n = Net::new();
    let (c, s) = n.connect(80);
    setup(&mut n, c, s);
    let reserve = n.a.tcp_send_reserve(c, 1).map(|r| r.len()).unwrap_err();

    // Reserved before, committed after.
    let mut n = Net::new();
    let (c, s) = n.connect(80);
    n.a.tcp_send_reserve(c, 1).unwrap()[0] = b'x';
    setup(&mut n, c, s);
    let commit = n.a.tcp_send_commit(n.now, c, 1, &mut n.sa).unwrap_err();
    [send, reserve, commit]
}

#[test]
fn errors_match_tcp_send() {
    let after_shutdown = errors_after(|n, c, _| {
        n.a.tcp_shutdown(n.now, c, Shutdown::Write, &mut n.sa)
            .unwrap();
    });
    assert_eq!(after_shutdown, [SocketError::BrokenPipe; 3]);

    let after_reset = errors_after(|n, _, s| {
        n.b.tcp_abort(n.now, s, &mut n.sb).unwrap();
        n.run(2);
    });
    assert_eq!(after_reset, [SocketError::ConnectionReset; 3]);

    let after_close = errors_after(|n, c, _| {
        n.a.tcp_close(n.now, c, &mut n.sa).unwrap();
    });
    // A closed connection lingers (detached) to finish sending: its
    // handle no longer takes calls.
    assert_eq!(after_close, [SocketError::NotSupported; 3]);

    let mut n = Net::new();
    let l = n.b.tcp_listen(addr(2, 81), 4).unwrap();
    assert_eq!(
        n.b.tcp_send(n.now, l, b"x", &mut n.sb),
        Err(SocketError::NotSupported)
    );
    assert_eq!(
        n.b.tcp_send_reserve(l, 1).map(|r| r.len()),
        Err(SocketError::NotSupported)
    );
    assert_eq!(
        n.b.tcp_send_commit(n.now, l, 1, &mut n.sb),
        Err(SocketError::NotSupported)
    );
}
