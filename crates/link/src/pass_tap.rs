//! A pass tap: a packet socket on an AF_XDP interface that receives the
//! frames the XDP program gave the kernel because no AF_XDP socket holds
//! the queue they arrived on.
//!
//! When several processes share an interface by queue (one AF_XDP socket
//! each), a queue nobody holds yet (before a pre-fork server's workers
//! start, while only the parent's engine runs; after a worker exits) has
//! an empty slot in the program's socket map, and the program passes its
//! frames to the kernel (`bpf_redirect_map`'s fallback): a socket of one
//! queue cannot take another queue's frames.  Frames redirected to a
//! socket never reach the kernel's stack, so a packet socket on the
//! interface sees exactly the passed ones.  Each process's tap joins one
//! fanout group steered by ustack's flow hash, so each such frame reaches
//! one process, which hands it on (`handoff`) if the flow is another's.
//!
//! The frames arrive as the kernel's receive path made them: a veth or a
//! NIC may have merged segments (GRO), so a frame may be up to 64 KiB, and
//! its TCP or UDP checksum may be left to do (`csum_partial`), which
//! `PACKET_AUXDATA` tells.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::ifreq::{cvt, CtlSocket};

const ETH_P_ALL: u16 = 0x0003;
const SOL_PACKET: libc::c_int = 263;
const PACKET_AUXDATA: libc::c_int = 8;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// `tp_status`: the checksum is partial (left to the receiver).
const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;

/// The largest frame a pass tap reads: a merged (GRO) frame of 64 KiB of
/// IP and its Ethernet header with a VLAN tag.
pub const PASS_TAP_FRAME: usize = 65_535 + 18;

/// `struct tpacket_auxdata`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct TpacketAuxdata {
    tp_status: u32,
    tp_len: u32,
    tp_snaplen: u32,
    tp_mac: u16,
    tp_net: u16,
    tp_vlan_tci: u16,
    tp_vlan_tpid: u16,
}

/// One frame read from a pass tap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Passed {
    /// Its length in the buffer.
    pub len: usize,
    /// Its TCP or UDP checksum holds only the pseudo-header's sum.
    pub csum_partial: bool,
    /// It was longer than the buffer and cut (the caller drops it).
    pub truncated: bool,
}

/// A non-blocking packet socket receiving what the kernel got on an
/// interface, in fanout group `group` (see the module's text).
#[derive(Debug)]
pub struct PassTap {
    fd: OwnedFd,
}

impl PassTap {
    /// Opens the tap on `ifname` and joins fanout group `group` (made by
    /// the first process that joins) with the flow-hash program.
    pub fn open(ifname: &str, group: u16) -> io::Result<PassTap> {
        let index = CtlSocket::new()?.index(ifname)?;
        let fd = crate::packet_socket::packet_socket()?;
        let one: libc::c_int = 1;
        for opt in [PACKET_AUXDATA, PACKET_IGNORE_OUTGOING] {
            // SAFETY: an int option of its size.
            cvt(unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    SOL_PACKET,
                    opt,
                    (&one as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            })?;
        }
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = index;
        // Stopped until it is in the group: as a bystander it would get a
        // copy of what the other processes' taps get.
        crate::fanout::set_receiving(fd.as_raw_fd(), false)?;
        // SAFETY: `sll` is a live sockaddr_ll and its size is passed.
        cvt(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })?;
        crate::fanout::join(fd.as_raw_fd(), Some(group))?;
        crate::fanout::set_program(fd.as_raw_fd(), &crate::fanout::FLOW_HASH_PROGRAM)?;
        // (A frame the group gave it before this is lost, as on a full
        // queue; its sender sends it again.)
        crate::fanout::set_receiving(fd.as_raw_fd(), true)?;
        Ok(PassTap { fd })
    }

    /// The next frame into `buf`, `None` when there is none now.
    pub fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<Passed>> {
        let mut aux_space = [0u64; 8];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: msghdr is plain data; all-zero is a valid value.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = aux_space.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&aux_space) as _;
        // SAFETY: `msg` points at `iov` (over `buf`, writable for its
        // length) and `aux_space`, all live for the call.
        let n = unsafe {
            libc::recvmsg(
                self.fd.as_raw_fd(),
                &mut msg,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(e),
            };
        }
        let n = n as usize;
        let mut csum_partial = false;
        // SAFETY: `msg` is the header recvmsg filled; the CMSG macros walk
        // its control buffer within `msg_controllen`.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == SOL_PACKET && (*c).cmsg_type == PACKET_AUXDATA {
                    let aux: TpacketAuxdata =
                        std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<TpacketAuxdata>());
                    csum_partial = aux.tp_status & TP_STATUS_CSUMNOTREADY != 0;
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        Ok(Some(Passed {
            len: n.min(buf.len()),
            csum_partial,
            truncated: n > buf.len(),
        }))
    }

    /// The socket, for an idle wait.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
