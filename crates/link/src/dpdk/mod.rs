//! DPDK backend (`link=dpdk`, cargo feature `dpdk`).
//!
//! - [`eal`]: the EAL, started once per process from `[dpdk]` (cores,
//!   memory, hugepages or not, PCI devices, virtual devices).
//! - [`DpdkLink`]: one queue pair of an ethdev port, set up from `[dpdk]`
//!   and `[portN]` (promiscuous mode, checksum offloads, TSO, VLAN strip,
//!   symmetric RSS).
//! - [`Mbuf`]: the link's buffer. Received frames are read where the driver
//!   put them, in the mbuf, and frames to send are written into an mbuf that
//!   goes to the driver as it is: no copy between the NIC and the engine.
//!
//! DPDK's inline fast path is reached through a small C shim (shim.c,
//! compiled by build.rs against libdpdk from pkg-config), one call per
//! burst; the Rust side declares the shim's functions by hand (ffi.rs).
//!
//! Checksums: on receive, a frame whose L4 checksum the NIC verified
//! (`RTE_MBUF_F_RX_L4_CKSUM_GOOD`) or found intact but left partial
//! (`..._NONE`) is marked `csum_partial`, so the stack does not verify it
//! again; one the NIC found bad (L4, or the IPv4 header where the port
//! checks it) is dropped and counted (`rx_l4_csum_bad`, `rx_ip_csum_bad`).
//! Large receive offload (LRO) is asked for where the port has it and
//! scatter: its joined frames are gathered whole (`rx_lro_frames`). On transmit, a frame marked `csum_partial` (its TCP/UDP
//! checksum field holds the pseudo-header sum) gets the checksum from the
//! NIC where the port offers it and `tx_csum_offoad_skip` is off, else the
//! link completes it in software.

pub mod eal;
mod ffi;
mod mbuf;
mod port;

pub use eal::{EalConfig, ProcType};
pub use mbuf::Mbuf;
pub use port::{DpdkLink, DpdkOffloads, DpdkPortConfig, RssTable};

#[cfg(test)]
mod tests;
