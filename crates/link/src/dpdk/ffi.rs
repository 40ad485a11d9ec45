//! The C shim's interface (src/dpdk/shim.c), declared by hand.
//!
//! Only plain integers, byte arrays and opaque pointers cross: every DPDK
//! struct layout stays on the C side. The structs here mirror the shim's
//! `struct ustack_*` field for field; their sizes are checked below.

use std::ffi::{c_char, c_int, c_uint, c_void};

/// `struct rte_mbuf`, never looked into from Rust.
#[repr(C)]
pub struct RteMbuf {
    _opaque: [u8; 0],
}

/// `struct rte_mempool`, never looked into from Rust.
#[repr(C)]
pub struct RteMempool {
    _opaque: [u8; 0],
}

/// `struct ustack_port_info`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PortInfo {
    pub name: [u8; 64],
    pub driver: [u8; 32],
    pub mac: [u8; 6],
    pub mtu: u16,
    pub max_rx_queues: u16,
    pub max_tx_queues: u16,
    pub socket_id: i32,
    pub max_rx_pktlen: u32,
    pub rx_offload_capa: u64,
    pub tx_offload_capa: u64,
    pub flow_type_rss_offloads: u64,
    pub devargs: [u8; 256],
}

/// `struct ustack_port_conf`.
#[repr(C)]
pub struct PortConf {
    pub rx_offloads: u64,
    pub tx_offloads: u64,
    pub rss_hf: u64,
    pub rss_key: *const u8,
    pub nb_queues: u16,
    pub nb_rxd: u16,
    pub nb_txd: u16,
    pub mtu: u16,
    pub promiscuous: u8,
    pub mac: *const u8,
    pub max_lro_pkt_size: u32,
    pub pad: u32,
}

/// `struct ustack_rx`: one received frame.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Rx {
    pub mbuf: *mut RteMbuf,
    pub data: *mut u8,
    pub len: u32,
    pub room: u32,
    pub flags: u32,
    /// With [`RX_LRO`]: the size of the segments the NIC joined.
    pub seg_size: u32,
}

/// `struct ustack_tx`: one frame to send.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Tx {
    pub mbuf: *mut RteMbuf,
    pub len: u32,
    pub l2_len: u16,
    pub l3_len: u16,
    pub offload: u32,
    /// With [`TX_TSO`]: the payload of each segment, and the TCP header's
    /// length.
    pub tso_segsz: u16,
    pub l4_len: u16,
}

/// `struct ustack_buf`: a fresh transmit buffer.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Buf {
    pub mbuf: *mut RteMbuf,
    pub data: *mut u8,
    pub room: u32,
    pub pad: u32,
}

const _: () = assert!(std::mem::size_of::<PortInfo>() == 400);
const _: () = assert!(std::mem::size_of::<PortConf>() == 64);
const _: () = assert!(std::mem::size_of::<Rx>() == 32);
const _: () = assert!(std::mem::size_of::<Tx>() == 24);
const _: () = assert!(std::mem::size_of::<Buf>() == 24);

/// `Rx::flags`.
pub const RX_L4_CSUM_VERIFIED: u32 = 1;
pub const RX_L4_CSUM_PARTIAL: u32 = 2;
pub const RX_L4_CSUM_BAD: u32 = 4;
pub const RX_VLAN_REINSERTED: u32 = 8;
pub const RX_VLAN_LOST: u32 = 16;
/// The frame came in several segments; `Rx::len` is the whole frame's.
pub const RX_CHAINED: u32 = 32;
/// The NIC found the IPv4 header's checksum wrong.
pub const RX_IP_CSUM_BAD: u32 = 64;
/// Segments the NIC joined into one (LRO).
pub const RX_LRO: u32 = 128;

/// `Tx::offload`.
pub const TX_TCP_CSUM: u32 = 1;
pub const TX_UDP_CSUM: u32 = 2;
/// The frame is IPv6 (else IPv4).
pub const TX_IPV6: u32 = 4;
/// A TCP super-frame the port cuts into segments of `tso_segsz` (TSO).
pub const TX_TSO: u32 = 8;

/// `RTE_ETH_RX_OFFLOAD_*` and `RTE_ETH_TX_OFFLOAD_*` (rte_ethdev.h).
pub const RX_OFFLOAD_VLAN_STRIP: u64 = 1 << 0;
pub const RX_OFFLOAD_IPV4_CKSUM: u64 = 1 << 1;
pub const RX_OFFLOAD_UDP_CKSUM: u64 = 1 << 2;
pub const RX_OFFLOAD_TCP_CKSUM: u64 = 1 << 3;
pub const RX_OFFLOAD_TCP_LRO: u64 = 1 << 4;
pub const RX_OFFLOAD_SCATTER: u64 = 1 << 13;
pub const TX_OFFLOAD_IPV4_CKSUM: u64 = 1 << 1;
pub const TX_OFFLOAD_UDP_CKSUM: u64 = 1 << 2;
pub const TX_OFFLOAD_TCP_CKSUM: u64 = 1 << 3;
pub const TX_OFFLOAD_TCP_TSO: u64 = 1 << 5;

/// `RTE_ETH_RSS_*` (rte_ethdev.h): IPv4/IPv6 addresses and TCP/UDP ports.
pub const RSS_IPV4: u64 = 1 << 2;
pub const RSS_NONFRAG_IPV4_TCP: u64 = 1 << 4;
pub const RSS_NONFRAG_IPV4_UDP: u64 = 1 << 5;
pub const RSS_IPV6: u64 = 1 << 8;
pub const RSS_NONFRAG_IPV6_TCP: u64 = 1 << 10;
pub const RSS_NONFRAG_IPV6_UDP: u64 = 1 << 11;

extern "C" {
    pub fn ustack_dpdk_errno() -> c_int;
    pub fn ustack_dpdk_strerror(err: c_int) -> *const c_char;
    pub fn ustack_dpdk_eal_init(argc: c_int, argv: *mut *mut c_char) -> c_int;
    pub fn ustack_dpdk_runtime_dir() -> *const c_char;
    pub fn ustack_dpdk_dev_probe(devargs: *const c_char) -> c_int;
    pub fn ustack_dpdk_port_by_name(name: *const c_char, port: *mut u16) -> c_int;
    pub fn ustack_dpdk_port_count() -> u16;
    pub fn ustack_dpdk_port_is_valid(port: u16) -> c_int;
    pub fn ustack_dpdk_port_info(port: u16, out: *mut PortInfo) -> c_int;
    pub fn ustack_dpdk_port_start(
        port: u16,
        conf: *mut PortConf,
        pools: *const *mut RteMempool,
        step: *mut *const c_char,
    ) -> c_int;
    pub fn ustack_dpdk_port_close(port: u16);
    pub fn ustack_dpdk_promiscuous_get(port: u16) -> c_int;
    pub fn ustack_dpdk_reta_size(port: u16) -> u16;
    pub fn ustack_dpdk_reta(port: u16, reta: *mut u16, n: u16, set: c_int) -> c_int;
    pub fn ustack_dpdk_rss_conf(port: u16, key: *mut u8, len: *mut u8, rss_hf: *mut u64) -> c_int;
    pub fn ustack_dpdk_port_stats(port: u16, out: *mut [u64; 8]) -> c_int;

    pub fn ustack_dpdk_pool_create(
        name: *const c_char,
        n: c_uint,
        cache: c_uint,
        data_room: u16,
        socket: c_int,
        packed: c_int,
    ) -> *mut RteMempool;
    pub fn ustack_dpdk_pool_free(pool: *mut RteMempool);
    pub fn ustack_dpdk_pool_avail(pool: *const RteMempool) -> c_uint;
    pub fn ustack_dpdk_pool_size(pool: *const RteMempool) -> c_uint;
    pub fn ustack_dpdk_pool_contains(pool: *mut RteMempool, addr: *const c_void) -> c_int;
    pub fn ustack_dpdk_page_size_of(addr: *const c_void) -> u64;

    pub fn ustack_dpdk_rx_burst(port: u16, queue: u16, out: *mut Rx, n: u16) -> u16;
    pub fn ustack_dpdk_chain_copy(mbuf: *const c_void, dst: *mut u8, room: u32) -> i32;
    pub fn ustack_dpdk_alloc(pool: *mut RteMempool, out: *mut Buf) -> c_int;
    pub fn ustack_dpdk_free(mbuf: *mut RteMbuf);
    pub fn ustack_dpdk_tx_burst(port: u16, queue: u16, pkts: *const Tx, n: u16) -> u16;
}
