//! What the classifying XDP program (`bpf/ustack_xdp.c`) sends to ustack's
//! sockets: the port's addresses, and the `[kni]` ports among their
//! traffic that go to the kernel instead. ustack writes these maps at start
//! and whenever an address changes; the program reads them per frame.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, OwnedFd};

use super::abi;
use super::hash_map::{self, annotate, update};
use super::program::bpf;
use crate::KernelPorts;

/// The `KNI_*` value of the C file for `mode`.
fn mode_word(mode: KernelPorts) -> u64 {
    match mode {
        KernelPorts::None => 0,
        KernelPorts::Listed => 1,
        KernelPorts::Unlisted => 2,
        KernelPorts::All => 3,
    }
}

/// First entries of the TCP and UDP port bitmaps in `ustack_kni`.
const KNI_TCP_BASE: u32 = 1;
const KNI_UDP_BASE: u32 = 1025;

/// The program's address and port maps.
#[derive(Debug)]
pub struct ServedMaps {
    addrs4: OwnedFd,
    addrs6: OwnedFd,
    kni: OwnedFd,
}

impl ServedMaps {
    pub(super) fn new(addrs4: OwnedFd, addrs6: OwnedFd, kni: OwnedFd) -> ServedMaps {
        ServedMaps {
            addrs4,
            addrs6,
            kni,
        }
    }

    /// Makes ustack's addresses exactly these: their frames (and ARP and
    /// neighbour solicitations for them) go to the sockets, frames to other
    /// addresses to the kernel. An IPv4 subnet broadcast belongs here too.
    pub fn set_addresses(&self, v4: &[Ipv4Addr], v6: &[Ipv6Addr]) -> io::Result<()> {
        hash_map::set_addresses(&self.addrs4, &self.addrs6, v4, v6)
    }

    /// The addresses the program serves now (for tests and `describe`).
    pub fn addresses(&self) -> io::Result<(Vec<Ipv4Addr>, Vec<Ipv6Addr>)> {
        hash_map::addresses(&self.addrs4, &self.addrs6)
    }

    /// Sets which of ustack's traffic goes to the kernel: `mode`, over the
    /// TCP ports `tcp` and UDP ports `udp`.
    pub fn set_kernel_ports(&self, mode: KernelPorts, tcp: &[u16], udp: &[u16]) -> io::Result<()> {
        let what = |e| annotate(e, "writing the XDP program's exception ports");
        for (base, ports) in [(KNI_TCP_BASE, tcp), (KNI_UDP_BASE, udp)] {
            let mut words = [0u64; 1024];
            for &p in ports {
                words[usize::from(p / 64)] |= 1 << (p % 64);
            }
            for (i, w) in words.iter().enumerate() {
                update(&self.kni, &(base + i as u32), w).map_err(what)?;
            }
        }
        // The mode last: the program never acts on half-written lists of a
        // mode it did not have before.
        update(&self.kni, &0u32, &mode_word(mode)).map_err(what)
    }

    /// The mode word the program reads (for tests).
    pub fn kernel_ports_mode(&self) -> io::Result<u64> {
        let key = 0u32;
        let mut value = 0u64;
        let mut attr = abi::MapElemAttr {
            map_fd: self.kni.as_raw_fd() as u32,
            key: (&key as *const u32) as u64,
            value: (&mut value as *mut u64) as u64,
            ..Default::default()
        };
        bpf(abi::BPF_MAP_LOOKUP_ELEM, &mut attr).map_err(|e| annotate(e, "reading ustack_kni"))?;
        Ok(value)
    }
}
