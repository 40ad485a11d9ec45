//! Packet I/O backends behind one trait.
//!
//! A [`Link`] moves frames in bursts between a device and the engine.  Every
//! frame lives in a buffer of the link's own kind ([`Link::Buf`]): a pool
//! buffer for the memory pair, TAP and AF_PACKET; an mbuf for DPDK, a UMEM
//! frame for AF_XDP, a slot of the shared mapping for the shm link.  The
//! engine never copies a frame between the link and the stack; it borrows
//! the bytes of the link's buffer.
//!
//! Buffers are recycled explicitly with [`Link::recycle`] on the fast path.
//! Dropping a buffer instead is always safe: it only loses the buffer to the
//! pool, which the pool's counters show.

pub mod af_packet;
pub mod af_xdp;
pub mod arp_tap;
pub mod csum_site;
#[cfg(feature = "dpdk")]
pub mod dpdk;
pub mod fanout;
pub mod fault;
pub mod gro;
pub mod gso;
pub mod handoff;
mod ifreq;
mod kernel_ports;
pub mod kernel_rx_drop;
pub mod memory;
pub mod nic_rss;
pub mod os;
pub mod packet_socket;
pub mod partial_form;
pub mod pass_tap;
pub mod pcap;
pub mod pool;
mod pseudo_header;
pub mod shm;
pub mod spsc;
pub mod tap;
#[cfg(test)]
mod test_frames;
#[cfg(test)]
mod test_net;
pub mod udp_gso;
pub mod vnet_hdr;

pub use af_packet::{AfPacketLink, RingConfig, RxRingKind};
pub use af_xdp::{AfXdpLink, XdpBindChoice, XdpConfig, XdpFrame, XdpMode, XdpModeChoice};
pub use arp_tap::ArpTap;
pub use fault::{FaultConfig, FaultDirStats, FaultLink, FaultStats};
pub use handoff::FlowHandoff;
pub use kernel_ports::KernelPorts;
pub use memory::{MemoryConfig, MemoryLink, QueueChooser};
pub use pass_tap::PassTap;
pub use pcap::{FrameRecorder, PcapLink, PcapSeries, PcapWriter};
pub use pool::{PacketPool, PoolBuf, PoolStats};
pub use shm::{ShmConfig, ShmFrame, ShmLink, ShmSide, ShmStats};
pub use tap::{TapLink, TapOptions};

use std::io;
use std::os::fd::RawFd;

/// The largest burst a link moves in one call.
pub const MAX_BURST: usize = 32;

/// A frame buffer of a link. Buffers move with their engine to its thread,
/// and a received one may be lent to the stack, which keeps it in a socket
/// until the application has read it (see [`Link::lend_budget`]).
pub trait PacketBuffer: Send + 'static {
    /// The frame's bytes.
    fn data(&self) -> &[u8];
    /// The frame's bytes, writable.
    fn data_mut(&mut self) -> &mut [u8];
    /// Sets the frame length. Panics if `len > capacity()`: only the engine
    /// calls it, with lengths it computed against `capacity()`.
    fn set_len(&mut self, len: usize);
    /// The largest frame this buffer can hold.
    fn capacity(&self) -> usize;
    /// Whether the frame's L4 checksum was left for the NIC to fill
    /// (Linux `TP_STATUS_CSUMNOTREADY`, virtio `NEEDS_CSUM`): the checksum
    /// field then holds only the pseudo-header sum and must not be verified.
    fn csum_partial(&self) -> bool {
        false
    }
    /// Marks the frame's checksum as partial (see [`csum_partial`](Self::csum_partial)).
    /// Buffers that cannot carry the mark ignore it.
    fn set_csum_partial(&mut self, _partial: bool) {}
    /// A TCP super-frame's segment size: the payload of each segment the
    /// link (its NIC's TSO, or the kernel's GSO behind AF_PACKET) cuts it
    /// into; 0 for an ordinary frame. Only set on links whose
    /// [`Link::tso_max`] is above 0, on frames with a partial checksum.
    fn gso_size(&self) -> u16 {
        0
    }
    /// Sets [`gso_size`](Self::gso_size). Buffers of links without
    /// segmentation offload ignore it.
    fn set_gso_size(&mut self, _size: u16) {}
}

/// What a link tells about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkInfo {
    /// The device's name (`tap0`, `veth-us0`, `mem0`).
    pub name: String,
    /// The device's Ethernet address.
    pub mac: [u8; 6],
    /// The largest IP packet (Ethernet payload) the link carries.
    pub mtu: usize,
}

/// Counters of a link, summed on read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkStats {
    pub rx_frames: u64,
    pub rx_bytes: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// Frames the device or ring dropped before the engine saw them.
    pub rx_dropped: u64,
    /// Frames that could not be sent (ring full, device error).
    pub tx_dropped: u64,
    /// Times a buffer was wanted and the pool was empty.
    pub pool_exhausted: u64,
    /// Frames too large for a buffer, dropped on receive.
    pub rx_oversize: u64,
    /// Frames user space copied from the device's ring into another buffer
    /// on receive (AF_PACKET: every frame; AF_XDP and shm: none, the engine
    /// reads the ring's own memory, the UMEM or the peer's slot; TAP: none,
    /// the kernel writes into the buffer).
    pub rx_copied: u64,
    /// Descriptors or ring indexes from the device that could not be true,
    /// and buffers handed back that were not the link's: counted, skipped.
    pub ring_errors: u64,
    /// Frames received without a per-frame checksum mark whose TCP or UDP
    /// checksum the link found in the partial form (an offloading sender
    /// on the same host, through a veth), marked `csum_partial`; see
    /// `wire::partial_checksum`.
    pub rx_csum_partial_form: u64,
    /// TCP super-frames from a peer with segmentation offload (a veth's,
    /// by default), handed over whole or cut.
    pub rx_super_frames: u64,
    /// Of those, cut into MTU-sized segments (`gso.rs`): no large buffer
    /// was free, or the frame was too long for one IP packet.
    pub rx_super_cut: u64,
    /// Super-frames dropped because their whole TCP checksum failed.
    pub rx_super_bad_checksum: u64,
    /// Frames longer than a ring slot, read whole from the socket's
    /// receive queue (AF_PACKET's TPACKET_V2 ring, `TP_STATUS_COPY`).
    pub rx_queued_whole: u64,
    /// Aggregates of two or more received TCP segments handed over
    /// (`gro.rs`).
    pub rx_gro_aggregates: u64,
    /// Segments joined to an earlier one of their flow.
    pub rx_gro_joined: u64,
    /// TCP super-frames handed to the device to cut (segmentation
    /// offload; `Link::tso_max`).
    pub tx_super_frames: u64,
    /// Kicks of a TX ring after which the kernel had left requested
    /// frames behind (its send buffer full, or the driver busy): sent by
    /// the next kick, on the engine's next turn (AF_PACKET).
    pub tx_kick_short: u64,
    /// Frames sent with their TCP or UDP checksum left partial for the
    /// device (or the kernel behind it) to finish: transmit checksum
    /// offload (AF_PACKET's `NEEDS_CSUM`, AF_XDP's TX metadata).
    pub tx_csum_partial: u64,
    /// 1 when the link was to offload transmit checksums and the kernel
    /// or device refused what that needs (AF_PACKET: `PACKET_VNET_HDR`;
    /// AF_XDP: `tx_metadata_len`, or a zero-copy binding): the stack
    /// computes every checksum, as said once on stderr.
    pub tx_csum_refused: u64,
    /// What received `virtio_net_hdr`s said, and the refused ones by
    /// reason (AF_PACKET with `PACKET_VNET_HDR`).
    pub rx_vnet: vnet_hdr::VnetRxStats,
    /// 1 when `kernel_rx_drop` is on and the kernel refused its tc
    /// ingress program (no tcx before Linux 6.6, no BPF permission): the
    /// kernel's IP input then handles every frame the link takes too
    /// (AF_PACKET, `kernel_rx_drop.rs`).
    pub kernel_rx_drop_refused: u64,
}

/// A frame [`Link::tx_place`] queued or handed out, for the caller to
/// write.
#[derive(Debug)]
pub enum TxPlaced<'a, B> {
    /// Queued on the link's own queue, its bytes lent: the caller writes
    /// them all before its next call on the link (the borrow sees to it),
    /// and they leave with the next [`Link::tx_flush`].
    InPlace(&'a mut [u8]),
    /// A buffer of the frame's length, on a link that keeps no queue: for
    /// the caller to write and pass to [`Link::tx_burst`].
    Frame(B),
    /// None: no buffer free (counted in `pool_exhausted`).
    NoBuffer,
    /// None: longer than a buffer holds.
    Oversize,
}

/// A packet I/O device: burst receive and burst transmit over its own buffers.
pub trait Link {
    type Buf: PacketBuffer;

    /// Receives up to `max` frames (at most [`MAX_BURST`]), appending them to
    /// `out`. Never blocks. Returns how many were appended.
    fn rx_burst(&mut self, out: &mut Vec<Self::Buf>, max: usize) -> io::Result<usize>;

    /// Whether the link hands received frames out one at a time
    /// ([`Link::rx_ready`], then [`Link::rx_next`]), so the caller can deal
    /// with each as it comes, with no queue between.  Links that receive
    /// in bursts only say no (the default) and the caller uses
    /// [`Link::rx_burst`].
    const RX_ONE_AT_A_TIME: bool = false;

    /// Readies up to `max` received frames (at most [`MAX_BURST`]) for
    /// [`Link::rx_next`], which hands them out; returns how many it
    /// readied, an upper bound on what `rx_next` gives (a frame found bad
    /// on the way is counted and skipped).  Never blocks.  Only for links
    /// with [`Link::RX_ONE_AT_A_TIME`]; the default readies none.  Callers
    /// call [`Link::service`] first (the engine does, each turn): a link may
    /// leave to it housekeeping that [`Link::rx_burst`] does itself.
    fn rx_ready(&mut self, max: usize) -> io::Result<usize> {
        let _ = max;
        Ok(0)
    }

    /// The next frame [`Link::rx_ready`] readied, or `None` when none is
    /// left.  Frames readied and not taken wait for the next `rx_ready` or
    /// `rx_burst`.
    fn rx_next(&mut self) -> Option<Self::Buf> {
        None
    }

    /// Takes an empty buffer to fill with a frame to send, or `None` when the
    /// pool is exhausted (counted in `pool_exhausted`).
    fn alloc_tx(&mut self) -> Option<Self::Buf>;

    /// Like [`Link::alloc_tx`], but may dip into the pool's reserve: for the
    /// few frames that must go out even when the pool is drained (ARP and
    /// ICMP replies). Links without a reserve take a plain buffer.
    fn alloc_tx_reserved(&mut self) -> Option<Self::Buf> {
        self.alloc_tx()
    }

    /// Sends the frames at the front of `bufs`, removing those it has taken
    /// (sent or dropped and counted). Frames left in `bufs` could not be
    /// queued now (ring full) and may be retried. Never blocks.
    fn tx_burst(&mut self, bufs: &mut Vec<Self::Buf>) -> io::Result<usize>;

    /// Queues one filled frame on the link's own transmit queue, to leave
    /// with the next [`Link::tx_flush`] (or [`Link::tx_burst`], which sends
    /// after it), and returns `None`; or, on a link that keeps no queue of
    /// its own (the default), gives the frame back for the caller to pass
    /// to `tx_burst`. A link that queues takes every frame (sent, or
    /// dropped and counted), so frames never wait in two queues.
    fn tx_push(&mut self, buf: Self::Buf) -> Option<Self::Buf> {
        Some(buf)
    }

    /// A frame of `len` bytes, its checksum marked partial (see
    /// [`PacketBuffer::set_csum_partial`]) or not, for the caller to write.
    /// The default takes a buffer with [`Link::alloc_tx`]; a link that
    /// queues frames itself may queue it in place, with no buffer handed
    /// out and taken back.
    fn tx_place(&mut self, len: usize, csum_partial: bool) -> TxPlaced<'_, Self::Buf> {
        let Some(mut buf) = self.alloc_tx() else {
            return TxPlaced::NoBuffer;
        };
        if len > buf.capacity() {
            self.recycle(buf);
            return TxPlaced::Oversize;
        }
        buf.set_len(len);
        // Always set: a recycled buffer may carry the mark of its last frame.
        buf.set_csum_partial(csum_partial);
        TxPlaced::Frame(buf)
    }

    /// The largest IP packet the link takes as one TCP super-frame, cut
    /// into segments of [`PacketBuffer::gso_size`] on its way out
    /// (segmentation offload); 0 (the default) when frames leave as they
    /// are, at most the MTU. A link that says so takes such frames from
    /// [`Link::tx_place`].
    fn tso_max(&self) -> usize {
        0
    }

    /// [`Link::tx_place`] of a frame to be cut into segments of
    /// `gso_size` payload bytes by the device (0: none; only on a link
    /// with [`Link::tso_max`]). The default places as `tx_place` does and
    /// marks a buffer handed out; a link that lends its ring in place
    /// keeps the size beside the frame.
    fn tx_place_sized(
        &mut self,
        len: usize,
        csum_partial: bool,
        gso_size: u16,
    ) -> TxPlaced<'_, Self::Buf> {
        let mut placed = self.tx_place(len, csum_partial);
        if let TxPlaced::Frame(b) = &mut placed {
            b.set_gso_size(gso_size);
        }
        placed
    }

    /// Whether [`Link::tx_place`] of `len` bytes would lend them in place
    /// on what the link already knows, with no step out of line (a look
    /// at the peer's index, a buffer taken): a caller that asks first may
    /// keep that step, and the registers it needs, off its usual path.
    /// `false` promises nothing: `tx_place` is still the one to ask.
    fn tx_fits_in_place(&self, _len: usize) -> bool {
        false
    }

    /// Frames [`Link::tx_push`] queued that no flush has sent yet.
    fn tx_pending(&self) -> usize {
        0
    }

    /// Sends the frames [`Link::tx_push`] queued. Never blocks.
    fn tx_flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Returns a buffer to the link's pool.
    fn recycle(&mut self, buf: Self::Buf);

    /// Name, address and MTU.
    fn info(&self) -> &LinkInfo;

    /// Counters so far.
    fn stats(&self) -> LinkStats;

    /// Housekeeping between bursts: release frames a wrapper held back,
    /// refill receive rings.  Called once per engine loop turn.
    fn service(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Whether the link will have work without new input (held frames come
    /// due), so the engine must not sleep past `next_event`.
    fn next_event(&self) -> Option<std::time::Instant> {
        None
    }

    /// Whether a frame marked [`PacketBuffer::set_csum_partial`] (its L4
    /// checksum holding only the pseudo-header sum) is finished by the
    /// device or reaches the receiver with the mark, so the stack may leave
    /// checksums to the link.  Links that put frames on a wire unchanged
    /// say no.
    fn tx_checksum_offload(&self) -> bool {
        false
    }

    /// Whether every frame the link hands out has an IPv4 header checksum
    /// that needs no verifying: a NIC that verified it (and drops or marks
    /// the bad), or a link between memories that no wire touches, such as
    /// the shared-memory pair.  The stack then skips that sum on receive.
    /// Links that take frames off a wire unchecked, or that can alter them
    /// (the fault injector), say no.
    fn rx_ip_checksum_offload(&self) -> bool {
        false
    }

    /// How many received buffers the engine may leave with the stack at once
    /// (held by sockets as their receive buffer, so the payload is not
    /// copied) while the link still has buffers to receive and send into.
    /// 0 (the default): give every buffer back at once; links that copy on
    /// receive anyway gain nothing from lending.
    fn lend_budget(&self) -> usize {
        0
    }

    /// Whether a child process that inherited this link by fork may drop
    /// its copy (unmap, close) without disturbing the parent, which keeps
    /// using it.  A copy that cannot be dropped is forgotten, its memory
    /// left mapped (an AF_XDP link would take its socket out of the XDP
    /// program's map; a DPDK port would stop).
    fn droppable_in_fork_child(&self) -> bool {
        false
    }

    /// Makes the link's receive filter take frames for exactly these
    /// addresses of the port (frames for others go to the kernel), where
    /// the link has such a filter (AF_XDP under ustack's classifying
    /// program): returns whether it has.
    fn serve_addresses(
        &self,
        _v4: &[std::net::Ipv4Addr],
        _v6: &[std::net::Ipv6Addr],
    ) -> io::Result<bool> {
        Ok(false)
    }

    /// Makes the link's receive filter send the port's own traffic that
    /// `mode` names over TCP ports `tcp` and UDP ports `udp` to the kernel
    /// (`[kni]` without a TAP), where the link has such a filter: returns
    /// whether it has.
    fn serve_kernel_ports(
        &self,
        _mode: KernelPorts,
        _tcp: &[u16],
        _udp: &[u16],
    ) -> io::Result<bool> {
        Ok(false)
    }

    /// A descriptor that becomes readable when frames wait, for idle sleep;
    /// `None` when the link can only be polled.
    fn rx_fd(&self) -> Option<RawFd> {
        None
    }
}
