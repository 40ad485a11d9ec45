//! A frame sink that lends buffers shorter than the frames it was asked
//! for (a broken sink) makes the stack leave those frames unwritten and
//! count them (`tx_sink_short_buffer`), on every way out (ARP, ICMP, UDP,
//! TCP's direct path and its general one), never index past the buffer.

use stack::{Duration, FrameSink, IfaceId, Instant, RxMeta, Stack, TxMeta, VecSink};

mod common;
use common::addr;

const IF0: IfaceId = IfaceId(0);

/// Host `last` of the test subnet, seeded by `last`.
fn stack(last: u8) -> Stack {
    common::seeded_stack_on_subnet(last, u64::from(last))
}

/// Lends one byte less than asked, both ways a sink can lend.
#[derive(Default)]
struct ShortSink {
    frames: Vec<Vec<u8>>,
}

impl FrameSink for ShortSink {
    fn transmit(&mut self, _: IfaceId, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        let mut buf = vec![0u8; len.saturating_sub(1)];
        fill(&mut buf);
        self.frames.push(buf);
        true
    }

    fn frame(&mut self, _: IfaceId, len: usize, _: TxMeta) -> Option<&mut [u8]> {
        self.frames.push(vec![0u8; len.saturating_sub(1)]);
        self.frames.last_mut().map(|b| &mut b[..])
    }

    fn lends_frames(&self) -> bool {
        true
    }
}

/// Moves frames between two stacks until both are quiet.
fn run(now: Instant, a: &mut Stack, b: &mut Stack, sa: &mut VecSink, sb: &mut VecSink) {
    for _ in 0..100 {
        if sa.frames.is_empty() && sb.frames.is_empty() {
            return;
        }
        for (_, f) in std::mem::take(&mut sa.frames) {
            b.receive(now, IF0, &f, RxMeta::default(), sb);
        }
        for (_, f) in std::mem::take(&mut sb.frames) {
            a.receive(now, IF0, &f, RxMeta::default(), sa);
        }
    }
}

fn csum(bytes: &[u8]) -> u16 {
    !wire::checksum::data(bytes)
}

/// An ARP request from 10.99.1.2 for 10.99.1.1.
fn arp_request() -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[2, 0, 0, 0, 0, 2, 0x08, 0x06]);
    f.extend_from_slice(&[0, 1, 0x08, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&[2, 0, 0, 0, 0, 2, 10, 99, 1, 2]);
    f.extend_from_slice(&[0, 0, 0, 0, 0, 0, 10, 99, 1, 1]);
    f
}

/// An echo request from 10.99.1.2 to 10.99.1.1.
fn echo_request() -> Vec<u8> {
    let mut icmp = vec![8, 0, 0, 0, 0x12, 0x34, 0, 1, b'p', b'i', b'n', b'g'];
    let c = csum(&icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let total = (20 + icmp.len()) as u16;
    let mut ip = vec![
        0x45, 0, 0, 0, 0, 1, 0, 0, 64, 1, 0, 0, 10, 99, 1, 2, 10, 99, 1, 1,
    ];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    let c = csum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(&ip);
    f.extend_from_slice(&icmp);
    f
}

#[test]
fn a_sink_lending_short_buffers_gets_frames_left_unwritten_and_counted() {
    let (mut a, mut b) = (stack(1), stack(2));
    let (mut sa, mut sb) = (VecSink::default(), VecSink::default());
    let mut now = Instant::from_secs(1);
    // A connection and a UDP pair over a good sink first.
    let l = b.tcp_listen(addr(2, 80), 4).unwrap();
    let c = a.tcp_connect(now, addr(2, 80), None, &mut sa).unwrap();
    run(now, &mut a, &mut b, &mut sa, &mut sb);
    let (s, _) = b.tcp_accept(l).unwrap();
    let u = a.udp_bind(addr(1, 5000)).unwrap();

    let mut short = ShortSink::default();
    // TCP data (the direct path), UDP (IPv4 output), an ARP reply and an
    // echo reply (Ethernet's frame helper), a timer's retransmission.
    assert_eq!(a.tcp_send(now, c, b"data", &mut short), Ok(4));
    a.udp_send_to(now, u, addr(2, 7), None, b"udp", &mut short)
        .unwrap();
    a.receive(now, IF0, &arp_request(), RxMeta::default(), &mut short);
    a.receive(now, IF0, &echo_request(), RxMeta::default(), &mut short);
    for _ in 0..5000 {
        now += Duration::from_millis(1);
        a.poll(now, &mut short);
    }
    assert!(short.frames.len() >= 5, "{} frames", short.frames.len());
    assert_eq!(a.counters().tx_sink_short_buffer, short.frames.len() as u64);
    // Left unwritten: all zeros.
    assert!(short.frames.iter().all(|f| f.iter().all(|&x| x == 0)));

    // Over a good sink again, the connection carries the data.
    for _ in 0..3000 {
        now += Duration::from_millis(1);
        a.poll(now, &mut sa);
        b.poll(now, &mut sb);
        run(now, &mut a, &mut b, &mut sa, &mut sb);
    }
    let mut buf = [0u8; 16];
    assert_eq!(b.tcp_recv(now, s, &mut buf, &mut sb), Ok(4));
    assert_eq!(&buf[..4], b"data");
}
