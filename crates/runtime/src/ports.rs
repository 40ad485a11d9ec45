//! The links a port can be opened on, behind one type, so one engine can
//! drive ports of different kinds (a TAP and an AF_PACKET port together).
//!
//! Each link keeps its own kind of buffer ([`PortBuf`]): pool buffers for
//! TAP, AF_PACKET and the memory pair, mbufs for DPDK. The engine reads and
//! writes a frame where its link put it; nothing is copied on the way.

use std::cell::RefCell;
use std::io;
use std::os::fd::RawFd;

#[cfg(feature = "dpdk")]
use link::dpdk::{DpdkLink, Mbuf};
use link::{
    AfPacketLink, AfXdpLink, FaultLink, Link, LinkInfo, LinkStats, MemoryLink, PacketBuffer,
    PcapLink, PcapSeries, PoolBuf, ShmFrame, ShmLink, TapLink, TxPlaced, XdpFrame, MAX_BURST,
};

/// The link of a port.
pub enum PortLink {
    Tap(TapLink),
    AfPacket(AfPacketLink),
    /// One AF_XDP socket (`link=af_xdp`); its buffers are UMEM frames.
    /// Boxed: its rings and counters make it the largest link.
    AfXdp(Box<AfXdpLink>),
    Memory(MemoryLink),
    /// A shared-memory link to another ustack process
    /// (`link=shm_create:`/`shm_attach:`); its buffers are its slots.
    Shm(ShmLink),
    /// A DPDK ethdev port (`link=dpdk`, cargo feature `dpdk`).
    #[cfg(feature = "dpdk")]
    Dpdk(DpdkLink),
    /// Any of the above behind the fault injector (`[fault]`).
    Faulty(Box<FaultLink<PortLink>>),
    /// Any of the above captured to pcap files (`[pcap] enable=1`).
    Captured(Box<PcapLink<PortLink, PcapSeries>>),
}

/// A frame buffer of a [`PortLink`]: the buffer kind of the link it came
/// from.
#[derive(Debug)]
pub enum PortBuf {
    /// A pool buffer (TAP, AF_PACKET, memory pair).
    Pool(PoolBuf),
    /// A frame in an AF_XDP link's UMEM.
    Xdp(XdpFrame),
    /// A slot of a shared-memory link.
    Shm(ShmFrame),
    /// A DPDK mbuf.
    #[cfg(feature = "dpdk")]
    Mbuf(Mbuf),
}

impl From<PoolBuf> for PortBuf {
    fn from(b: PoolBuf) -> PortBuf {
        PortBuf::Pool(b)
    }
}

impl From<ShmFrame> for PortBuf {
    fn from(b: ShmFrame) -> PortBuf {
        PortBuf::Shm(b)
    }
}

impl From<XdpFrame> for PortBuf {
    fn from(b: XdpFrame) -> PortBuf {
        PortBuf::Xdp(b)
    }
}

#[cfg(feature = "dpdk")]
impl From<Mbuf> for PortBuf {
    fn from(b: Mbuf) -> PortBuf {
        PortBuf::Mbuf(b)
    }
}

macro_rules! each_buf {
    ($self:expr, $b:ident => $e:expr) => {
        match $self {
            PortBuf::Pool($b) => $e,
            PortBuf::Xdp($b) => $e,
            PortBuf::Shm($b) => $e,
            #[cfg(feature = "dpdk")]
            PortBuf::Mbuf($b) => $e,
        }
    };
}

impl PacketBuffer for PortBuf {
    fn data(&self) -> &[u8] {
        each_buf!(self, b => b.data())
    }
    fn data_mut(&mut self) -> &mut [u8] {
        each_buf!(self, b => b.data_mut())
    }
    fn set_len(&mut self, len: usize) {
        each_buf!(self, b => b.set_len(len))
    }
    fn capacity(&self) -> usize {
        each_buf!(self, b => b.capacity())
    }
    fn csum_partial(&self) -> bool {
        each_buf!(self, b => b.csum_partial())
    }
    fn set_csum_partial(&mut self, partial: bool) {
        each_buf!(self, b => b.set_csum_partial(partial))
    }
    fn gso_size(&self) -> u16 {
        each_buf!(self, b => b.gso_size())
    }
    fn set_gso_size(&mut self, size: u16) {
        each_buf!(self, b => b.set_gso_size(size))
    }
}

/// A buffer kind of [`PortBuf`], for the conversions at the link's edge.
trait Native: PacketBuffer + Into<PortBuf> + Sized + 'static {
    /// The buffer itself if it is of this kind, else it back.
    fn from_port(b: PortBuf) -> Result<Self, PortBuf>;
    /// Per-thread vectors for a burst of this kind (RX, TX): reused, so the
    /// conversion allocates nothing after the first bursts.
    fn scratch() -> &'static std::thread::LocalKey<RefCell<(Vec<Self>, Vec<Self>)>>;
}

thread_local! {
    static POOL_SCRATCH: RefCell<(Vec<PoolBuf>, Vec<PoolBuf>)> =
        RefCell::new((Vec::with_capacity(MAX_BURST), Vec::with_capacity(MAX_BURST)));
}

impl Native for PoolBuf {
    fn from_port(b: PortBuf) -> Result<PoolBuf, PortBuf> {
        match b {
            PortBuf::Pool(p) => Ok(p),
            other => Err(other),
        }
    }
    fn scratch() -> &'static std::thread::LocalKey<RefCell<(Vec<PoolBuf>, Vec<PoolBuf>)>> {
        &POOL_SCRATCH
    }
}

thread_local! {
    static XDP_SCRATCH: RefCell<(Vec<XdpFrame>, Vec<XdpFrame>)> =
        RefCell::new((Vec::with_capacity(MAX_BURST), Vec::with_capacity(MAX_BURST)));
}

impl Native for XdpFrame {
    fn from_port(b: PortBuf) -> Result<XdpFrame, PortBuf> {
        match b {
            PortBuf::Xdp(f) => Ok(f),
            other => Err(other),
        }
    }
    fn scratch() -> &'static std::thread::LocalKey<RefCell<(Vec<XdpFrame>, Vec<XdpFrame>)>> {
        &XDP_SCRATCH
    }
}

thread_local! {
    static SHM_SCRATCH: RefCell<(Vec<ShmFrame>, Vec<ShmFrame>)> =
        RefCell::new((Vec::with_capacity(MAX_BURST), Vec::with_capacity(MAX_BURST)));
}

impl Native for ShmFrame {
    fn from_port(b: PortBuf) -> Result<ShmFrame, PortBuf> {
        match b {
            PortBuf::Shm(f) => Ok(f),
            other => Err(other),
        }
    }
    fn scratch() -> &'static std::thread::LocalKey<RefCell<(Vec<ShmFrame>, Vec<ShmFrame>)>> {
        &SHM_SCRATCH
    }
}

#[cfg(feature = "dpdk")]
thread_local! {
    static MBUF_SCRATCH: RefCell<(Vec<Mbuf>, Vec<Mbuf>)> =
        RefCell::new((Vec::with_capacity(MAX_BURST), Vec::with_capacity(MAX_BURST)));
}

#[cfg(feature = "dpdk")]
impl Native for Mbuf {
    fn from_port(b: PortBuf) -> Result<Mbuf, PortBuf> {
        match b {
            PortBuf::Mbuf(m) => Ok(m),
            other => Err(other),
        }
    }
    fn scratch() -> &'static std::thread::LocalKey<RefCell<(Vec<Mbuf>, Vec<Mbuf>)>> {
        &MBUF_SCRATCH
    }
}

fn rx_native<L: Link>(l: &mut L, out: &mut Vec<PortBuf>, max: usize) -> io::Result<usize>
where
    L::Buf: Native,
{
    L::Buf::scratch().with(|s| {
        let rx = &mut s.borrow_mut().0;
        rx.clear();
        let r = l.rx_burst(rx, max);
        // Most bursts of a busy-polling engine are empty: no drain then.
        if !rx.is_empty() {
            out.extend(rx.drain(..).map(Into::into));
        }
        r
    })
}

fn tx_native<L: Link>(l: &mut L, bufs: &mut Vec<PortBuf>) -> io::Result<usize>
where
    L::Buf: Native,
{
    L::Buf::scratch().with(|s| {
        let tx = &mut s.borrow_mut().1;
        tx.clear();
        let mut foreign = 0;
        for b in bufs.drain(..) {
            match L::Buf::from_port(b) {
                Ok(n) => tx.push(n),
                // A buffer of another link's kind (the engine allocates from
                // the port it sends on, so only a wrapper could do this):
                // its frame is copied into one of ours.
                Err(other) => match l.alloc_tx() {
                    Some(mut n) if n.capacity() >= other.data().len() => {
                        n.set_len(other.data().len());
                        n.data_mut().copy_from_slice(other.data());
                        n.set_csum_partial(other.csum_partial());
                        tx.push(n);
                    }
                    Some(n) => {
                        l.recycle(n);
                        foreign += 1;
                    }
                    None => foreign += 1,
                },
            }
        }
        let r = l.tx_burst(tx);
        bufs.extend(tx.drain(..).map(Into::into));
        r.map(|n| n + foreign)
    })
}

macro_rules! each {
    ($self:expr, $l:ident => $e:expr) => {
        match $self {
            PortLink::Tap($l) => $e,
            PortLink::AfPacket($l) => $e,
            PortLink::AfXdp($l) => $e,
            PortLink::Memory($l) => $e,
            PortLink::Shm($l) => $e,
            #[cfg(feature = "dpdk")]
            PortLink::Dpdk($l) => $e,
            PortLink::Faulty($l) => $e,
            PortLink::Captured($l) => $e,
        }
    };
}

/// Like `each!`, for the links with their own buffer kind: `$pool` for
/// those over pool buffers, `$mbuf` for DPDK, `$fault` for the injector
/// (whose buffers are already `PortBuf`s).
macro_rules! by_kind {
    ($self:expr, $l:ident => native $native:expr, fault $fault:expr) => {
        match $self {
            PortLink::Tap($l) => $native,
            PortLink::AfPacket($l) => $native,
            PortLink::AfXdp(boxed) => {
                let $l = boxed.as_mut();
                $native
            }
            PortLink::Memory($l) => $native,
            PortLink::Shm($l) => $native,
            #[cfg(feature = "dpdk")]
            PortLink::Dpdk($l) => $native,
            PortLink::Faulty($l) => $fault,
            PortLink::Captured($l) => $fault,
        }
    };
}

impl PortLink {
    /// The fault injector's counters, when there is one.
    pub fn fault_stats(&self) -> Option<link::FaultStats> {
        match self {
            PortLink::Faulty(f) => Some(f.fault_stats()),
            PortLink::Captured(c) => c.inner().fault_stats(),
            _ => None,
        }
    }

    /// The device link under the fault injector and the capture.
    pub fn device(&self) -> &PortLink {
        match self {
            PortLink::Faulty(f) => f.inner().device(),
            PortLink::Captured(c) => c.inner().device(),
            other => other,
        }
    }

    /// Capture records that could not be written, when capturing.
    pub fn capture_write_errors(&self) -> Option<u64> {
        match self {
            PortLink::Captured(c) => Some(c.write_errors()),
            PortLink::Faulty(f) => f.inner().capture_write_errors(),
            _ => None,
        }
    }

    /// The kind of link, as the config names it.
    pub fn kind(&self) -> &'static str {
        match self {
            PortLink::Tap(_) => "tap",
            PortLink::AfPacket(_) => "af_packet",
            PortLink::AfXdp(_) => "af_xdp",
            PortLink::Memory(_) => "memory",
            PortLink::Shm(_) => "shm",
            #[cfg(feature = "dpdk")]
            PortLink::Dpdk(_) => "dpdk",
            PortLink::Faulty(f) => f.inner().kind(),
            PortLink::Captured(c) => c.inner().kind(),
        }
    }

    /// Counters a backend has beyond [`LinkStats`] (`name`, value).
    pub fn extra_stats(&self) -> Vec<(&'static str, u64)> {
        match self {
            #[cfg(feature = "dpdk")]
            PortLink::Dpdk(d) => d.extra_stats().to_vec(),
            PortLink::Faulty(f) => f.inner().extra_stats(),
            PortLink::Captured(c) => c.inner().extra_stats(),
            _ => Vec::new(),
        }
    }
}

impl Link for PortLink {
    type Buf = PortBuf;

    fn rx_burst(&mut self, out: &mut Vec<PortBuf>, max: usize) -> io::Result<usize> {
        by_kind!(self, l => native rx_native(l, out, max), fault l.rx_burst(out, max))
    }

    fn alloc_tx(&mut self) -> Option<PortBuf> {
        by_kind!(self, l => native l.alloc_tx().map(Into::into), fault l.alloc_tx())
    }

    fn alloc_tx_reserved(&mut self) -> Option<PortBuf> {
        by_kind!(self, l => native l.alloc_tx_reserved().map(Into::into), fault l.alloc_tx_reserved())
    }

    fn tx_burst(&mut self, bufs: &mut Vec<PortBuf>) -> io::Result<usize> {
        by_kind!(self, l => native tx_native(l, bufs), fault l.tx_burst(bufs))
    }

    fn recycle(&mut self, buf: PortBuf) {
        by_kind!(self, l => native match Native::from_port(buf) {
            Ok(b) => l.recycle(b),
            // Another link's buffer: dropping it returns it where it
            // belongs (an mbuf to its mempool) or loses it to no pool.
            Err(other) => drop(other),
        }, fault l.recycle(buf))
    }

    fn info(&self) -> &LinkInfo {
        each!(self, l => l.info())
    }

    fn stats(&self) -> LinkStats {
        each!(self, l => l.stats())
    }

    fn service(&mut self) -> io::Result<()> {
        match self {
            // The injector services the link inside it too (AF_XDP refills).
            PortLink::Faulty(f) => f.service(),
            PortLink::Captured(c) => c.service(),
            PortLink::AfXdp(x) => x.service(),
            // Publishes the consumer index of the frames taken back.
            PortLink::Shm(l) => l.service(),
            #[cfg(feature = "dpdk")]
            PortLink::Dpdk(d) => d.service(),
            _ => Ok(()),
        }
    }

    /// AF_PACKET owes a kick when the kernel left requested TX slots
    /// behind; other links here send all they take in `tx_burst`.
    fn tx_pending(&self) -> usize {
        match self {
            PortLink::AfPacket(l) => l.tx_pending(),
            _ => 0,
        }
    }

    fn tx_flush(&mut self) -> io::Result<()> {
        match self {
            PortLink::AfPacket(l) => l.tx_flush(),
            _ => Ok(()),
        }
    }

    fn next_event(&self) -> Option<std::time::Instant> {
        match self {
            PortLink::Faulty(f) => f.next_event(),
            PortLink::Captured(c) => c.next_event(),
            PortLink::AfXdp(x) => x.next_event(),
            _ => None,
        }
    }

    fn rx_fd(&self) -> Option<RawFd> {
        each!(self, l => l.rx_fd())
    }

    fn droppable_in_fork_child(&self) -> bool {
        each!(self, l => l.droppable_in_fork_child())
    }

    fn serve_addresses(
        &self,
        v4: &[std::net::Ipv4Addr],
        v6: &[std::net::Ipv6Addr],
    ) -> std::io::Result<bool> {
        each!(self, l => l.serve_addresses(v4, v6))
    }

    fn serve_kernel_ports(
        &self,
        mode: link::KernelPorts,
        tcp: &[u16],
        udp: &[u16],
    ) -> std::io::Result<bool> {
        each!(self, l => l.serve_kernel_ports(mode, tcp, udp))
    }

    fn tx_checksum_offload(&self) -> bool {
        each!(self, l => l.tx_checksum_offload())
    }

    fn rx_ip_checksum_offload(&self) -> bool {
        each!(self, l => l.rx_ip_checksum_offload())
    }

    fn lend_budget(&self) -> usize {
        each!(self, l => l.lend_budget())
    }

    /// Only a bare AF_PACKET port cuts super-frames: behind the fault
    /// injector or the capture, a super-frame would be corrupted or
    /// recorded whole, not as segments cross the wire.
    fn tso_max(&self) -> usize {
        match self {
            PortLink::AfPacket(l) => l.tso_max(),
            #[cfg(feature = "dpdk")]
            PortLink::Dpdk(l) => l.tso_max(),
            _ => 0,
        }
    }

    /// AF_PACKET lends its TX ring's slots in place.
    fn tx_place_sized(
        &mut self,
        len: usize,
        csum_partial: bool,
        gso_size: u16,
    ) -> TxPlaced<'_, PortBuf> {
        if let PortLink::AfPacket(l) = self {
            return match l.tx_place_sized(len, csum_partial, gso_size) {
                TxPlaced::Frame(b) => TxPlaced::Frame(b.into()),
                TxPlaced::InPlace(bytes) => TxPlaced::InPlace(bytes),
                TxPlaced::NoBuffer => TxPlaced::NoBuffer,
                TxPlaced::Oversize => TxPlaced::Oversize,
            };
        }
        let mut placed = self.tx_place(len, csum_partial);
        if let TxPlaced::Frame(b) = &mut placed {
            b.set_gso_size(gso_size);
        }
        placed
    }

    fn tx_fits_in_place(&self, len: usize) -> bool {
        match self {
            PortLink::AfPacket(l) => l.tx_fits_in_place(len),
            _ => false,
        }
    }

    fn tx_place(&mut self, len: usize, csum_partial: bool) -> TxPlaced<'_, PortBuf> {
        if let PortLink::AfPacket(l) = self {
            // Its own: super-frames take its large buffers.
            return match l.tx_place(len, csum_partial) {
                TxPlaced::Frame(b) => TxPlaced::Frame(b.into()),
                TxPlaced::InPlace(bytes) => TxPlaced::InPlace(bytes),
                TxPlaced::NoBuffer => TxPlaced::NoBuffer,
                TxPlaced::Oversize => TxPlaced::Oversize,
            };
        }
        #[cfg(feature = "dpdk")]
        if let PortLink::Dpdk(l) = self {
            // Its own: super-frames take its TSO pool's buffers.
            return match l.tx_place(len, csum_partial) {
                TxPlaced::Frame(b) => TxPlaced::Frame(b.into()),
                TxPlaced::InPlace(bytes) => TxPlaced::InPlace(bytes),
                TxPlaced::NoBuffer => TxPlaced::NoBuffer,
                TxPlaced::Oversize => TxPlaced::Oversize,
            };
        }
        // `Link::tx_place`'s own way.
        let Some(mut buf) = self.alloc_tx() else {
            return TxPlaced::NoBuffer;
        };
        if len > buf.capacity() {
            self.recycle(buf);
            return TxPlaced::Oversize;
        }
        buf.set_len(len);
        buf.set_csum_partial(csum_partial);
        TxPlaced::Frame(buf)
    }
}
