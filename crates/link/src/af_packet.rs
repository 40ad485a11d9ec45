//! AF_PACKET with TPACKET rings: a kernel NIC driven from user space
//! without DPDK or XDP.
//!
//! One `SOCK_RAW` packet socket, bound to one interface for all protocols,
//! with two rings in one shared mapping:
//! - RX: TPACKET_V2 frame slots by default, each handed over
//!   (`TP_STATUS_USER`) as soon as the kernel wrote it; a frame longer
//!   than a slot is read whole from the socket's receive queue
//!   (`TP_STATUS_COPY`, see `af_packet/rx_ring.rs`). Or TPACKET_V3 blocks
//!   (`RingConfig::rx_ring`), handed over when full or when their retire
//!   timer fires. We copy each frame into a pool buffer and give the slot
//!   or block back. A frame received with a partial checksum
//!   (`TP_STATUS_CSUMNOTREADY`) is flagged `csum_partial`. A VLAN tag the
//!   kernel took out into metadata is put back into the frame. Large
//!   receive (`RingConfig::gro`): a TCP super-frame from a peer with
//!   segmentation offload (a veth's) is handed over whole in a 64 KiB
//!   buffer; without one free (or tagged), `gso.rs` cuts it into segments
//!   of the MTU. In-order TCP segments of a flow read in one burst are
//!   joined into one (`gro.rs`). What is done with each frame is in
//!   `af_packet/receive.rs`.
//! - TX: frames of fixed size, in the RX ring's TPACKET version (each slot
//!   a `tpacket2_hdr` or `tpacket3_hdr` followed by the frame at offset 32
//!   or 48). We copy a frame in, mark it `TP_STATUS_SEND_REQUEST`, and kick the
//!   kernel with `send(fd, NULL, 0, MSG_DONTWAIT)`. With `RingConfig::tso`
//!   (`PACKET_VNET_HDR`) a `virtio_net_hdr` goes before each frame: the
//!   kernel finishes partial TCP/UDP checksums and cuts TCP super-frames
//!   (or a veth passes them to its peer whole).
//!
//! The socket also asks for `PACKET_QDISC_BYPASS` (frames go straight to
//! the driver), `PACKET_IGNORE_OUTGOING` (our own transmissions do not come
//! back on RX) and `PACKET_LOSS` (a malformed TX slot is skipped rather than
//! stalling the ring). The link uses the interface's own MAC and MTU: the
//! stack takes the interface over, so the kernel should hold no address on
//! it.
//!
//! Latency: with TPACKET_V3 a frame may wait up to the retire timeout
//! (1 ms at least) before it is seen, which is why V2 is the default.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::csum_site;
use crate::gro::LARGE_BUF_SIZE;
use crate::ifreq::{cvt, CtlSocket};
use crate::kernel_rx_drop::KernelRxDrop;
use crate::pool::{PacketPool, PoolBuf, PoolStats};
use crate::vnet_hdr::VNET_HDR_LEN;
use crate::{Link, LinkInfo, LinkStats, PacketBuffer, TxPlaced, MAX_BURST};

mod receive;
mod rx_ring;

use receive::{FrameMeta, Receiver};
pub use rx_ring::RxRingKind;
use rx_ring::{RingFrame, SlotCursor};

/// Ethernet header and one VLAN tag.
const FRAME_OVERHEAD: usize = 18;

/// Kernel ABI of `<linux/if_packet.h>`, declared here so the layouts this
/// file depends on are in view and checked by size.
mod abi {
    pub const SOL_PACKET: libc::c_int = 263;
    pub const PACKET_RX_RING: libc::c_int = 5;
    pub const PACKET_STATISTICS: libc::c_int = 6;
    pub const PACKET_COPY_THRESH: libc::c_int = 7;
    pub const PACKET_VERSION: libc::c_int = 10;
    pub const PACKET_TX_RING: libc::c_int = 13;
    pub const PACKET_LOSS: libc::c_int = 14;
    pub const PACKET_VNET_HDR: libc::c_int = 15;
    pub const PACKET_QDISC_BYPASS: libc::c_int = 20;
    pub const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
    /// `enum tpacket_versions`: V1 = 0, V2 = 1, V3 = 2.
    pub const TPACKET_V2: libc::c_int = 1;
    pub const TPACKET_V3: libc::c_int = 2;

    pub const TP_STATUS_KERNEL: u32 = 0;

    pub const TP_STATUS_SEND_REQUEST: u32 = 1 << 0;
    pub const TP_STATUS_SENDING: u32 = 1 << 1;
    pub const TP_STATUS_WRONG_FORMAT: u32 = 1 << 2;

    /// `struct tpacket_req3`; a V1/V2 ring reads its first four fields
    /// (`struct tpacket_req`).
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    pub struct TpacketReq3 {
        pub tp_block_size: u32,
        pub tp_block_nr: u32,
        pub tp_frame_size: u32,
        pub tp_frame_nr: u32,
        pub tp_retire_blk_tov: u32,
        pub tp_sizeof_priv: u32,
        pub tp_feature_req_word: u32,
    }

    /// `struct tpacket_block_desc` with its `tpacket_hdr_v1` inlined.
    #[repr(C)]
    #[derive(Debug, Clone, Copy)]
    pub struct BlockDesc {
        pub version: u32,
        pub offset_to_priv: u32,
        pub block_status: u32,
        pub num_pkts: u32,
        pub offset_to_first_pkt: u32,
        pub blk_len: u32,
        pub seq_num: u64,
        pub ts_first_pkt: [u32; 2],
        pub ts_last_pkt: [u32; 2],
    }

    /// `struct tpacket_stats_v3`.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    pub struct TpacketStatsV3 {
        pub tp_packets: u32,
        pub tp_drops: u32,
        pub tp_freeze_q_cnt: u32,
    }

    /// Offset of `block_status` in a V3 block.
    pub const BLOCK_STATUS_OFFSET: usize = 8;

    const _: () = assert!(std::mem::size_of::<TpacketReq3>() == 28);
    const _: () = assert!(std::mem::size_of::<BlockDesc>() == 48);
    const _: () = assert!(std::mem::offset_of!(BlockDesc, block_status) == BLOCK_STATUS_OFFSET);
}

/// Where a TX slot's fields are, by TPACKET version.
#[derive(Debug, Clone, Copy)]
struct TxLayout {
    /// `tp_status`.
    status: usize,
    /// `tp_snaplen` and `tp_len`.
    snaplen: usize,
    len: usize,
    /// Where the frame's bytes start: `tp_hdrlen - sizeof(struct
    /// sockaddr_ll)` aligned to 16, which is what the kernel uses when
    /// `PACKET_TX_HAS_OFF` is off.
    data: usize,
}

impl TxLayout {
    /// `struct tpacket2_hdr`.
    const V2: TxLayout = TxLayout {
        status: 0,
        len: 4,
        snaplen: 8,
        data: 32,
    };
    /// `struct tpacket3_hdr` (its `tp_next_offset`, at 0, must be 0).
    const V3: TxLayout = TxLayout {
        snaplen: 12,
        len: 16,
        status: 20,
        data: 48,
    };
}

/// The RX ring and the reader's place in it.
enum RxRing {
    /// TPACKET_V2: fixed-size frame slots.
    Slots(SlotCursor),
    /// TPACKET_V3: blocks of frames.
    Blocks {
        block_size: usize,
        block_count: usize,
        block: usize,
        cursor: Option<BlockCursor>,
    },
}

/// The most a frame's slot holds beside the frame: a `tpacket2_hdr`
/// (32), a `sockaddr_ll` (20), 16-byte alignment and a `virtio_net_hdr`
/// (10), as `tpacket_rcv` lays a slot out.
const V2_SLOT_OVERHEAD: usize = 96;

/// What a default V2 RX slot has beyond a power of two: one cache line.
/// With slots of a power of two, every slot's header (the status word the
/// kernel and the engine both look at, and the one `tpacket_rcv` reads a
/// quarter of the ring ahead to see whether there is room) falls in the
/// same few cache sets: 2048 slots of 2 KiB put 2048 headers into 64 of
/// a 1 MiB L2's sets, so each is a miss. Skewed by a line, they spread
/// over all sets. The kernel's receive softirq took 612-690 ns per
/// 150-byte frame with 2112-byte slots against 747-803 with 2048-byte
/// ones (2048 slots, a sender on the other core through a veth, RPS:
/// `scripts/rx-frame-cost.sh`, runs where the reader dropped under 2%).
const RX_SLOT_SKEW: usize = 64;

/// The most bytes in a V2 RX block: blocks hold whole slots, so with
/// slots skewed off a power of two each block holds several (31 of 2112
/// bytes in 64 KiB, the last 64 bytes unused) rather than one per page.
const RX_BLOCK_BYTES: usize = 64 << 10;

/// The socket's receive buffer, where frames longer than a V2 slot wait
/// whole: room for about a hundred 64 KiB super-frames.
const COPY_RCVBUF: libc::c_int = 8 << 20;

/// Ring sizes and socket choices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingConfig {
    /// The RX ring's layout (and the TX ring's TPACKET version).
    pub rx_ring: RxRingKind,
    /// V2: RX frame slots.
    pub rx_frame_count: usize,
    /// V2: size of an RX slot; a multiple of 64 of at least 2048. `None`:
    /// the smallest power of two that holds an MTU-sized frame (a tagged
    /// one, after a `virtio_net_hdr`), and a cache line more (see
    /// [`RX_SLOT_SKEW`]). Longer frames come through the socket's queue.
    pub rx_frame_size: Option<usize>,
    /// V3: size of an RX block; a power of two, at least a page.
    pub rx_block_size: usize,
    /// V3: RX blocks.
    pub rx_block_count: usize,
    /// V3: milliseconds after which the kernel hands over a block that is
    /// not full (at least 1).
    pub rx_retire_ms: u32,
    /// TX slots.
    pub tx_frame_count: usize,
    /// Size of a TX slot (header included); a power of two. `None`: the
    /// smallest that holds an MTU-sized frame, at least 2048.
    pub tx_frame_size: Option<usize>,
    /// Ask for `PACKET_QDISC_BYPASS`.
    pub qdisc_bypass: bool,
    /// Buffers of 64 KiB for frames larger than the pool's: TCP
    /// super-frames handed over whole, and aggregates. With none, every
    /// super-frame is cut into MTU-sized segments and nothing aggregates.
    pub large_buffers: usize,
    /// Receive aggregation of in-order TCP segments per burst (`gro.rs`).
    pub gro: bool,
    /// Segmentation offload on transmit, through a `virtio_net_hdr`
    /// before each frame (`PACKET_VNET_HDR`): the stack hands TCP
    /// super-frames of up to 64 KiB, which the kernel passes on as one
    /// (to a veth's peer) or cuts into segments (its GSO, or the NIC's
    /// TSO). TX slots then hold 64 KiB frames (`tx_frame_size` 128 KiB by
    /// default). Implies `tx_checksum` (a super-frame's checksum is
    /// finished per segment) and needs `PACKET_VNET_HDR`, which it turns
    /// on whatever `vnet_hdr` says.
    pub tso: bool,
    /// Checksum offload on transmit (with `vnet_hdr`): the stack leaves
    /// TCP and UDP checksums partial (the pseudo-header's sum) and each
    /// such frame's `virtio_net_hdr` says `NEEDS_CSUM` with where the
    /// checksum lies. The kernel makes the frame a `CHECKSUM_PARTIAL`
    /// skb, which the NIC finishes, or the kernel itself
    /// (`skb_checksum_help`) on a device without the offload, or which
    /// a veth's peer takes as it is (its stack trusts a partial skb).
    /// Without `PACKET_VNET_HDR` (refused by the kernel, or `vnet_hdr`
    /// off) every checksum is the stack's.
    pub tx_checksum: bool,
    /// A `virtio_net_hdr` before each frame both ways
    /// (`PACKET_VNET_HDR`), when the kernel allows it: a received
    /// super-frame's header gives its segment size (TCP: cut at the
    /// sender's MSS, not the MTU; UDP GSO: cut into its datagrams) and
    /// whether its checksum is partial (`vnet_hdr.rs`). On transmit it
    /// carries `tx_checksum` and `tso`; a frame with neither says
    /// nothing (all zeros).
    pub vnet_hdr: bool,
    /// Drop the frames the link receives for the port's addresses at tc
    /// ingress, after the socket has its copy, so the kernel's IP input
    /// does not handle them too (`kernel_rx_drop.rs`; the addresses come
    /// through [`Link::serve_addresses`]).
    pub kernel_rx_drop: bool,
}

impl Default for RingConfig {
    /// A V2 RX ring of 2048 slots (4.2 MiB with 2112-byte slots); for V3, 16
    /// RX blocks of 256 KiB (4 MiB), 1 ms retire; 256 TX slots, 40 large
    /// buffers (2.5 MiB), aggregation on, a `virtio_net_hdr` and transmit
    /// checksum offload.
    fn default() -> RingConfig {
        RingConfig {
            rx_ring: RxRingKind::V2,
            rx_frame_count: 2048,
            rx_frame_size: None,
            rx_block_size: 1 << 18,
            rx_block_count: 16,
            rx_retire_ms: 1,
            tx_frame_count: 256,
            tx_frame_size: None,
            qdisc_bypass: true,
            large_buffers: 40,
            gro: true,
            tso: false,
            tx_checksum: true,
            vnet_hdr: true,
            kernel_rx_drop: true,
        }
    }
}

/// The shared mapping of both rings.
struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

impl Mapping {
    /// The status word at `offset`, shared with the kernel.
    fn status(&self, offset: usize) -> &AtomicU32 {
        assert!(offset + 4 <= self.len && offset & 3 == 0);
        // SAFETY: checked above to lie in the mapping and be 4-aligned
        // (the mapping is page-aligned; blocks and slots are powers of
        // two of at least 2048 bytes, and the status fields sit at 0, 8
        // or 20). The kernel updates it concurrently, which is why it is
        // only ever read and written atomically. The reference lives no
        // longer than `&self`, and the mapping as long as the link.
        unsafe { &*self.base.as_ptr().add(offset).cast::<AtomicU32>() }
    }

    /// Bytes `[offset, offset + len)` of the mapping; see
    /// [`AfPacketLink::bytes`] for when they may be looked at. Borrows the
    /// mapping alone, so the link's other fields stay free to use.
    fn bytes(&self, offset: usize, len: usize) -> &[u8] {
        assert!(offset + len <= self.len);
        // SAFETY: bounds checked above; the callers only look at parts of
        // a block the kernel has handed over, or at a TX slot written in
        // place and not yet requested (the kernel does not write those
        // while the slice lives), and the slice lives no longer than the
        // borrow of the mapping.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(offset), len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly what mmap returned, unmapped once,
        // and no reference into the mapping outlives the link that owns it.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// Where the RX reader is inside the current block.
#[derive(Debug, Clone, Copy)]
struct BlockCursor {
    /// Frames not yet taken.
    left: u32,
    /// Offset of the next frame from the block's start.
    offset: usize,
}

/// A link over an AF_PACKET socket with TPACKET rings.
pub struct AfPacketLink {
    // Field order matters for drop: unmap before the socket closes.
    map: Mapping,
    fd: OwnedFd,
    info: LinkInfo,

    ring: RxRing,
    rx: Receiver,
    /// Where a frame longer than a V2 slot is read into when no large
    /// buffer is free (grown on first use).
    copy_scratch: Vec<u8>,

    tx_layout: TxLayout,
    tx_base: usize,
    tx_frame_size: usize,
    tx_frame_count: usize,
    tx_next: usize,
    /// Slots marked SEND_REQUEST wait for a kick: the last one was
    /// refused (busy) or the kernel stopped short of the last slot we
    /// filled (see [`AfPacketLink::kick`]).
    tx_need_kick: bool,
    /// The last kick's frame was refused by the driver (ENOBUFS): the
    /// owed kick waits for the next burst.
    tx_refused: bool,
    /// Kicks after which the kernel had left requested slots behind.
    tx_kick_short: u64,
    /// Frames written in place (`tx_place_sized`) in the slots from
    /// `tx_next` on, not yet requested: each one's length, whether its
    /// checksum is partial, and its segment size. Requested in order by
    /// the next flush or burst.
    tx_lent: Vec<LentFrame>,

    qdisc_bypass: bool,
    ignore_outgoing: bool,
    /// Each frame goes after a `virtio_net_hdr`, both ways
    /// (`PACKET_VNET_HDR`: `RingConfig::vnet_hdr` or `tso`).
    vnet_hdr: bool,
    /// Partial checksums are sent for the kernel to finish
    /// (`RingConfig::tx_checksum` or `tso`, with `PACKET_VNET_HDR`).
    tx_checksum: bool,
    /// TCP super-frames are sent for the kernel to cut (`RingConfig::tso`).
    tso: bool,
    /// Frames sent with a partial checksum and `NEEDS_CSUM`.
    tx_csum_partial: u64,
    /// 1 when transmit checksum offload was asked and the kernel refused
    /// `PACKET_VNET_HDR` it needs.
    tx_csum_refused: bool,
    /// TCP super-frames sent for the kernel to cut (or pass on whole).
    tx_super_frames: u64,

    tx_frames: u64,
    tx_bytes: u64,
    tx_dropped: u64,
    /// Ring drops reported by PACKET_STATISTICS (which resets on read).
    kernel_drops: Cell<u64>,
    /// The tc ingress program that keeps the kernel's IP input off the
    /// port's frames (`RingConfig::kernel_rx_drop`), shared by the
    /// process's links on the interface.
    kernel_rx_drop: Option<Arc<KernelRxDrop>>,
    /// `kernel_rx_drop` was asked for and the kernel refused it.
    kernel_rx_drop_refused: bool,
}

// SAFETY: the mapping and socket are owned by this value alone; nothing in
// them is tied to the thread that created them, so the link may move to an
// engine thread. It is not `Sync` (it has a `Cell`), so one thread uses it
// at a time.
unsafe impl Send for AfPacketLink {}

fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the option value is a live `int` and its size is passed.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

fn setsockopt_req(fd: RawFd, name: libc::c_int, req: &abi::TpacketReq3) -> io::Result<()> {
    // SAFETY: `req` is a live `struct tpacket_req3` and its size is passed.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            abi::SOL_PACKET,
            name,
            (req as *const abi::TpacketReq3).cast(),
            std::mem::size_of::<abi::TpacketReq3>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

impl AfPacketLink {
    /// Opens interface `ifname` (brought up if it is down) with rings as
    /// `ring` says, receiving into buffers of `pool`.
    ///
    /// The link's MTU is the interface's, or less when the pool's buffers
    /// (`buf_size - 18`) cannot hold a full frame.
    pub fn open(ifname: &str, pool: PacketPool, ring: &RingConfig) -> io::Result<AfPacketLink> {
        let ctl = CtlSocket::new()?;
        let ifindex = ctl.index(ifname)?;
        let mac = ctl.hwaddr(ifname)?;
        let dev_mtu = ctl.mtu(ifname)?;
        ctl.set_up(ifname)?;
        let mtu = dev_mtu.min(pool.buf_size().saturating_sub(FRAME_OVERHEAD));

        let page = page_size();
        let (version, tx_layout) = match ring.rx_ring {
            RxRingKind::V2 => (abi::TPACKET_V2, TxLayout::V2),
            RxRingKind::V3 => (abi::TPACKET_V3, TxLayout::V3),
        };
        if ring.rx_ring == RxRingKind::V3
            && (!ring.rx_block_size.is_power_of_two() || ring.rx_block_size < page)
        {
            return Err(invalid(format!(
                "rx_block_size {} must be a power of two of at least {page}",
                ring.rx_block_size
            )));
        }
        let rx_frame_size = ring.rx_frame_size.unwrap_or_else(|| {
            (V2_SLOT_OVERHEAD + VNET_HDR_LEN + dev_mtu + FRAME_OVERHEAD)
                .next_power_of_two()
                .max(2048)
                + RX_SLOT_SKEW
        });
        if ring.rx_ring == RxRingKind::V2
            && (!rx_frame_size.is_multiple_of(64) || rx_frame_size < 2048)
        {
            return Err(invalid(format!(
                "rx_frame_size {rx_frame_size} must be a multiple of 64 of at least 2048"
            )));
        }
        if ring.rx_block_count == 0 || ring.rx_frame_count == 0 || ring.tx_frame_count == 0 {
            return Err(invalid("ring counts must be above zero".into()));
        }
        let largest_frame = if ring.tso {
            VNET_HDR_LEN + MAX_SUPER_FRAME
        } else {
            VNET_HDR_LEN + dev_mtu + FRAME_OVERHEAD
        };
        let tx_frame_size = ring.tx_frame_size.unwrap_or_else(|| {
            (tx_layout.data + largest_frame)
                .next_power_of_two()
                .max(2048)
        });
        if !tx_frame_size.is_power_of_two() || tx_frame_size <= tx_layout.data + 14 {
            return Err(invalid(format!("bad tx_frame_size {tx_frame_size}")));
        }
        // One slot per block if slots are a page or more, else a page of
        // slots per block: either way blocks are whole pages and slot `i`
        // sits at `i * tx_frame_size`. (V2 RX slots: see below.)
        let tx_block_size = tx_frame_size.max(page);
        let tx_per_block = tx_block_size / tx_frame_size;
        let tx_block_count = ring.tx_frame_count.div_ceil(tx_per_block);
        let tx_frame_count = tx_block_count * tx_per_block;

        // Protocol 0: nothing is received until `bind` below, after the
        // rings exist.
        let fd = crate::packet_socket::packet_socket()?;
        let s = fd.as_raw_fd();
        setsockopt_int(s, abi::SOL_PACKET, abi::PACKET_VERSION, version)?;
        setsockopt_int(s, abi::SOL_PACKET, abi::PACKET_LOSS, 1)?;
        // Before the rings: the kernel refuses it once they exist.
        let vnet_hdr = if ring.tso {
            setsockopt_int(s, abi::SOL_PACKET, abi::PACKET_VNET_HDR, 1)
                .map_err(|e| io::Error::new(e.kind(), format!("PACKET_VNET_HDR (for tso): {e}")))?;
            true
        } else {
            // Without it, received frames are taken as before: the MTU
            // is the segment size guessed for super-frames.
            let on = ring.vnet_hdr
                && match setsockopt_int(s, abi::SOL_PACKET, abi::PACKET_VNET_HDR, 1) {
                    Ok(()) => true,
                    Err(e) => {
                        eprintln!(
                            "ustack: af_packet {ifname}: the kernel refused PACKET_VNET_HDR ({e}): \
                             no virtio_net_hdr, every checksum sent is the stack's"
                        );
                        false
                    }
                };
            on
        };

        let (rx_req, rx_ring) = match ring.rx_ring {
            RxRingKind::V2 => {
                // Whole pages of whole slots; the kernel counts the slots
                // per block as block_size / slot size, and so do we.
                let fit = (RX_BLOCK_BYTES / rx_frame_size).max(1);
                let block_size = (fit * rx_frame_size).next_multiple_of(page);
                let per_block = block_size / rx_frame_size;
                let block_count = ring.rx_frame_count.div_ceil(per_block);
                let req = abi::TpacketReq3 {
                    tp_block_size: block_size as u32,
                    tp_block_nr: block_count as u32,
                    tp_frame_size: rx_frame_size as u32,
                    tp_frame_nr: (block_count * per_block) as u32,
                    ..Default::default()
                };
                let cursor = SlotCursor::new(
                    rx_frame_size,
                    block_count * per_block,
                    per_block,
                    block_size,
                );
                (req, RxRing::Slots(cursor))
            }
            RxRingKind::V3 => {
                let req = abi::TpacketReq3 {
                    tp_block_size: ring.rx_block_size as u32,
                    tp_block_nr: ring.rx_block_count as u32,
                    // V3 frames are variable; the kernel only checks the
                    // arithmetic.
                    tp_frame_size: 2048,
                    tp_frame_nr: (ring.rx_block_size / 2048 * ring.rx_block_count) as u32,
                    tp_retire_blk_tov: ring.rx_retire_ms.max(1),
                    tp_sizeof_priv: 0,
                    tp_feature_req_word: 0,
                };
                let blocks = RxRing::Blocks {
                    block_size: ring.rx_block_size,
                    block_count: ring.rx_block_count,
                    block: 0,
                    cursor: None,
                };
                (req, blocks)
            }
        };
        setsockopt_req(s, abi::PACKET_RX_RING, &rx_req)?;
        if ring.rx_ring == RxRingKind::V2 {
            // A frame longer than a slot is also queued whole on the
            // socket (any value above 0 asks for it), where it waits in
            // the receive buffer: made large enough for a burst of
            // super-frames (SO_RCVBUFFORCE when privileged, else as far
            // as `rmem_max` allows).
            setsockopt_int(s, abi::SOL_PACKET, abi::PACKET_COPY_THRESH, 1)?;
            if setsockopt_int(s, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, COPY_RCVBUF).is_err() {
                setsockopt_int(s, libc::SOL_SOCKET, libc::SO_RCVBUF, COPY_RCVBUF)?;
            }
        }
        let tx_req = abi::TpacketReq3 {
            tp_block_size: tx_block_size as u32,
            tp_block_nr: tx_block_count as u32,
            tp_frame_size: tx_frame_size as u32,
            tp_frame_nr: tx_frame_count as u32,
            // The kernel refuses these on a V3 TX ring.
            tp_retire_blk_tov: 0,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setsockopt_req(s, abi::PACKET_TX_RING, &tx_req)?;
        // Each frame the kernel took from the TX ring counts against the
        // socket's send buffer until the receiver lets it go (a veth
        // peer: once its IP layer took it off its backlog). With the
        // default (`wmem_default`, ~200 KiB: three super-frames) the
        // kernel stops short of the slots requested while the peer's core
        // is busy; so the buffer is made to hold the whole ring.
        let tx_ring_bytes = (tx_block_size * tx_block_count).min(i32::MAX as usize / 2) as i32;
        if setsockopt_int(s, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, tx_ring_bytes).is_err() {
            setsockopt_int(s, libc::SOL_SOCKET, libc::SO_SNDBUF, tx_ring_bytes)?;
        }

        let rx_len = rx_req.tp_block_size as usize * rx_req.tp_block_nr as usize;
        let map_len = rx_len + tx_block_size * tx_block_count;
        // SAFETY: maps the rings just set up on `s`, RX first then TX, as
        // the kernel lays them out; the result is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                s,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let map = Mapping {
            base: NonNull::new(base.cast()).ok_or_else(|| io::Error::other("mmap gave NULL"))?,
            len: map_len,
        };

        let qdisc_bypass = ring.qdisc_bypass
            && setsockopt_int(s, abi::SOL_PACKET, abi::PACKET_QDISC_BYPASS, 1).is_ok();
        let ignore_outgoing =
            setsockopt_int(s, abi::SOL_PACKET, abi::PACKET_IGNORE_OUTGOING, 1).is_ok();

        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex;
        // SAFETY: `sll` is a live sockaddr_ll and its size is passed.
        cvt(unsafe {
            libc::bind(
                s,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })?;

        let kernel_rx_drop = if ring.kernel_rx_drop {
            crate::kernel_rx_drop::attach_or_say(ifindex as u32, ifname)
        } else {
            None
        };
        let kernel_rx_drop_attached = kernel_rx_drop.is_some();

        Ok(AfPacketLink {
            map,
            fd,
            info: LinkInfo {
                name: ifname.to_string(),
                mac,
                mtu,
            },
            ring: rx_ring,
            rx: Receiver::new(
                pool,
                PacketPool::new(LARGE_BUF_SIZE, ring.large_buffers),
                ring.gro,
                mtu,
            ),
            copy_scratch: Vec::new(),
            tx_layout,
            tx_base: rx_len,
            tx_frame_size,
            tx_frame_count,
            tx_next: 0,
            tx_need_kick: false,
            tx_refused: false,
            tx_kick_short: 0,
            tx_lent: Vec::with_capacity(MAX_BURST),
            qdisc_bypass,
            ignore_outgoing,
            vnet_hdr,
            tx_checksum: vnet_hdr && (ring.tx_checksum || ring.tso),
            tso: ring.tso,
            tx_csum_partial: 0,
            tx_csum_refused: ring.tx_checksum && !vnet_hdr && ring.vnet_hdr,
            tx_super_frames: 0,
            tx_frames: 0,
            tx_bytes: 0,
            tx_dropped: 0,
            kernel_drops: Cell::new(0),
            kernel_rx_drop,
            kernel_rx_drop_refused: ring.kernel_rx_drop && !kernel_rx_drop_attached,
        })
    }

    /// Joins this socket to an AF_PACKET fanout group steered by ustack's
    /// flow hash ([`crate::fanout`]), creating the group when `group` is
    /// `None`. Returns the group's id. Sockets must join in engine order.
    pub fn join_fanout(&self, group: Option<u16>) -> io::Result<u16> {
        crate::fanout::join(self.fd.as_raw_fd(), group)
    }

    /// Stops (`on` false) or resumes receiving (see
    /// [`crate::fanout::set_receiving`]): a socket about to join a group
    /// that has members stops, drops what it received as a bystander
    /// (copies of frames the group gave its members), joins, and resumes.
    pub fn set_receiving(&self, on: bool) -> io::Result<()> {
        crate::fanout::set_receiving(self.fd.as_raw_fd(), on)
    }

    /// Installs the flow-hash program on the group this socket is in.
    pub fn set_fanout_program(&self) -> io::Result<()> {
        crate::fanout::set_program(self.fd.as_raw_fd(), &crate::fanout::FLOW_HASH_PROGRAM)
    }

    /// Whether the kernel accepted `PACKET_QDISC_BYPASS`.
    pub fn qdisc_bypass(&self) -> bool {
        self.qdisc_bypass
    }

    /// Whether the kernel accepted `PACKET_IGNORE_OUTGOING` (Linux 4.20+);
    /// without it the link sees its own transmissions.
    pub fn ignores_outgoing(&self) -> bool {
        self.ignore_outgoing
    }

    /// The pool's levels and counters.
    pub fn pool_stats(&self) -> PoolStats {
        self.rx.pool.stats()
    }

    /// Ring entries that made no sense (never expected from the kernel;
    /// counted rather than trusted).
    pub fn rx_malformed(&self) -> u64 {
        self.rx.malformed
    }

    fn bytes_mut(&mut self, offset: usize, len: usize) -> &mut [u8] {
        assert!(offset + len <= self.map.len);
        // SAFETY: bounds checked above; only called on a TX slot whose
        // status is AVAILABLE, which the kernel does not touch until we set
        // SEND_REQUEST; `&mut self` makes the slice unique on our side.
        unsafe { std::slice::from_raw_parts_mut(self.map.base.as_ptr().add(offset), len) }
    }

    /// Reads one frame from the V2 ring's next slot, if the kernel has
    /// handed it over, and gives the slot back (unless no buffer was free
    /// for a frame in the slot: it waits there).
    fn rx_from_slots(&mut self, out: &mut Vec<PoolBuf>, start: usize) -> RxStep {
        let AfPacketLink {
            map,
            fd,
            ring,
            rx,
            copy_scratch,
            vnet_hdr,
            ..
        } = self;
        let RxRing::Slots(cursor) = ring else {
            return RxStep::Empty;
        };
        let off = cursor.offset();
        let status = map.status(off).load(Ordering::Acquire);
        if status & rx_ring::TP_STATUS_USER == 0 {
            return RxStep::Empty;
        }
        let slot = map.bytes(off, cursor.size());
        match rx_ring::read_v2(slot, status, *vnet_hdr) {
            Ok(RingFrame::Whole { data, len, meta }) => {
                if !rx.take(&slot[data..data + len], meta, out, start) {
                    return RxStep::NoBuffer;
                }
            }
            Ok(RingFrame::Copied { len, meta }) => {
                take_copied(
                    fd.as_raw_fd(),
                    *vnet_hdr,
                    rx,
                    copy_scratch,
                    len,
                    meta,
                    out,
                    start,
                );
            }
            Ok(RingFrame::Truncated) => rx.oversize += 1,
            Err(rx_ring::Malformed) => rx.malformed += 1,
        }
        map.status(off)
            .store(abi::TP_STATUS_KERNEL, Ordering::Release);
        cursor.advance();
        RxStep::Taken
    }

    /// Reads one frame from the V3 ring's current block, if the kernel
    /// has handed it over, and gives the block back after its last.
    fn rx_from_blocks(&mut self, out: &mut Vec<PoolBuf>, start: usize) -> RxStep {
        let AfPacketLink {
            map,
            ring,
            rx,
            vnet_hdr,
            ..
        } = self;
        let RxRing::Blocks {
            block_size,
            block_count,
            block,
            cursor,
        } = ring
        else {
            return RxStep::Empty;
        };
        let block_off = *block * *block_size;
        let status_off = block_off + abi::BLOCK_STATUS_OFFSET;
        let c = match *cursor {
            Some(c) => c,
            None => {
                if map.status(status_off).load(Ordering::Acquire) & rx_ring::TP_STATUS_USER == 0 {
                    return RxStep::Empty;
                }
                let desc = read_block_desc(map, block_off);
                let c = BlockCursor {
                    left: desc.num_pkts,
                    offset: desc.offset_to_first_pkt as usize,
                };
                *cursor = Some(c);
                c
            }
        };
        let blk = map.bytes(block_off, *block_size);
        let mut next = 0;
        if c.left > 0 {
            match rx_ring::read_v3(blk, c.offset, *vnet_hdr) {
                Ok((frame, n)) => {
                    next = n;
                    match frame {
                        RingFrame::Whole { data, len, meta } => {
                            if !rx.take(&blk[data..data + len], meta, out, start) {
                                // No buffer: the frame waits in the ring.
                                return RxStep::NoBuffer;
                            }
                        }
                        _ => rx.oversize += 1,
                    }
                }
                Err(rx_ring::Malformed) => rx.malformed += 1,
            }
        }
        if c.left <= 1 || next == 0 {
            // Last frame, or a chain that cannot go on.
            if c.left > 1 {
                rx.malformed += u64::from(c.left - 1);
            }
            map.status(status_off)
                .store(abi::TP_STATUS_KERNEL, Ordering::Release);
            *block = (*block + 1) % *block_count;
            *cursor = None;
        } else {
            *cursor = Some(BlockCursor {
                left: c.left - 1,
                offset: c.offset + next,
            });
        }
        RxStep::Taken
    }

    /// Tells the kernel to send the slots marked SEND_REQUEST.
    ///
    /// The kernel sends requested slots in ring order and may stop before
    /// the last: its send buffer full (`send` then still succeeds, or
    /// says EAGAIN), or the driver refusing a frame (ENOBUFS). Whatever
    /// it left stays requested, so the last slot we filled tells: if it
    /// is still SEND_REQUEST, another kick is owed (`tx_pending` says so
    /// to the engine, which flushes again on its next turn), else nothing
    /// waits. Without this the slots left waited for the stack's next
    /// frame, which, with the whole window in the ring, only a
    /// retransmission timeout would bring.
    fn kick(&mut self) -> io::Result<()> {
        // SAFETY: a zero-length send with a NULL buffer is what the TX ring
        // protocol asks for; the kernel reads the ring, not the buffer.
        let r = unsafe { libc::send(self.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
        if r < 0 {
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                // Busy: the slots stay requested.
                Some(libc::EAGAIN) | Some(libc::EINTR) => {}
                // The driver refused a frame (its queue full, or a veth
                // whose peer is down): the kernel marks its slot requested
                // again and stops. Tried again with the next burst, not
                // on every turn: a peer that stays down must not keep the
                // engine from sleeping.
                Some(libc::ENOBUFS) => {
                    self.tx_dropped += 1;
                    self.tx_need_kick = true;
                    self.tx_refused = true;
                    return Ok(());
                }
                _ => return Err(err),
            }
        }
        self.tx_refused = false;
        self.tx_need_kick = self.last_tx_slot_requested();
        self.tx_kick_short += u64::from(self.tx_need_kick);
        Ok(())
    }

    /// The room for a frame in a TX slot (after the `virtio_net_hdr`).
    fn tx_room(&self) -> usize {
        let hdr_len = if self.vnet_hdr { VNET_HDR_LEN } else { 0 };
        self.tx_frame_size - self.tx_layout.data - hdr_len
    }

    /// Offset of the TX slot `ahead` slots after `tx_next`.
    fn tx_slot(&self, ahead: usize) -> usize {
        self.tx_base + (self.tx_next + ahead) % self.tx_frame_count * self.tx_frame_size
    }

    /// Whether the kernel is done with the TX slot at `slot`.
    fn tx_slot_free(&self, slot: usize) -> bool {
        self.map
            .status(slot + self.tx_layout.status)
            .load(Ordering::Acquire)
            & (abi::TP_STATUS_SEND_REQUEST | abi::TP_STATUS_SENDING)
            == 0
    }

    /// Writes slot `slot`'s header for a frame of `len` bytes (its
    /// `virtio_net_hdr` already in place) and requests it.
    fn request_tx_slot(&mut self, slot: usize, len: usize) {
        let lay = self.tx_layout;
        let hdr_len = if self.vnet_hdr { VNET_HDR_LEN } else { 0 };
        // A frame the kernel must skip (PACKET_LOSS) goes as length 0.
        let wire_len = if len == 0 { 0 } else { (hdr_len + len) as u32 };
        let hdr = self.bytes_mut(slot, lay.data);
        if lay.status > 0 {
            // V3: tp_next_offset (and what else lies before the status)
            // must be 0: fixed-size slots.
            hdr[..lay.status].fill(0);
        }
        hdr[lay.snaplen..lay.snaplen + 4].copy_from_slice(&wire_len.to_ne_bytes());
        hdr[lay.len..lay.len + 4].copy_from_slice(&wire_len.to_ne_bytes());
        self.map
            .status(slot + lay.status)
            .store(abi::TP_STATUS_SEND_REQUEST, Ordering::Release);
    }

    /// Requests the frames written in place, in order; returns how many.
    fn request_lent(&mut self) -> usize {
        let lent = std::mem::take(&mut self.tx_lent);
        let hdr_len = if self.vnet_hdr { VNET_HDR_LEN } else { 0 };
        for f in &lent {
            let slot = self.tx_slot(0);
            let data = slot + self.tx_layout.data;
            let mut len = f.len;
            if self.vnet_hdr {
                let frame = &self.map.bytes(data + hdr_len, f.len);
                match tx_vnet_header(frame, f.csum_partial, f.gso_size) {
                    Some(vnet) => self.bytes_mut(data, hdr_len).copy_from_slice(&vnet),
                    None => {
                        // Its headers do not say what to finish: skipped.
                        self.tx_dropped += 1;
                        len = 0;
                    }
                }
            }
            self.request_tx_slot(slot, len);
            self.tx_next = (self.tx_next + 1) % self.tx_frame_count;
            if len > 0 {
                self.tx_frames += 1;
                self.tx_bytes += len as u64;
                self.tx_csum_partial += u64::from(f.csum_partial && self.vnet_hdr);
                if f.gso_size > 0 {
                    self.tx_super_frames += 1;
                }
            }
        }
        let n = lent.len();
        self.tx_lent = lent;
        self.tx_lent.clear();
        n
    }

    /// Whether the slot filled last is still waiting for the kernel.
    fn last_tx_slot_requested(&self) -> bool {
        let last = (self.tx_next + self.tx_frame_count - 1) % self.tx_frame_count;
        let slot = self.tx_base + last * self.tx_frame_size;
        self.map
            .status(slot + self.tx_layout.status)
            .load(Ordering::Acquire)
            & abi::TP_STATUS_SEND_REQUEST
            != 0
    }
}

/// A frame written in a TX slot in place, not yet requested.
#[derive(Debug, Clone, Copy)]
struct LentFrame {
    len: usize,
    csum_partial: bool,
    gso_size: u16,
}

/// What one read of the RX ring found.
enum RxStep {
    /// A frame was taken (or dropped and counted).
    Taken,
    /// Nothing handed over yet.
    Empty,
    /// A frame is there but no buffer was free for it.
    NoBuffer,
}

fn read_block_desc(map: &Mapping, block_off: usize) -> abi::BlockDesc {
    let b = map.bytes(block_off, std::mem::size_of::<abi::BlockDesc>());
    // SAFETY: `b` holds exactly a descriptor's bytes (checked by `bytes`),
    // of a block handed over to us (status USER, read with Acquire
    // before this), so the kernel does not write it now; the descriptor
    // is plain integers, valid for any bytes, and `read_unaligned` needs
    // no alignment.
    unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<abi::BlockDesc>()) }
}

/// Takes a frame the V2 ring held truncated (`TP_STATUS_COPY`): its
/// whole copy, `len` bytes, is the next on the socket's receive queue
/// (the kernel queues copies in ring order). Read into a large buffer
/// when one is free (a TCP super-frame is then handed over in it), else
/// into `scratch`. Lost (counted) when no buffer takes it; counted
/// malformed when the queue does not hold what the ring said.
#[allow(clippy::too_many_arguments)]
fn take_copied(
    fd: RawFd,
    vnet_hdr: bool,
    rx: &mut Receiver,
    scratch: &mut Vec<u8>,
    len: usize,
    mut meta: FrameMeta,
    out: &mut Vec<PoolBuf>,
    start: usize,
) {
    // The queued copy comes after a header of its own, which is what
    // counts (the ring's was written for the truncated frame).
    let mut vnet = [0u8; VNET_HDR_LEN];
    if let Some(mut b) = rx.large.alloc() {
        let room = b.capacity();
        b.set_len(room);
        match recv_whole(fd, vnet_hdr.then_some(&mut vnet), b.data_mut()) {
            Some(n) if n == len && n <= room => {
                rx.queued_whole += 1;
                meta.vnet = vnet_hdr.then_some(vnet);
                b.set_len(n);
                rx.take_large(b, meta, out, start);
            }
            Some(n) if n == len => {
                rx.oversize += 1;
                rx.large.free(b);
            }
            _ => {
                rx.malformed += 1;
                rx.large.free(b);
            }
        }
        return;
    }
    if scratch.len() < LARGE_BUF_SIZE {
        scratch.resize(LARGE_BUF_SIZE, 0);
    }
    match recv_whole(fd, vnet_hdr.then_some(&mut vnet), scratch) {
        Some(n) if n == len && n <= scratch.len() => {
            rx.queued_whole += 1;
            meta.vnet = vnet_hdr.then_some(vnet);
            // `take` returns false with no pool buffer: lost, the pool
            // counts it (the copy is off the queue already).
            let _ = rx.take(&scratch[..n], meta, out, start);
        }
        Some(n) if n == len => rx.oversize += 1,
        _ => rx.malformed += 1,
    }
}

/// Reads the next frame queued on the packet socket `fd` into `buf`,
/// its `virtio_net_hdr` into `vnet` when the socket has one. Returns the
/// frame's whole length (more than `buf` when it was cut), or `None`
/// when nothing was queued or the read failed.
fn recv_whole(fd: RawFd, vnet: Option<&mut [u8; VNET_HDR_LEN]>, buf: &mut [u8]) -> Option<usize> {
    let vnet_hdr = vnet.is_some();
    let mut spare = [0u8; VNET_HDR_LEN];
    let hdr = vnet.unwrap_or(&mut spare);
    let mut iov = [
        libc::iovec {
            iov_base: hdr.as_mut_ptr().cast(),
            iov_len: VNET_HDR_LEN,
        },
        libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        },
    ];
    let iov: &mut [libc::iovec] = if vnet_hdr { &mut iov } else { &mut iov[1..] };
    // SAFETY: msghdr is plain data; all-zero is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = iov.len();
    // SAFETY: `msg` names only `iov`, whose entries point at `hdr` and
    // `buf` with their lengths; all live and writable for the call.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT | libc::MSG_TRUNC) };
    let head = if vnet_hdr { VNET_HDR_LEN } else { 0 };
    usize::try_from(n).ok()?.checked_sub(head)
}

impl Link for AfPacketLink {
    type Buf = PoolBuf;

    fn rx_burst(&mut self, out: &mut Vec<PoolBuf>, max: usize) -> io::Result<usize> {
        let max = max.min(MAX_BURST);
        let start = out.len();
        // Frames joined to an aggregate are not handed out: the ring is
        // read for at most this many, so a burst's work stays bounded.
        let mut ring_budget = max * 4;
        while out.len() - start < max && ring_budget > 0 {
            // Segments of a super-frame first, in order.
            if let Some(b) = self.rx.segments.pop_front() {
                self.rx.frames += 1;
                self.rx.bytes += b.data().len() as u64;
                out.push(b);
                continue;
            }
            let step = match self.ring {
                RxRing::Slots(_) => self.rx_from_slots(out, start),
                RxRing::Blocks { .. } => self.rx_from_blocks(out, start),
            };
            match step {
                RxStep::Taken => ring_budget -= 1,
                RxStep::Empty | RxStep::NoBuffer => break,
            }
        }
        if let Some(gro) = self.rx.gro.as_mut() {
            gro.finish(&mut out[start..]);
        }
        Ok(out.len() - start)
    }

    fn alloc_tx(&mut self) -> Option<PoolBuf> {
        self.rx.pool.alloc()
    }

    fn alloc_tx_reserved(&mut self) -> Option<PoolBuf> {
        self.rx.pool.alloc_reserved()
    }

    fn tx_burst(&mut self, bufs: &mut Vec<PoolBuf>) -> io::Result<usize> {
        // Frames written in place came first.
        let mut queued = self.request_lent();
        let hdr_len = if self.vnet_hdr { VNET_HDR_LEN } else { 0 };
        let room = self.tx_room();
        let mut taken = 0;
        for buf in bufs.iter() {
            let len = buf.data().len();
            let vnet = if self.vnet_hdr {
                tx_vnet_header(buf.data(), buf.csum_partial(), buf.gso_size())
            } else {
                Some([0; VNET_HDR_LEN])
            };
            let Some(vnet) = vnet.filter(|_| len >= 14 && len <= room) else {
                self.tx_dropped += 1;
                taken += 1;
                continue;
            };
            let slot = self.tx_slot(0);
            if !self.tx_slot_free(slot) {
                break; // ring full
            }
            let st = self.map.status(slot + self.tx_layout.status);
            if st.load(Ordering::Relaxed) & abi::TP_STATUS_WRONG_FORMAT != 0 {
                // Not expected with PACKET_LOSS; the slot's frame was lost.
                self.tx_dropped += 1;
            }
            let data = slot + self.tx_layout.data;
            if hdr_len > 0 {
                self.bytes_mut(data, hdr_len).copy_from_slice(&vnet);
            }
            self.bytes_mut(data + hdr_len, len)
                .copy_from_slice(buf.data());
            self.request_tx_slot(slot, len);
            self.tx_next = (self.tx_next + 1) % self.tx_frame_count;
            self.tx_frames += 1;
            self.tx_bytes += len as u64;
            self.tx_csum_partial += u64::from(buf.csum_partial() && self.vnet_hdr);
            if buf.gso_size() > 0 {
                self.tx_super_frames += 1;
            }
            taken += 1;
            queued += 1;
        }
        for buf in bufs.drain(..taken) {
            if buf.capacity() == LARGE_BUF_SIZE {
                self.rx.large.free(buf);
            } else {
                self.rx.pool.free(buf);
            }
        }
        if queued > 0 || self.tx_need_kick {
            self.kick()?;
        }
        Ok(taken)
    }

    /// In place, in the next free TX slot (no buffer, no copy), when one
    /// is free and holds the frame; else in a buffer of the pool (a large
    /// one for a super-frame).
    fn tx_place_sized(
        &mut self,
        len: usize,
        csum_partial: bool,
        gso_size: u16,
    ) -> TxPlaced<'_, PoolBuf> {
        if !self.tx_fits_in_place(len) {
            let mut placed = self.tx_place(len, csum_partial);
            if let TxPlaced::Frame(b) = &mut placed {
                b.set_gso_size(gso_size);
            }
            return placed;
        }
        let slot = self.tx_slot(self.tx_lent.len());
        self.tx_lent.push(LentFrame {
            len,
            csum_partial,
            gso_size,
        });
        let hdr_len = if self.vnet_hdr { VNET_HDR_LEN } else { 0 };
        TxPlaced::InPlace(self.bytes_mut(slot + self.tx_layout.data + hdr_len, len))
    }

    /// The next slot past those lent is free, and holds `len` bytes.
    #[inline]
    fn tx_fits_in_place(&self, len: usize) -> bool {
        self.tx_lent.len() < MAX_BURST.min(self.tx_frame_count)
            && (14..=self.tx_room()).contains(&len)
            && self.tx_slot_free(self.tx_slot(self.tx_lent.len()))
    }

    fn tx_place(&mut self, len: usize, csum_partial: bool) -> TxPlaced<'_, PoolBuf> {
        // A super-frame (only with `tso`) takes a large buffer.
        let buf = if len > self.rx.pool.buf_size() && self.tso {
            self.rx.large.alloc()
        } else {
            self.rx.pool.alloc()
        };
        let Some(mut buf) = buf else {
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

    fn tso_max(&self) -> usize {
        if self.tso {
            usize::from(u16::MAX)
        } else {
            0
        }
    }

    fn tx_checksum_offload(&self) -> bool {
        self.tx_checksum
    }

    /// The frames written in place, and 1 while requested TX slots wait
    /// for another kick (see `kick`), unless the driver refused the last.
    fn tx_pending(&self) -> usize {
        self.tx_lent.len() + usize::from(self.tx_need_kick && !self.tx_refused)
    }

    fn tx_flush(&mut self) -> io::Result<()> {
        if self.request_lent() > 0 || self.tx_need_kick {
            self.kick()?;
        }
        Ok(())
    }

    fn recycle(&mut self, buf: PoolBuf) {
        if buf.capacity() == LARGE_BUF_SIZE {
            self.rx.large.free(buf);
        } else {
            self.rx.pool.free(buf);
        }
    }

    fn info(&self) -> &LinkInfo {
        &self.info
    }

    fn stats(&self) -> LinkStats {
        let mut st = abi::TpacketStatsV3::default();
        let mut len = std::mem::size_of::<abi::TpacketStatsV3>() as libc::socklen_t;
        // SAFETY: `st` is a live tpacket_stats_v3 and `len` its size; the
        // kernel writes at most `len` bytes (V2's tpacket_stats is its
        // first two fields).
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                abi::SOL_PACKET,
                abi::PACKET_STATISTICS,
                (&mut st as *mut abi::TpacketStatsV3).cast(),
                &mut len,
            )
        };
        if r == 0 {
            self.kernel_drops
                .set(self.kernel_drops.get() + u64::from(st.tp_drops));
        }
        let rx = &self.rx;
        let gro = rx.gro.as_ref().map(|g| g.stats()).unwrap_or_default();
        LinkStats {
            rx_frames: rx.frames,
            rx_bytes: rx.bytes,
            tx_frames: self.tx_frames,
            tx_bytes: self.tx_bytes,
            rx_dropped: self.kernel_drops.get(),
            tx_dropped: self.tx_dropped,
            pool_exhausted: rx.pool.stats().exhausted,
            rx_oversize: rx.oversize,
            rx_copied: rx.frames,
            ring_errors: rx.malformed,
            rx_csum_partial_form: 0,
            rx_super_frames: rx.super_frames,
            rx_super_cut: rx.super_cut,
            rx_queued_whole: rx.queued_whole,
            rx_super_bad_checksum: rx.super_bad_checksum,
            rx_gro_aggregates: gro.aggregates,
            rx_gro_joined: gro.joined,
            tx_super_frames: self.tx_super_frames,
            tx_kick_short: self.tx_kick_short,
            tx_csum_partial: self.tx_csum_partial,
            tx_csum_refused: u64::from(self.tx_csum_refused),
            rx_vnet: rx.vnet,
            kernel_rx_drop_refused: u64::from(self.kernel_rx_drop_refused),
        }
    }

    fn rx_fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }
    /// Unmapping the rings and closing the fd in a child leave the
    /// parent's socket as it is.
    fn droppable_in_fork_child(&self) -> bool {
        true
    }

    /// The tc ingress program's addresses (`kernel_rx_drop`): frames to
    /// them stop after the socket has its copy, but for those the kernel
    /// holds itself (its own traffic to them goes on reaching it).
    fn serve_addresses(
        &self,
        v4: &[std::net::Ipv4Addr],
        v6: &[std::net::Ipv6Addr],
    ) -> io::Result<bool> {
        match &self.kernel_rx_drop {
            Some(p) => p.serve(v4, v6).map(|()| true),
            None => Ok(false),
        }
    }
}

/// The largest TCP super-frame: an IP packet of 65535 bytes with its
/// Ethernet header and a VLAN tag.
const MAX_SUPER_FRAME: usize = 65535 + FRAME_OVERHEAD;

/// The `virtio_net_hdr` (little-endian, as the kernel reads it on a
/// little-endian host) telling the kernel what to finish of `frame`: its
/// TCP or UDP checksum (`partial`: the field holds the pseudo-header's
/// sum) and, for a TCP super-frame, its cutting into segments of
/// `gso_size` payload bytes. `None` for a frame marked so whose headers
/// do not say where its TCP or UDP header is (the stack makes none).
fn vnet_header(frame: &[u8], partial: bool, gso_size: u16) -> Option<[u8; VNET_HDR_LEN]> {
    const NEEDS_CSUM: u8 = 1;
    const GSO_TCPV4: u8 = 1;
    const GSO_TCPV6: u8 = 4;
    let mut h = [0u8; VNET_HDR_LEN];
    if !partial {
        return (gso_size == 0).then_some(h);
    }
    let site = csum_site::locate(frame)?;
    let l4 = usize::from(site.start);
    if gso_size > 0 {
        if site.protocol != csum_site::L4::Tcp {
            return None;
        }
        let tcp_len = usize::from(frame.get(l4 + 12)? >> 4) * 4;
        h[1] = if site.ipv6 { GSO_TCPV6 } else { GSO_TCPV4 };
        h[2..4].copy_from_slice(&((l4 + tcp_len) as u16).to_le_bytes());
        h[4..6].copy_from_slice(&gso_size.to_le_bytes());
    }
    h[0] = NEEDS_CSUM;
    h[6..8].copy_from_slice(&site.start.to_le_bytes());
    h[8..10].copy_from_slice(&site.offset.to_le_bytes());
    Some(h)
}

/// [`vnet_header`] for a frame of the TX ring, with `hdr_len` (the bytes
/// the kernel copies into the socket buffer's own memory) the whole frame
/// unless it is a super-frame.
///
/// Why: `tpacket_snd` copies `hdr_len` bytes (at least the Ethernet
/// header) and attaches the rest as the ring's pages, marked zero-copy.
/// A device that hands the frame on to a kernel stack (a veth) or a
/// second packet socket's copy must then copy those pages into new ones
/// (`skb_copy_ubufs`: a page allocated per frame) before the slot is given
/// back. Copied whole at once, a frame costs less on the sending core:
/// 1.1-1.3 us per frame against 1.6-2.1 us (medians; means 1.1-1.4 against
/// 3.8-7.2 us) for 66-, 654- and 1514-byte frames to a veth in bursts of 32
/// (`scripts/tx-frame-cost.sh`). A super-frame keeps its payload in the
/// ring's pages: a 64 KiB head would be a large allocation.
fn tx_vnet_header(frame: &[u8], partial: bool, gso_size: u16) -> Option<[u8; VNET_HDR_LEN]> {
    let mut h = vnet_header(frame, partial, gso_size)?;
    if gso_size == 0 {
        // A frame fits a TX slot, far below 64 KiB.
        let whole = u16::try_from(frame.len()).ok()?;
        h[2..4].copy_from_slice(&whole.to_le_bytes());
    }
    Some(h)
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_net::{
        arp_request, is_arp_reply_from, is_root, quiet_veth_pair, receive, run, NsVeth,
    };
    use std::net::UdpSocket;
    use std::time::Duration;

    fn send_arp(link: &mut AfPacketLink, target: [u8; 4], count: usize) {
        let mac = link.info().mac;
        let req = arp_request(mac, [target[0], target[1], target[2], 2], target);
        let mut v = Vec::new();
        for _ in 0..count {
            let mut b = link.alloc_tx().unwrap();
            b.set_len(req.len());
            b.data_mut().copy_from_slice(&req);
            v.push(b);
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !v.is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "tx ring never drained"
            );
            link.tx_burst(&mut v).unwrap();
            if !v.is_empty() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    /// The kernel may send fewer of the requested TX slots than a kick
    /// asks for: here a send buffer shrunk to the minimum, with a slow
    /// qdisc holding the frames it took. The link then says a kick is
    /// owed (`tx_pending`), and `tx_flush` sends the rest without a new
    /// frame to send (before, they waited for the next `tx_burst`: in a
    /// TCP stream whose window was all in the ring, the retransmission
    /// timeout). And the link's own send buffer holds its whole TX ring.
    #[test]
    fn frames_left_by_a_short_kick_are_owed_and_flushed() {
        assert!(is_root(), "AF_PACKET test needs root");
        let (na, nb, _cleanup) = quiet_veth_pair("uvk");
        run(&["ip", "link", "set", &nb, "up"]);
        // One 1000-byte frame at once, then one a millisecond.
        run(&[
            "tc", "qdisc", "replace", "dev", &na, "root", "tbf", "rate", "8mbit", "burst", "1600",
            "latency", "5s",
        ]);
        let ring = RingConfig {
            qdisc_bypass: false,
            tx_frame_count: 64,
            ..RingConfig::default()
        };
        let mut link = AfPacketLink::open(&na, PacketPool::new(2048, 128), &ring).unwrap();
        let sndbuf = |link: &AfPacketLink| {
            let mut v: libc::c_int = 0;
            let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            // SAFETY: `v` is a live int and `len` its size.
            let r = unsafe {
                libc::getsockopt(
                    link.fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_SNDBUF,
                    (&mut v as *mut libc::c_int).cast(),
                    &mut len,
                )
            };
            assert_eq!(r, 0);
            v as usize
        };
        assert!(
            sndbuf(&link) >= link.tx_frame_size * link.tx_frame_count,
            "send buffer {} for a ring of {} x {}",
            sndbuf(&link),
            link.tx_frame_count,
            link.tx_frame_size
        );
        let rx_packets = || {
            std::fs::read_to_string(format!("/sys/class/net/{nb}/statistics/rx_packets"))
                .unwrap()
                .trim()
                .parse::<u64>()
                .unwrap()
        };
        let mac = link.info().mac;
        let mut frame = arp_request(mac, [10, 99, 153, 2], [10, 99, 153, 1]);
        frame.resize(1000, 0);
        let frames = |link: &mut AfPacketLink, n: usize| {
            (0..n)
                .map(|_| {
                    let mut b = link.alloc_tx().unwrap();
                    b.set_len(frame.len());
                    b.data_mut().copy_from_slice(&frame);
                    b
                })
                .collect::<Vec<_>>()
        };
        // Until the peer gets frames: opening the link brought our end
        // up, and its qdisc is attached by the kernel's linkwatch work.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while rx_packets() == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the veth never passed a frame"
            );
            let mut v = frames(&mut link, 1);
            link.tx_burst(&mut v).unwrap();
            while link.tx_pending() > 0 {
                link.tx_flush().unwrap();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(50));

        setsockopt_int(link.fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, 1).unwrap();
        let before = rx_packets();
        let short_before = link.stats().tx_kick_short;
        let mut v = frames(&mut link, 40);
        assert_eq!(link.tx_burst(&mut v).unwrap(), 40);
        assert_eq!(link.tx_pending(), 1, "the kernel took every slot at once");
        assert!(link.stats().tx_kick_short > short_before);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while link.tx_pending() > 0 {
            assert!(std::time::Instant::now() < deadline, "a kick stays owed");
            link.tx_flush().unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        while rx_packets() < before + 40 {
            assert!(
                std::time::Instant::now() < deadline,
                "{} of 40 frames reached the peer",
                rx_packets() - before
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(rx_packets(), before + 40);
    }

    #[test]
    fn bad_ring_configs_are_refused() {
        if !is_root() {
            return;
        }
        let blocks = RingConfig {
            rx_ring: RxRingKind::V3,
            rx_block_size: 3000,
            ..RingConfig::default()
        };
        let slots = RingConfig {
            rx_frame_size: Some(3000),
            ..RingConfig::default()
        };
        let (na, _nb, _cleanup) = quiet_veth_pair("uvr");
        for cfg in [blocks, slots] {
            let err = AfPacketLink::open(&na, PacketPool::new(2048, 4), &cfg)
                .err()
                .unwrap();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
        }
        assert!(AfPacketLink::open(
            "no-such-if0",
            PacketPool::new(2048, 4),
            &RingConfig::default()
        )
        .is_err());
    }

    #[test]
    fn veth_arp_and_udp_from_kernel() {
        if !is_root() {
            eprintln!("skipped: AF_PACKET test needs root");
            return;
        }
        let y = (std::process::id() % 100) as u8;
        let veth = NsVeth::new("uv", y);
        let ring = RingConfig {
            rx_block_size: 1 << 16,
            rx_block_count: 4,
            tx_frame_count: 8,
            ..RingConfig::default()
        };
        let mut link =
            AfPacketLink::open(&veth.outer, PacketPool::with_reserve(2048, 512, 32), &ring)
                .unwrap();
        assert_eq!(link.info().mtu, 1500);
        assert!(link.ignores_outgoing());
        let mac = link.info().mac;
        let peer = [10, 99, veth.y, 1];

        // One request, one reply from the namespace's kernel. Asked again
        // for a while: opening the link brought our end up, and until the
        // kernel's linkwatch work (delayed on a loaded machine) gives the
        // peer its qdisc back, the peer drops what it sends.
        let mut got = Vec::new();
        let mut asked = 0;
        while asked < 20 {
            send_arp(&mut link, peer, 1);
            asked += 1;
            got = receive(&mut link, 1, Duration::from_millis(500), |b| {
                is_arp_reply_from(b.data(), mac, peer)
            });
            if !got.is_empty() {
                break;
            }
        }
        assert_eq!(got.len(), 1, "no ARP reply");

        // Many: the 8-slot TX ring wraps and fills, RX spans blocks.
        // Many, received while sending as an engine would: the 8-slot TX
        // ring fills and wraps, RX wraps around its 4 blocks.
        let req = arp_request(mac, [10, 99, veth.y, 2], peer);
        let mut to_send = 100;
        let mut replies = 0;
        let mut v = Vec::new();
        let mut out = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while replies < 100 && std::time::Instant::now() < deadline {
            while to_send > 0 && v.len() < MAX_BURST {
                let mut b = link.alloc_tx().unwrap();
                b.set_len(req.len());
                b.data_mut().copy_from_slice(&req);
                v.push(b);
                to_send -= 1;
            }
            link.tx_burst(&mut v).unwrap();
            link.rx_burst(&mut out, MAX_BURST).unwrap();
            for b in out.drain(..) {
                if is_arp_reply_from(b.data(), mac, peer) {
                    replies += 1;
                }
                link.recycle(b);
            }
        }
        assert_eq!(replies, 100, "stats {:?}", link.stats());

        // A datagram the kernel sends: it arrives whole.
        veth.peer_neigh(mac);
        let dst = format!("{}:9999", veth.our_ip());
        veth.in_ns(move || {
            let s = UdpSocket::bind("0.0.0.0:0").unwrap();
            s.send_to(b"hello-ustack", dst.as_str()).unwrap();
        });
        let got = receive(&mut link, 1, Duration::from_secs(5), |b| {
            let d = b.data();
            d.len() >= 42
                && d[12..14] == [0x08, 0x00]
                && d[23] == 17
                && d[36..38] == 9999u16.to_be_bytes()
        });
        assert_eq!(got.len(), 1, "no UDP datagram");
        let (frame, partial) = &got[0];
        assert_eq!(&frame[0..6], &mac);
        assert!(frame.ends_with(b"hello-ustack"));
        // veth offers checksum offload, so the kernel leaves it partial.
        eprintln!("udp csum_partial = {partial}");
        assert!(
            *partial,
            "expected TP_STATUS_CSUMNOTREADY on a veth UDP frame"
        );

        let s = link.stats();
        assert_eq!(s.tx_frames, 100 + asked);
        assert!(s.rx_frames >= 102);
        assert_eq!(s.tx_dropped, 0);
        assert_eq!(link.pool_stats().available, 512);
    }

    /// A kernel socket in `veth`'s namespace sends `payload` to
    /// 10.99.y.2:9999 (the link's end, whose MAC it is told) as one UDP
    /// super-frame of datagrams of `segment` bytes (`UDP_SEGMENT`).
    fn send_udp_gso(veth: &NsVeth, mac: [u8; 6], payload: Vec<u8>, segment: u16) {
        veth.peer_neigh(mac);
        let dst = format!("{}:9999", veth.our_ip());
        veth.in_ns(move || {
            let s = UdpSocket::bind("0.0.0.0:0").unwrap();
            const UDP_SEGMENT: libc::c_int = 103;
            setsockopt_int(s.as_raw_fd(), libc::SOL_UDP, UDP_SEGMENT, segment.into())
                .expect("UDP_SEGMENT");
            s.send_to(&payload, dst.as_str()).unwrap();
        });
    }

    /// A kernel peer's `UDP_SEGMENT` send crosses the veth as one
    /// super-frame; its `virtio_net_hdr` (GSO type UDP_L4) gives the
    /// datagrams' size and the link hands over each datagram, in order,
    /// with both rings (V2: the frame read whole from the socket's queue;
    /// V3: whole in a block).
    #[test]
    fn udp_gso_super_frames_from_the_kernel_become_their_datagrams() {
        assert!(is_root(), "this AF_PACKET test needs root");
        for (i, kind) in [RxRingKind::V2, RxRingKind::V3].into_iter().enumerate() {
            let veth = NsVeth::new(&format!("uvug{i}"), 56 + i as u8);
            let ring = RingConfig {
                rx_ring: kind,
                tx_frame_count: 8,
                ..RingConfig::default()
            };
            let mut link =
                AfPacketLink::open(&veth.outer, PacketPool::with_reserve(2048, 256, 32), &ring)
                    .unwrap();
            assert!(link.vnet_hdr, "PACKET_VNET_HDR is on by default");
            let payload: Vec<u8> = (0..10_000u32).map(|i| (i * 13 % 251) as u8).collect();
            send_udp_gso(&veth, link.info().mac, payload.clone(), 1200);
            let got = receive(&mut link, 9, Duration::from_secs(5), |b| {
                let d = b.data();
                d.len() >= 42 && d[23] == 17 && d[36..38] == 9999u16.to_be_bytes()
            });
            let st = link.stats();
            assert_eq!(got.len(), 9, "{kind:?}: {st:?}");
            for (n, (d, partial)) in got.iter().enumerate() {
                let want = &payload[n * 1200..((n + 1) * 1200).min(payload.len())];
                assert_eq!(&d[42..], want, "{kind:?}: datagram {n}");
                assert_eq!(
                    usize::from(u16::from_be_bytes([d[38], d[39]])),
                    8 + want.len()
                );
                assert!(*partial);
                let mut whole = d.clone();
                assert!(wire::partial_checksum::complete(&mut whole));
            }
            let v = st.rx_vnet;
            assert_eq!((v.udp_gso, v.udp_datagrams, v.udp_gso_size), (1, 9, 1200));
            assert_eq!(st.rx_oversize, 0);
            if kind == RxRingKind::V2 {
                assert_eq!(st.rx_queued_whole, 1);
            }
        }
    }

    #[test]
    fn vlan_tag_is_put_back_and_frames_cross_unchanged() {
        if !is_root() {
            eprintln!("skipped: AF_PACKET test needs root");
            return;
        }
        // Both ends in this namespace, no addresses: only our frames move.
        let (na, nb, _cleanup) = quiet_veth_pair("uvq");
        let mut a =
            AfPacketLink::open(&na, PacketPool::new(2048, 64), &RingConfig::default()).unwrap();
        let mut b =
            AfPacketLink::open(&nb, PacketPool::new(2048, 64), &RingConfig::default()).unwrap();
        let (ma, mb) = (a.info().mac, b.info().mac);
        assert_ne!(ma, mb);

        let mut tagged = Vec::new();
        tagged.extend_from_slice(&mb);
        tagged.extend_from_slice(&ma);
        tagged.extend_from_slice(&[0x81, 0x00, 0x20, 0x07]); // PCP 1, VLAN 7
        tagged.extend_from_slice(&[0x88, 0xb5]); // local experimental
        tagged.extend((0..100).map(|i| i as u8));
        let mut plain = Vec::new();
        plain.extend_from_slice(&ma);
        plain.extend_from_slice(&mb);
        plain.extend_from_slice(&[0x88, 0xb5]);
        plain.extend((0..1500).map(|i| (i * 7) as u8));

        let send = |link: &mut AfPacketLink, frame: &[u8]| {
            let mut buf = link.alloc_tx().unwrap();
            buf.set_len(frame.len());
            buf.data_mut().copy_from_slice(frame);
            let mut v = vec![buf];
            link.tx_burst(&mut v).unwrap();
            assert!(v.is_empty());
        };
        let experimental = |d: &[u8]| d.windows(2).take(20).any(|w| w == [0x88, 0xb5]);
        send(&mut a, &tagged);
        let got = receive(&mut b, 1, Duration::from_secs(5), |f| {
            experimental(f.data())
        });
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, tagged, "the tag is back where it was");
        send(&mut b, &plain);
        let got = receive(&mut a, 1, Duration::from_secs(5), |f| {
            experimental(f.data())
        });
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, plain);
        // A frame longer than the MTU allows is refused and counted.
        let mut big = plain.clone();
        big.resize(3000, 0);
        let mut buf = a.alloc_tx().unwrap();
        assert!(!buf.fill_from(&big), "pool buffers are 2048 bytes");
        buf.set_len(10);
        let mut v = vec![buf];
        a.tx_burst(&mut v).unwrap();
        assert_eq!(a.stats().tx_dropped, 1, "a 10-byte frame is not Ethernet");
    }

    /// The kernel takes the fanout program and spreads frames as
    /// `stack::steer` hashes them: IPv4 and IPv6 TCP/UDP by addresses and
    /// ports, IPv6 behind an extension header by addresses, IPv6 multicast
    /// and ARP to the first socket.
    #[test]
    fn fanout_program_spreads_frames_by_the_stacks_hash() {
        use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
        if !is_root() {
            eprintln!("skipped: AF_PACKET test needs root");
            return;
        }
        let (na, nb, _cleanup) = quiet_veth_pair("uvf");
        let open = |name: &str| {
            AfPacketLink::open(name, PacketPool::new(2048, 512), &RingConfig::default()).unwrap()
        };
        let mut engines = [open(&na), open(&na)];
        let group = engines[0].join_fanout(None).unwrap();
        engines[1].join_fanout(Some(group)).unwrap();
        engines[0].set_fanout_program().unwrap();
        let mut sender = open(&nb);
        let (ma, mb) = (engines[0].info().mac, sender.info().mac);

        // Frames, each told apart by its first port, with the socket
        // (engine of 2) the stack's hash gives it.
        let eth = |ethertype: u16| {
            let mut f = ma.to_vec();
            f.extend_from_slice(&mb);
            f.extend_from_slice(&ethertype.to_be_bytes());
            f
        };
        let ip6 = |next: u8, s: Ipv6Addr, d: Ipv6Addr, l4: &[u8]| {
            let mut f = eth(0x86dd);
            f.extend_from_slice(&[0x60, 0, 0, 0]);
            f.extend_from_slice(&(l4.len() as u16).to_be_bytes());
            f.extend_from_slice(&[next, 64]);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&d.octets());
            f.extend_from_slice(l4);
            f
        };
        let a6 = Ipv6Addr::new(0xfd00, 0x99, 0, 3, 0, 0, 0, 1);
        let b6 = Ipv6Addr::new(0xfd00, 0x99, 0, 3, 0, 0x77, 0, 2);
        let (a4, b4) = (Ipv4Addr::new(10, 99, 3, 1), Ipv4Addr::new(10, 99, 3, 2));
        let engine = |h: u32| (h % 2) as usize;
        let mut frames: Vec<(u16, Vec<u8>, usize)> = Vec::new();
        for i in 0..48u16 {
            let sport = 40_000 + i;
            let mut l4 = sport.to_be_bytes().to_vec();
            l4.extend_from_slice(&[0, 80, 0, 0, 0, 0]);
            let f = match i % 4 {
                0 => {
                    let h = stack::steer::flow_hash(IpAddr::V6(a6), sport, IpAddr::V6(b6), 80);
                    (ip6(if i % 8 == 0 { 6 } else { 17 }, a6, b6, &l4), engine(h))
                }
                1 => {
                    // Port-less: the addresses vary so both engines get some.
                    let s = Ipv6Addr::new(0xfd00, 0x99, 0, 3, 0, 0, i, 9);
                    let mut frag = vec![6, 0, 0, 1, 0, 0, 0, 7];
                    frag.extend_from_slice(&l4);
                    let h = stack::steer::address_hash(IpAddr::V6(s), IpAddr::V6(b6));
                    (ip6(44, s, b6, &frag), engine(h))
                }
                2 => {
                    let all_nodes = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
                    (ip6(17, a6, all_nodes, &l4), 0)
                }
                _ => {
                    let mut f = eth(0x0800);
                    let mut ip = [0u8; 20];
                    ip[0] = 0x45;
                    ip[2..4].copy_from_slice(&(20 + l4.len() as u16).to_be_bytes());
                    ip[8] = 64;
                    ip[9] = 6;
                    ip[12..16].copy_from_slice(&a4.octets());
                    ip[16..20].copy_from_slice(&b4.octets());
                    f.extend_from_slice(&ip);
                    f.extend_from_slice(&l4);
                    let h = stack::steer::flow_hash(IpAddr::V4(a4), sport, IpAddr::V4(b4), 80);
                    (f, engine(h))
                }
            };
            frames.push((sport, f.0, f.1));
        }
        let mut spread = [0usize; 2];
        for (_, f, e) in &frames {
            let mut buf = sender.alloc_tx().unwrap();
            assert!(buf.fill_from(f));
            let mut v = vec![buf];
            sender.tx_burst(&mut v).unwrap();
            assert!(v.is_empty());
            spread[*e] += 1;
        }
        assert!(spread.iter().all(|&n| n > 4), "{spread:?}");
        // The first port, wherever the frame put it.
        let sport_of = |d: &[u8]| {
            let l3 = 14;
            let l4 = match (d[12], d[13]) {
                (0x86, 0xdd) if d[l3 + 6] == 44 => l3 + 48,
                (0x86, 0xdd) => l3 + 40,
                _ => l3 + 20,
            };
            u16::from_be_bytes([d[l4], d[l4 + 1]])
        };
        for (e, link) in engines.iter_mut().enumerate() {
            let want = frames.iter().filter(|f| f.2 == e).count();
            let got = receive(link, want, Duration::from_secs(5), |b| {
                b.data().len() > 14 && b.data()[6..12] == mb
            });
            let mut got: Vec<u16> = got.iter().map(|(d, _)| sport_of(d)).collect();
            got.sort_unstable();
            let expect: Vec<u16> = frames.iter().filter(|f| f.2 == e).map(|f| f.0).collect();
            assert_eq!(got, expect, "engine {e}");
        }
    }

    /// In-order TCP segments of one flow sent over a veth come out of the
    /// receiving link aggregated (in one burst or a few, as the kernel's
    /// blocks cut them), every byte in order; a segment with a bad
    /// checksum among them is handed over alone, untouched.
    #[test]
    fn tcp_segments_over_a_veth_are_aggregated() {
        assert!(is_root(), "this AF_PACKET test needs root");
        let (na, nb, _cleanup) = quiet_veth_pair("uvg");
        let mut a =
            AfPacketLink::open(&na, PacketPool::new(2048, 256), &RingConfig::default()).unwrap();
        let mut b =
            AfPacketLink::open(&nb, PacketPool::new(2048, 256), &RingConfig::default()).unwrap();
        let payload: Vec<u8> = (0..30_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut bad = None;
        let mut v = Vec::new();
        for (i, chunk) in payload.chunks(1000).enumerate() {
            let mut f =
                crate::gro::tests::segment(false, 4000, 1000 + i as u32 * 1000, 0x10, 5, chunk);
            if i == 15 {
                // Its TCP checksum field.
                f[14 + 20 + 16] ^= 0x20;
                bad = Some(f.clone());
            }
            let mut buf = a.alloc_tx().unwrap();
            assert!(buf.fill_from(&f));
            v.push(buf);
        }
        while !v.is_empty() {
            a.tx_burst(&mut v).unwrap();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut got: Vec<(u32, Vec<u8>, bool)> = Vec::new();
        let mut out = Vec::new();
        let mut bytes = 0;
        while bytes < payload.len() && std::time::Instant::now() < deadline {
            b.rx_burst(&mut out, MAX_BURST).unwrap();
            for buf in out.drain(..) {
                let d = buf.data();
                if d.len() > 54 && d[12..14] == [0x08, 0x00] && d[34..36] == 4000u16.to_be_bytes() {
                    let seq = u32::from_be_bytes([d[38], d[39], d[40], d[41]]);
                    let data = d[66..].to_vec();
                    bytes += data.len();
                    got.push((seq, d.to_vec(), buf.csum_partial()));
                }
                b.recycle(buf);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(bytes, payload.len(), "every byte came");
        assert!(got.len() < 30, "{} frames for 30 segments", got.len());
        let bad = bad.unwrap();
        let alone = got
            .iter()
            .position(|g| g.1 == bad)
            .expect("the bad one, alone");
        assert!(!got[alone].2, "not vouched for");
        let mut next = 1000;
        let mut joined = Vec::new();
        for (seq, frame, vouched) in &got {
            assert_eq!(*seq, next, "in order");
            next += (frame.len() - 66) as u32;
            joined.extend_from_slice(&frame[66..]);
            if frame.len() > 1066 {
                assert!(vouched, "an aggregate is vouched for");
                let mut whole = frame.clone();
                assert!(wire::partial_checksum::complete(&mut whole));
            }
        }
        assert!(joined == payload, "the payload, whole and in order");
        let st = b.stats();
        assert!(st.rx_gro_aggregates > 0 && st.rx_gro_joined > 0, "{st:?}");
        assert_eq!(st.rx_frames, 30);
        assert_eq!(b.pool_stats().available, 256, "every buffer back");
    }

    #[test]
    fn vnet_header_says_what_to_finish_and_refuses_what_it_cannot_place() {
        let p = [9u8; 300];
        let tcp4 = crate::gro::tests::segment(false, 1, 1000, 0x10, 5, &p);
        let tcp6 = crate::gro::tests::segment(true, 1, 1000, 0x10, 5, &p);
        // Nothing to finish: all zero.
        assert_eq!(vnet_header(&tcp4, false, 0), Some([0; VNET_HDR_LEN]));
        assert_eq!(
            vnet_header(&tcp4, false, 1000),
            None,
            "GSO needs the partial sum"
        );
        let le = |h: &[u8; VNET_HDR_LEN], at: usize| u16::from_le_bytes([h[at], h[at + 1]]);
        let h = vnet_header(&tcp4, true, 0).unwrap();
        assert_eq!((h[0], h[1], le(&h, 6), le(&h, 8)), (1, 0, 34, 16));
        let h = vnet_header(&tcp4, true, 1448).unwrap();
        assert_eq!((h[1], le(&h, 2), le(&h, 4)), (1, 34 + 32, 1448));
        let h = vnet_header(&tcp6, true, 1428).unwrap();
        assert_eq!(
            (h[1], le(&h, 2), le(&h, 4), le(&h, 6)),
            (4, 54 + 32, 1428, 54)
        );
        // Tagged: the offsets move by the tag.
        let mut tagged = tcp4[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0, 7]);
        tagged.extend_from_slice(&tcp4[12..]);
        let h = vnet_header(&tagged, true, 0).unwrap();
        assert_eq!(le(&h, 6), 38);
        // UDP: its checksum, no segmentation.
        let mut udp = tcp4.clone();
        udp[23] = 17;
        let h = vnet_header(&udp, true, 0).unwrap();
        assert_eq!((le(&h, 6), le(&h, 8)), (34, 6));
        assert_eq!(vnet_header(&udp, true, 1000), None);
        // A fragment has no whole datagram to sum: refused.
        let mut fragment = udp.clone();
        fragment[20] = 0x20;
        assert_eq!(vnet_header(&fragment, true, 0), None);
        assert_eq!(vnet_header(&fragment, false, 0), Some([0; VNET_HDR_LEN]));
        // Anything else marked partial, or cut short: refused, no panic.
        let mut icmp = tcp4.clone();
        icmp[23] = 1;
        assert_eq!(vnet_header(&icmp, true, 0), None);
        for n in 0..60 {
            let _ = vnet_header(&tcp4[..n], true, 1000);
            let _ = vnet_header(&tcp6[..n], true, 0);
        }
    }

    /// Without `tso`, by default, a link leaves checksums to the kernel:
    /// a UDP datagram sent with only its pseudo-header's sum, after a
    /// `virtio_net_hdr` saying `NEEDS_CSUM`, reaches the veth's other end
    /// partial and marked so (the kernel passes a partial skb on as it
    /// is); with our end's checksum offload off, the kernel finishes it in
    /// software and it arrives whole. Without the header (`vnet_hdr` off)
    /// or with `tx_checksum` off the link offloads nothing.
    #[test]
    fn partial_checksums_leave_with_needs_csum_by_default() {
        assert!(is_root(), "this AF_PACKET test needs root");
        let (na, nb, _cleanup) = quiet_veth_pair("uvc");
        let mut a =
            AfPacketLink::open(&na, PacketPool::new(2048, 64), &RingConfig::default()).unwrap();
        assert!(a.tx_checksum_offload(), "on by default");
        assert_eq!(a.tso_max(), 0, "no super-frames without tso");
        let mut b =
            AfPacketLink::open(&nb, PacketPool::new(2048, 64), &RingConfig::default()).unwrap();
        let (src, dst) = ([10, 99, 31, 1], [10, 99, 31, 2]);
        let payload = b"left for the kernel to finish";
        let mut frame = vec![0xffu8; 6];
        frame.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x00]);
        let udp_len = 8 + payload.len();
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((20 + udp_len) as u16).to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&src);
        ip[16..20].copy_from_slice(&dst);
        let sum = !wire::checksum::data(&ip);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        frame.extend_from_slice(&ip);
        let pseudo = wire::checksum::pseudo_header_v4(
            &src.into(),
            &dst.into(),
            wire::ip::IpProtocol::Udp,
            udp_len as u32,
        );
        frame.extend_from_slice(&5000u16.to_be_bytes());
        frame.extend_from_slice(&5001u16.to_be_bytes());
        frame.extend_from_slice(&(udp_len as u16).to_be_bytes());
        frame.extend_from_slice(&pseudo.to_be_bytes());
        frame.extend_from_slice(payload);
        let send = |a: &mut AfPacketLink| {
            let TxPlaced::InPlace(bytes) = a.tx_place_sized(frame.len(), true, 0) else {
                panic!("a free slot not lent");
            };
            bytes.copy_from_slice(&frame);
            while a.tx_pending() > 0 {
                a.tx_flush().unwrap();
            }
        };
        let ours = |d: &[u8]| d.len() == frame.len() && d.ends_with(payload);
        send(&mut a);
        let got = receive(&mut b, 1, Duration::from_secs(3), |f| ours(f.data()));
        assert_eq!(got.len(), 1, "{:?}", a.stats());
        let (arrived, partial) = &got[0];
        assert!(
            *partial,
            "the kernel marks it partial (TP_STATUS_CSUMNOTREADY)"
        );
        assert_eq!(arrived, &frame, "as sent, the sum left for the device");
        // Our end cannot finish checksums: the kernel does, in software.
        run(&["ethtool", "-K", &na, "tx", "off"]);
        send(&mut a);
        let got = receive(&mut b, 1, Duration::from_secs(3), |f| ours(f.data()));
        assert_eq!(got.len(), 1, "{:?}", a.stats());
        let (arrived, partial) = &got[0];
        assert!(!*partial, "finished, so no longer marked");
        assert_ne!(arrived, &frame, "the checksum field was finished");
        let mut want = frame.clone();
        assert!(wire::partial_checksum::complete(&mut want));
        assert_eq!(arrived, &want, "finished as a device would");
        assert_eq!(a.stats().tx_csum_partial, 2);
        assert_eq!(a.stats().tx_csum_refused, 0);
        for ring in [
            RingConfig {
                vnet_hdr: false,
                ..RingConfig::default()
            },
            RingConfig {
                tx_checksum: false,
                ..RingConfig::default()
            },
        ] {
            let l = AfPacketLink::open(&na, PacketPool::new(2048, 8), &ring).unwrap();
            assert!(!l.tx_checksum_offload(), "{ring:?}");
            assert_eq!(l.stats().tx_csum_refused, 0, "not asked, not refused");
        }
    }

    #[test]
    fn tx_frames_go_whole_into_the_kernels_buffer_but_super_frames() {
        let p = [9u8; 300];
        let tcp4 = crate::gro::tests::segment(false, 1, 1000, 0x10, 5, &p);
        let hdr_len = |h: [u8; VNET_HDR_LEN]| u16::from_le_bytes([h[2], h[3]]);
        let whole = tcp4.len() as u16;
        // Plain and partial-checksum frames: the whole frame, the rest of
        // the header as vnet_header wrote it.
        let h = tx_vnet_header(&tcp4, false, 0).unwrap();
        assert_eq!(hdr_len(h), whole);
        assert_eq!(h[..2], [0, 0][..]);
        assert_eq!(h[4..], [0; 6][..]);
        let h = tx_vnet_header(&tcp4, true, 0).unwrap();
        let plain = vnet_header(&tcp4, true, 0).unwrap();
        assert_eq!(hdr_len(h), whole);
        assert_eq!((&h[..2], &h[4..]), (&plain[..2], &plain[4..]));
        // A super-frame: its headers only, as vnet_header says.
        assert_eq!(
            tx_vnet_header(&tcp4, true, 1448),
            vnet_header(&tcp4, true, 1448)
        );
        assert_eq!(hdr_len(tx_vnet_header(&tcp4, true, 1448).unwrap()), 34 + 32);
        // What vnet_header refuses stays refused.
        assert_eq!(tx_vnet_header(&tcp4, false, 1000), None);
    }

    /// A link with `tso` sends a TCP super-frame and a partial-checksum
    /// frame after their `virtio_net_hdr`: the veth carries the
    /// super-frame whole to its peer, whose link (reading the kernel's
    /// marks) hands it over whole, or cut into checked segments without
    /// large buffers. With either RX ring: a V2 slot holds 2 KiB, so
    /// there the super-frame comes whole through the socket's queue
    /// (`TP_STATUS_COPY`). Sent from a buffer, or written in the TX
    /// ring's slot in place.
    #[test]
    fn tso_super_frames_cross_a_veth_whole_or_cut() {
        assert!(is_root(), "this AF_PACKET test needs root");
        let (na, nb, _cleanup) = quiet_veth_pair("uvt");
        let tso = RingConfig {
            tso: true,
            tx_frame_count: 16,
            ..RingConfig::default()
        };
        let mut a = AfPacketLink::open(&na, PacketPool::new(2048, 64), &tso).unwrap();
        assert!(a.tx_checksum_offload());
        assert_eq!(a.tso_max(), 65535);
        let payload: Vec<u8> = (0..30_000u32).map(|i| (i * 11 % 251) as u8).collect();
        let mut frame = crate::gro::tests::segment(false, 4000, 1000, 0x18, 5, &payload);
        // The partial form, as the stack leaves it.
        let tcp_len = frame.len() - 34;
        let pseudo = wire::checksum::pseudo_header_v4(
            &[10, 99, 30, 1].into(),
            &[10, 99, 30, 2].into(),
            wire::ip::IpProtocol::Tcp,
            tcp_len as u32,
        );
        frame[50..52].copy_from_slice(&pseudo.to_be_bytes());
        let send = |a: &mut AfPacketLink, frame: &[u8], in_place: bool| {
            if in_place {
                // Written in the TX ring's slot, requested by the flush.
                let TxPlaced::InPlace(bytes) = a.tx_place_sized(frame.len(), true, 1000) else {
                    panic!("a free slot not lent");
                };
                bytes.copy_from_slice(frame);
                assert_eq!(a.tx_pending(), 1);
                a.tx_flush().unwrap();
                while a.tx_pending() > 0 {
                    a.tx_flush().unwrap();
                }
                return;
            }
            let TxPlaced::Frame(mut buf) = a.tx_place(frame.len(), true) else {
                panic!("no large buffer for a super-frame");
            };
            assert_eq!(buf.capacity(), LARGE_BUF_SIZE);
            buf.data_mut().copy_from_slice(frame);
            buf.set_gso_size(1000);
            let mut v = vec![buf];
            while !v.is_empty() {
                a.tx_burst(&mut v).unwrap();
            }
        };
        let ours = |d: &[u8]| d.len() > 54 && d[12..14] == [0x08, 0x00] && d[34..36] == [15, 160];
        // (ring, whole, sent in place)
        let cases = [
            (RxRingKind::V2, true, false),
            (RxRingKind::V2, false, true),
            (RxRingKind::V3, true, true),
            (RxRingKind::V3, false, false),
        ];
        for (kind, whole, in_place) in cases {
            let rx = RingConfig {
                rx_ring: kind,
                gro: whole,
                large_buffers: if whole { 4 } else { 0 },
                ..RingConfig::default()
            };
            let mut b = AfPacketLink::open(&nb, PacketPool::new(2048, 256), &rx).unwrap();
            send(&mut a, &frame, in_place);
            let mut got: Vec<(Vec<u8>, bool)> = Vec::new();
            let mut bytes = 0;
            let mut out = Vec::new();
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while bytes < payload.len() && std::time::Instant::now() < deadline {
                b.rx_burst(&mut out, MAX_BURST).unwrap();
                for buf in out.drain(..) {
                    if ours(buf.data()) {
                        bytes += buf.data().len() - 66;
                        got.push((buf.data().to_vec(), buf.csum_partial()));
                    }
                    b.recycle(buf);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(
                bytes,
                payload.len(),
                "{kind:?} whole {whole}: {:?}",
                b.stats()
            );
            assert!(got.iter().all(|g| g.1), "the kernel's partial mark on each");
            if whole {
                assert_eq!(got.len(), 1);
                assert!(got[0].0 == frame, "the super-frame as it was sent");
            } else {
                // At the sender's segment size, from the virtio_net_hdr
                // the kernel put before the frame (1000, not the MTU's
                // 1448).
                assert_eq!(got.len(), payload.len().div_ceil(1000), "{:?}", b.stats());
                let mut joined = Vec::new();
                for (seg, _) in &got {
                    assert!(seg.len() - 66 <= 1000);
                    joined.extend_from_slice(&seg[66..]);
                }
                assert!(joined == payload);
            }
            let v = b.stats().rx_vnet;
            assert_eq!((v.tcp_gso, v.tcp_gso_size), (1, 1000), "{v:?}");
            assert_eq!(b.stats().rx_super_frames, 1);
            assert_eq!(b.stats().rx_oversize + b.stats().ring_errors, 0);
            let queued = b.stats().rx_queued_whole;
            assert_eq!(
                queued,
                u64::from(kind == RxRingKind::V2),
                "through the queue"
            );
        }
        assert_eq!(a.stats().tx_super_frames, 4);
        assert_eq!(a.stats().tx_dropped, 0);
    }
}
