//! Kernel ABI of `<linux/if_xdp.h>`, `<linux/bpf.h>` and `<linux/if_link.h>`
//! that the AF_XDP link uses, declared here so every layout it depends on is
//! in view and checked by size.

// <linux/socket.h>
pub const AF_XDP: libc::c_int = 44;
pub const SOL_XDP: libc::c_int = 283;

// <linux/if_xdp.h>: bind flags.
pub const XDP_COPY: u16 = 1 << 1;
pub const XDP_ZEROCOPY: u16 = 1 << 2;
pub const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
/// Multi-buffer: a frame longer than a chunk comes as several descriptors
/// (Linux 6.6).
pub const XDP_USE_SG: u16 = 1 << 4;
/// A descriptor's `options`: the frame goes on in the next descriptor.
pub const XDP_PKT_CONTD: u32 = 1 << 0;
/// `struct xdp_umem_reg`'s `flags`: `tx_metadata_len` is given (Linux
/// 6.11; older kernels refuse the flag, and before 6.8 would ignore the
/// length unflagged).
pub const XDP_UMEM_TX_METADATA_LEN: u32 = 1 << 2;
/// A TX descriptor's `options`: an `xsk_tx_metadata` lies in the
/// `tx_metadata_len` bytes before its address.
pub const XDP_TX_METADATA: u32 = 1 << 1;
/// `xsk_tx_metadata.flags`: finish the L4 checksum at `csum_start` +
/// `csum_offset`, skb-style (`CHECKSUM_PARTIAL`).
pub const XDP_TXMD_FLAGS_CHECKSUM: u64 = 1 << 1;
/// Bytes reserved before each TX frame for its `xsk_tx_metadata`
/// (`flags`, then `request.csum_start` and `request.csum_offset`, then
/// `launch_time` in 6.14+): 24, a multiple of 8 as the kernel requires.
pub const TX_METADATA_LEN: usize = 24;
/// A ring's `flags` word: the kernel wants a syscall to make progress.
pub const XDP_RING_NEED_WAKEUP: u32 = 1 << 0;

// Socket options at SOL_XDP.
pub const XDP_MMAP_OFFSETS: libc::c_int = 1;
pub const XDP_RX_RING: libc::c_int = 2;
pub const XDP_TX_RING: libc::c_int = 3;
pub const XDP_UMEM_REG: libc::c_int = 4;
pub const XDP_UMEM_FILL_RING: libc::c_int = 5;
pub const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
pub const XDP_STATISTICS: libc::c_int = 7;
pub const XDP_OPTIONS: libc::c_int = 8;
pub const XDP_OPTIONS_ZEROCOPY: u32 = 1 << 0;

// mmap offsets of the four rings.
pub const XDP_PGOFF_RX_RING: libc::off_t = 0;
pub const XDP_PGOFF_TX_RING: libc::off_t = 0x8000_0000;
pub const XDP_UMEM_PGOFF_FILL_RING: libc::off_t = 0x1_0000_0000;
pub const XDP_UMEM_PGOFF_COMPLETION_RING: libc::off_t = 0x1_8000_0000;

/// Room the kernel keeps in front of a frame in every chunk
/// (`XDP_PACKET_HEADROOM`): received data starts at least this far in.
pub const XDP_PACKET_HEADROOM: usize = 256;

/// `struct sockaddr_xdp`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct SockaddrXdp {
    pub family: u16,
    pub flags: u16,
    pub ifindex: u32,
    pub queue_id: u32,
    pub shared_umem_fd: u32,
}

/// `struct xdp_ring_offset`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RingOffset {
    pub producer: u64,
    pub consumer: u64,
    pub desc: u64,
    pub flags: u64,
}

/// `struct xdp_mmap_offsets`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct MmapOffsets {
    pub rx: RingOffset,
    pub tx: RingOffset,
    pub fill: RingOffset,
    pub completion: RingOffset,
}

/// `struct xdp_umem_reg` with `tx_metadata_len` (Linux 6.8); older kernels
/// read the first 28 bytes, which is the same structure padded.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct UmemReg {
    pub addr: u64,
    pub len: u64,
    pub chunk_size: u32,
    pub headroom: u32,
    pub flags: u32,
    pub tx_metadata_len: u32,
}

/// `struct xdp_statistics`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpStatistics {
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
    pub rx_ring_full: u64,
    pub rx_fill_ring_empty_descs: u64,
    pub tx_ring_empty_descs: u64,
}

/// `struct xdp_desc`: an RX or TX ring entry.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct XdpDesc {
    pub addr: u64,
    pub len: u32,
    pub options: u32,
}

const _: () = assert!(std::mem::size_of::<SockaddrXdp>() == 16);
const _: () = assert!(std::mem::size_of::<MmapOffsets>() == 128);
const _: () = assert!(std::mem::size_of::<UmemReg>() == 32);
const _: () = assert!(std::mem::size_of::<XdpStatistics>() == 48);
const _: () = assert!(std::mem::size_of::<XdpDesc>() == 16);

// <linux/bpf.h>: commands, types and instruction encodings.
pub const BPF_MAP_CREATE: libc::c_long = 0;
pub const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
pub const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
pub const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
pub const BPF_PROG_LOAD: libc::c_long = 5;
#[cfg(feature = "libxdp")]
pub const BPF_OBJ_PIN: libc::c_long = 6;
pub const BPF_LINK_CREATE: libc::c_long = 28;
pub const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;
pub const BPF_MAP_GET_FD_BY_ID: libc::c_long = 14;
pub const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
pub const BPF_LINK_GET_FD_BY_ID: libc::c_long = 30;
pub const BPF_LINK_GET_NEXT_ID: libc::c_long = 31;
#[cfg(feature = "libxdp")]
pub const BPF_PROG_BIND_MAP: libc::c_long = 35;
/// `enum bpf_link_type`: BPF_LINK_TYPE_XDP.
pub const BPF_LINK_TYPE_XDP: u32 = 6;
pub const BPF_MAP_TYPE_XSKMAP: u32 = 17;
pub const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type`: BPF_XDP.
pub const BPF_XDP: u32 = 37;
pub const BPF_PSEUDO_MAP_FD: u8 = 1;
/// `BPF_FUNC_redirect_map`.
pub const BPF_FUNC_REDIRECT_MAP: i32 = 51;
/// `enum xdp_action`: XDP_PASS.
pub const XDP_PASS: i32 = 2;
/// `offsetof(struct xdp_md, rx_queue_index)`.
pub const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

// <linux/if_link.h>: attach modes.
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// `struct bpf_insn`: opcode, registers (dst in the low nibble, src in the
/// high one), offset, immediate.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct BpfInsn {
    pub code: u8,
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

const _: () = assert!(std::mem::size_of::<BpfInsn>() == 8);

/// The part of `union bpf_attr` for BPF_MAP_CREATE.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct MapCreateAttr {
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub map_flags: u32,
    pub inner_map_fd: u32,
    pub numa_node: u32,
    pub map_name: [u8; 16],
}

/// The part of `union bpf_attr` for BPF_MAP_UPDATE_ELEM/DELETE_ELEM.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct MapElemAttr {
    pub map_fd: u32,
    pub _pad: u32,
    pub key: u64,
    pub value: u64,
    pub flags: u64,
}

/// The part of `union bpf_attr` for BPF_PROG_LOAD, up to `prog_name`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ProgLoadAttr {
    pub prog_type: u32,
    pub insn_cnt: u32,
    pub insns: u64,
    pub license: u64,
    pub log_level: u32,
    pub log_size: u32,
    pub log_buf: u64,
    pub kern_version: u32,
    pub prog_flags: u32,
    pub prog_name: [u8; 16],
    pub prog_ifindex: u32,
    pub expected_attach_type: u32,
}

/// The part of `union bpf_attr` for BPF_LINK_CREATE.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct LinkCreateAttr {
    pub prog_fd: u32,
    pub target_ifindex: u32,
    pub attach_type: u32,
    pub flags: u32,
}

const _: () = assert!(std::mem::size_of::<MapElemAttr>() == 32);
const _: () = assert!(std::mem::offset_of!(ProgLoadAttr, prog_name) == 48);
const _: () = assert!(std::mem::offset_of!(ProgLoadAttr, expected_attach_type) == 68);

/// The part of `union bpf_attr` for BPF_OBJ_PIN.
#[cfg(feature = "libxdp")]
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ObjPinAttr {
    pub pathname: u64,
    pub bpf_fd: u32,
    pub file_flags: u32,
}

/// The part of `union bpf_attr` for BPF_PROG_BIND_MAP.
#[cfg(feature = "libxdp")]
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct BindMapAttr {
    pub prog_fd: u32,
    pub map_fd: u32,
    pub flags: u32,
}

/// The part of `union bpf_attr` for BPF_*_GET_FD_BY_ID and
/// BPF_*_GET_NEXT_ID: the id (or the id to start after), the next id.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct IdAttr {
    pub id: u32,
    pub next_id: u32,
    pub open_flags: u32,
}

/// The part of `union bpf_attr` for BPF_OBJ_GET_INFO_BY_FD.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct InfoAttr {
    pub bpf_fd: u32,
    pub info_len: u32,
    pub info: u64,
}

/// `struct bpf_link_info` up to its XDP member: type, id, program id,
/// then (8-byte aligned) the interface index.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct LinkInfoXdp {
    pub link_type: u32,
    pub id: u32,
    pub prog_id: u32,
    pub _pad: u32,
    pub ifindex: u32,
    pub _rest: [u32; 3],
}

/// `struct bpf_prog_info` up to `name`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ProgInfo {
    pub prog_type: u32,
    pub id: u32,
    pub tag: [u8; 8],
    pub jited_prog_len: u32,
    pub xlated_prog_len: u32,
    pub jited_prog_insns: u64,
    pub xlated_prog_insns: u64,
    pub load_time: u64,
    pub created_by_uid: u32,
    pub nr_map_ids: u32,
    pub map_ids: u64,
    pub name: [u8; 16],
}

/// `struct bpf_map_info` up to `name`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct MapInfo {
    pub map_type: u32,
    pub id: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub map_flags: u32,
    pub name: [u8; 16],
}

const _: () = assert!(std::mem::size_of::<LinkInfoXdp>() == 32);
const _: () = assert!(std::mem::size_of::<ProgInfo>() == 80);
const _: () = assert!(std::mem::size_of::<MapInfo>() == 40);

// <linux/bpf.h>: what the tc ingress program of `kernel_rx_drop.rs` uses.
pub const BPF_PROG_TEST_RUN: libc::c_long = 10;
pub const BPF_PROG_QUERY: libc::c_long = 16;
pub const BPF_MAP_TYPE_HASH: u32 = 1;
pub const BPF_PROG_TYPE_SCHED_CLS: u32 = 3;
/// `enum bpf_attach_type`: BPF_TCX_INGRESS (Linux 6.6).
pub const BPF_TCX_INGRESS: u32 = 46;
/// `BPF_FUNC_map_lookup_elem`.
pub const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
/// `offsetof(struct __sk_buff, ...)`.
pub const SKB_PKT_TYPE: i16 = 4;
pub const SKB_DATA: i16 = 76;
pub const SKB_DATA_END: i16 = 80;
/// `enum tcx_action_base` / `TC_ACT_SHOT`.
pub const TCX_NEXT: i32 = -1;
pub const TCX_DROP: i32 = 2;

/// The part of `union bpf_attr` for BPF_PROG_TEST_RUN.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct TestRunAttr {
    pub prog_fd: u32,
    pub retval: u32,
    pub data_size_in: u32,
    pub data_size_out: u32,
    pub data_in: u64,
    pub data_out: u64,
    pub repeat: u32,
    pub duration: u32,
}

/// The part of `union bpf_attr` for BPF_PROG_QUERY.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct QueryAttr {
    pub target_ifindex: u32,
    pub attach_type: u32,
    pub query_flags: u32,
    pub attach_flags: u32,
    pub prog_ids: u64,
    pub count: u32,
    pub _pad: u32,
    pub prog_attach_flags: u64,
    pub link_ids: u64,
    pub link_attach_flags: u64,
    pub revision: u64,
}

const _: () = assert!(std::mem::size_of::<TestRunAttr>() == 40);
const _: () = assert!(std::mem::size_of::<QueryAttr>() == 64);
