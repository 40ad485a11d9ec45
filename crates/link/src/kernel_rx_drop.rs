//! Keeps the kernel's IP input from handling the frames an AF_PACKET port
//! receives for ustack.
//!
//! A packet socket gets a copy of every frame of its interface (the
//! `ptype_all` taps run before anything else), but the frame also goes on
//! into the kernel's own IPv4/IPv6 input: it is counted (`IpInReceives`),
//! routed, finds no local address and is dropped (`IpInAddrErrors`) — or,
//! with `ip_forward=1`, forwarded. That costs the kernel a route lookup per
//! frame ustack serves. This program runs at tc ingress (tcx), after the
//! taps have taken their copy, and drops (`TCX_DROP`) unicast IPv4 and IPv6
//! frames to one of the port's addresses, behind at most one VLAN tag left
//! in the frame (a tag the kernel took out into the socket buffer is not
//! in the data at all). Everything else goes on (`TCX_NEXT`): the kernel's
//! own traffic on the interface, ARP, broadcast and multicast.
//!
//! Hand-assembled and loaded with the `bpf()` system call as the AF_XDP
//! link's program is (no compiler, no libbpf):
//!
//! ```text
//!       r2 = skb->pkt_type; if r2 != PACKET_HOST goto pass
//!       r2 = skb->data; r3 = skb->data_end
//!       if r2 + 14 > r3 goto pass; r5 = ethertype
//!       if r5 != 802.1Q goto l3
//!       r2 += 4; if r2 + 14 > r3 goto pass; r5 = inner ethertype
//! l3:   if r5 == IPv4 goto v4; if r5 == IPv6 goto v6; goto pass
//! v4:   if r2 + 34 > r3 goto pass; key = daddr; look up addrs4
//! v6:   if r2 + 54 > r3 goto pass; key = daddr; look up addrs6
//!       found ? TCX_DROP : TCX_NEXT
//! pass: TCX_NEXT
//! ```
//!
//! It is attached through a BPF link (`BPF_LINK_CREATE`, `BPF_TCX_INGRESS`,
//! Linux 6.6): the attachment belongs to the link's file descriptor and
//! goes with the process, also when it is killed; nothing is left on the
//! interface. Several links of one process on one interface (engines of a
//! fanout group) share one program ([`KernelRxDrop::attach`]); a forked
//! child that keeps the parent's link keeps its program too, and closing
//! its copy detaches nothing while the parent holds its own. Other
//! processes on the same port attach their own program each: the first to
//! match drops the frame, the others never see it.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, Weak};

use crate::af_xdp::abi::{self, BpfInsn};
use crate::af_xdp::hash_map::{self, annotate};
use crate::af_xdp::program::{bpf, load_program, name16, owned};

/// Addresses each family's map holds.
pub const MAX_ADDRESSES: u32 = 1024;

/// The program's name, as `bpftool` and BPF_OBJ_GET_INFO show it.
pub const PROGRAM_NAME: &str = "ustack_rxdrop";

/// The loaded program, its address maps and its attachment to one
/// interface. Dropping the last holder detaches it.
#[derive(Debug)]
pub struct KernelRxDrop {
    // Drop order: detach first, then the program, then the maps.
    _link: OwnedFd,
    prog: OwnedFd,
    addrs4: OwnedFd,
    addrs6: OwnedFd,
    ifindex: u32,
}

/// The programs this process holds, by network namespace and interface.
static ATTACHED: Mutex<Vec<(u64, u32, Weak<KernelRxDrop>)>> = Mutex::new(Vec::new());

/// The inode of this thread's network namespace (ifindexes are per
/// namespace).
fn netns() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/thread-self/ns/net").map_or(0, |m| m.ino())
}

impl KernelRxDrop {
    /// The program on interface `ifindex`: the one this process attached
    /// there already, else a new one loaded and attached. Fails where the
    /// kernel has no tcx (before 6.6: `EINVAL`) or refuses BPF (`EPERM`).
    pub fn attach(ifindex: u32) -> io::Result<Arc<KernelRxDrop>> {
        let ns = netns();
        let mut attached = ATTACHED.lock().unwrap_or_else(|p| p.into_inner());
        attached.retain(|(_, _, w)| w.strong_count() > 0);
        if let Some(p) = attached
            .iter()
            .find(|(n, i, _)| *n == ns && *i == ifindex)
            .and_then(|(_, _, w)| w.upgrade())
        {
            return Ok(p);
        }
        let p = Arc::new(Self::load_and_attach(ifindex)?);
        attached.push((ns, ifindex, Arc::downgrade(&p)));
        Ok(p)
    }

    fn load_and_attach(ifindex: u32) -> io::Result<KernelRxDrop> {
        let addrs4 = create_map(4, "ustack_rxdrop4")?;
        let addrs6 = create_map(16, "ustack_rxdrop6")?;
        let prog = load(addrs4.as_raw_fd(), addrs6.as_raw_fd())?;
        let mut link_attr = abi::LinkCreateAttr {
            prog_fd: prog.as_raw_fd() as u32,
            target_ifindex: ifindex,
            attach_type: abi::BPF_TCX_INGRESS,
            flags: 0,
        };
        let link = owned(
            bpf(abi::BPF_LINK_CREATE, &mut link_attr)
                .map_err(|e| annotate(e, "attaching at tc ingress (tcx, Linux 6.6+)"))?,
        );
        Ok(KernelRxDrop {
            _link: link,
            prog,
            addrs4,
            addrs6,
            ifindex,
        })
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Makes the port's addresses exactly these: unicast frames to them
    /// stop at tc ingress.
    pub fn set_addresses(&self, v4: &[Ipv4Addr], v6: &[Ipv6Addr]) -> io::Result<()> {
        hash_map::set_addresses(&self.addrs4, &self.addrs6, v4, v6)
    }

    /// [`KernelRxDrop::set_addresses`] with those of the addresses the
    /// kernel holds itself in this namespace (on any interface) left out:
    /// its own frames to them must still reach it.
    pub fn serve(&self, v4: &[Ipv4Addr], v6: &[Ipv6Addr]) -> io::Result<()> {
        let (k4, k6) = kernel_addresses()?;
        let v4: Vec<Ipv4Addr> = v4.iter().copied().filter(|a| !k4.contains(a)).collect();
        let v6: Vec<Ipv6Addr> = v6.iter().copied().filter(|a| !k6.contains(a)).collect();
        self.set_addresses(&v4, &v6)
    }

    /// The addresses the program drops frames to now.
    pub fn addresses(&self) -> io::Result<(Vec<Ipv4Addr>, Vec<Ipv6Addr>)> {
        hash_map::addresses(&self.addrs4, &self.addrs6)
    }

    /// Runs the program once on `frame` (BPF_PROG_TEST_RUN): its verdict,
    /// [`abi::TCX_DROP`] or [`abi::TCX_NEXT`].
    pub fn test_run(&self, frame: &[u8]) -> io::Result<i32> {
        let mut out = vec![0u8; frame.len() + 256];
        let mut attr = abi::TestRunAttr {
            prog_fd: self.prog.as_raw_fd() as u32,
            data_size_in: frame.len() as u32,
            data_size_out: out.len() as u32,
            data_in: frame.as_ptr() as u64,
            data_out: out.as_mut_ptr() as u64,
            repeat: 1,
            ..Default::default()
        };
        bpf(abi::BPF_PROG_TEST_RUN, &mut attr).map_err(|e| annotate(e, "test-running"))?;
        Ok(attr.retval as i32)
    }
}

/// [`KernelRxDrop::attach`] for AF_PACKET link `ifname`; where the kernel
/// refuses, says so once per interface on stderr and gives `None` (the
/// link works as without it).
pub fn attach_or_say(ifindex: u32, ifname: &str) -> Option<Arc<KernelRxDrop>> {
    static SAID: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    match KernelRxDrop::attach(ifindex) {
        Ok(p) => Some(p),
        Err(e) => {
            let mut said = SAID.lock().unwrap_or_else(|p| p.into_inner());
            if !said.contains(&ifindex) {
                said.push(ifindex);
                eprintln!(
                    "ustack: af_packet {ifname}: kernel_rx_drop: the kernel refused the tc \
                     ingress program ({e}); the kernel's IP input also handles every frame \
                     ustack receives there"
                );
            }
            None
        }
    }
}

/// The addresses the kernel holds on the interfaces of this namespace
/// (`getifaddrs`).
fn kernel_addresses() -> io::Result<(Vec<Ipv4Addr>, Vec<Ipv6Addr>)> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `list` is a valid place for the list's head.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Err(annotate(
            io::Error::last_os_error(),
            "listing the kernel's addresses",
        ));
    }
    let (mut v4, mut v6) = (Vec::new(), Vec::new());
    let mut at = list;
    while !at.is_null() {
        // SAFETY: `at` is an entry of the list getifaddrs made, alive until
        // freeifaddrs below; `ifa_addr`, when not null, points at a
        // sockaddr of the family it names, of that family's full size.
        unsafe {
            let sa = (*at).ifa_addr;
            if !sa.is_null() {
                match i32::from((*sa).sa_family) {
                    libc::AF_INET => {
                        let sin = &*sa.cast::<libc::sockaddr_in>();
                        v4.push(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)));
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*sa.cast::<libc::sockaddr_in6>();
                        v6.push(Ipv6Addr::from(sin6.sin6_addr.s6_addr));
                    }
                    _ => {}
                }
            }
            at = (*at).ifa_next;
        }
    }
    // SAFETY: `list` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(list) };
    Ok((v4, v6))
}

/// The ids of the tcx ingress programs on interface `ifindex` of this
/// namespace (BPF_PROG_QUERY).
pub fn tcx_ingress_programs(ifindex: u32) -> io::Result<Vec<u32>> {
    let mut ids = vec![0u32; 64];
    let mut attr = abi::QueryAttr {
        target_ifindex: ifindex,
        attach_type: abi::BPF_TCX_INGRESS,
        prog_ids: ids.as_mut_ptr() as u64,
        count: ids.len() as u32,
        ..Default::default()
    };
    bpf(abi::BPF_PROG_QUERY, &mut attr)
        .map_err(|e| annotate(e, "querying the tcx ingress programs"))?;
    ids.truncate(attr.count.min(64) as usize);
    Ok(ids)
}

fn create_map(key_size: u32, name: &str) -> io::Result<OwnedFd> {
    let mut attr = abi::MapCreateAttr {
        map_type: abi::BPF_MAP_TYPE_HASH,
        key_size,
        value_size: 1,
        max_entries: MAX_ADDRESSES,
        map_name: name16(name),
        ..Default::default()
    };
    Ok(owned(
        bpf(abi::BPF_MAP_CREATE, &mut attr).map_err(|e| annotate(e, "creating its address map"))?,
    ))
}

fn load(addrs4: RawFd, addrs6: RawFd) -> io::Result<OwnedFd> {
    load_program(
        abi::BPF_PROG_TYPE_SCHED_CLS,
        abi::BPF_TCX_INGRESS,
        PROGRAM_NAME,
        &instructions(addrs4, addrs6),
        "the program",
    )
}

/// Jump targets of [`instructions`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Label {
    L3,
    V4,
    V6,
    Lookup,
    Pass,
}

/// A small assembler: instructions, and jumps to labels resolved at the
/// end.
struct Asm {
    insns: Vec<BpfInsn>,
    labels: Vec<(Label, usize)>,
    jumps: Vec<(usize, Label)>,
}

const R0: u8 = 0;
const R1: u8 = 1;
const R2: u8 = 2;
const R3: u8 = 3;
const R4: u8 = 4;
const R5: u8 = 5;
const R10: u8 = 10;

// Opcodes (class | size or op | source).
const LDX_W: u8 = 0x61; // BPF_LDX | BPF_MEM | BPF_W
const LDX_H: u8 = 0x69; // BPF_LDX | BPF_MEM | BPF_H
const LDX_DW: u8 = 0x79; // BPF_LDX | BPF_MEM | BPF_DW
const STX_W: u8 = 0x63; // BPF_STX | BPF_MEM | BPF_W
const STX_DW: u8 = 0x7b; // BPF_STX | BPF_MEM | BPF_DW
const LD_IMM64: u8 = 0x18; // BPF_LD | BPF_IMM | BPF_DW
const MOV_IMM: u8 = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K
const MOV_REG: u8 = 0xbf; // BPF_ALU64 | BPF_MOV | BPF_X
const ADD_IMM: u8 = 0x07; // BPF_ALU64 | BPF_ADD | BPF_K
const JA: u8 = 0x05; // BPF_JMP | BPF_JA
const JEQ_IMM: u8 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JNE_IMM: u8 = 0x55; // BPF_JMP | BPF_JNE | BPF_K
const JGT_REG: u8 = 0x2d; // BPF_JMP | BPF_JGT | BPF_X
const CALL: u8 = 0x85; // BPF_JMP | BPF_CALL
const EXIT: u8 = 0x95; // BPF_JMP | BPF_EXIT

/// An ethertype as a 16-bit load of it reads on this machine (the frame
/// holds it big-endian).
const fn ethertype(t: u16) -> i32 {
    u16::from_ne_bytes(t.to_be_bytes()) as i32
}

impl Asm {
    fn op(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) {
        self.insns.push(BpfInsn {
            code,
            regs: dst | (src << 4),
            off,
            imm,
        });
    }
    fn jump(&mut self, code: u8, dst: u8, src: u8, imm: i32, to: Label) {
        self.jumps.push((self.insns.len(), to));
        self.op(code, dst, src, 0, imm);
    }
    fn label(&mut self, l: Label) {
        self.labels.push((l, self.insns.len()));
    }
    /// `if base + len > r3 (data_end) goto pass`, through r4.
    fn need(&mut self, base: u8, len: i32) {
        self.op(MOV_REG, R4, base, 0, 0);
        self.op(ADD_IMM, R4, 0, 0, len);
        self.jump(JGT_REG, R4, R3, 0, Label::Pass);
    }
    fn load_map(&mut self, dst: u8, fd: RawFd) {
        self.op(LD_IMM64, dst, abi::BPF_PSEUDO_MAP_FD, 0, fd);
        // The second half of the 64-bit immediate.
        self.insns.push(BpfInsn::default());
    }
    fn finish(mut self) -> Vec<BpfInsn> {
        for &(at, to) in &self.jumps {
            let target = self
                .labels
                .iter()
                .find(|(l, _)| *l == to)
                .map(|&(_, i)| i)
                .expect("every label of the program is placed");
            self.insns[at].off = (target as isize - at as isize - 1) as i16;
        }
        self.insns
    }
}

/// The program's instructions for address maps `addrs4` and `addrs6`.
fn instructions(addrs4: RawFd, addrs6: RawFd) -> Vec<BpfInsn> {
    const PACKET_HOST: i32 = 0;
    const ETH_HLEN: i32 = 14;
    let mut a = Asm {
        insns: Vec::new(),
        labels: Vec::new(),
        jumps: Vec::new(),
    };
    // r1 = the socket buffer. Only frames to this host's MAC address.
    a.op(LDX_W, R2, R1, abi::SKB_PKT_TYPE, 0);
    a.jump(JNE_IMM, R2, 0, PACKET_HOST, Label::Pass);
    a.op(LDX_W, R2, R1, abi::SKB_DATA, 0);
    a.op(LDX_W, R3, R1, abi::SKB_DATA_END, 0);
    a.need(R2, ETH_HLEN);
    a.op(LDX_H, R5, R2, 12, 0);
    a.jump(JNE_IMM, R5, 0, ethertype(0x8100), Label::L3);
    // One VLAN tag in the frame: the header seen from 4 bytes on.
    a.op(ADD_IMM, R2, 0, 0, 4);
    a.need(R2, ETH_HLEN);
    a.op(LDX_H, R5, R2, 12, 0);
    a.label(Label::L3);
    a.jump(JEQ_IMM, R5, 0, ethertype(0x0800), Label::V4);
    a.jump(JEQ_IMM, R5, 0, ethertype(0x86dd), Label::V6);
    a.jump(JA, 0, 0, 0, Label::Pass);

    // IPv4: the destination address (header offset 16) as the key.
    a.label(Label::V4);
    a.need(R2, ETH_HLEN + 20);
    a.op(LDX_W, R5, R2, (ETH_HLEN + 16) as i16, 0);
    a.op(STX_W, R10, R5, -4, 0);
    a.load_map(R1, addrs4);
    a.op(MOV_REG, R2, R10, 0, 0);
    a.op(ADD_IMM, R2, 0, 0, -4);
    a.jump(JA, 0, 0, 0, Label::Lookup);

    // IPv6: the destination address (header offset 24) as the key.
    a.label(Label::V6);
    a.need(R2, ETH_HLEN + 40);
    a.op(LDX_DW, R5, R2, (ETH_HLEN + 24) as i16, 0);
    a.op(STX_DW, R10, R5, -16, 0);
    a.op(LDX_DW, R5, R2, (ETH_HLEN + 32) as i16, 0);
    a.op(STX_DW, R10, R5, -8, 0);
    a.load_map(R1, addrs6);
    a.op(MOV_REG, R2, R10, 0, 0);
    a.op(ADD_IMM, R2, 0, 0, -16);

    a.label(Label::Lookup);
    a.op(CALL, 0, 0, 0, abi::BPF_FUNC_MAP_LOOKUP_ELEM);
    a.jump(JEQ_IMM, R0, 0, 0, Label::Pass);
    a.op(MOV_IMM, R0, 0, 0, abi::TCX_DROP);
    a.op(EXIT, 0, 0, 0, 0);

    a.label(Label::Pass);
    a.op(MOV_IMM, R0, 0, 0, abi::TCX_NEXT);
    a.op(EXIT, 0, 0, 0, 0);
    a.finish()
}

#[cfg(test)]
mod tests;
