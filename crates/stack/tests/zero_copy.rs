//! Received frames lent to the stack (`lend.rs`): in-order TCP payload stays
//! in the frame it came in, the application reads it from there, and the
//! frame goes back once read; bounds fall back to copying; closing, resets
//! and the end of the stream give every frame back.
//!
//! Two stacks over an in-memory wire: `a` sends, `b` receives each frame
//! through `receive_lent` as a [`FakeFrame`] that counts the frames alive.

use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use stack::{
    IfaceId, Instant, LendLimits, LentFrame, RxFrame, RxMeta, SocketError, SocketHandle, Stack,
    VecSink,
};

const IF0: IfaceId = IfaceId(0);

/// A frame in a heap buffer of its own, as a link's buffer would be.
struct FakeFrame {
    bytes: Vec<u8>,
    live: Arc<AtomicUsize>,
}

impl Drop for FakeFrame {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::Relaxed);
    }
}

impl RxFrame for FakeFrame {
    fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

mod common;
use common::addr;

/// Host `last` of the test subnet, seeded by `last`.
fn stack(last: u8) -> Stack {
    common::seeded_stack_on_subnet(last, u64::from(last))
}

struct Pair {
    a: Stack,
    b: Stack,
    sa: VecSink,
    sb: VecSink,
    now: Instant,
    /// FakeFrames alive (lent, or not yet dropped).
    live: Arc<AtomicUsize>,
    /// The address ranges of the frames `b` kept.
    kept: Vec<(usize, usize)>,
    /// `a`'s client socket and `b`'s accepted one.
    ca: SocketHandle,
    cb: SocketHandle,
}

const LIMITS: LendLimits = LendLimits {
    frames: 64,
    frames_per_conn: 16,
    min_payload: 64,
};

impl Pair {
    /// A connection from `a` to `b`, `b` lending frames under `limits`.
    fn new(limits: LendLimits) -> Pair {
        let mut b = stack(2);
        assert!(b.set_rx_lending(IF0, limits));
        assert!(!b.set_rx_lending(IfaceId(3), limits), "no such interface");
        let l = b.tcp_listen(addr(2, 80), 8).unwrap();
        let now = Instant::from_secs(1);
        let mut a = stack(1);
        let mut sa = VecSink::default();
        let ca = a.tcp_connect(now, addr(2, 80), None, &mut sa).unwrap();
        a.tcp_set_nodelay(now, ca, true, &mut sa).unwrap();
        let mut p = Pair {
            a,
            b,
            sa,
            sb: VecSink::default(),
            now,
            live: Arc::new(AtomicUsize::new(0)),
            kept: Vec::new(),
            ca,
            // Set once accepted.
            cb: ca,
        };
        p.run();
        p.cb = p.b.tcp_accept(l).unwrap().0;
        p
    }

    /// Hands one frame to `b` as a lent frame.
    fn deliver_to_b(&mut self, frame: Vec<u8>) {
        self.live.fetch_add(1, Ordering::Relaxed);
        let f = FakeFrame {
            bytes: frame,
            live: self.live.clone(),
        };
        let kept = &mut self.kept;
        let back = self.b.receive_lent(
            self.now,
            IF0,
            f,
            RxMeta::default(),
            &mut self.sb,
            |f| &f.bytes,
            |f| {
                kept.push((f.bytes.as_ptr() as usize, f.bytes.len()));
                Box::new(f)
            },
        );
        drop(back);
    }

    /// `a`'s frames that wait, taken off the wire.
    fn take_from_a(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.sa.frames)
            .into_iter()
            .map(|(_, f)| f)
            .collect()
    }

    /// Moves frames both ways until both stacks are quiet.
    fn run(&mut self) {
        for _ in 0..1000 {
            if self.sa.frames.is_empty() && self.sb.frames.is_empty() {
                return;
            }
            for f in self.take_from_a() {
                self.deliver_to_b(f);
            }
            for (_, f) in std::mem::take(&mut self.sb.frames) {
                self.a
                    .receive(self.now, IF0, &f, RxMeta::default(), &mut self.sa);
            }
        }
        panic!("the stacks never went quiet");
    }

    fn send(&mut self, data: &[u8]) {
        assert_eq!(
            self.a.tcp_send(self.now, self.ca, data, &mut self.sa),
            Ok(data.len())
        );
    }

    /// The frames `b` released, unwrapped.
    fn released(&mut self) -> Vec<FakeFrame> {
        let mut out: Vec<LentFrame> = Vec::new();
        self.b.take_released_frames(&mut out);
        out.into_iter()
            .map(|f| {
                let any: Box<dyn Any> = f;
                *any.downcast::<FakeFrame>().expect("the frames given")
            })
            .collect()
    }

    fn read_all(&mut self) -> Vec<u8> {
        let mut got = Vec::new();
        let mut buf = [0u8; 777];
        while let Ok(n) = self.b.tcp_recv(self.now, self.cb, &mut buf, &mut self.sb) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        got
    }

    fn live(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }
}

fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8 ^ salt).collect()
}

#[test]
fn payload_is_read_from_the_frame_it_came_in() {
    let mut p = Pair::new(LIMITS);
    let data = pattern(4000, 1);
    p.send(&data);
    p.run();
    let c = p.b.counters().clone();
    assert_eq!(c.tcp_rx_zero_copy_segments, 3, "1448 + 1448 + 1104 bytes");
    assert_eq!(c.tcp_rx_copied_segments, 0);
    assert_eq!(c.tcp_rx_frames_held, 3);
    assert_eq!(p.b.rx_frames_held(), 3);
    assert_eq!(p.kept.len(), 3);
    assert_eq!(p.live(), 3, "every other frame went back at once");
    assert_eq!(p.b.tcp_recv_queued(p.cb), Ok(4000));

    // Borrowed in place: the bytes are those of the frames kept.
    let mut got = Vec::new();
    let mut runs = 0;
    loop {
        let kept = &p.kept;
        let r = p.b.tcp_recv_zero_copy(
            p.now,
            p.cb,
            |bytes| {
                let at = bytes.as_ptr() as usize;
                let inside = kept
                    .iter()
                    .any(|&(s, len)| at >= s && at + bytes.len() <= s + len);
                assert!(inside, "the run at {at:#x} is in no frame kept");
                got.extend_from_slice(bytes);
                bytes.len()
            },
            &mut p.sb,
        );
        match r {
            Ok(0) => panic!("end of stream too early"),
            Ok(_) => runs += 1,
            Err(SocketError::WouldBlock) => break,
            Err(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(runs, 3, "one run per frame");
    assert_eq!(got, data);
    let back = p.released();
    assert_eq!(back.len(), 3, "every frame read went back");
    assert_eq!(p.b.rx_frames_held(), 0);
    assert_eq!(p.b.counters().tcp_rx_frames_held, 0);
    drop(back);
    assert_eq!(p.live(), 0, "no frame leaked");
}

#[test]
fn a_frame_goes_back_only_when_all_its_payload_is_read() {
    let mut p = Pair::new(LIMITS);
    let data = pattern(2000, 2);
    p.send(&data);
    p.run();
    assert_eq!(p.b.rx_frames_held(), 2);
    let mut buf = [0u8; 1000];
    assert_eq!(p.b.tcp_recv(p.now, p.cb, &mut buf, &mut p.sb), Ok(1000));
    assert_eq!(&buf[..], &data[..1000]);
    assert!(
        p.released().is_empty(),
        "448 bytes of the first frame unread"
    );
    // MSG_PEEK sees across the frames.
    let mut peek = [0u8; 1000];
    assert_eq!(p.b.tcp_peek(p.cb, &mut peek), Ok(1000));
    assert_eq!(&peek[..], &data[1000..]);
    assert_eq!(
        p.b.tcp_recv(p.now, p.cb, &mut buf[..500], &mut p.sb),
        Ok(500)
    );
    assert_eq!(&buf[..500], &data[1000..1500]);
    assert_eq!(p.released().len(), 1, "the first frame is read");
    assert_eq!(p.read_all(), &data[1500..]);
    assert_eq!(p.released().len(), 1);
    assert_eq!(p.live(), 0);
}

#[test]
fn bounds_fall_back_to_copying_in_stream_order() {
    // Two frames per connection: the third segment is copied; once a
    // frame is read, the next one may be held again.
    let mut p = Pair::new(LendLimits {
        frames_per_conn: 2,
        ..LIMITS
    });
    let first = pattern(3 * 1448, 3);
    p.send(&first);
    p.run();
    let c = p.b.counters().clone();
    assert_eq!(c.tcp_rx_zero_copy_segments, 2);
    assert_eq!(c.tcp_rx_copied_segments, 1);
    assert_eq!(c.tcp_rx_hold_limited, 1);
    let mut buf = vec![0u8; 1448];
    assert_eq!(p.b.tcp_recv(p.now, p.cb, &mut buf, &mut p.sb), Ok(1448));
    assert_eq!(buf, first[..1448]);
    assert_eq!(p.released().len(), 1);
    let second = pattern(1448, 4);
    p.send(&second);
    p.run();
    assert_eq!(p.b.counters().tcp_rx_zero_copy_segments, 3);
    assert_eq!(p.b.rx_frames_held(), 2);
    let mut all = first[1448..].to_vec();
    all.extend_from_slice(&second);
    assert_eq!(p.read_all(), all, "held, copied, held: read in order");
    assert_eq!(p.released().len(), 2);
    assert_eq!(p.live(), 0);

    // The interface's bound: one frame for every connection together.
    let mut p = Pair::new(LendLimits {
        frames: 1,
        ..LIMITS
    });
    let data = pattern(3000, 5);
    p.send(&data);
    p.run();
    let c = p.b.counters().clone();
    assert_eq!(
        (c.tcp_rx_zero_copy_segments, c.tcp_rx_copied_segments),
        (1, 2)
    );
    assert_eq!(c.tcp_rx_hold_limited, 2);
    assert_eq!(p.read_all(), data);
    assert_eq!(p.released().len(), 1);
    assert_eq!(p.live(), 0);
}

#[test]
fn short_payloads_and_stacks_without_lending_copy() {
    let mut p = Pair::new(LIMITS);
    p.send(b"short");
    p.run();
    let c = p.b.counters().clone();
    assert_eq!(
        (c.tcp_rx_zero_copy_segments, c.tcp_rx_copied_segments),
        (0, 1)
    );
    assert_eq!(c.tcp_rx_hold_limited, 0, "short is not a bound");
    assert_eq!(p.read_all(), b"short");

    let mut p = Pair::new(LendLimits::default());
    p.send(&pattern(3000, 6));
    p.run();
    assert_eq!(p.b.counters().tcp_rx_zero_copy_segments, 0);
    assert_eq!(p.b.counters().tcp_rx_copied_segments, 3);
    assert_eq!(p.live(), 0, "nothing kept");
}

#[test]
fn out_of_order_data_is_copied_and_the_hole_filler_too() {
    let mut p = Pair::new(LIMITS);
    let data = pattern(3 * 1448, 7);
    p.send(&data);
    let frames = p.take_from_a();
    assert_eq!(frames.len(), 3);
    let mut it = frames.into_iter();
    let (f1, f2, f3) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
    p.deliver_to_b(f2);
    p.deliver_to_b(f3);
    p.deliver_to_b(f1);
    p.run();
    let c = p.b.counters().clone();
    assert_eq!(c.tcp_rx_out_of_order, 2);
    assert_eq!(c.tcp_rx_zero_copy_segments, 0);
    assert_eq!(c.tcp_rx_copied_segments, 3);
    let more = pattern(1448, 8);
    p.send(&more);
    p.run();
    assert_eq!(
        p.b.counters().tcp_rx_zero_copy_segments,
        1,
        "in order again"
    );
    let mut all = data.clone();
    all.extend_from_slice(&more);
    assert_eq!(p.read_all(), all);
    assert_eq!(p.released().len(), 1);
    assert_eq!(p.live(), 0);
}

#[test]
fn the_end_of_the_stream_a_reset_and_close_give_the_frames_back() {
    // FIN after the data: read to the end, every frame back.
    let mut p = Pair::new(LIMITS);
    let data = pattern(2500, 9);
    p.send(&data);
    p.a.tcp_close(p.now, p.ca, &mut p.sa).unwrap();
    p.run();
    assert_eq!(p.b.rx_frames_held(), 2);
    assert_eq!(p.read_all(), data);
    let mut buf = [0u8; 8];
    assert_eq!(p.b.tcp_recv(p.now, p.cb, &mut buf, &mut p.sb), Ok(0));
    assert_eq!(
        p.b.tcp_recv_zero_copy(p.now, p.cb, |b| b.len(), &mut p.sb),
        Ok(0),
        "end of stream"
    );
    assert_eq!(p.released().len(), 2);
    assert_eq!(p.live(), 0);

    // Closing with unread data resets the connection and frees it.
    let mut p = Pair::new(LIMITS);
    p.send(&pattern(2500, 10));
    p.run();
    assert_eq!(p.b.rx_frames_held(), 2);
    p.b.tcp_close(p.now, p.cb, &mut p.sb).unwrap();
    assert_eq!(p.released().len(), 2);
    assert_eq!(p.b.rx_frames_held(), 0);
    assert_eq!(p.live(), 0);

    // A reset: the data stays readable, then the error; close frees.
    let mut p = Pair::new(LIMITS);
    let data = pattern(2500, 11);
    p.send(&data);
    p.run();
    p.a.tcp_abort(p.now, p.ca, &mut p.sa).unwrap();
    p.run();
    assert_eq!(p.b.counters().tcp_resets_received, 1);
    assert_eq!(p.b.rx_frames_held(), 2);
    let mut buf = vec![0u8; 4000];
    assert_eq!(p.b.tcp_recv(p.now, p.cb, &mut buf, &mut p.sb), Ok(2500));
    assert_eq!(buf[..2500], data[..]);
    assert_eq!(
        p.b.tcp_recv(p.now, p.cb, &mut buf, &mut p.sb),
        Err(SocketError::ConnectionReset)
    );
    assert_eq!(p.released().len(), 2);
    p.b.tcp_close(p.now, p.cb, &mut p.sb).unwrap();

    let mut p = Pair::new(LIMITS);
    p.send(&pattern(2500, 12));
    p.run();
    p.a.tcp_abort(p.now, p.ca, &mut p.sa).unwrap();
    p.run();
    p.b.tcp_close(p.now, p.cb, &mut p.sb).unwrap();
    assert_eq!(
        p.released().len(),
        2,
        "unread after a reset, freed by close"
    );
    assert_eq!(p.live(), 0);
}

#[test]
fn release_all_frames_hands_everything_back() {
    let mut p = Pair::new(LIMITS);
    p.send(&pattern(5000, 13));
    p.run();
    assert_eq!(p.b.rx_frames_held(), 4);
    p.b.release_all_frames();
    assert_eq!(p.b.rx_frames_held(), 0);
    assert_eq!(p.released().len(), 4);
    assert_eq!(p.live(), 0);
}
