//! A DPDK ethdev port queue as a [`Link`] whose buffers are mbufs.

use std::ffi::CStr;
use std::io;
use std::sync::Arc;

use super::eal::{self, dpdk_error};
use super::ffi;
use super::mbuf::{Mbuf, MbufPool};
use crate::gso::TcpSuperFrame;
use crate::partial_form::PartialForm;
use crate::{Link, LinkInfo, LinkStats, PacketBuffer, TxPlaced, MAX_BURST};

/// DPDK's default headroom in front of an mbuf's data
/// (`RTE_PKTMBUF_HEADROOM`).
const HEADROOM: usize = 128;

/// Ethernet header and one VLAN tag.
const FRAME_OVERHEAD: usize = 18;

/// The largest frame an mbuf holds: its data room is 16 bits, headroom
/// included.
const MAX_MBUF_FRAME: usize = u16::MAX as usize - HEADROOM;

/// The pool a driver receives into when its frames are larger than the
/// port's buffers (DPDK's af_packet driver: one mbuf of its whole
/// `framesz` per frame, however short the frame) has the port's number of
/// mbufs, as far as this many bytes per queue allow, and at least
/// [`LARGE_RX_MBUFS_MIN`]: 1024 mbufs of 16 KB, 256 of 64 KB. The driver
/// takes one per frame as it reads it, so these cover the bursts in
/// flight and the frames sockets keep; the frames to send come from the
/// port's pool of MTU-sized mbufs.
const LARGE_RX_BYTES: usize = 17 << 20;
const LARGE_RX_MBUFS_MIN: u32 = 256;

/// Mbufs in a queue's large receive pool (see [`LARGE_RX_BYTES`]).
fn large_rx_mbufs(pool_size: u32, frame: usize) -> u32 {
    let fit = u32::try_from(LARGE_RX_BYTES / (frame + HEADROOM).max(1)).unwrap_or(u32::MAX);
    pool_size.min(fit).max(LARGE_RX_MBUFS_MIN)
}

/// Mbufs per queue into which chained frames are gathered (ports with
/// scatter receive): a frame longer than one mbuf arrives in segments and
/// leaves the link as one buffer.
const CHAIN_MBUFS: u32 = 64;

/// Mbufs per queue for TCP super-frames to send (TSO on): each up to
/// [`MAX_MBUF_FRAME`], enough for a few bursts of them in flight.
const TSO_MBUFS: u32 = 64;

/// A symmetric RSS key (the 16-bit pattern 0x6d5a repeated): the Toeplitz
/// hash of a flow is the same in both directions, so a connection's two
/// halves land on one queue.
const SYMMETRIC_RSS_KEY: [u8; 40] = {
    let mut k = [0u8; 40];
    let mut i = 0;
    while i < 40 {
        k[i] = if i % 2 == 0 { 0x6d } else { 0x5a };
        i += 1;
    }
    k
};

/// How to set a port up (`[dpdk]` and `[portN]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DpdkPortConfig {
    /// The ethdev port id (N of `[portN]`).
    pub port_id: u16,
    /// Mbufs in the port's pool.
    pub pool_size: u32,
    /// The largest frame an mbuf must hold (Ethernet header included).
    pub buf_size: usize,
    /// Mbufs kept back for [`Link::alloc_tx_reserved`] (ARP, ICMP).
    pub reserve: u32,
    /// RX and TX descriptors asked of the driver (it may adjust them).
    pub rx_desc: u16,
    pub tx_desc: u16,
    /// `promiscuous`.
    pub promiscuous: bool,
    /// `!tx_csum_offoad_skip`: let the NIC fill TCP/UDP checksums of
    /// frames marked partial, where the port can.
    pub tx_csum_offload: bool,
    /// `tso`: turn on the port's TCP segmentation offload, where it has it.
    pub tso: bool,
    /// `vlan_strip`: let the NIC strip VLAN tags, where it can (the link
    /// puts them back for the stack).
    pub vlan_strip: bool,
    /// `symmetric_rss`: hash with a symmetric key, where the port has RSS.
    pub symmetric_rss: bool,
    /// `[portN] mtu`: set the port's MTU.
    pub mtu: Option<u16>,
    /// `[portN] mac`: set the port's Ethernet address.
    pub mac: Option<[u8; 6]>,
}

impl DpdkPortConfig {
    /// Defaults for port `port_id`: 8192 mbufs of 2048 bytes, 512
    /// descriptors each way, F-Stack's `[dpdk]` defaults for the rest.
    pub fn new(port_id: u16) -> DpdkPortConfig {
        DpdkPortConfig {
            port_id,
            pool_size: 8192,
            buf_size: 2048,
            reserve: 64,
            rx_desc: 512,
            tx_desc: 512,
            promiscuous: true,
            tx_csum_offload: true,
            tso: false,
            vlan_strip: true,
            symmetric_rss: false,
            mtu: None,
            mac: None,
        }
    }
}

/// The offloads a port was started with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DpdkOffloads {
    pub rx_tcp_csum: bool,
    pub rx_udp_csum: bool,
    pub tx_tcp_csum: bool,
    pub tx_udp_csum: bool,
    /// TCP segmentation offload: super-frames to send go to the port whole.
    pub tso: bool,
    /// The port's TSO cuts IPv6 super-frames too (else the link cuts them).
    pub tso_ipv6: bool,
    /// The port counts the Ethernet header against the MTU when it checks
    /// a segment's size (net_tap: `tso_segsz` plus every header at most
    /// the MTU), so segments carry 14 bytes less.
    pub tso_segment_counts_l2: bool,
    pub vlan_strip: bool,
    /// The port verifies IPv4 header checksums: a frame it found bad is
    /// dropped and counted (`rx_ip_csum_bad`).
    pub rx_ipv4_csum: bool,
    /// Scatter receive: frames longer than an mbuf come chained and are
    /// gathered into one buffer.
    pub rx_scatter: bool,
    /// Large receive offload: the port joins a flow's TCP segments into
    /// frames of up to 64 KiB, which arrive chained and are gathered (only
    /// with scatter). None of net_tap, net_af_packet, net_af_xdp offers
    /// it; net_virtio_user over vhost-user does.
    pub rx_lro: bool,
    /// Frames are received into mbufs of this many bytes, larger than the
    /// port's (a driver whose frames may exceed them: net_af_packet's
    /// `framesz`).
    pub large_rx_frame: Option<usize>,
    /// RSS hash functions in use (0: none).
    pub rss_hf: u64,
}

/// Counters of the link itself (beside the port's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counters {
    rx_frames: u64,
    rx_bytes: u64,
    tx_frames: u64,
    tx_bytes: u64,
    tx_dropped: u64,
    rx_oversize: u64,
    /// Frames whose VLAN tag the NIC stripped and the link put back.
    rx_vlan_reinserted: u64,
    /// Frames whose stripped VLAN tag could not be put back (dropped).
    rx_vlan_lost: u64,
    /// Frames the NIC found with a bad L4 checksum: dropped.
    rx_l4_csum_bad: u64,
    /// Frames the NIC found with a bad IPv4 header checksum: dropped.
    rx_ip_csum_bad: u64,
    /// Frames the NIC joined from several TCP segments (LRO).
    rx_lro_frames: u64,
    /// The segment size the NIC gave for the last of them.
    rx_lro_seg_size: u64,
    /// Frames the NIC vouched for (checksum good or left partial).
    rx_l4_csum_offloaded: u64,
    /// Frames sent with the checksum left to the NIC.
    tx_csum_offloaded: u64,
    /// Partial frames whose checksum the link completed in software.
    tx_csum_software: u64,
    pool_exhausted: u64,
    /// Frames longer than the MTU (and its Ethernet header and a tag)
    /// received whole: a peer's TCP super-frames and reassembled datagrams
    /// from the af_packet driver, chained frames gathered.
    rx_above_mtu: u64,
    /// Frames received in several segments, gathered into one buffer.
    rx_chained_gathered: u64,
    /// Chained frames dropped: no buffer to gather them into (the count
    /// of those too long for any buffer is `rx_oversize`).
    rx_chained_no_buffer: u64,
    /// TCP super-frames handed to the port to cut (TSO).
    tx_tso_frames: u64,
    /// TCP super-frames the link cut into segments itself (the port's TSO
    /// does not take them: IPv6 on net_tap).
    tx_super_frames_cut: u64,
}

/// One RX/TX queue pair of a DPDK port.
pub struct DpdkLink {
    // Field order matters for drop: the reserve goes back to the pool, then
    // the port's share (the last queue's link closes the port, whose rings
    // free their mbufs, then the pools).
    reserve: Vec<Mbuf>,
    shared: Arc<PortQueues>,
    queue: u16,
    reserve_target: usize,
    /// What [`Link::lend_budget`] says.
    lend_budget: usize,
    info: LinkInfo,
    driver: String,
    offloads: DpdkOffloads,
    counters: Counters,
    /// Partial checksums recognised (a software driver on a veth).
    partial_form: PartialForm,
    /// The shim's burst descriptors (boxed: they would make the link, and
    /// every enum holding it, 1.8 KB larger).
    rx: Box<[ffi::Rx; MAX_BURST]>,
    tx: Box<[ffi::Tx; MAX_BURST]>,
}

// SAFETY: a link may move to another thread (its engine's) as a whole. Its
// queue pair is used by this link alone, whatever thread it is on; DPDK
// requires only that one thread at a time uses a queue. The pointers in the
// burst descriptors (`rx`, `tx`) are scratch, filled and read within one
// burst call and never dereferenced after it; the mbufs they named are
// owned by `Mbuf` values (Send) or by the driver by then. The shared port
// and pools are Sync (`PortQueues`).
unsafe impl Send for DpdkLink {}

/// Closes the port on drop.
struct PortGuard(u16);

/// What the queue pairs of one port share: the port, and the pool of each
/// queue (queue q receives into `pools[q]`; each queue's link allocates
/// only from its own, so the engines share no pool). Gone with the last
/// queue's link; field order: the port closes first, so every mbuf its
/// rings hold is back before the pools are freed.
struct PortQueues {
    port: PortGuard,
    pools: Vec<MbufPool>,
    /// The pool each queue receives into when it is not `pools[q]`: mbufs
    /// of the driver's frame size (see [`LARGE_RX_BYTES`]); empty when the
    /// queues receive into `pools`.
    rx_pools: Vec<MbufPool>,
    /// Where each queue gathers chained frames (scatter receive on), with
    /// room for the largest frame an mbuf holds; empty without scatter.
    chain_pools: Vec<MbufPool>,
    /// Where each queue takes buffers for TCP super-frames to send (TSO
    /// on), of [`MAX_MBUF_FRAME`] bytes; empty without TSO.
    tso_pools: Vec<MbufPool>,
    /// The port's RSS as the engines must compute it (several queues with
    /// RSS), or why it is not known.
    rss: Result<RssTable, String>,
}

pub use crate::nic_rss::RssTable;

/// Programs port `port_id`'s indirection table to spread flows round
/// robin over `queues` queues, or reads it back where the driver does not
/// allow it, and reads the key.
fn program_rss(port_id: u16, queues: u16) -> Result<RssTable, String> {
    // SAFETY: the port is started; the call reads its info.
    let n = unsafe { ffi::ustack_dpdk_reta_size(port_id) };
    if n == 0 {
        return Err("the port reports no RSS indirection table".into());
    }
    let mut reta: Vec<u16> = (0..n).map(|i| i % queues).collect();
    // SAFETY: `reta` holds `n` entries, written (set) or filled (get).
    let set = unsafe { ffi::ustack_dpdk_reta(port_id, reta.as_mut_ptr(), n, 1) };
    let programmed = set == 0;
    if !programmed {
        // SAFETY: as above.
        let get = unsafe { ffi::ustack_dpdk_reta(port_id, reta.as_mut_ptr(), n, 0) };
        if get != 0 {
            return Err(format!(
                "the indirection table can be neither written ({}) nor read ({})",
                dpdk_error("rss_reta_update", set),
                dpdk_error("rss_reta_query", get)
            ));
        }
        if let Some(q) = reta.iter().find(|&&q| q >= queues) {
            return Err(format!("the indirection table names queue {q} of {queues}"));
        }
    }
    let mut key = vec![0u8; 64];
    let mut len: u8 = 64;
    let mut hf = 0u64;
    // SAFETY: `key` has `len` bytes of room; `len` and `hf` are written.
    let r = unsafe { ffi::ustack_dpdk_rss_conf(port_id, key.as_mut_ptr(), &mut len, &mut hf) };
    if r != 0 {
        return Err(format!(
            "the RSS key cannot be read ({})",
            dpdk_error("rss_hash_conf_get", r)
        ));
    }
    key.truncate(usize::from(len));
    if key.len() < 40 {
        return Err(format!(
            "the RSS key is {} bytes, fewer than the 40 a flow's hash reads",
            key.len()
        ));
    }
    Ok(RssTable {
        key,
        reta,
        programmed,
    })
}

impl Drop for PortGuard {
    fn drop(&mut self) {
        // SAFETY: the port was started by this link, which is going away;
        // stopping frees the mbufs its rings hold back to their pool.
        unsafe { ffi::ustack_dpdk_port_close(self.0) }
    }
}

/// One pool per queue beside a port's main pools (`what`: "rx" or
/// "chain"), of `n` mbufs holding frames of `frame` bytes, without
/// per-lcore caches (a small pool is not to be stranded in them).
fn extra_pools(
    what: &str,
    port_id: u16,
    queues: u16,
    serial: u32,
    n: u32,
    frame: usize,
    socket: i32,
) -> io::Result<Vec<MbufPool>> {
    let data_room = u16::try_from(HEADROOM + frame)
        .map_err(|_| invalid(format!("buffers of {frame} bytes are too large")))?;
    (0..queues)
        .map(|q| {
            MbufPool::create(
                &format!("ustack_p{port_id}_q{q}_{what}_{serial}"),
                n,
                data_room,
                socket,
                false,
                false,
            )
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "port {port_id} queue {q}: a {what} pool of {n} mbufs of {data_room} \
                         bytes ({} MB) cannot be made ({e}): give DPDK more memory \
                         (hugepages, or [dpdk] memory= with no_huge)",
                        (n as usize * usize::from(data_room)) >> 20
                    ),
                )
            })
        })
        .collect()
}

/// Numbers the ports' pool sets of this process (see the pools' names).
static POOL_SERIAL: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

fn c_str(bytes: &[u8]) -> String {
    CStr::from_bytes_until_nul(bytes)
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What the port offers, from `rte_eth_dev_info_get` and friends.
fn port_info(port_id: u16) -> io::Result<ffi::PortInfo> {
    // SAFETY: PortInfo is plain data; all-zero is a valid value.
    let mut info: ffi::PortInfo = unsafe { std::mem::zeroed() };
    // SAFETY: the EAL is started and `port_id` valid (checked by the
    // caller); `info` is a live out-parameter.
    let r = unsafe { ffi::ustack_dpdk_port_info(port_id, &mut info) };
    if r != 0 {
        return Err(dpdk_error(
            &format!("port {port_id}: rte_eth_dev_info_get"),
            r,
        ));
    }
    Ok(info)
}

impl DpdkLink {
    /// Sets up and starts DPDK port `cfg.port_id` with one queue pair and
    /// a pool of its own. The EAL must be started ([`eal::init`]).
    pub fn open(cfg: &DpdkPortConfig) -> io::Result<DpdkLink> {
        let mut links = DpdkLink::open_queues(cfg, 1)?;
        Ok(links.remove(0))
    }

    /// Sets up and starts DPDK port `cfg.port_id` with `queues` queue
    /// pairs, one link each (one per engine: link q reads RX queue q and
    /// writes TX queue q), each queue with a pool of `cfg.pool_size` mbufs
    /// of its own. With several queues the port spreads received frames
    /// over them by RSS where it has it (with the symmetric key when
    /// `cfg.symmetric_rss`); a port without RSS delivers everything to
    /// queue 0. Fails when the port has fewer queues than asked.
    pub fn open_queues(cfg: &DpdkPortConfig, queues: u16) -> io::Result<Vec<DpdkLink>> {
        if !eal::is_started() {
            return Err(io::Error::other(
                "the DPDK EAL is not started (link::dpdk::eal::init first)",
            ));
        }
        let port_id = cfg.port_id;
        // SAFETY: the EAL is started; the call reads ethdev's port table.
        if unsafe { ffi::ustack_dpdk_port_is_valid(port_id) } == 0 {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "there is no DPDK port {port_id}: DPDK found {} port(s) (add devices with \
                     [dpdk] allow= or vdev=)",
                    eal::port_count()
                ),
            ));
        }
        let dev = port_info(port_id)?;
        let driver = c_str(&dev.driver);
        if queues == 0 || queues > dev.max_rx_queues || queues > dev.max_tx_queues {
            let hint = if driver == "net_af_packet" {
                format!(" (its vdev takes qpairs={queues})")
            } else {
                String::new()
            };
            return Err(invalid(format!(
                "port {port_id} ({driver}) has at most {} RX and {} TX queues; {queues} queue \
                 pairs asked, one per engine{hint}",
                dev.max_rx_queues, dev.max_tx_queues
            )));
        }
        let reserve = cfg.reserve as usize;
        let min_pool = usize::from(cfg.rx_desc) + usize::from(cfg.tx_desc) + 2 * MAX_BURST;
        if (cfg.pool_size as usize) < min_pool + reserve {
            return Err(invalid(format!(
                "port {port_id}: a pool of {} mbufs is too small for {} RX and {} TX \
                 descriptors, two bursts and a reserve of {reserve} (at least {})",
                cfg.pool_size,
                cfg.rx_desc,
                cfg.tx_desc,
                min_pool + reserve
            )));
        }
        // A driver that keeps mbufs of its own beyond the descriptors gets
        // them on top, or its queue setup fails.
        let driver_held = driver_held_mbufs(&driver);
        let pool_size = cfg.pool_size.max((min_pool + reserve + driver_held) as u32);
        if pool_size > cfg.pool_size {
            eprintln!(
                "ustack: port {port_id} ({driver}): {pool_size} mbufs per queue instead of {}: \
                 the driver fills its AF_XDP fill ring with {driver_held} mbufs of the pool at \
                 queue setup, beside {} RX and {} TX descriptors, two bursts and a reserve of \
                 {reserve}",
                cfg.pool_size, cfg.rx_desc, cfg.tx_desc
            );
        }
        let mut buf_size = cfg.buf_size;
        // A driver whose frames may be longer than the port's buffers
        // receives into a pool of its own, of mbufs that hold them.
        let rx_frame = device_frame_size(&driver, &c_str(&dev.devargs));
        let large_rx = (rx_frame > buf_size).then_some(rx_frame);
        if let Some(f) = large_rx {
            if f > MAX_MBUF_FRAME {
                return Err(invalid(format!(
                    "port {port_id} ({driver}): its frames of {f} bytes do not fit in an mbuf \
                     (at most {MAX_MBUF_FRAME}): give its vdev a smaller framesz"
                )));
            }
        }
        if driver == "net_af_xdp" && dev.max_rx_pktlen != 0 && buf_size > dev.max_rx_pktlen as usize
        {
            // Its UMEM chunk is an mbuf, which must fit in a page.
            eprintln!(
                "ustack: port {port_id} ({driver}): mbufs of {} bytes of frame, not {buf_size}: \
                 the driver's UMEM chunks are the mbufs themselves, each within a page",
                dev.max_rx_pktlen
            );
            buf_size = dev.max_rx_pktlen as usize;
        }
        let data_room = u16::try_from(HEADROOM + buf_size)
            .map_err(|_| invalid(format!("buffers of {buf_size} bytes are too large")))?;

        let partial_form_possible = kernel_interface(&driver, &c_str(&dev.devargs))
            .is_some_and(crate::partial_form::may_carry_partial);
        let mut offloads = DpdkOffloads::default();
        let mut rx_offloads = 0u64;
        let mut tx_offloads = 0u64;
        if dev.rx_offload_capa & ffi::RX_OFFLOAD_TCP_CKSUM != 0 {
            rx_offloads |= ffi::RX_OFFLOAD_TCP_CKSUM;
            offloads.rx_tcp_csum = true;
        }
        if dev.rx_offload_capa & ffi::RX_OFFLOAD_UDP_CKSUM != 0 {
            rx_offloads |= ffi::RX_OFFLOAD_UDP_CKSUM;
            offloads.rx_udp_csum = true;
        }
        // Scatter wherever the port has it: a frame longer than one mbuf
        // (a driver that does not filter by length, as net_tap under a
        // kernel MTU raised behind its back) then arrives chained and is
        // gathered into one buffer, where without it the driver would cut
        // it to the mbuf. Frames that fit come in one segment as before.
        if dev.rx_offload_capa & ffi::RX_OFFLOAD_SCATTER != 0 {
            rx_offloads |= ffi::RX_OFFLOAD_SCATTER;
            offloads.rx_scatter = true;
        }
        if dev.rx_offload_capa & ffi::RX_OFFLOAD_IPV4_CKSUM != 0 {
            rx_offloads |= ffi::RX_OFFLOAD_IPV4_CKSUM;
            offloads.rx_ipv4_csum = true;
        }
        // LRO where the port has it: its joined frames are longer than an
        // mbuf, so they need scatter (chained, gathered whole).
        if offloads.rx_scatter && dev.rx_offload_capa & ffi::RX_OFFLOAD_TCP_LRO != 0 {
            rx_offloads |= ffi::RX_OFFLOAD_TCP_LRO;
            offloads.rx_lro = true;
        }
        if cfg.vlan_strip && dev.rx_offload_capa & ffi::RX_OFFLOAD_VLAN_STRIP != 0 {
            rx_offloads |= ffi::RX_OFFLOAD_VLAN_STRIP;
            offloads.vlan_strip = true;
        }
        if cfg.tx_csum_offload {
            if dev.tx_offload_capa & ffi::TX_OFFLOAD_TCP_CKSUM != 0 {
                tx_offloads |= ffi::TX_OFFLOAD_TCP_CKSUM;
                offloads.tx_tcp_csum = true;
            }
            if dev.tx_offload_capa & ffi::TX_OFFLOAD_UDP_CKSUM != 0 {
                tx_offloads |= ffi::TX_OFFLOAD_UDP_CKSUM;
                offloads.tx_udp_csum = true;
            }
        }
        // TSO where the port has it and takes TCP checksums: a super-frame's
        // checksum is partial, finished by the port for each segment.
        if cfg.tso && dev.tx_offload_capa & ffi::TX_OFFLOAD_TCP_TSO != 0 {
            if offloads.tx_tcp_csum {
                tx_offloads |= ffi::TX_OFFLOAD_TCP_TSO;
                if dev.tx_offload_capa & ffi::TX_OFFLOAD_IPV4_CKSUM != 0 {
                    tx_offloads |= ffi::TX_OFFLOAD_IPV4_CKSUM;
                }
                offloads.tso = true;
                // DPDK 22.11's net_tap cuts with the GSO library, which
                // takes TCP over IPv4 only, and checks segments against
                // the MTU headers and all (rte_eth_tap.c).
                offloads.tso_ipv6 = driver != "net_tap";
                offloads.tso_segment_counts_l2 = driver == "net_tap";
            } else {
                eprintln!(
                    "ustack: port {port_id} ({driver}): tso=1 is not used: TSO needs TCP \
                     checksum offload, which is off (tx_csum_offoad_skip=1) or missing"
                );
            }
        }
        let rss_wanted = ffi::RSS_IPV4
            | ffi::RSS_NONFRAG_IPV4_TCP
            | ffi::RSS_NONFRAG_IPV4_UDP
            | ffi::RSS_IPV6
            | ffi::RSS_NONFRAG_IPV6_TCP
            | ffi::RSS_NONFRAG_IPV6_UDP;
        offloads.rss_hf = dev.flow_type_rss_offloads & rss_wanted;

        // One pool per port queue, named after both and a serial (DPDK
        // names are global): a pool whose mbufs were not all back when its
        // link closed is left in place (see `MbufPool`'s drop), and a port
        // number DPDK hands out again must not meet its name.
        // With several queues the links run on threads that are not EAL
        // lcores, which DPDK's per-lcore caches do not serve: a cache would
        // only strand mbufs the opening thread (an lcore) left in it.
        let serial = POOL_SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let pools = (0..queues)
            .map(|q| {
                MbufPool::create(
                    &format!("ustack_p{port_id}_q{q}_{serial}"),
                    pool_size,
                    data_room,
                    dev.socket_id,
                    queues == 1,
                    driver == "net_af_xdp",
                )
                .map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!(
                            "port {port_id} queue {q}: a pool of {} mbufs of {} bytes ({} MB) \
                             cannot be made ({e}): give DPDK more memory (hugepages, or \
                             [dpdk] memory= with no_huge) or the port fewer buffers \
                             ([port{port_id}] memory=)",
                            pool_size,
                            data_room,
                            (pool_size as usize * usize::from(data_room)) >> 20
                        ),
                    )
                })
            })
            .collect::<io::Result<Vec<MbufPool>>>()?;
        offloads.large_rx_frame = large_rx;
        let rx_pools = match large_rx {
            Some(frame) => extra_pools(
                "rx",
                port_id,
                queues,
                serial,
                large_rx_mbufs(pool_size, frame),
                frame,
                dev.socket_id,
            )?,
            None => Vec::new(),
        };
        let chain_pools = if offloads.rx_scatter {
            extra_pools(
                "chain",
                port_id,
                queues,
                serial,
                CHAIN_MBUFS,
                MAX_MBUF_FRAME,
                dev.socket_id,
            )?
        } else {
            Vec::new()
        };
        let tso_pools = if offloads.tso {
            extra_pools(
                "tso",
                port_id,
                queues,
                serial,
                TSO_MBUFS,
                MAX_MBUF_FRAME,
                dev.socket_id,
            )?
        } else {
            Vec::new()
        };
        let pool_ptrs: Vec<*mut ffi::RteMempool> = if rx_pools.is_empty() {
            pools.iter().map(MbufPool::as_ptr).collect()
        } else {
            rx_pools.iter().map(MbufPool::as_ptr).collect()
        };

        let mut conf = ffi::PortConf {
            rx_offloads,
            tx_offloads,
            rss_hf: offloads.rss_hf,
            rss_key: if cfg.symmetric_rss && offloads.rss_hf != 0 {
                SYMMETRIC_RSS_KEY.as_ptr()
            } else {
                std::ptr::null()
            },
            nb_queues: queues,
            nb_rxd: cfg.rx_desc,
            nb_txd: cfg.tx_desc,
            mtu: cfg.mtu.unwrap_or(0),
            promiscuous: u8::from(cfg.promiscuous),
            mac: cfg.mac.as_ref().map_or(std::ptr::null(), |m| m.as_ptr()),
            max_lro_pkt_size: MAX_MBUF_FRAME as u32,
            pad: 0,
        };
        let mut step: *const libc::c_char = std::ptr::null();
        // SAFETY: `conf` and the key/MAC it points to live across the call;
        // `pool_ptrs` holds `queues` live pools, which stay so while the
        // port runs (`PortQueues` owns them and closes the port first);
        // `step` receives a static string.
        let r = unsafe {
            ffi::ustack_dpdk_port_start(port_id, &mut conf, pool_ptrs.as_ptr(), &mut step)
        };
        let rss = if r != 0 {
            Err("the port did not start".into())
        } else if queues < 2 {
            Err("one queue".into())
        } else if offloads.rss_hf == 0 {
            Err("the port has no RSS".into())
        } else {
            program_rss(port_id, queues)
        };
        let shared = Arc::new(PortQueues {
            port: PortGuard(port_id),
            pools,
            rx_pools,
            chain_pools,
            tso_pools,
            rss,
        });
        if r != 0 {
            let call = if step.is_null() {
                "rte_eth_dev_start".to_string()
            } else {
                // SAFETY: the shim sets `step` to a string literal.
                unsafe { CStr::from_ptr(step) }
                    .to_string_lossy()
                    .into_owned()
            };
            return Err(dpdk_error(&format!("port {port_id} ({driver}): {call}"), r));
        }
        // The MAC and MTU after setup.
        let dev = port_info(port_id)?;
        let mac = match (driver.as_str(), cfg.mac) {
            ("net_tap", None) => {
                let own = tap_peer_mac(dev.mac);
                eprintln!(
                    "ustack: port {port_id} (net_tap): the kernel's TAP interface has the port's \
                     address {}, so ustack answers as {} (set [port{port_id}] mac to choose)",
                    mac_text(dev.mac),
                    mac_text(own)
                );
                own
            }
            _ => dev.mac,
        };
        let mtu = usize::from(dev.mtu).min(buf_size.saturating_sub(FRAME_OVERHEAD));
        let empty_rx = ffi::Rx {
            mbuf: std::ptr::null_mut(),
            data: std::ptr::null_mut(),
            len: 0,
            room: 0,
            flags: 0,
            seg_size: 0,
        };
        let empty_tx = ffi::Tx {
            mbuf: std::ptr::null_mut(),
            len: 0,
            l2_len: 0,
            l3_len: 0,
            offload: 0,
            tso_segsz: 0,
            l4_len: 0,
        };
        let links = (0..queues)
            .map(|queue| {
                let mut link = DpdkLink {
                    reserve: Vec::with_capacity(reserve),
                    shared: Arc::clone(&shared),
                    queue,
                    reserve_target: reserve,
                    lend_budget: if let Some(frame) = large_rx {
                        // The driver takes no mbuf ahead of a frame.
                        (large_rx_mbufs(pool_size, frame) as usize).saturating_sub(2 * MAX_BURST)
                            / 2
                    } else {
                        (pool_size as usize).saturating_sub(min_pool + reserve + driver_held) / 2
                    },
                    info: LinkInfo {
                        name: c_str(&dev.name),
                        mac,
                        mtu,
                    },
                    driver: driver.clone(),
                    offloads,
                    counters: Counters::default(),
                    partial_form: PartialForm::new(partial_form_possible),
                    rx: Box::new([empty_rx; MAX_BURST]),
                    tx: Box::new([empty_tx; MAX_BURST]),
                };
                // With one queue the opening thread is the engine's; with
                // several, each engine fills its reserve on its own thread
                // (`service`), so no lcore cache is involved.
                if queues == 1 {
                    link.refill_reserve();
                }
                link
            })
            .collect();
        Ok(links)
    }

    /// The port's driver (`net_af_packet`, `net_ixgbe`, ...).
    pub fn driver(&self) -> &str {
        &self.driver
    }

    /// The ethdev port id.
    pub fn port_id(&self) -> u16 {
        self.shared.port.0
    }

    /// The port's RSS key and indirection table when it spreads frames
    /// over several queues by RSS, or why they are not known (the engines
    /// then steer by ustack's own flow hash).
    pub fn rss_table(&self) -> Result<&RssTable, &str> {
        self.shared.rss.as_ref().map_err(String::as_str)
    }

    /// The queue pair this link reads and writes.
    pub fn queue(&self) -> u16 {
        self.queue
    }

    fn pool(&self) -> &MbufPool {
        &self.shared.pools[usize::from(self.queue)]
    }

    /// The pool this queue receives into.
    fn rx_pool(&self) -> &MbufPool {
        self.shared
            .rx_pools
            .get(usize::from(self.queue))
            .unwrap_or_else(|| self.pool())
    }

    /// Takes a frame the driver handed over in several segments: gathered
    /// into one buffer of the queue's chain pool, or dropped and counted
    /// (never cut).
    fn gather(&mut self, rx: &ffi::Rx) -> Option<Mbuf> {
        // SAFETY: the shim handed over a received mbuf chain (RX_CHAINED)
        // with its first segment's data pointer and room.
        let chain = unsafe { Mbuf::from_rx_chain(rx) }?;
        let Some(pool) = self.shared.chain_pools.get(usize::from(self.queue)) else {
            // A driver chained without scatter asked.
            self.counters.rx_oversize += 1;
            return None;
        };
        let Some(mut whole) = pool.alloc() else {
            self.counters.rx_chained_no_buffer += 1;
            return None;
        };
        if !whole.gather_chain(&chain) {
            self.counters.rx_oversize += 1;
            return None;
        }
        self.counters.rx_chained_gathered += 1;
        Some(whole)
    }

    /// The offloads in use.
    pub fn offloads(&self) -> DpdkOffloads {
        self.offloads
    }

    /// Whether the port is in promiscuous mode.
    pub fn promiscuous(&self) -> bool {
        // SAFETY: the port is started; the call reads its state.
        unsafe { ffi::ustack_dpdk_promiscuous_get(self.shared.port.0) == 1 }
    }

    /// Mbufs in the pool now, and the pool's size.
    pub fn pool_levels(&self) -> (u32, u32) {
        (self.pool().available(), self.pool().size())
    }

    /// Whether `buf`'s bytes lie in this link's mbuf memory: the proof that
    /// a received frame was not copied out of its mbuf.
    pub fn owns_memory_of(&self, buf: &Mbuf) -> bool {
        let p = buf.data().as_ptr();
        self.pool().contains(p) || self.rx_pool().contains(p)
    }

    /// The size of the page holding `buf`'s bytes: 4 KiB without
    /// hugepages, 2 MiB or 1 GiB with them (0 if DPDK does not know it).
    pub fn page_size_of(buf: &Mbuf) -> u64 {
        // SAFETY: the EAL is started (a link exists); the call only looks
        // the address up in DPDK's memory map.
        unsafe { ffi::ustack_dpdk_page_size_of(buf.data().as_ptr().cast()) }
    }

    /// Link counters beyond [`LinkStats`]: `(name, value)`.
    pub fn extra_stats(&self) -> [(&'static str, u64); 14] {
        let c = &self.counters;
        [
            ("rx_vlan_reinserted", c.rx_vlan_reinserted),
            ("rx_vlan_lost", c.rx_vlan_lost),
            ("rx_l4_csum_bad", c.rx_l4_csum_bad),
            ("rx_ip_csum_bad", c.rx_ip_csum_bad),
            ("rx_lro_frames", c.rx_lro_frames),
            ("rx_lro_seg_size", c.rx_lro_seg_size),
            ("rx_l4_csum_offloaded", c.rx_l4_csum_offloaded),
            ("tx_csum_offloaded", c.tx_csum_offloaded),
            ("tx_csum_software", c.tx_csum_software),
            ("rx_above_mtu", c.rx_above_mtu),
            ("rx_chained_gathered", c.rx_chained_gathered),
            ("rx_chained_no_buffer", c.rx_chained_no_buffer),
            ("tx_tso_frames", c.tx_tso_frames),
            ("tx_super_frames_cut", c.tx_super_frames_cut),
        ]
    }

    fn refill_reserve(&mut self) {
        while self.reserve.len() < self.reserve_target {
            match self.pool().alloc() {
                Some(m) => self.reserve.push(m),
                None => break,
            }
        }
    }

    /// The segment size the port is asked for (see [`tso_segment_size`]).
    fn tso_segment(&self, gso_size: u16, l2_len: u16, l3_len: u16, l4_len: u16) -> u16 {
        let hdrs = usize::from(l3_len)
            + usize::from(l4_len)
            + if self.offloads.tso_segment_counts_l2 {
                usize::from(l2_len)
            } else {
                0
            };
        tso_segment_size(gso_size, self.info.mtu, hdrs)
    }

    /// Cuts, in place in `bufs`, the super-frames the port's TSO does not
    /// take (IPv6 where it cuts IPv4 only, anything but TCP) into segments
    /// of their `gso_size` from the queue's pool, their checksums left
    /// partial as the super-frame's was. Returns the frames dropped (no
    /// buffer for a segment, or not TCP), counted by the caller.
    fn cut_what_the_port_cannot(&mut self, bufs: &mut Vec<Mbuf>) -> u64 {
        let mut dropped = 0;
        let mut i = 0;
        while i < bufs.len() {
            let gso = bufs[i].gso_size();
            let port_takes = gso == 0
                || (bufs[i].csum_partial()
                    && l4_of(bufs[i].data())
                        .is_some_and(|l4| l4.proto == 6 && (!l4.v6 || self.offloads.tso_ipv6)));
            if port_takes {
                i += 1;
                continue;
            }
            let frame = bufs.remove(i);
            let cut = l4_of(frame.data()).and_then(|l4| {
                let tcp_len = usize::from(
                    *frame
                        .data()
                        .get(usize::from(l4.l2_len) + usize::from(l4.l3_len) + 12)?
                        >> 4,
                ) * 4;
                let mtu = usize::from(l4.l3_len) + tcp_len + usize::from(gso);
                TcpSuperFrame::parse(frame.data(), mtu, frame.csum_partial()).ok()
            });
            let Some(sf) = cut else {
                dropped += 1;
                continue;
            };
            let mut segments = Vec::with_capacity(sf.segments());
            for k in 0..sf.segments() {
                let Some(mut m) = self.alloc_tx() else {
                    break;
                };
                let len = sf.segment_len(k);
                if len > m.capacity() {
                    break;
                }
                m.set_len(len);
                sf.write_segment(frame.data(), k, m.data_mut());
                m.set_csum_partial(true);
                m.set_gso_size(0);
                segments.push(m);
            }
            if segments.len() < sf.segments() {
                // Half a super-frame is worse than none: TCP sends it again.
                dropped += 1;
                continue;
            }
            self.counters.tx_super_frames_cut += 1;
            let n = segments.len();
            bufs.splice(i..i, segments);
            i += n;
        }
        dropped
    }

    /// Prepares a frame marked partial: the NIC finishes its checksum if
    /// the port can, else the link does. Returns the shim's offload request.
    fn prepare_partial(&mut self, buf: &mut Mbuf) -> (u32, u16, u16) {
        let Some(l4) = l4_of(buf.data()) else {
            // Not TCP/UDP over IPv4 or IPv6: nothing to finish.
            return (0, 0, 0);
        };
        let family = if l4.v6 { ffi::TX_IPV6 } else { 0 };
        let offload = match l4.proto {
            6 if self.offloads.tx_tcp_csum => ffi::TX_TCP_CSUM | family,
            17 if self.offloads.tx_udp_csum => ffi::TX_UDP_CSUM | family,
            _ => 0,
        };
        if offload != 0 {
            self.counters.tx_csum_offloaded += 1;
            return (offload, l4.l2_len, l4.l3_len);
        }
        complete_checksum(buf.data_mut(), &l4);
        self.counters.tx_csum_software += 1;
        (0, 0, 0)
    }
}

/// The largest frame a driver may hand over beyond the MTU, which its
/// receive mbufs must hold: DPDK's af_packet driver joins its socket to a
/// fanout group with the kernel's defragmentation flag, so a fragmented
/// datagram arrives reassembled, and a veth peer's TCP super-frames
/// (TSO/GSO) arrive whole, each as one frame of up to its ring's frame
/// size. Its queue setup refuses mbufs of less room than `framesz` less
/// the 32 bytes of TPACKET_V2 header beyond a `sockaddr_ll` (and a frame
/// starts 66 bytes into its slot, so none is longer). `framesz` is 2048
/// when not given. Other drivers deliver frames up to the MTU: 0.
pub(super) fn device_frame_size(driver: &str, devargs: &str) -> usize {
    if driver != "net_af_packet" {
        return 0;
    }
    let framesz: usize = devargs
        .split(',')
        .find_map(|kv| kv.trim().strip_prefix("framesz=")?.trim().parse().ok())
        .unwrap_or(2048);
    framesz.saturating_sub(AF_PACKET_SLOT_HEADER)
}

/// What DPDK's af_packet driver (22.11) subtracts from `framesz` for the
/// data an mbuf must hold: `TPACKET2_HDRLEN - sizeof(struct sockaddr_ll)`.
const AF_PACKET_SLOT_HEADER: usize = 32;

/// The address ustack takes on a `net_tap` port. DPDK's tap driver gives
/// the kernel's TAP interface the port's own address (setting the port's
/// sets both), so with that address ustack would see the kernel's frames
/// come from itself (its ARP drops such a sender). The driver reads every
/// frame the kernel sends into the TAP whatever its destination, so ustack
/// answers with a neighbouring address instead: locally administered, its
/// last bit flipped.
pub(super) fn tap_peer_mac(port: [u8; 6]) -> [u8; 6] {
    let mut mac = port;
    mac[0] = (mac[0] | 0x02) & !0x01;
    mac[5] ^= 0x01;
    mac
}

fn mac_text(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Mbufs a driver takes from a queue's pool beyond its descriptors:
/// DPDK's af_xdp driver (22.11) puts 2048 mbufs (libxdp's default ring
/// size) into its AF_XDP fill ring when the queue is set up, and fails the
/// setup (`Failed to configure xdp socket`, EINVAL) when the pool cannot
/// give them. Other drivers: 0.
pub(super) fn driver_held_mbufs(driver: &str) -> usize {
    if driver == "net_af_xdp" {
        2048
    } else {
        0
    }
}

/// The kernel interface under a software driver's port (the `iface=` of
/// `net_af_packet` and `net_af_xdp` vdevs), whose frames come from the
/// kernel as they were handed to it.
pub(super) fn kernel_interface<'a>(driver: &str, devargs: &'a str) -> Option<&'a str> {
    if driver != "net_af_packet" && driver != "net_af_xdp" {
        return None;
    }
    devargs
        .split(',')
        .find_map(|kv| kv.trim().strip_prefix("iface="))
        .map(str::trim)
        .filter(|i| !i.is_empty())
}

/// The payload of each segment a port cuts a super-frame into: the
/// stack's segment size, but no more than the MTU leaves after `hdrs`
/// (the IP and TCP headers, and the Ethernet header for a port that counts
/// it: see [`DpdkOffloads::tso_segment_counts_l2`]), and at least 1.
pub(super) fn tso_segment_size(gso_size: u16, mtu: usize, hdrs: usize) -> u16 {
    let room = u16::try_from(mtu.saturating_sub(hdrs)).unwrap_or(u16::MAX);
    gso_size.min(room).max(1)
}

/// Where the L4 header of an IPv4 or IPv6 TCP/UDP frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct L4 {
    proto: u8,
    l2_len: u16,
    l3_len: u16,
    v6: bool,
}

/// Finds the TCP or UDP header of an unfragmented IPv4 frame, or of an
/// IPv6 frame with TCP or UDP as its first header (what the stack makes),
/// after at most one VLAN tag.
pub(super) fn l4_of(frame: &[u8]) -> Option<L4> {
    let mut l2 = 14;
    let mut ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    if ethertype == 0x8100 {
        ethertype = u16::from_be_bytes([*frame.get(16)?, *frame.get(17)?]);
        l2 = 18;
    }
    if ethertype == 0x86dd {
        let proto = *frame.get(l2 + 6)?;
        let min_l4 = match proto {
            6 => 20,
            17 => 8,
            _ => return None,
        };
        if frame.len() < l2 + 40 + min_l4 {
            return None;
        }
        return Some(L4 {
            proto,
            l2_len: l2 as u16,
            l3_len: 40,
            v6: true,
        });
    }
    if ethertype != 0x0800 {
        return None;
    }
    let ihl = usize::from(*frame.get(l2)? & 0x0f) * 4;
    let proto = *frame.get(l2 + 9)?;
    let frag = u16::from_be_bytes([*frame.get(l2 + 6)?, *frame.get(l2 + 7)?]);
    // A first fragment carries the header but not the whole datagram: its
    // checksum cannot be completed here.
    if ihl < 20 || frag & 0x3fff != 0 || !(proto == 6 || proto == 17) {
        return None;
    }
    let min_l4 = if proto == 6 { 20 } else { 8 };
    if frame.len() < l2 + ihl + min_l4 {
        return None;
    }
    Some(L4 {
        proto,
        l2_len: l2 as u16,
        l3_len: ihl as u16,
        v6: false,
    })
}

/// Completes a partial L4 checksum in software: the checksum field holds the
/// pseudo-header sum; the one's complement sum over the L4 segment with it
/// gives the final value (as a NIC does for `CHECKSUM_PARTIAL`).
pub(super) fn complete_checksum(frame: &mut [u8], l4: &L4) {
    let l2 = usize::from(l4.l2_len);
    let start = l2 + usize::from(l4.l3_len);
    // The IP packet's end: IPv4's total length, IPv6's payload length
    // after its fixed header.
    let end = if l4.v6 {
        start + usize::from(u16::from_be_bytes([frame[l2 + 4], frame[l2 + 5]]))
    } else {
        l2 + usize::from(u16::from_be_bytes([frame[l2 + 2], frame[l2 + 3]]))
    }
    .min(frame.len());
    if end <= start {
        return;
    }
    let field = start + if l4.proto == 6 { 16 } else { 6 };
    let mut sum: u32 = 0;
    let seg = &frame[start..end];
    let mut chunks = seg.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let mut csum = !(sum as u16);
    if l4.proto == 17 && csum == 0 {
        csum = 0xffff;
    }
    frame[field..field + 2].copy_from_slice(&csum.to_be_bytes());
}

impl Link for DpdkLink {
    type Buf = Mbuf;

    fn rx_burst(&mut self, out: &mut Vec<Mbuf>, max: usize) -> io::Result<usize> {
        let max = max.min(MAX_BURST) as u16;
        // SAFETY: the port is started with queue `self.queue`, used by this
        // link only; `self.rx` has room for MAX_BURST entries.
        let n = unsafe {
            ffi::ustack_dpdk_rx_burst(self.shared.port.0, self.queue, self.rx.as_mut_ptr(), max)
        };
        let mut taken = 0;
        for i in 0..usize::from(n) {
            let rx = self.rx[i];
            if rx.flags & ffi::RX_VLAN_LOST != 0 {
                self.counters.rx_vlan_lost += 1;
                // SAFETY: as below; taken only to be freed.
                drop(unsafe { Mbuf::from_rx_chain(&rx) });
                continue;
            }
            let m = if rx.flags & ffi::RX_CHAINED != 0 {
                self.gather(&rx)
            } else if rx.len > rx.room {
                // SAFETY: as below; taken only to be freed.
                drop(unsafe { Mbuf::from_rx_chain(&rx) });
                self.counters.rx_oversize += 1;
                None
            } else {
                // SAFETY: the shim handed over a received single-segment
                // mbuf, its data pointer and room, and len <= room.
                unsafe { Mbuf::from_rx(&rx) }
            };
            let Some(mut m) = m else {
                continue;
            };
            if rx.flags & ffi::RX_VLAN_REINSERTED != 0 {
                self.counters.rx_vlan_reinserted += 1;
            }
            if rx.flags & (ffi::RX_L4_CSUM_BAD | ffi::RX_IP_CSUM_BAD) != 0 {
                // The stack would find the same and drop it: dropped here,
                // without the software check.
                if rx.flags & ffi::RX_IP_CSUM_BAD != 0 {
                    self.counters.rx_ip_csum_bad += 1;
                } else {
                    self.counters.rx_l4_csum_bad += 1;
                }
                drop(m);
                continue;
            }
            if rx.flags & ffi::RX_LRO != 0 {
                self.counters.rx_lro_frames += 1;
                self.counters.rx_lro_seg_size = u64::from(rx.seg_size);
            }
            if rx.flags & (ffi::RX_L4_CSUM_VERIFIED | ffi::RX_L4_CSUM_PARTIAL) != 0 {
                // Verified by the NIC, or left partial by a local sender
                // with the data intact: the stack must not verify it.
                m.set_csum_partial(true);
                self.counters.rx_l4_csum_offloaded += 1;
            } else {
                // No verdict: a software driver over a kernel interface
                // (af_packet, af_xdp on a veth) says nothing of a local
                // sender's partial checksum; its form does.
                self.partial_form.mark(&mut m);
            }
            self.counters.rx_frames += 1;
            self.counters.rx_bytes += u64::from(m.len_u32());
            if m.len_u32() as usize > self.info.mtu + FRAME_OVERHEAD {
                self.counters.rx_above_mtu += 1;
            }
            out.push(m);
            taken += 1;
        }
        Ok(taken)
    }

    fn alloc_tx(&mut self) -> Option<Mbuf> {
        let m = self.pool().alloc();
        if m.is_none() {
            self.counters.pool_exhausted += 1;
        }
        m
    }

    fn alloc_tx_reserved(&mut self) -> Option<Mbuf> {
        if let Some(m) = self.pool().alloc() {
            return Some(m);
        }
        let m = self.reserve.pop();
        if m.is_none() {
            self.counters.pool_exhausted += 1;
        }
        m
    }

    fn tx_burst(&mut self, bufs: &mut Vec<Mbuf>) -> io::Result<usize> {
        let mut dropped = 0;
        // Super-frames the port does not cut are cut here, in place.
        if self.offloads.tso && bufs.iter().any(|b| b.gso_size() > 0) {
            dropped += self.cut_what_the_port_cannot(bufs);
        }
        // Frames that are not Ethernet, or larger than the port carries,
        // go no further.
        let max_frame = self.info.mtu + FRAME_OVERHEAD;
        bufs.retain(|b| {
            let max = if b.gso_size() > 0 {
                MAX_MBUF_FRAME
            } else {
                max_frame
            };
            let ok = b.data().len() >= 14 && b.data().len() <= max;
            dropped += u64::from(!ok);
            ok
        });
        self.counters.tx_dropped += dropped;
        let n = bufs.len().min(MAX_BURST);
        for (i, b) in bufs.iter_mut().take(n).enumerate() {
            let (mut offload, l2_len, l3_len) = if b.csum_partial() {
                self.prepare_partial(b)
            } else {
                (0, 0, 0)
            };
            let (mut tso_segsz, mut l4_len) = (0, 0);
            if b.gso_size() > 0 {
                // Left by `cut_what_the_port_cannot` only when the port
                // takes it: TCP with its checksum offloaded.
                let hdrs = usize::from(l2_len) + usize::from(l3_len);
                l4_len = b.data().get(hdrs + 12).map_or(0, |o| u16::from(o >> 4) * 4);
                tso_segsz = self.tso_segment(b.gso_size(), l2_len, l3_len, l4_len);
                offload |= ffi::TX_TSO;
                self.counters.tx_tso_frames += 1;
            }
            self.tx[i] = ffi::Tx {
                mbuf: b.as_mbuf_ptr() as *mut ffi::RteMbuf,
                len: b.len_u32(),
                l2_len,
                l3_len,
                offload,
                tso_segsz,
                l4_len,
            };
        }
        // SAFETY: `self.tx[..n]` describe `n` live mbufs owned by `bufs[..n]`;
        // the port and queue are this link's. The driver takes the first
        // `sent` of them, whose ownership passes to it below.
        let sent = usize::from(unsafe {
            ffi::ustack_dpdk_tx_burst(self.shared.port.0, self.queue, self.tx.as_ptr(), n as u16)
        });
        let mut sent_bytes = 0;
        for b in bufs.drain(..sent) {
            sent_bytes += u64::from(b.len_u32());
            let _ = b.into_raw(); // now the driver's
        }
        self.counters.tx_frames += sent as u64;
        self.counters.tx_bytes += sent_bytes;
        Ok(sent + dropped as usize)
    }

    /// A super-frame of up to 64 KB takes a buffer of the queue's TSO pool.
    fn tx_place(&mut self, len: usize, csum_partial: bool) -> TxPlaced<'_, Mbuf> {
        let large = len > self.info.mtu + FRAME_OVERHEAD;
        let buf = match self.shared.tso_pools.get(usize::from(self.queue)) {
            Some(pool) if large => pool.alloc(),
            _ => self.alloc_tx(),
        };
        let Some(mut buf) = buf else {
            if large {
                self.counters.pool_exhausted += 1;
            }
            return TxPlaced::NoBuffer;
        };
        if len > buf.capacity() {
            self.recycle(buf);
            return TxPlaced::Oversize;
        }
        buf.set_len(len);
        buf.set_csum_partial(csum_partial);
        buf.set_gso_size(0);
        TxPlaced::Frame(buf)
    }

    /// The largest IP packet of a super-frame: what an mbuf of the TSO
    /// pool holds after the Ethernet header and a tag.
    fn tso_max(&self) -> usize {
        if self.shared.tso_pools.is_empty() {
            0
        } else {
            MAX_MBUF_FRAME - FRAME_OVERHEAD
        }
    }

    fn recycle(&mut self, buf: Mbuf) {
        // Back to the mempool (the reserve refills from there in `service`).
        drop(buf);
    }

    fn info(&self) -> &LinkInfo {
        &self.info
    }

    fn stats(&self) -> LinkStats {
        let mut port = [0u64; 8];
        // SAFETY: the port is started; `port` is a live out-parameter.
        let r = unsafe { ffi::ustack_dpdk_port_stats(self.shared.port.0, &mut port) };
        // The port's own counters are the whole port's: queue 0's link
        // reports them, so the engines' sums count them once.
        let (imissed, ierrors, oerrors, rx_nombuf) = if r == 0 && self.queue == 0 {
            (port[4], port[5], port[6], port[7])
        } else {
            (0, 0, 0, 0)
        };
        let c = &self.counters;
        LinkStats {
            rx_frames: c.rx_frames,
            rx_bytes: c.rx_bytes,
            tx_frames: c.tx_frames,
            tx_bytes: c.tx_bytes,
            rx_dropped: imissed + ierrors + rx_nombuf + c.rx_vlan_lost,
            tx_dropped: c.tx_dropped + oerrors,
            pool_exhausted: c.pool_exhausted + rx_nombuf,
            rx_oversize: c.rx_oversize,
            // The mbuf the engine reads is the one the driver filled; a NIC
            // writes it by DMA, but the af_packet driver copies each frame
            // from the kernel's ring into it, in user space.
            rx_copied: if self.driver == "net_af_packet" {
                c.rx_frames
            } else {
                0
            },
            ring_errors: 0,
            rx_csum_partial_form: self.partial_form.marked(),
            rx_super_frames: 0,
            rx_super_cut: 0,
            rx_queued_whole: 0,
            rx_super_bad_checksum: 0,
            rx_gro_aggregates: 0,
            rx_gro_joined: 0,
            tx_super_frames: 0,
            tx_kick_short: 0,
            tx_csum_partial: c.tx_csum_offloaded,
            tx_csum_refused: 0,
            rx_vnet: Default::default(),
            kernel_rx_drop_refused: 0,
        }
    }

    /// The stack may leave TCP and UDP checksums partial when the NIC
    /// finishes them; otherwise it computes them itself (the link would
    /// only do the same work later).
    /// Received mbufs a socket may keep as its receive buffer: half of what
    /// the pool has beyond the descriptors, two bursts and the reserve
    /// (the other half covers the per-lcore caches and TX bursts).
    fn lend_budget(&self) -> usize {
        self.lend_budget
    }

    fn tx_checksum_offload(&self) -> bool {
        self.offloads.tx_tcp_csum && self.offloads.tx_udp_csum
    }

    fn service(&mut self) -> io::Result<()> {
        if self.reserve.len() < self.reserve_target {
            self.refill_reserve();
        }
        Ok(())
    }
}
