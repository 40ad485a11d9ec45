//! An ARP tap: a packet socket on an interface that receives a copy of
//! every ARP frame, outside any fanout group.  When several processes
//! share an interface through one AF_PACKET fanout group, the group's
//! program hands ARP to one member only; each process reads its own tap
//! so that every neighbour table learns the replies to its requests.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::ifreq::{cvt, CtlSocket};

const ETH_P_ARP: u16 = 0x0806;

/// A non-blocking packet socket receiving the interface's ARP frames.
#[derive(Debug)]
pub struct ArpTap {
    fd: OwnedFd,
}

impl ArpTap {
    pub fn open(ifname: &str) -> io::Result<ArpTap> {
        let index = CtlSocket::new()?.index(ifname)?;
        // Protocol 0 until the bind below names ARP.
        let fd = crate::packet_socket::packet_socket()?;
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ARP.to_be();
        sll.sll_ifindex = index;
        // SAFETY: `sll` is a live sockaddr_ll and its size is passed.
        cvt(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })?;
        // Our own transmissions are not news.
        let one: libc::c_int = 1;
        // SAFETY: an int option of its size.
        let _ = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                263, // SOL_PACKET
                23,  // PACKET_IGNORE_OUTGOING
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        Ok(ArpTap { fd })
    }

    /// The next ARP frame into `buf` (its length), `None` when there is
    /// none now.
    pub fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        // SAFETY: `buf` is writable for its length.
        let n = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(e),
            };
        }
        Ok(Some(n as usize))
    }

    /// The socket, for an idle wait.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
