//! Tests of the shared-memory link: a pair in one process, corruption of
//! the file by a "peer" (the test writing into it), and two processes (the
//! test binary runs itself again as side B).

use std::mem::offset_of;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::layout::{Geometry, Header, Layout, DESC_SIZE};
use super::*;

/// Names the child process looks for.
const CHILD_ENV: &str = "USTACK_SHM_TEST_CHILD";
const CHILD_PATH_ENV: &str = "USTACK_SHM_TEST_PATH";
const CHILD_TEST: &str = "shm::tests::child_process_entry";

/// A fresh path under /dev/shm, removed when dropped.
struct TmpPath(PathBuf);

impl TmpPath {
    fn new(tag: &str) -> TmpPath {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        TmpPath(PathBuf::from(format!(
            "/dev/shm/ustack-shm-test-{}-{tag}-{n}",
            std::process::id()
        )))
    }
}

impl Drop for TmpPath {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

fn pair(path: &Path, cfg: &ShmConfig) -> (ShmLink, ShmLink) {
    let a = ShmLink::create(path, cfg).unwrap();
    assert!(!a.peer_attached());
    let b = ShmLink::open(path).unwrap();
    assert!(a.peer_attached());
    (a, b)
}

fn layout_of(cfg: &ShmConfig) -> (Geometry, Layout) {
    let g = Geometry::new(map::page_size(), cfg.mtu, cfg.slots).unwrap();
    let l = Layout::new(&g).unwrap();
    (g, l)
}

/// A frame to send holding `bytes`, built in a spare slot (`alloc_tx`).
fn frame(link: &mut ShmLink, bytes: &[u8]) -> ShmFrame {
    let mut b = link.alloc_tx().expect("a free spare");
    b.set_len(bytes.len());
    b.data_mut().copy_from_slice(bytes);
    b
}

/// Sends `frames` as the engine does: each built in place in its ring
/// position's slot (`tx_place`), then one flush.
fn send(link: &mut ShmLink, frames: &[Vec<u8>]) -> usize {
    for f in frames {
        match link.tx_place(f.len(), false) {
            TxPlaced::InPlace(buf) => buf.copy_from_slice(f),
            _ => panic!("a free position for a {}-byte frame", f.len()),
        }
    }
    link.tx_flush().unwrap();
    frames.len()
}

/// Sends `frames` the other way: each built in a spare (`alloc_tx`), all
/// given to `tx_burst`, which copies them into the ring.
fn send_copied(link: &mut ShmLink, frames: &[Vec<u8>]) -> usize {
    let mut sent = 0;
    for f in frames {
        let mut v = vec![frame(link, f)];
        sent += link.tx_burst(&mut v).unwrap();
        assert!(v.is_empty(), "tx_burst takes every frame");
    }
    sent
}

fn recv_all(link: &mut ShmLink) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut got = Vec::new();
    while link.rx_burst(&mut out, MAX_BURST).unwrap() > 0 {
        for b in out.drain(..) {
            got.push(b.data().to_vec());
            link.recycle(b);
        }
    }
    got
}

/// A test frame: `seq` in the first 8 bytes, then a pattern.
fn test_frame(seq: u64, len: usize) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len)
        .map(|i| (seq as u8).wrapping_add((i as u8).wrapping_mul(7)))
        .collect();
    f[..8].copy_from_slice(&seq.to_le_bytes());
    f
}

#[test]
fn pair_passes_frames_both_ways_in_order() {
    let path = TmpPath::new("pair");
    let cfg = ShmConfig::new(1500, 8);
    let (mut a, mut b) = pair(&path.0, &cfg);
    assert_eq!(a.side(), ShmSide::A);
    assert_eq!(b.side(), ShmSide::B);
    assert_eq!(a.info().mac, cfg.mac_a);
    assert_eq!(b.info().mac, cfg.mac_b);
    assert_eq!(b.config(), &cfg);
    assert_eq!(a.info().mtu, 1500);
    let x = a.alloc_tx().unwrap();
    assert_eq!(x.capacity(), 1518);
    a.recycle(x);
    assert!(a.rx_fd().is_none());
    assert_eq!(a.lend_budget(), 0);

    let mut next_ab = 0u64;
    let mut next_ba = 0u64;
    let mut want_ab = 0u64;
    let mut want_ba = 0u64;
    let mut bytes = 0u64;
    // Bursts of 1..=6 frames (8 slots, 2 kept in reserve), 2000 rounds:
    // the 8-slot rings wrap over a thousand times.
    for round in 0..2000u64 {
        let k = (round % 6 + 1) as usize;
        let fa: Vec<Vec<u8>> = (0..k)
            .map(|i| test_frame(next_ab + i as u64, 14 + ((round as usize * 37 + i) % 1505)))
            .collect();
        bytes += fa.iter().map(|f| f.len() as u64).sum::<u64>();
        assert_eq!(send(&mut a, &fa), k);
        next_ab += k as u64;
        let kb = 6 - k + 1;
        let fb: Vec<Vec<u8>> = (0..kb)
            .map(|i| test_frame(next_ba + i as u64, 60 + i))
            .collect();
        // B sends in place and through spares, by turns.
        if round % 2 == 0 {
            assert_eq!(send(&mut b, &fb), kb);
        } else {
            assert_eq!(send_copied(&mut b, &fb), kb);
        }
        next_ba += kb as u64;
        let got = recv_all(&mut b);
        assert_eq!(got, fa);
        want_ab += got.len() as u64;
        let got = recv_all(&mut a);
        assert_eq!(got, fb);
        want_ba += got.len() as u64;
    }
    assert_eq!(want_ab, next_ab);
    assert_eq!(want_ba, next_ba);
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!(sa.tx_frames, next_ab);
    assert_eq!(sb.rx_frames, next_ab);
    assert_eq!(sa.tx_bytes, bytes);
    assert_eq!(sb.rx_bytes, bytes);
    assert_eq!(sb.tx_frames, next_ba);
    assert_eq!(sa.rx_frames, next_ba);
    assert_eq!(
        sa.tx_dropped + sa.rx_dropped + sb.tx_dropped + sb.rx_dropped,
        0
    );
    assert_eq!(a.shm_stats(), ShmStats::default());
    let copied: usize = (0..2000).filter(|r| r % 2 == 1).map(|r| 6 - r % 6).sum();
    assert_eq!(
        b.shm_stats(),
        ShmStats {
            tx_copied: copied as u64,
            ..ShmStats::default()
        }
    );
    assert_eq!(sa.rx_copied + sb.rx_copied, 0);
    assert_eq!(sa.ring_errors + sb.ring_errors, 0);
    // Every slot is home again, once the producers look.
    for l in [&mut a, &mut b] {
        assert_eq!(l.frames_held(), (0, 0));
        l.refresh_tx_room();
        assert_eq!(l.tx_slots_free(), 8);
        assert_eq!(l.rx_tail, l.rx_next);
    }
}

/// Sets both ends of both directions to start at `start`, to run the free-
/// running `u32` indexes across their wrap.
fn start_indexes_at(a: &mut ShmLink, b: &mut ShmLink, start: u32) {
    for l in [&mut *a, &mut *b] {
        l.tx_head = start;
        l.tx_tail_cache = start;
        l.tx.prod().store(start, Ordering::Release);
        l.rx_tail = start;
        l.rx_published = start;
        l.rx_next = start;
        l.rx_head_cache = start;
        l.rx.cons().store(start, Ordering::Release);
    }
}

#[test]
fn indexes_wrap_around_u32() {
    let path = TmpPath::new("wrap");
    let (mut a, mut b) = pair(&path.0, &ShmConfig::new(1500, 16));
    start_indexes_at(&mut a, &mut b, u32::MAX - 100);
    let mut seq = 0u64;
    for round in 0..50 {
        let k = 1 + round % 12;
        let f: Vec<Vec<u8>> = (0..k).map(|i| test_frame(seq + i as u64, 64)).collect();
        seq += k as u64;
        assert_eq!(send(&mut a, &f), k);
        assert_eq!(b.rx_pending(), k);
        assert_eq!(recv_all(&mut b), f);
        assert_eq!(send(&mut b, &f), k);
        assert_eq!(recv_all(&mut a), f);
    }
    assert!(a.tx_head < 1000, "the index wrapped");
    assert_eq!(a.shm_stats().peer_errors + b.shm_stats().peer_errors, 0);
}

/// The offset of a frame's first byte in its link's mapping.
fn offset_in_mapping(link: &ShmLink, f: &ShmFrame) -> usize {
    let r = link.mapping_range();
    let p = f.as_ptr() as usize;
    assert!(r.contains(&p) && r.contains(&(p + f.data().len() - 1)));
    p - r.start
}

#[test]
fn received_frames_are_the_senders_slots_not_copies() {
    let path = TmpPath::new("zc");
    let cfg = ShmConfig::new(1500, 8);
    let (g, l) = layout_of(&cfg);
    let (mut a, mut b) = pair(&path.0, &cfg);
    let f: Vec<Vec<u8>> = (0..3).map(|i| test_frame(i, 100 + i as usize)).collect();
    // Built in place: each frame in the slot of its ring position (0, 1,
    // 2) of direction 0 in A's mapping.
    let base = a.mapping_range().start;
    let mut sent_at = Vec::new();
    for x in &f {
        let TxPlaced::InPlace(buf) = a.tx_place(x.len(), false) else {
            panic!("a free position");
        };
        buf.copy_from_slice(x);
        sent_at.push(buf.as_ptr() as usize - base);
    }
    for (pos, &off) in sent_at.iter().enumerate() {
        assert_eq!(off, l.slab[0] + pos * g.stride);
    }
    a.tx_flush().unwrap();
    let mut out = Vec::new();
    assert_eq!(b.rx_burst(&mut out, MAX_BURST).unwrap(), 3);
    for (i, x) in out.iter_mut().enumerate() {
        // The same bytes of the same file, seen through B's mapping.
        assert_eq!(offset_in_mapping(&b, x), sent_at[i]);
        assert_eq!(x.data(), &f[i][..]);
        assert_eq!(x.capacity(), g.frame_cap);
        // Writable in place (the engine completes checksums there): the
        // write lands in the file itself.
        x.data_mut()[20] = 0xa5;
        let mut byte = [0u8];
        File::open(&path.0)
            .unwrap()
            .read_exact_at(&mut byte, (sent_at[i] + 20) as u64)
            .unwrap();
        assert_eq!(byte[0], 0xa5);
    }
    for x in out.drain(..) {
        b.recycle(x);
    }
    let s = b.stats();
    assert_eq!((s.rx_frames, s.rx_copied), (3, 0));
    assert_eq!(b.frames_held(), (0, 0));

    // A frame from alloc_tx is built in a spare, past the ring's slots,
    // and copied into its position's slot (3) when sent.
    let spare = frame(&mut a, &f[0]);
    let spare_at = offset_in_mapping(&a, &spare);
    assert!(spare_at >= l.slab[0] + cfg.slots * g.stride && spare_at < l.region_end[0]);
    assert!(a.tx_push(spare).is_none());
    a.tx_flush().unwrap();
    assert_eq!(a.shm_stats().tx_copied, 1);
    assert_eq!(a.frames_held(), (0, 0));
    assert_eq!(b.rx_burst(&mut out, MAX_BURST).unwrap(), 1);
    assert_eq!(offset_in_mapping(&b, &out[0]), l.slab[0] + 3 * g.stride);
    assert_eq!(out[0].data(), &f[0][..]);
    b.recycle(out.pop().unwrap());
}

/// Side B's published consumer index of direction 0, as side A reads it.
fn cons_index(a: &ShmLink) -> u32 {
    a.tx.cons().load(Ordering::Acquire)
}

/// The same once B has had its `service` call (once per engine turn),
/// which publishes the index as B's recycling left it.
fn cons_index_after_turn(a: &ShmLink, b: &mut ShmLink) -> u32 {
    b.service().unwrap();
    cons_index(a)
}

#[test]
fn consumer_index_waits_for_a_frame_still_held() {
    let path = TmpPath::new("hold");
    let (mut a, mut b) = pair(&path.0, &ShmConfig::new(1500, 8));
    let f: Vec<Vec<u8>> = (0..6).map(|i| test_frame(i, 64)).collect();
    assert_eq!(send(&mut a, &f[..4]), 4);
    let mut out = Vec::new();
    assert_eq!(b.rx_burst(&mut out, MAX_BURST).unwrap(), 4);
    let held = out.remove(0);
    let held_at = offset_in_mapping(&b, &held);
    for x in out.drain(..) {
        b.recycle(x);
    }
    // Positions 1..4 are done, position 0 is not: the index stays at 0.
    assert_eq!(cons_index_after_turn(&a, &mut b), 0);
    assert_eq!(b.frames_held(), (0, 1));
    // So A takes none of the four slots back, and no frame it builds can
    // be in the held one, however many it sends.
    a.refresh_tx_room();
    assert_eq!(a.tx_slots_free(), 4);
    for round in 0..3 {
        let x = frame(&mut a, &f[4]);
        assert_ne!(offset_in_mapping(&a, &x), held_at, "round {round}");
        a.recycle(x);
    }
    assert_eq!(send(&mut a, &f[4..6]), 2);
    assert_eq!(b.rx_burst(&mut out, MAX_BURST).unwrap(), 2);
    for x in out.drain(..) {
        assert_ne!(offset_in_mapping(&b, &x), held_at);
        b.recycle(x);
    }
    assert_eq!(cons_index_after_turn(&a, &mut b), 0);
    // The held frame still has its bytes.
    assert_eq!(held.data(), &f[0][..]);
    b.recycle(held);
    // Published at B's next turn, not by the recycle itself (see
    // `publish_rx`).
    assert_eq!(cons_index(&a), 0);
    assert_eq!(cons_index_after_turn(&a, &mut b), 6);
    a.refresh_tx_room();
    assert_eq!(a.tx_slots_free(), 8);
}

#[test]
fn frames_recycled_out_of_order_move_the_index_over_the_done_prefix() {
    let path = TmpPath::new("order");
    let (mut a, mut b) = pair(&path.0, &ShmConfig::new(1500, 8));
    let f: Vec<Vec<u8>> = (0..5).map(|i| test_frame(i, 64)).collect();
    assert_eq!(send(&mut a, &f), 5);
    let mut out = Vec::new();
    assert_eq!(b.rx_burst(&mut out, MAX_BURST).unwrap(), 5);
    let mut frames: Vec<Option<ShmFrame>> = out.drain(..).map(Some).collect();
    // Recycled as 3, 1, 4, 0, 2: the index stays at 0 until 0 is back,
    // then passes 0 and 1, then, with 2, the rest.
    for (i, want) in [(3, 0), (1, 0), (4, 0), (0, 2), (2, 5)] {
        let x = frames[i].take().unwrap();
        assert_eq!(x.data(), &f[i][..]);
        b.recycle(x);
        assert_eq!(
            cons_index_after_turn(&a, &mut b),
            want,
            "after recycling {i}"
        );
    }
    assert_eq!(b.frames_held(), (0, 0));
    assert_eq!(b.stats().ring_errors, 0);
    // The ring goes on, in order.
    assert_eq!(send(&mut a, &f), 5);
    assert_eq!(recv_all(&mut b), f);
}

#[test]
fn the_ring_runs_out_of_positions_and_recovers() {
    let path = TmpPath::new("slots");
    let (mut a, mut b) = pair(&path.0, &ShmConfig::new(1500, 4));
    // 4 positions, 1 of them in reserve; 1 spare.
    let f: Vec<Vec<u8>> = (0..4).map(|i| test_frame(i, 100)).collect();
    assert_eq!(send(&mut a, &f[..3]), 3);
    assert!(matches!(a.tx_place(100, false), TxPlaced::NoBuffer));
    assert!(a.alloc_tx().is_none(), "the last position is the reserve's");
    assert_eq!(a.stats().pool_exhausted, 2);
    let mut last = a.alloc_tx_reserved().expect("the reserve");
    assert_eq!(a.shm_stats().reserve_taken, 1);
    assert!(a.alloc_tx_reserved().is_none(), "the only spare is out");
    assert_eq!(a.stats().pool_exhausted, 3);
    last.set_len(100);
    last.data_mut().copy_from_slice(&f[3]);
    assert_eq!(a.frames_held(), (1, 0));
    assert!(a.tx_push(last).is_none());
    a.tx_flush().unwrap();
    assert_eq!(a.frames_held(), (0, 0));
    assert_eq!(a.tx_slots_free(), 0);
    // All four in the ring: no position until B is done with them.
    assert!(a.alloc_tx().is_none());
    assert!(a.alloc_tx_reserved().is_none());
    let mut out = Vec::new();
    assert_eq!(b.rx_burst(&mut out, MAX_BURST).unwrap(), 4);
    assert!(a.alloc_tx_reserved().is_none(), "B still reads them");
    assert_eq!(a.stats().pool_exhausted, 6);
    let got: Vec<Vec<u8>> = out.iter().map(|x| x.data().to_vec()).collect();
    assert_eq!(got, f);
    for x in out.drain(..) {
        b.recycle(x);
    }
    // Recovered once B has published its index (its next turn): three in
    // place, the fourth is the reserve's.
    assert!(a.alloc_tx().is_none());
    b.service().unwrap();
    assert_eq!(send(&mut a, &f[..3]), 3);
    assert!(a.alloc_tx().is_none());
    assert_eq!(recv_all(&mut b), f[..3].to_vec());
    assert_eq!(send(&mut a, &f[1..4]), 3);
    assert_eq!(recv_all(&mut b), f[1..4].to_vec());
    let s = a.stats();
    assert_eq!((s.tx_frames, s.tx_dropped, s.ring_errors), (10, 0, 0));
    assert_eq!(a.shm_stats().tx_copied, 1);
}

/// A frame from `alloc_tx` finds the ring full when it is pushed (the
/// reserve of a 2-slot ring is empty): taken, dropped and counted, its
/// spare free again.
#[test]
fn a_copied_frame_pushed_into_a_full_ring_is_dropped_and_counted() {
    let path = TmpPath::new("full");
    let (mut a, mut b) = pair(&path.0, &ShmConfig::new(1500, 2));
    let f: Vec<Vec<u8>> = (0..3).map(|i| test_frame(i, 80)).collect();
    let x = frame(&mut a, &f[2]);
    assert_eq!(send(&mut a, &f[..2]), 2);
    assert!(a.tx_push(x).is_none(), "taken");
    a.tx_flush().unwrap();
    assert_eq!(a.stats().tx_dropped, 1);
    assert_eq!(a.frames_held(), (0, 0));
    assert_eq!(recv_all(&mut b), f[..2].to_vec());
    b.service().unwrap();
    // The spare is back, and sends once there is room.
    let x = frame(&mut a, &f[2]);
    assert!(a.tx_push(x).is_none());
    a.tx_flush().unwrap();
    assert_eq!(recv_all(&mut b), f[2..].to_vec());
    assert_eq!((a.stats().tx_frames, a.shm_stats().tx_copied), (3, 1));
}

#[test]
fn frames_not_this_links_are_counted_and_not_used() {
    let p1 = TmpPath::new("own1");
    let p2 = TmpPath::new("own2");
    let cfg = ShmConfig::new(1500, 8);
    let (mut a, mut b) = pair(&p1.0, &cfg);
    let (mut c, mut d) = pair(&p2.0, &cfg);

    // Another link's TX frame, to recycle and to send: counted, not put on
    // our free stack nor sent; its own link gets its slot back.
    let theirs = frame(&mut c, &test_frame(1, 64));
    a.recycle(theirs);
    assert_eq!(a.shm_stats().foreign_frames, 1);
    assert_eq!(a.stats().ring_errors, 1);
    let mut v = vec![
        frame(&mut c, &test_frame(2, 64)),
        frame(&mut a, &test_frame(3, 64)),
    ];
    assert_eq!(a.tx_burst(&mut v).unwrap(), 2);
    assert_eq!(a.shm_stats().foreign_frames, 2);
    let s = a.stats();
    assert_eq!((s.tx_frames, s.tx_dropped, s.ring_errors), (1, 1, 2));
    assert_eq!(recv_all(&mut b), vec![test_frame(3, 64)]);
    assert_eq!(d.rx_pending(), 0, "nothing went out on the other link");
    c.service().unwrap();
    assert_eq!(c.frames_held(), (0, 0));
    assert_eq!(c.shm_stats().dropped_frames, 2);
    assert_eq!(c.stats().ring_errors, 0);

    // Another link's received frame: counted; its own link's index moves
    // on once it notices.
    assert_eq!(send(&mut c, &[test_frame(4, 64)]), 1);
    let mut out = Vec::new();
    assert_eq!(d.rx_burst(&mut out, MAX_BURST).unwrap(), 1);
    b.recycle(out.pop().unwrap());
    assert_eq!(b.shm_stats().foreign_frames, 1);
    assert_eq!(c.tx.cons().load(Ordering::Acquire), 0);
    d.service().unwrap();
    assert_eq!(c.tx.cons().load(Ordering::Acquire), 1);
    assert_eq!(d.frames_held(), (0, 0));

    // Our own received frame handed to tx_burst (the wrong direction): not
    // sent, counted, and its position done with.
    assert_eq!(send(&mut a, &[test_frame(5, 64)]), 1);
    assert_eq!(b.rx_burst(&mut out, MAX_BURST).unwrap(), 1);
    assert_eq!(b.tx_burst(&mut out).unwrap(), 1);
    assert!(out.is_empty());
    let s = b.stats();
    assert_eq!((s.tx_frames, s.tx_dropped), (0, 1));
    assert_eq!(b.shm_stats().foreign_frames, 2);
    assert_eq!(a.rx_pending(), 0);
    assert_eq!(b.frames_held(), (0, 0));
    assert_eq!(cons_index(&a), 2);

    // A frame of a link of the same file's other side: not ours either.
    let x = frame(&mut b, &test_frame(6, 64));
    a.recycle(x);
    assert_eq!(a.shm_stats().foreign_frames, 3);
    b.service().unwrap();
    assert_eq!(b.frames_held(), (0, 0));
    // Everything still works both ways.
    assert_eq!(send(&mut a, &[test_frame(7, 64)]), 1);
    assert_eq!(recv_all(&mut b), vec![test_frame(7, 64)]);
    assert_eq!(send(&mut b, &[test_frame(8, 64)]), 1);
    assert_eq!(recv_all(&mut a), vec![test_frame(8, 64)]);
}

#[test]
fn frames_dropped_without_recycling_give_their_slots_back() {
    let path = TmpPath::new("drop");
    let (mut a, mut b) = pair(&path.0, &ShmConfig::new(1500, 8));
    // TX: both spares' frames dropped; alloc_tx finds them again.
    for _ in 0..2 {
        drop(a.alloc_tx().unwrap());
    }
    assert_eq!(a.frames_held(), (2, 0));
    let x = a.alloc_tx().expect("the dropped frames' spares");
    assert_eq!(a.shm_stats().dropped_frames, 2);
    assert_eq!(a.frames_held(), (1, 0));
    a.recycle(x);
    // RX: frames dropped after the first was recycled, one of them on
    // another thread: the index passes them once the link looks (rx_burst
    // or service).
    let f: Vec<Vec<u8>> = (0..3).map(|i| test_frame(i, 64)).collect();
    assert_eq!(send(&mut a, &f), 3);
    let mut out = Vec::new();
    assert_eq!(b.rx_burst(&mut out, MAX_BURST).unwrap(), 3);
    let third = out.pop().unwrap();
    let second = out.pop().unwrap();
    b.recycle(out.pop().unwrap());
    assert_eq!(cons_index_after_turn(&a, &mut b), 1);
    drop(second);
    std::thread::spawn(move || drop(third)).join().unwrap();
    assert_eq!(cons_index(&a), 1);
    assert_eq!(b.rx_burst(&mut out, MAX_BURST).unwrap(), 0);
    assert_eq!(cons_index(&a), 3);
    assert_eq!(b.frames_held(), (0, 0));
    let s = b.shm_stats();
    assert_eq!((s.dropped_frames, s.foreign_frames), (2, 0));
    // A frame dropped before an earlier one comes back is passed with it.
    assert_eq!(send(&mut a, &f), 3);
    assert_eq!(b.rx_burst(&mut out, MAX_BURST).unwrap(), 3);
    let first = out.remove(0);
    out.clear();
    assert_eq!(cons_index(&a), 3);
    b.recycle(first);
    assert_eq!(cons_index_after_turn(&a, &mut b), 6);
    assert_eq!(b.shm_stats().dropped_frames, 4);
    assert_eq!(send(&mut a, &f), 3);
    assert_eq!(recv_all(&mut b), f);
}

#[test]
fn a_link_knows_whether_frames_it_made_are_out() {
    let path = TmpPath::new("out");
    let (mut a, mut b) = pair(&path.0, &ShmConfig::new(1500, 8));
    assert!(!a.frames_out() && !b.frames_out());
    // TX: out while alive, whether sent, recycled or dropped after.
    let x = a.alloc_tx().unwrap();
    assert!(a.frames_out());
    drop(x);
    assert!(
        !a.frames_out(),
        "a dropped frame is not out, noticed or not"
    );
    let y = a.alloc_tx().unwrap();
    assert!(a.frames_out());
    a.recycle(y);
    assert!(!a.frames_out());
    assert_eq!(send(&mut a, &[test_frame(1, 64), test_frame(2, 64)]), 2);
    assert!(!a.frames_out(), "sent frames are the ring's");
    // RX: out until back, whatever order they come back in.
    let mut out = Vec::new();
    assert_eq!(b.rx_burst(&mut out, MAX_BURST).unwrap(), 2);
    let second = out.pop().unwrap();
    let first = out.pop().unwrap();
    assert!(b.frames_out());
    b.recycle(second);
    assert!(b.frames_out(), "the first is still out");
    std::thread::spawn(move || drop(first)).join().unwrap();
    assert!(!b.frames_out());
    b.service().unwrap();
    assert!(!b.frames_out());
    assert_eq!(b.frames_held(), (0, 0));
}

#[test]
fn frames_outliving_their_link_stay_readable() {
    let path = TmpPath::new("outlive");
    let (mut a, mut b) = pair(&path.0, &ShmConfig::new(1500, 8));
    let f = test_frame(9, 300);
    assert_eq!(send(&mut a, std::slice::from_ref(&f)), 1);
    let mut out = Vec::new();
    assert_eq!(b.rx_burst(&mut out, MAX_BURST).unwrap(), 1);
    let mut tx = frame(&mut b, &f);
    drop(b);
    drop(a);
    // Both links are gone; the mapping was left for the frames.
    assert_eq!(out[0].data(), &f[..]);
    tx.data_mut()[0] = 1;
    assert_eq!(tx.data()[1..], f[1..]);
    drop(out);
    drop(tx);
}

#[test]
fn pushed_frames_wait_for_a_flush_and_go_before_a_burst() {
    let path = TmpPath::new("push");
    let (mut a, mut b) = pair(&path.0, &ShmConfig::new(1500, 8));
    let f: Vec<Vec<u8>> = (0..4).map(|i| test_frame(i, 64 + i as usize)).collect();
    assert_eq!(a.tx_pending(), 0);
    for x in &f[..2] {
        let x = frame(&mut a, x);
        assert!(a.tx_push(x).is_none(), "the link keeps every frame");
    }
    assert_eq!(a.tx_pending(), 2);
    assert_eq!(a.frames_held(), (0, 0), "queued frames are the link's");
    assert_eq!(b.rx_pending(), 0, "nothing is published before the flush");
    assert_eq!(a.stats().tx_frames, 0);
    a.tx_flush().unwrap();
    assert_eq!(a.tx_pending(), 0);
    let s = a.stats();
    assert_eq!((s.tx_frames, s.tx_bytes), (2, 64 + 65));
    assert_eq!(recv_all(&mut b), f[..2]);

    // A burst after a push: the pushed frame goes first.
    let x = frame(&mut a, &f[2]);
    assert!(a.tx_push(x).is_none());
    assert_eq!(send(&mut a, &f[3..]), 1);
    assert_eq!(a.tx_pending(), 0);
    assert_eq!(recv_all(&mut b), f[2..]);

    // Another link's frame pushed: counted and not sent; its own link
    // gets the slot back.
    let theirs = frame(&mut b, &f[0]);
    assert!(a.tx_push(theirs).is_none());
    assert_eq!(a.tx_pending(), 0);
    a.tx_flush().unwrap();
    assert_eq!(a.shm_stats().foreign_frames, 1);
    assert_eq!(a.stats().tx_dropped, 1);
    assert_eq!(b.rx_pending(), 0);
    b.service().unwrap();
    assert_eq!(b.frames_held(), (0, 0));
    assert_eq!(b.shm_stats().dropped_frames, 1);
}

#[test]
fn frames_built_in_place_queue_like_pushed_ones() {
    let path = TmpPath::new("build");
    let (mut a, mut b) = pair(&path.0, &ShmConfig::new(1500, 4));
    let cap = a.tx.frame_cap;
    let f: Vec<Vec<u8>> = (0..4).map(|i| test_frame(i, 70 + i as usize)).collect();
    let build = |a: &mut ShmLink, x: &[u8], partial: bool| match a.tx_place(x.len(), partial) {
        TxPlaced::InPlace(buf) => {
            assert_eq!(buf.len(), x.len(), "the frame's bytes exactly");
            buf.copy_from_slice(x);
            "queued"
        }
        TxPlaced::Frame(_) => "handed out",
        TxPlaced::NoBuffer => "no buffer",
        TxPlaced::Oversize => "oversize",
    };
    assert!(a.tx_fits_in_place(70) && a.tx_fits_in_place(cap));
    assert!(!a.tx_fits_in_place(cap + 1), "longer than a slot");
    assert_eq!(build(&mut a, &f[0], true), "queued");
    assert_eq!(build(&mut a, &f[1], false), "queued");
    assert_eq!(a.tx_pending(), 2);
    assert_eq!(a.frames_held(), (0, 0), "no frame was handed out");
    assert_eq!(b.rx_pending(), 0, "nothing is published before the flush");
    // Too long: not queued, no slot taken.
    let free = a.tx_slots_free();
    assert!(matches!(a.tx_place(cap + 1, false), TxPlaced::Oversize));
    assert_eq!((a.tx_slots_free(), a.tx_pending()), (free, 2));
    // One slot left beyond the reserve, then none.
    assert!(a.tx_fits_in_place(72));
    assert_eq!(build(&mut a, &f[2], false), "queued");
    assert!(!a.tx_fits_in_place(73), "only the reserve is left");
    assert_eq!(a.stats().pool_exhausted, 0, "asking counts nothing");
    assert_eq!(build(&mut a, &f[3], false), "no buffer");
    assert_eq!(a.stats().pool_exhausted, 1);
    a.tx_flush().unwrap();
    let s = a.stats();
    assert_eq!((s.tx_frames, s.tx_bytes), (3, 70 + 71 + 72));
    let mut out = Vec::new();
    assert_eq!(b.rx_burst(&mut out, MAX_BURST).unwrap(), 3);
    let got: Vec<(Vec<u8>, bool)> = out
        .iter()
        .map(|x| (x.data().to_vec(), x.csum_partial()))
        .collect();
    let want = vec![
        (f[0].clone(), true),
        (f[1].clone(), false),
        (f[2].clone(), false),
    ];
    assert_eq!(got, want);
    for x in out.drain(..) {
        b.recycle(x);
    }
    b.service().unwrap();
    assert_eq!(build(&mut a, &f[3], false), "queued");
    a.tx_flush().unwrap();
    assert_eq!(recv_all(&mut b), f[3..]);
}

#[test]
fn rx_burst_respects_max() {
    let path = TmpPath::new("max");
    let (mut a, mut b) = pair(&path.0, &ShmConfig::new(1500, 64));
    let f: Vec<Vec<u8>> = (0..40).map(|i| test_frame(i, 64)).collect();
    assert_eq!(send(&mut a, &f), 40);
    let mut out = Vec::new();
    assert_eq!(b.rx_burst(&mut out, 5).unwrap(), 5);
    assert_eq!(b.rx_burst(&mut out, 100).unwrap(), MAX_BURST);
    assert_eq!(b.rx_burst(&mut out, 100).unwrap(), 3);
    assert_eq!(b.rx_burst(&mut out, 100).unwrap(), 0);
    let got: Vec<Vec<u8>> = out.iter().map(|x| x.data().to_vec()).collect();
    assert_eq!(got, f);
}

#[test]
fn frames_come_one_at_a_time_as_readied() {
    let path = TmpPath::new("one");
    let cfg = ShmConfig::new(1500, 8);
    let (g, l) = layout_of(&cfg);
    let (mut a, mut b) = pair(&path.0, &cfg);
    let f: Vec<Vec<u8>> = (0..5).map(|i| test_frame(i, 80)).collect();
    assert!(b.rx_next().is_none(), "nothing readied yet");
    assert_eq!(send(&mut a, &f), 5);
    // Position 1: one byte past the slot.
    poke(
        &path.0,
        l.desc[0] + DESC_SIZE,
        &(g.frame_cap as u64 + 1).to_ne_bytes(),
    );
    assert_eq!(b.rx_ready(3).unwrap(), 3, "at most max, bad ones included");
    let x = b.rx_next().expect("position 0");
    assert_eq!(x.data(), &f[0][..]);
    b.recycle(x);
    let y = b.rx_next().expect("position 2, past the bad one");
    assert_eq!(y.data(), &f[2][..]);
    assert!(b.rx_next().is_none(), "only 3 readied");
    assert_eq!(b.shm_stats().rx_bad_desc, 1);
    assert_eq!(b.frames_held(), (0, 1));
    // Those not readied wait for the next call; the held frame holds the
    // consumer index at its position.
    b.service().unwrap();
    assert_eq!(b.rx_ready(MAX_BURST).unwrap(), 2);
    assert_eq!(cons_index(&a), 2);
    let rest: Vec<ShmFrame> = std::iter::from_fn(|| b.rx_next()).collect();
    let got: Vec<&[u8]> = rest.iter().map(|x| x.data()).collect();
    assert_eq!(got, vec![&f[3][..], &f[4][..]]);
    b.recycle(y);
    for x in rest {
        b.recycle(x);
    }
    assert_eq!(cons_index_after_turn(&a, &mut b), 5);
    assert_eq!(b.rx_ready(MAX_BURST).unwrap(), 0);
    assert_eq!(b.stats().rx_frames, 4);
}

#[test]
fn jumbo_frames_of_65536_mtu_cross_intact() {
    let path = TmpPath::new("jumbo");
    let cfg = ShmConfig::new(MAX_MTU, 4);
    let (mut a, mut b) = pair(&path.0, &cfg);
    assert_eq!(a.alloc_tx().unwrap().capacity(), 65536 + 18);
    for round in 0..10u64 {
        let f: Vec<Vec<u8>> = (0..3)
            .map(|i| test_frame(round * 3 + i, 65536 + 18 - i as usize * 1000))
            .collect();
        assert_eq!(send(&mut a, &f), 3);
        assert_eq!(recv_all(&mut b), f);
    }
}

#[test]
fn a_frames_length_and_marks_are_kept_apart() {
    assert_eq!(std::mem::size_of::<ShmFrame>(), 24, "three words");
    let path = TmpPath::new("marks");
    let (mut a, mut b) = pair(&path.0, &ShmConfig::new(MAX_MTU, 4));
    let mut f = a.alloc_tx().unwrap();
    assert_eq!(f.capacity(), MAX_MTU + FRAME_OVERHEAD);
    assert_eq!(
        (f.dir(), f.data().len(), f.csum_partial()),
        (Dir::Tx, 0, false)
    );
    f.set_csum_partial(true);
    f.set_len(f.capacity());
    assert_eq!(f.data().len(), MAX_MTU + FRAME_OVERHEAD);
    assert!(f.csum_partial());
    f.set_len(60);
    f.set_csum_partial(false);
    assert_eq!(
        (f.dir(), f.data().len(), f.csum_partial()),
        (Dir::Tx, 60, false)
    );
    f.set_csum_partial(true);
    let mut v = vec![f];
    assert_eq!(a.tx_burst(&mut v).unwrap(), 1);
    let mut out = Vec::new();
    assert_eq!(b.rx_burst(&mut out, MAX_BURST).unwrap(), 1);
    let g = out.pop().unwrap();
    assert_eq!(
        (g.dir(), g.data().len(), g.csum_partial()),
        (Dir::Rx, 60, true)
    );
    assert_eq!(g.capacity(), MAX_MTU + FRAME_OVERHEAD);
    b.recycle(g);
}

#[test]
fn csum_partial_mark_crosses() {
    let path = TmpPath::new("csum");
    let (mut a, mut b) = pair(&path.0, &ShmConfig::new(1500, 8));
    let mut x = frame(&mut a, &test_frame(1, 60));
    x.set_csum_partial(true);
    let y = frame(&mut a, &test_frame(2, 60));
    let mut v = vec![x, y];
    assert_eq!(a.tx_burst(&mut v).unwrap(), 2);
    let mut out = Vec::new();
    assert_eq!(b.rx_burst(&mut out, MAX_BURST).unwrap(), 2);
    assert!(out[0].csum_partial());
    assert!(!out[1].csum_partial());
}

/// Overwrites `bytes` at `off` in the file at `path` (as a buggy peer
/// writing into its parts of the mapping would), returning the old bytes.
fn poke(path: &Path, off: usize, bytes: &[u8]) -> Vec<u8> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut old = vec![0u8; bytes.len()];
    f.read_exact_at(&mut old, off as u64).unwrap();
    f.write_all_at(bytes, off as u64).unwrap();
    old
}

#[test]
fn corrupt_headers_are_rejected() {
    let path = TmpPath::new("hdr");
    let cfg = ShmConfig::new(1500, 256);
    let a = ShmLink::create(&path.0, &cfg).unwrap();
    let p = &path.0;
    let bad_u32 = |off: usize, v: u32, kind: io::ErrorKind| {
        let old = poke(p, off, &v.to_ne_bytes());
        let e = ShmLink::open(p).expect_err("corrupt header accepted");
        assert_eq!(e.kind(), kind, "field at {off} = {v}: {e}");
        poke(p, off, &old);
    };
    use io::ErrorKind::{InvalidData, WouldBlock};
    bad_u32(offset_of!(Header, magic), 0x1234_5678, InvalidData);
    // Version 1 named a slot in each descriptor: its files are refused.
    bad_u32(offset_of!(Header, version), 1, InvalidData);
    bad_u32(offset_of!(Header, page_size), 8192, InvalidData);
    bad_u32(offset_of!(Header, mtu), 9000, InvalidData);
    bad_u32(offset_of!(Header, mtu), 10, InvalidData);
    bad_u32(offset_of!(Header, mtu), 1501, InvalidData);
    bad_u32(offset_of!(Header, frame_cap), 100_000, InvalidData);
    bad_u32(offset_of!(Header, stride), 64, InvalidData);
    bad_u32(offset_of!(Header, slots), 255, InvalidData);
    bad_u32(offset_of!(Header, slots), 512, InvalidData);
    bad_u32(offset_of!(Header, slots), 0, InvalidData);
    bad_u32(offset_of!(Header, file_len), 1 << 30, InvalidData);
    bad_u32(offset_of!(Header, ready), 1, WouldBlock);

    // The file's length must match the layout.
    let short = TmpPath::new("short");
    fs::copy(p, &short.0).unwrap();
    let len = fs::metadata(p).unwrap().len();
    let f = OpenOptions::new().write(true).open(&short.0).unwrap();
    f.set_len(len - 4096).unwrap();
    assert_eq!(
        ShmLink::open(&short.0).unwrap_err().kind(),
        io::ErrorKind::InvalidData
    );
    f.set_len(len + 4096).unwrap();
    assert_eq!(
        ShmLink::open(&short.0).unwrap_err().kind(),
        io::ErrorKind::InvalidData
    );
    f.set_len(100).unwrap();
    assert_eq!(ShmLink::open(&short.0).unwrap_err().kind(), WouldBlock);

    // Restored, it opens; only once.
    let b = ShmLink::open(p).unwrap();
    assert_eq!(b.config(), &cfg);
    assert_eq!(
        ShmLink::open(p).unwrap_err().kind(),
        io::ErrorKind::AddrInUse
    );
    drop(b);
    drop(a);
    assert!(!p.exists(), "side A removes the file");
    assert_eq!(
        ShmLink::open(p).unwrap_err().kind(),
        io::ErrorKind::NotFound
    );
    let e = ShmLink::open_wait(p, Duration::from_millis(20)).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::TimedOut);
}

#[test]
fn create_checks_config_and_existing_files() {
    let path = TmpPath::new("cfg");
    let p = &path.0;
    for (mtu, slots) in [(1500, 100), (1500, 1), (10, 256), (70_000, 256)] {
        let e = ShmLink::create(p, &ShmConfig::new(mtu, slots)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(!p.exists());
    }
    // Not ours: left alone.
    fs::write(p, b"some other file's contents").unwrap();
    let e = ShmLink::create(p, &ShmConfig::new(1500, 8)).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
    assert_eq!(fs::read(p).unwrap(), b"some other file's contents");
    // A leftover of ours (kept by unlink's absence): replaced.
    fs::remove_file(p).unwrap();
    let mut old = ShmLink::create(p, &ShmConfig::new(1500, 8)).unwrap();
    old.remove_on_drop = false;
    drop(old);
    assert!(p.exists());
    let a = ShmLink::create(p, &ShmConfig::new(9000, 16)).unwrap();
    let b = ShmLink::open(p).unwrap();
    assert_eq!(b.info().mtu, 9000);
    // unlink: the path goes, the link keeps working.
    let mut a = a;
    let mut b = b;
    a.unlink().unwrap();
    assert!(!p.exists());
    assert_eq!(send(&mut a, &[test_frame(1, 100)]), 1);
    assert_eq!(recv_all(&mut b), vec![test_frame(1, 100)]);
}

#[test]
fn a_second_link_at_the_same_path_is_not_removed_by_the_first() {
    let path = TmpPath::new("replace");
    let first = ShmLink::create(&path.0, &ShmConfig::new(1500, 8)).unwrap();
    let second = ShmLink::create(&path.0, &ShmConfig::new(1500, 16)).unwrap();
    drop(first);
    assert!(path.0.exists());
    assert_eq!(ShmLink::open(&path.0).unwrap().config().slots, 16);
    drop(second);
    assert!(!path.0.exists());
}

#[test]
fn bogus_descriptors_are_counted_not_followed() {
    let path = TmpPath::new("desc");
    let cfg = ShmConfig::new(1500, 8);
    let (g, l) = layout_of(&cfg);
    let (mut a, mut b) = pair(&path.0, &cfg);
    let f: Vec<Vec<u8>> = (0..4).map(|i| test_frame(i, 200)).collect();
    assert_eq!(send(&mut a, &f), 4);
    // Position 1: one byte past the slot; position 2: a huge length (and
    // every other bit set).
    let bad1 = (g.frame_cap as u64 + 1).to_ne_bytes();
    poke(&path.0, l.desc[0] + DESC_SIZE, &bad1);
    poke(&path.0, l.desc[0] + 2 * DESC_SIZE, &u64::MAX.to_ne_bytes());
    // Position 3: its good length with the reserved bits (once a slot
    // number) set: ignored, the frame is its position's slot all the same.
    let mut third = [0u8; DESC_SIZE];
    File::open(&path.0)
        .unwrap()
        .read_exact_at(&mut third, (l.desc[0] + 3 * DESC_SIZE) as u64)
        .unwrap();
    let third = u64::from_ne_bytes(third) | 0xffff << 32;
    poke(&path.0, l.desc[0] + 3 * DESC_SIZE, &third.to_ne_bytes());
    assert_eq!(recv_all(&mut b), vec![f[0].clone(), f[3].clone()]);
    let s = b.stats();
    assert_eq!(s.rx_frames, 2);
    assert_eq!(s.rx_dropped, 2);
    assert_eq!(s.rx_oversize, 2);
    assert_eq!(b.shm_stats().rx_bad_desc, 2);
    assert_eq!(s.ring_errors, 2);
    assert_eq!(b.frames_held(), (0, 0));
    assert_eq!(
        cons_index(&a),
        4,
        "the dropped descriptors' positions are done"
    );
    // The ring goes on.
    assert_eq!(send(&mut a, &f), 4);
    assert_eq!(recv_all(&mut b), f);
}

#[test]
fn impossible_indexes_are_errors() {
    let path = TmpPath::new("idx");
    let cfg = ShmConfig::new(1500, 8);
    let (_, l) = layout_of(&cfg);
    let (mut a, mut b) = pair(&path.0, &cfg);
    let f: Vec<Vec<u8>> = (0..3).map(|i| test_frame(i, 100)).collect();
    assert_eq!(send(&mut a, &f), 3);

    // A's producer index of direction 0 claims more than the ring holds.
    let old = poke(&path.0, l.region[0], &(3u32 + 8).to_ne_bytes());
    let mut out = Vec::new();
    let e = b.rx_burst(&mut out, MAX_BURST).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    assert_eq!(b.shm_stats().peer_errors, 1);
    assert!(out.is_empty());
    // Behind our consumer index: also impossible.
    poke(&path.0, l.region[0], &u32::MAX.to_ne_bytes());
    assert!(b.rx_burst(&mut out, MAX_BURST).is_err());
    poke(&path.0, l.region[0], &old);
    assert_eq!(recv_all(&mut b), f);

    // Behind what it published before (B has read positions 3 and 4):
    // impossible too, and nothing moves.
    assert_eq!(send(&mut a, &f[..2]), 2);
    assert_eq!(b.rx_burst(&mut out, MAX_BURST).unwrap(), 2);
    let old = poke(&path.0, l.region[0], &4u32.to_ne_bytes());
    assert!(b.rx_burst(&mut out, MAX_BURST).is_err());
    assert_eq!(b.shm_stats().peer_errors, 3);
    poke(&path.0, l.region[0], &old);
    for x in out.drain(..) {
        b.recycle(x);
    }
    assert_eq!(b.rx_burst(&mut out, MAX_BURST).unwrap(), 0);

    // B's consumer index of direction 0 claims frames A never sent: the
    // frames already built go out all the same, and no position is taken
    // back on the strength of it.
    assert_eq!(a.refresh_tx_room(), 8, "B has read all five");
    let g: Vec<Vec<u8>> = (0..6).map(|i| test_frame(10 + i, 100)).collect();
    let old = poke(&path.0, l.cons[0], &100u32.to_ne_bytes());
    for x in &g[..3] {
        let TxPlaced::InPlace(buf) = a.tx_place(x.len(), false) else {
            panic!("room");
        };
        buf.copy_from_slice(x);
    }
    let e = a.tx_flush().unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    assert_eq!(a.shm_stats().peer_errors, 1);
    assert_eq!(a.stats().tx_frames, 8);
    // tx_place, short of positions, finds it impossible too: counted, no
    // room with the reserve's two positions left.
    let mut placed = 0;
    while let TxPlaced::InPlace(buf) = a.tx_place(100, false) {
        buf.copy_from_slice(&g[3 + placed]);
        placed += 1;
    }
    assert_eq!(placed, 3);
    assert_eq!(a.shm_stats().peer_errors, 2);
    assert_eq!(a.tx_slots_free(), 2);
    poke(&path.0, l.cons[0], &old);
    a.tx_flush().unwrap();
    assert_eq!(recv_all(&mut b), g);
    assert_eq!(send(&mut a, &f), 3);
    assert_eq!(recv_all(&mut b), f);
    a.refresh_tx_room();
    assert_eq!(a.tx_slots_free(), 8);
}

#[test]
fn peer_parts_are_mapped_read_only() {
    // A write into the peer's index through our own mapping must fault: run
    // it in a child process (the test binary, as side B's role "poke").
    let path = TmpPath::new("ro");
    let _a = ShmLink::create(&path.0, &ShmConfig::new(1500, 8)).unwrap();
    let out = child("poke-ro", &path.0).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the write into a read-only part went through: {stderr}"
    );
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGSEGV),
        "{:?} {stderr}",
        out.status
    );
}

/// The test binary as a child process, running `role` on the link at `path`.
fn child(role: &str, path: &Path) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([CHILD_TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, role)
        .env(CHILD_PATH_ENV, path)
        .stdin(Stdio::null());
    c
}

/// A child process running a role, with its output piped; killed if still
/// running when dropped (a failing test leaves no spinning child behind).
struct Kid(Option<std::process::Child>);

impl Kid {
    fn spawn(role: &str, path: &Path) -> Kid {
        let c = child(role, path)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Kid(Some(c))
    }

    fn alive(&mut self) -> bool {
        matches!(self.0.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Waits for it to end; returns its standard output, panicking with all
    /// its output if it failed.
    fn finish(mut self) -> String {
        let out = self.0.take().unwrap().wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "side B failed ({}): {stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }
}

impl Drop for Kid {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs as a plain (passing, empty) test, unless it is the child process
/// of a two-process test.
#[test]
fn child_process_entry() {
    let Ok(role) = std::env::var(CHILD_ENV) else {
        return;
    };
    let path = PathBuf::from(std::env::var(CHILD_PATH_ENV).unwrap());
    let mut b = ShmLink::open_wait(&path, Duration::from_secs(10)).unwrap();
    match role.as_str() {
        "exchange" => {
            let r = exchange(&mut b, EXCHANGE_FRAMES, 0, &mut || true);
            println!("side B: {r}");
        }
        "throughput-spin" => {
            pin_to_cpu(1);
            println!("{}", receive_throughput(&mut b, Idle::Spin));
        }
        "throughput-yield" => {
            println!("{}", receive_throughput(&mut b, Idle::Yield));
        }
        "poke-ro" => {
            // No core file for the fault to come.
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: `none` is a live rlimit the call only reads.
            unsafe { libc::setrlimit(libc::RLIMIT_CORE, &none) };
            // Direction 0's producer index is side A's: read-only here.
            b.rx.prod().store(12345, Ordering::Relaxed);
            println!("wrote into a read-only part");
        }
        other => panic!("unknown role {other}"),
    }
}

const EXCHANGE_FRAMES: u64 = 1_000_000;

/// The length of frame `seq` of the direction `dir` sends.
fn exchange_len(dir: u64, seq: u64, cap: usize) -> usize {
    if seq.is_multiple_of(997) {
        return cap; // a full slot now and then
    }
    // Mostly small (the test runs unoptimised too), of every length.
    let x = seq.wrapping_mul(0x9e37_79b9).wrapping_add(dir * 7) >> 7;
    8 + (x % 100) as usize
}

/// Writes frame `seq` of direction `dir` into `d` (its whole length): the
/// sequence number, then a pattern that differs from frame to frame.
fn write_exchange(d: &mut [u8], dir: u64, seq: u64) {
    d[..8].copy_from_slice(&seq.to_le_bytes());
    let fill = (seq ^ dir.wrapping_mul(0xdead_beef)).wrapping_mul(0x2545_f491_4f6c_dd1d);
    for (i, w) in d[8..].chunks_mut(8).enumerate() {
        let v = fill.wrapping_add(i as u64).to_le_bytes();
        w.copy_from_slice(&v[..w.len()]);
    }
}

/// Sends `n` frames and receives `n` from the peer, checking each one's
/// sequence, length and every byte. Returns a summary. `alive` tells, now
/// and then while idle, whether the peer is still there. With `drop_every`
/// above 0, every `drop_every`th received frame is dropped instead of
/// recycled, and as often a frame to send is built and dropped unsent: the
/// link must take their slots back.
fn exchange(
    link: &mut ShmLink,
    n: u64,
    drop_every: u64,
    alive: &mut dyn FnMut() -> bool,
) -> String {
    let dir = match link.side() {
        ShmSide::A => 0,
        ShmSide::B => 1,
    };
    let x = link.alloc_tx().unwrap();
    let cap = x.capacity();
    link.recycle(x);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut idle_turns = 0u32;
    let mut sent = 0u64;
    let mut got = 0u64;
    let mut dropped = 0u64;
    let mut allocs = 0u64;
    let mut txq: Vec<ShmFrame> = Vec::new();
    let mut rx: Vec<ShmFrame> = Vec::new();
    let mut want = vec![0u8; cap];
    let start = Instant::now();
    while sent < n || got < n {
        assert!(Instant::now() < deadline, "stuck: sent {sent}, got {got}");
        while sent + (txq.len() as u64) < n && txq.len() < MAX_BURST {
            // No free slot: the peer has not given enough back yet.
            let Some(mut b) = link.alloc_tx() else { break };
            allocs += 1;
            if drop_every > 0 && allocs.is_multiple_of(drop_every) {
                b.set_len(64);
                drop(b);
                dropped += 1;
                continue;
            }
            let seq = sent + txq.len() as u64;
            b.set_len(exchange_len(dir, seq, cap));
            write_exchange(b.data_mut(), dir, seq);
            txq.push(b);
        }
        let mut moved = 0;
        if !txq.is_empty() {
            moved += link.tx_burst(&mut txq).unwrap();
            sent += moved as u64;
        }
        moved += link.rx_burst(&mut rx, MAX_BURST).unwrap();
        if moved == 0 {
            idle_turns = idle_turns.wrapping_add(1);
            if idle_turns.is_multiple_of(4096) {
                assert!(alive(), "the peer is gone: sent {sent}, got {got}");
            }
            // Let the peer run if it shares our CPU (a loaded machine).
            std::thread::yield_now();
        }
        for b in rx.drain(..) {
            let d = b.data();
            let seq = u64::from_le_bytes(d[..8].try_into().unwrap());
            assert_eq!(seq, got, "frames arrive in order");
            let len = exchange_len(1 - dir, seq, cap);
            assert_eq!(d.len(), len, "length of {seq}");
            write_exchange(&mut want[..len], 1 - dir, seq);
            if let Some(at) = (0..len).find(|&i| d[i] != want[i]) {
                panic!(
                    "frame {seq}: byte {at} of {len} is {:#x}, not {:#x}",
                    d[at], want[at]
                );
            }
            got += 1;
            if drop_every > 0 && seq.is_multiple_of(drop_every) {
                drop(b);
                dropped += 1;
            } else {
                link.recycle(b);
            }
        }
    }
    let s = link.stats();
    assert_eq!(s.tx_frames, n);
    assert_eq!(s.rx_frames, n);
    assert_eq!(s.rx_dropped + s.tx_dropped + s.ring_errors + s.rx_copied, 0);
    // Every dropped frame's slot comes back (received ones at once or at
    // the next rx_burst, sent ones when alloc_tx runs short).
    link.service().unwrap();
    assert_eq!(link.frames_held(), (0, 0));
    assert_eq!(link.shm_stats().dropped_frames, dropped);
    format!(
        "sent and checked {n} frames each way, byte by byte, in {:?} (alloc_tx found no \
         free slot {} times; {dropped} frames dropped unreturned and taken back)",
        start.elapsed(),
        s.pool_exhausted,
    )
}

#[test]
fn two_processes_exchange_a_million_frames() {
    let path = TmpPath::new("exchange");
    let mut a = ShmLink::create(&path.0, &ShmConfig::new(1500, 256)).unwrap();
    let mut kid = Kid::spawn("exchange", &path.0);
    let r = exchange(&mut a, EXCHANGE_FRAMES, 0, &mut || kid.alive());
    let stdout = kid.finish();
    let line = report_line(&stdout, "side B:");
    println!("side A: {r}\n{line}");
}

/// Side B on a thread of this process, frames dropped now and then on
/// both sides while the other side keeps going.
#[test]
fn two_threads_exchange_frames_dropping_some() {
    let path = TmpPath::new("threads");
    let mut a = ShmLink::create(&path.0, &ShmConfig::new(1500, 64)).unwrap();
    let mut b = ShmLink::open(&path.0).unwrap();
    let n = if cfg!(debug_assertions) {
        50_000
    } else {
        300_000
    };
    let side_b = std::thread::spawn(move || exchange(&mut b, n, 101, &mut || true));
    let r = exchange(&mut a, n, 97, &mut || !side_b.is_finished());
    let rb = side_b.join().unwrap();
    println!("side A: {r}\nside B: {rb}");
}

/// The child's report: from `mark` to the end of its line (the harness
/// prints the test's name in front of it).
fn report_line<'a>(stdout: &'a str, mark: &str) -> &'a str {
    let at = stdout
        .find(mark)
        .unwrap_or_else(|| panic!("no {mark:?} in the child's output: {stdout}"));
    stdout[at..].lines().next().unwrap()
}

/// Pins this thread to `cpu` (when there are two CPUs or more).
fn pin_to_cpu(cpu: usize) {
    set_affinity(&[cpu]);
}

/// Lets this thread run on any CPU.
fn unpin() {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    set_affinity(&(0..n.min(1024)).collect::<Vec<_>>());
}

fn set_affinity(cpus: &[usize]) {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    if n < 2 {
        return;
    }
    // SAFETY: `set` is a zeroed cpu_set_t, a valid empty set; CPU_SET writes
    // a bit inside it (each cpu < 1024 = CPU_SETSIZE, CPU_SET checks too);
    // sched_setaffinity only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// What a side of the throughput test does when it has nothing to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Idle {
    /// Busy-poll, each side pinned to its own CPU (the benchmark's mode).
    Spin,
    /// Yield the CPU, unpinned: on a machine whose CPUs are shared with
    /// other work, the two sides then take turns instead of each spinning
    /// while the other waits for a CPU.
    Yield,
}

impl Idle {
    fn idle(self) {
        match self {
            Idle::Spin => std::hint::spin_loop(),
            Idle::Yield => std::thread::yield_now(),
        }
    }
}

/// Frames of the throughput test: 64 bytes.
const TP_LEN: usize = 64;
/// The last frame of the throughput test carries this sequence number.
const TP_END: u64 = u64::MAX;

/// Ring size of the throughput tests: 1024 frames, or 256 of 64 KiB (a
/// file of 34 MB rather than 134 MB in /dev/shm).
fn tp_slots(mtu: usize) -> usize {
    if mtu > 9000 {
        256
    } else {
        1024
    }
}

/// CPU time this thread has used.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Receives 64-byte frames until the end mark; returns the rate.
fn receive_throughput(link: &mut ShmLink, idle: Idle) -> String {
    let mut rx: Vec<ShmFrame> = Vec::new();
    let mut n = 0u64;
    let mut first = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    'outer: loop {
        if link.rx_burst(&mut rx, MAX_BURST).unwrap() == 0 {
            assert!(Instant::now() < deadline, "no end mark after {n} frames");
            idle.idle();
            continue;
        }
        first.get_or_insert_with(|| (Instant::now(), thread_cpu()));
        for b in rx.drain(..) {
            let seq = u64::from_le_bytes(b.data()[..8].try_into().unwrap());
            link.recycle(b);
            if seq == TP_END {
                break 'outer;
            }
            assert_eq!(seq, n);
            n += 1;
        }
    }
    let (wall, cpu) = first.unwrap();
    let t = wall.elapsed().as_secs_f64();
    let cpu = (thread_cpu() - cpu).as_secs_f64();
    format!(
        "shm throughput, {idle:?}, mtu {}: {n} frames of {TP_LEN} bytes in {t:.3} s = {:.2} Mframes/s; \
         receiver on CPU {:.0}% of the time, {:.1} ns of CPU per frame",
        link.info().mtu,
        n as f64 / t / 1e6,
        cpu / t * 100.0,
        cpu * 1e9 / n as f64,
    )
}

/// Side A's half of the throughput test: sends 64-byte frames for `run`,
/// then the end mark. Returns frames sent, wall and CPU seconds.
fn send_throughput(a: &mut ShmLink, run: Duration, idle: Idle, kid: &mut Kid) -> (u64, f64, f64) {
    let mut txq: Vec<ShmFrame> = Vec::with_capacity(MAX_BURST);
    let mut seq = 0u64;
    let start = Instant::now();
    let cpu = thread_cpu();
    let mut turns = 0u32;
    loop {
        while txq.len() < MAX_BURST {
            // No free slot: side B has not given enough back yet.
            let Some(mut b) = a.alloc_tx() else { break };
            b.set_len(TP_LEN);
            b.data_mut()[..8].copy_from_slice(&seq.to_le_bytes());
            seq += 1;
            txq.push(b);
        }
        if a.tx_burst(&mut txq).unwrap() == 0 {
            idle.idle();
        }
        turns = turns.wrapping_add(1);
        if turns.is_multiple_of(64) && start.elapsed() >= run {
            break;
        }
    }
    let mut turns = 0u32;
    let mut end = loop {
        if let Some(x) = a.alloc_tx() {
            break x;
        }
        idle.idle();
        turns = turns.wrapping_add(1);
        if turns.is_multiple_of(4096) {
            assert!(kid.alive(), "side B is gone");
        }
    };
    end.set_len(TP_LEN);
    end.data_mut()[..8].copy_from_slice(&TP_END.to_le_bytes());
    txq.push(end);
    a.tx_burst(&mut txq).unwrap();
    let t = start.elapsed().as_secs_f64();
    (seq, t, (thread_cpu() - cpu).as_secs_f64())
}

/// The CPU cost of the link alone: both ends in this thread, bursts of 32
/// 64-byte frames sent and then received, for `run`.
fn one_thread_cost(mtu: usize, run: Duration) -> String {
    let path = TmpPath::new("cost");
    let (mut a, mut b) = pair(&path.0, &ShmConfig::new(mtu, tp_slots(mtu)));
    let mut txq: Vec<ShmFrame> = Vec::with_capacity(MAX_BURST);
    let mut rx: Vec<ShmFrame> = Vec::with_capacity(MAX_BURST);
    let start = Instant::now();
    let cpu = thread_cpu();
    let mut n = 0u64;
    while start.elapsed() < run {
        for _ in 0..64 {
            while txq.len() < MAX_BURST {
                let mut x = a.alloc_tx().expect("b gives every slot back at once");
                x.set_len(TP_LEN);
                x.data_mut()[..8].copy_from_slice(&n.to_le_bytes());
                txq.push(x);
                n += 1;
            }
            a.tx_burst(&mut txq).unwrap();
            b.rx_burst(&mut rx, MAX_BURST).unwrap();
            for x in rx.drain(..) {
                b.recycle(x);
            }
        }
    }
    let cpu = (thread_cpu() - cpu).as_secs_f64();
    format!(
        "shm cost, mtu {mtu}: {:.1} ns of CPU per 64-byte frame for alloc + tx_burst + \
         rx_burst + recycle, both ends on one thread ({:.1} Mframes/s per CPU second)",
        cpu * 1e9 / n as f64,
        n as f64 / cpu / 1e6
    )
}

/// Frames per second, 64-byte frames, one way, side A (this process) to
/// side B (a child process), at MTU 1500 and 65536: busy-polling with each
/// side pinned to its own CPU (0 and 1), and again unpinned and yielding
/// when idle. Printed, not asserted (run it alone, with `--release
/// --nocapture`). The CPU shares tell whether the two processes really had
/// a core each: on a machine busy with other work, the pinned spinners
/// mostly wait for each other.
#[test]
fn two_process_throughput_64_byte_frames() {
    let run = Duration::from_millis(if cfg!(debug_assertions) { 200 } else { 1000 });
    pin_to_cpu(0); // this test's own thread
    for mtu in [1500, MAX_MTU] {
        println!("{}", one_thread_cost(mtu, run));
    }
    for (idle, mtu) in [
        (Idle::Spin, 1500),
        (Idle::Spin, MAX_MTU),
        (Idle::Yield, 1500),
        (Idle::Yield, MAX_MTU),
    ] {
        match idle {
            Idle::Spin => pin_to_cpu(0),
            Idle::Yield => unpin(),
        }
        let role = match idle {
            Idle::Spin => "throughput-spin",
            Idle::Yield => "throughput-yield",
        };
        let path = TmpPath::new("tp");
        let mut a = ShmLink::create(&path.0, &ShmConfig::new(mtu, tp_slots(mtu))).unwrap();
        let mut kid = Kid::spawn(role, &path.0);
        let attach_deadline = Instant::now() + Duration::from_secs(10);
        while !a.peer_attached() {
            assert!(kid.alive(), "side B ended before attaching");
            assert!(Instant::now() < attach_deadline, "side B never attached");
            std::thread::sleep(Duration::from_millis(1));
        }
        let (n, t, cpu) = send_throughput(&mut a, run, idle, &mut kid);
        let stdout = kid.finish();
        println!(
            "{}\n  sender: {n} frames in {t:.3} s = {:.2} Mframes/s, on CPU {:.0}% of the time, \
             {:.1} ns of CPU per frame, alloc_tx found no free slot {} times{}",
            report_line(&stdout, "shm throughput"),
            n as f64 / t / 1e6,
            cpu / t * 100.0,
            cpu * 1e9 / n as f64,
            a.stats().pool_exhausted,
            if cfg!(debug_assertions) {
                " (debug build)"
            } else {
                ""
            }
        );
    }
}
