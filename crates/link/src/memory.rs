//! An in-process pair of links joined by two bounded queues.
//!
//! What one side transmits, the other receives. A frame is copied once, at
//! transmit, into a buffer of the *receiver's* pool and queued; the sender's
//! buffer goes straight back to the sender's pool. So the queue behaves like
//! the receiver's NIC ring: frames waiting in it hold the receiver's buffers,
//! and each side's pool only ever holds its own buffers.
//!
//! Drops are counted where a NIC would count them: a full queue is the
//! sender's `tx_dropped`; an empty receiver pool is the receiver's
//! `rx_dropped` (and its pool's `exhausted`).
//!
//! The two sides share state through `Arc<Mutex<..>>`: they may live on
//! different threads, and an engine over one may be driven by any thread
//! (the socket layer hands an engine whose thread left it to another).
//! Each call takes the locks of its own side and, when sending, the
//! receiving side's, never two of one side: no call waits for another.

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::pool::{PacketPool, PoolBuf, PoolStats};
use crate::{Link, LinkInfo, LinkStats, PacketBuffer, MAX_BURST};

/// Room for the Ethernet header and one VLAN tag around an MTU-sized packet.
const FRAME_OVERHEAD: usize = 18;

/// How a memory pair is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryConfig {
    /// The largest IP packet; buffers hold `mtu + 18` bytes.
    pub mtu: usize,
    /// Buffers in each side's pool.
    pub pool_count: usize,
    /// Of those, kept back for receive (see [`PacketPool::alloc_reserved`]).
    pub pool_reserve: usize,
    /// Frames each direction's queue holds before it drops.
    pub queue_len: usize,
}

impl MemoryConfig {
    /// `mtu` and `pool_count` as given, a reserve of an eighth of the pool,
    /// and a queue of half the pool (at most 1024).
    pub fn new(mtu: usize, pool_count: usize) -> MemoryConfig {
        MemoryConfig {
            mtu,
            pool_count,
            pool_reserve: pool_count / 8,
            queue_len: (pool_count / 2).clamp(1, 1024),
        }
    }
}

/// One direction: the queue and the receiving side's pool.
struct Side {
    queue: VecDeque<PoolBuf>,
    queue_len: usize,
    pool: PacketPool,
    /// Frames lost because this side's pool was empty when the peer sent.
    rx_dropped: u64,
}

type Shared = Arc<Mutex<Side>>;

/// A side's state (a panic elsewhere leaves it usable: its fields are
/// each consistent).
fn lock(s: &Shared) -> MutexGuard<'_, Side> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// Picks the receive queue of a frame (a NIC's RSS): its result is taken
/// modulo the number of queues.
pub type QueueChooser = Arc<dyn Fn(&[u8]) -> usize + Send + Sync>;

/// Where a side's frames go.
enum Peer {
    /// The other end of a pair.
    One(Shared),
    /// The queues of a multi-queue NIC, one chosen per frame.
    Queues {
        queues: Vec<Shared>,
        choose: QueueChooser,
    },
}

impl Peer {
    fn for_frame(&self, frame: &[u8]) -> &Shared {
        match self {
            Peer::One(s) => s,
            Peer::Queues { queues, choose } => &queues[choose(frame) % queues.len()],
        }
    }
}

/// One end of an in-process link pair.
pub struct MemoryLink {
    info: LinkInfo,
    /// This side's pool and the queue of frames sent to this side.
    me: Shared,
    /// The peer's pool and the queue of frames sent to the peer (or, for
    /// the wire end of a multi-queue NIC, those of each queue).
    peer: Peer,
    rx_frames: u64,
    rx_bytes: u64,
    tx_frames: u64,
    tx_bytes: u64,
    tx_dropped: u64,
    tx_oversize: u64,
}

fn new_side(config: &MemoryConfig) -> Shared {
    Arc::new(Mutex::new(Side {
        queue: VecDeque::with_capacity(config.queue_len),
        queue_len: config.queue_len,
        pool: PacketPool::with_reserve(
            config.mtu + FRAME_OVERHEAD,
            config.pool_count,
            config.pool_reserve,
        ),
        rx_dropped: 0,
    }))
}

impl MemoryLink {
    /// Makes a joined pair, `mem0` (MAC 02:00:00:00:00:01) and `mem1`
    /// (02:00:00:00:00:02), each with a pool of `pool_count` buffers.
    pub fn pair(mtu: usize, pool_count: usize) -> (MemoryLink, MemoryLink) {
        MemoryLink::pair_with(&MemoryConfig::new(mtu, pool_count))
    }

    /// Makes a joined pair as `config` says.
    pub fn pair_with(config: &MemoryConfig) -> (MemoryLink, MemoryLink) {
        let a = new_side(config);
        let b = new_side(config);
        (
            MemoryLink::end(config, 0, &a, Peer::One(b.clone())),
            MemoryLink::end(config, 1, &b, Peer::One(a)),
        )
    }

    /// A model of a NIC with `queues` receive queues and its wire: what the
    /// wire end (`mem0`, the peer host) sends lands on the queue `choose`
    /// picks (the NIC's RSS); what any queue (`mem1`, same MAC on each, as
    /// the queues of one port) sends reaches the wire end.  Each queue has
    /// a pool of its own.
    pub fn multi_queue(
        config: &MemoryConfig,
        queues: usize,
        choose: QueueChooser,
    ) -> (MemoryLink, Vec<MemoryLink>) {
        let wire = new_side(config);
        let sides: Vec<Shared> = (0..queues.max(1)).map(|_| new_side(config)).collect();
        let ends = sides
            .iter()
            .enumerate()
            .map(|(q, s)| {
                let mut l = MemoryLink::end(config, 1, s, Peer::One(wire.clone()));
                l.info.name = format!("mem1q{q}");
                l
            })
            .collect();
        let peer = Peer::Queues {
            queues: sides,
            choose,
        };
        (MemoryLink::end(config, 0, &wire, peer), ends)
    }

    fn end(config: &MemoryConfig, n: u8, me: &Shared, peer: Peer) -> MemoryLink {
        MemoryLink {
            info: LinkInfo {
                name: format!("mem{n}"),
                mac: [0x02, 0, 0, 0, 0, n + 1],
                mtu: config.mtu,
            },
            me: me.clone(),
            peer,
            rx_frames: 0,
            rx_bytes: 0,
            tx_frames: 0,
            tx_bytes: 0,
            tx_dropped: 0,
            tx_oversize: 0,
        }
    }

    /// Sets this side's Ethernet address.
    pub fn set_mac(&mut self, mac: [u8; 6]) {
        self.info.mac = mac;
    }

    /// Sets this side's name.
    pub fn set_name(&mut self, name: &str) {
        self.info.name = name.to_string();
    }

    /// Frames waiting to be received on this side.
    pub fn rx_pending(&self) -> usize {
        lock(&self.me).queue.len()
    }

    /// This side's pool levels and counters.
    pub fn pool_stats(&self) -> PoolStats {
        lock(&self.me).pool.stats()
    }

    /// Takes a buffer from this side's pool, reserve included (for ARP and
    /// ICMP replies).
    pub fn alloc_reserved(&mut self) -> Option<PoolBuf> {
        lock(&self.me).pool.alloc_reserved()
    }
}

impl Link for MemoryLink {
    type Buf = PoolBuf;

    fn rx_burst(&mut self, out: &mut Vec<PoolBuf>, max: usize) -> io::Result<usize> {
        let max = max.min(MAX_BURST);
        let mut me = lock(&self.me);
        let mut n = 0;
        while n < max {
            let Some(buf) = me.queue.pop_front() else {
                break;
            };
            self.rx_frames += 1;
            self.rx_bytes += buf.data().len() as u64;
            out.push(buf);
            n += 1;
        }
        Ok(n)
    }

    fn alloc_tx(&mut self) -> Option<PoolBuf> {
        lock(&self.me).pool.alloc()
    }

    fn alloc_tx_reserved(&mut self) -> Option<PoolBuf> {
        self.alloc_reserved()
    }

    fn tx_burst(&mut self, bufs: &mut Vec<PoolBuf>) -> io::Result<usize> {
        let taken = bufs.len();
        let mut me = lock(&self.me);
        for buf in bufs.drain(..) {
            let len = buf.data().len();
            let mut peer = lock(self.peer.for_frame(buf.data()));
            if peer.queue.len() >= peer.queue_len {
                self.tx_dropped += 1;
            } else if let Some(mut copy) = peer.pool.alloc_reserved() {
                if copy.fill_from(buf.data()) {
                    peer.queue.push_back(copy);
                    self.tx_frames += 1;
                    self.tx_bytes += len as u64;
                } else {
                    // Only when the two pools differ in size, which `pair`
                    // never makes; counted all the same.
                    peer.pool.free(copy);
                    self.tx_dropped += 1;
                    self.tx_oversize += 1;
                }
            } else {
                peer.rx_dropped += 1;
                self.tx_dropped += 1;
            }
            me.pool.free(buf);
        }
        Ok(taken)
    }

    fn recycle(&mut self, buf: PoolBuf) {
        lock(&self.me).pool.free(buf);
    }

    fn info(&self) -> &LinkInfo {
        &self.info
    }

    fn stats(&self) -> LinkStats {
        let me = lock(&self.me);
        LinkStats {
            rx_frames: self.rx_frames,
            rx_bytes: self.rx_bytes,
            tx_frames: self.tx_frames,
            tx_bytes: self.tx_bytes,
            rx_dropped: me.rx_dropped,
            tx_dropped: self.tx_dropped,
            pool_exhausted: me.pool.stats().exhausted,
            rx_oversize: 0,
            rx_copied: 0,
            ring_errors: 0,
            rx_csum_partial_form: 0,
            rx_super_frames: 0,
            rx_super_cut: 0,
            rx_queued_whole: 0,
            rx_super_bad_checksum: 0,
            rx_gro_aggregates: 0,
            rx_gro_joined: 0,
            tx_super_frames: 0,
            tx_kick_short: 0,
            tx_csum_partial: 0,
            tx_csum_refused: 0,
            rx_vnet: Default::default(),
            kernel_rx_drop_refused: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(link: &mut MemoryLink, payload: &[u8]) {
        let mut b = link.alloc_tx().unwrap();
        b.set_len(payload.len());
        b.data_mut().copy_from_slice(payload);
        let mut v = vec![b];
        assert_eq!(link.tx_burst(&mut v).unwrap(), 1);
        assert!(v.is_empty());
    }

    fn recv_all(link: &mut MemoryLink) -> Vec<Vec<u8>> {
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

    #[test]
    fn frames_cross_both_ways_intact() {
        let (mut a, mut b) = MemoryLink::pair(1500, 64);
        assert_ne!(a.info().mac, b.info().mac);
        let f1: Vec<u8> = (0..1514).map(|i| i as u8).collect();
        let f2 = vec![0xab; 60];
        send(&mut a, &f1);
        send(&mut a, &f2);
        send(&mut b, b"hello from b");
        assert_eq!(b.rx_pending(), 2);
        assert_eq!(recv_all(&mut b), vec![f1.clone(), f2.clone()]);
        assert_eq!(recv_all(&mut a), vec![b"hello from b".to_vec()]);
        let sa = a.stats();
        assert_eq!(sa.tx_frames, 2);
        assert_eq!(sa.tx_bytes, 1514 + 60);
        assert_eq!(sa.rx_frames, 1);
        assert_eq!(b.stats().rx_bytes, 1514 + 60);
        // Every buffer is home again.
        assert_eq!(a.pool_stats().available, 64);
        assert_eq!(b.pool_stats().available, 64);
    }

    #[test]
    fn full_queue_drops_are_counted() {
        let mut cfg = MemoryConfig::new(1500, 64);
        cfg.queue_len = 4;
        let (mut a, mut b) = MemoryLink::pair_with(&cfg);
        for i in 0..10u8 {
            send(&mut a, &[i; 64]);
        }
        assert_eq!(a.stats().tx_frames, 4);
        assert_eq!(a.stats().tx_dropped, 6);
        let got = recv_all(&mut b);
        assert_eq!(got.len(), 4);
        assert_eq!(got[3], vec![3u8; 64]);
        assert_eq!(a.pool_stats().available, 64);
        assert_eq!(b.pool_stats().available, 64);
    }

    #[test]
    fn empty_receiver_pool_is_counted_as_rx_drop() {
        let mut cfg = MemoryConfig::new(1500, 4);
        cfg.pool_reserve = 0;
        cfg.queue_len = 16;
        let (mut a, mut b) = MemoryLink::pair_with(&cfg);
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(b.alloc_tx().unwrap());
        }
        send(&mut a, b"one");
        send(&mut a, b"two");
        assert_eq!(a.stats().tx_dropped, 1);
        assert_eq!(b.stats().rx_dropped, 1);
        assert_eq!(b.stats().pool_exhausted, 1);
        assert_eq!(recv_all(&mut b), vec![b"one".to_vec()]);
        for h in held {
            b.recycle(h);
        }
    }

    #[test]
    fn a_multi_queue_nic_spreads_what_the_wire_sends_and_merges_what_it_receives() {
        let cfg = MemoryConfig::new(1500, 64);
        let (mut wire, mut queues) =
            MemoryLink::multi_queue(&cfg, 3, Arc::new(|f: &[u8]| usize::from(f[0])));
        assert_eq!(queues.len(), 3);
        for i in 0..9u8 {
            send(&mut wire, &[i, 0xee]);
        }
        for (q, link) in queues.iter_mut().enumerate() {
            let got = recv_all(link);
            let want: Vec<Vec<u8>> = (0..9u8)
                .filter(|i| usize::from(*i) % 3 == q)
                .map(|i| vec![i, 0xee])
                .collect();
            assert_eq!(got, want, "queue {q}");
        }
        send(&mut queues[2], b"from queue 2");
        send(&mut queues[0], b"from queue 0");
        assert_eq!(
            recv_all(&mut wire),
            vec![b"from queue 2".to_vec(), b"from queue 0".to_vec()]
        );
        assert_eq!(wire.pool_stats().available, 64);
        for q in &queues {
            assert_eq!(q.pool_stats().available, 64);
        }
    }

    #[test]
    fn rx_burst_respects_max() {
        let (mut a, mut b) = MemoryLink::pair(1500, 256);
        for i in 0..40u8 {
            send(&mut a, &[i; 20]);
        }
        let mut out = Vec::new();
        assert_eq!(b.rx_burst(&mut out, 5).unwrap(), 5);
        assert_eq!(b.rx_burst(&mut out, 100).unwrap(), MAX_BURST);
        assert_eq!(b.rx_burst(&mut out, 100).unwrap(), 3);
        assert_eq!(out.len(), 40);
        for (i, f) in out.iter().enumerate() {
            assert_eq!(f.data(), &[i as u8; 20]);
        }
    }

    #[test]
    fn mac_is_settable() {
        let (mut a, _b) = MemoryLink::pair(1500, 8);
        a.set_mac([0x02, 1, 2, 3, 4, 5]);
        a.set_name("left");
        assert_eq!(a.info().mac, [0x02, 1, 2, 3, 4, 5]);
        assert_eq!(a.info().name, "left");
    }
}
