//! sendmsg and recvmsg with their ancillary data: the socket layer hands
//! it over typed ([`api::RecvMsg`], [`api::SendMsg`]); here it becomes
//! cmsgs in Linux's layout (`struct cmsghdr` of `<sys/socket.h>`, which
//! F-Stack's calls take too):
//!
//! - IP_PKTINFO (`struct in_pktinfo`): received with the option on; on
//!   send, `ipi_spec_dst` picks the source address and `ipi_ifindex` the
//!   interface.
//! - IP_RECVDSTADDR / IP_SENDSRCADDR (`struct in_addr`, FreeBSD's names):
//!   the destination of a received datagram, and the source of one sent.
//!   Their cmsg type is `USTACK_IP_RECVDSTADDR` on the native API and
//!   FreeBSD's 7 on the F-Stack one ([`CmsgNames`]).
//! - IPV6_PKTINFO (`struct in6_pktinfo`, level IPPROTO_IPV6, Linux's
//!   numbers on both APIs): received with IPV6_RECVPKTINFO on (the
//!   destination, IPv4-mapped for an IPv4 datagram); on send,
//!   `ipi6_addr` picks the source and `ipi6_ifindex` the interface.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::raw::c_int;

use api::{Errno, RecvMsg, Result, SendMsg};
use libc::{msghdr, sockaddr, socklen_t};

use crate::addr::{self, as_bytes, Call};
use crate::sockets::{iovecs, iovecs_mut};
use crate::{ret_size, EFAULT};

/// The cmsg types of the options Linux lacks, on one API.
#[derive(Clone, Copy)]
pub(crate) struct CmsgNames {
    pub recvdstaddr: c_int,
    pub sendsrcaddr: c_int,
}

/// The native API's numbers (the socket layer's own).
pub(crate) const NATIVE: CmsgNames = CmsgNames {
    recvdstaddr: api::consts::IP_RECVDSTADDR,
    sendsrcaddr: api::consts::IP_SENDSRCADDR,
};

/// `struct cmsghdr` on 64-bit Linux: a size_t length, then level and type.
const CMSG_HDR: usize = std::mem::size_of::<libc::cmsghdr>();
const ALIGN: usize = std::mem::size_of::<usize>();

const fn cmsg_align(n: usize) -> usize {
    (n + ALIGN - 1) & !(ALIGN - 1)
}

const fn cmsg_len(data: usize) -> usize {
    cmsg_align(CMSG_HDR) + data
}

const fn cmsg_space(data: usize) -> usize {
    cmsg_align(CMSG_HDR) + cmsg_align(data)
}

fn in_addr(a: Ipv4Addr) -> libc::in_addr {
    libc::in_addr {
        s_addr: u32::from(a).to_be(),
    }
}

fn from_in_addr(a: libc::in_addr) -> Ipv4Addr {
    Ipv4Addr::from(u32::from_be(a.s_addr))
}

/// Reads the ancillary data of a sendmsg.
fn parse_control(control: &[u8], names: CmsgNames, out: &mut SendMsg) -> Result<()> {
    let mut off = 0;
    while off + CMSG_HDR <= control.len() {
        // SAFETY: CMSG_HDR bytes at `off` are in the slice; the read is
        // unaligned-safe and cmsghdr is plain data.
        let h: libc::cmsghdr =
            unsafe { std::ptr::read_unaligned(control[off..].as_ptr().cast::<libc::cmsghdr>()) };
        let len = h.cmsg_len;
        if len < CMSG_HDR || off + len > control.len() {
            return Err(Errno::EINVAL);
        }
        let data = &control[off + cmsg_align(CMSG_HDR)..off + len];
        if h.cmsg_level == libc::IPPROTO_IPV6 {
            if h.cmsg_type != libc::IPV6_PKTINFO {
                return Err(Errno::EINVAL);
            }
            if data.len() < std::mem::size_of::<libc::in6_pktinfo>() {
                return Err(Errno::EINVAL);
            }
            // SAFETY: a whole in6_pktinfo is in `data` (checked above).
            let p: libc::in6_pktinfo =
                unsafe { std::ptr::read_unaligned(data.as_ptr().cast::<libc::in6_pktinfo>()) };
            let src = Ipv6Addr::from(p.ipi6_addr.s6_addr);
            if !src.is_unspecified() {
                out.src = Some(IpAddr::V6(src));
            }
            if p.ipi6_ifindex != 0 {
                out.ifindex = Some(p.ipi6_ifindex);
            }
        } else if h.cmsg_level != libc::IPPROTO_IP {
            return Err(Errno::EINVAL);
        } else if h.cmsg_type == libc::IP_PKTINFO {
            if data.len() < std::mem::size_of::<libc::in_pktinfo>() {
                return Err(Errno::EINVAL);
            }
            // SAFETY: a whole in_pktinfo is in `data` (checked above).
            let p: libc::in_pktinfo =
                unsafe { std::ptr::read_unaligned(data.as_ptr().cast::<libc::in_pktinfo>()) };
            let src = from_in_addr(p.ipi_spec_dst);
            if !src.is_unspecified() {
                out.src = Some(IpAddr::V4(src));
            }
            if p.ipi_ifindex != 0 {
                out.ifindex = Some(p.ipi_ifindex as u32);
            }
        } else if h.cmsg_type == names.sendsrcaddr {
            if data.len() < std::mem::size_of::<libc::in_addr>() {
                return Err(Errno::EINVAL);
            }
            // SAFETY: a whole in_addr is in `data` (checked above).
            let a: libc::in_addr =
                unsafe { std::ptr::read_unaligned(data.as_ptr().cast::<libc::in_addr>()) };
            out.src = Some(IpAddr::V4(from_in_addr(a)));
        } else {
            return Err(Errno::EINVAL);
        }
        off += cmsg_align(len);
    }
    Ok(())
}

/// Writes the ancillary data of a recvmsg into `control`; returns the
/// length written and whether some did not fit (MSG_CTRUNC).
fn build_control(m: &RecvMsg, names: CmsgNames, control: &mut [u8]) -> (usize, bool) {
    let mut off = 0;
    let mut truncated = false;
    let mut put = |level: c_int, ty: c_int, data: &[u8]| {
        let space = cmsg_space(data.len());
        // Linux writes a cmsg only when all of it fits (the last one
        // without its padding).
        if off + cmsg_len(data.len()) > control.len() {
            truncated = true;
            return;
        }
        let h = libc::cmsghdr {
            cmsg_len: cmsg_len(data.len()),
            cmsg_level: level,
            cmsg_type: ty,
        };
        // SAFETY: CMSG_HDR bytes at `off` are in the slice (checked
        // above); cmsghdr is plain data and the write is unaligned-safe.
        unsafe {
            std::ptr::write_unaligned(control[off..].as_mut_ptr().cast::<libc::cmsghdr>(), h)
        };
        let d = off + cmsg_align(CMSG_HDR);
        control[d..d + data.len()].copy_from_slice(data);
        off = (off + space).min(control.len());
    };
    // Linux's order: the IPv6 cmsgs of a dual-stack socket first
    // (ip6_datagram_recv_common_ctl), then the IPv4 ones.
    if let Some(p) = m.pktinfo6 {
        let v = libc::in6_pktinfo {
            ipi6_addr: libc::in6_addr {
                s6_addr: p.addr.octets(),
            },
            ipi6_ifindex: p.ifindex,
        };
        put(libc::IPPROTO_IPV6, libc::IPV6_PKTINFO, as_bytes(&v));
    }
    if let Some(p) = m.pktinfo {
        let v = libc::in_pktinfo {
            ipi_ifindex: p.ifindex as c_int,
            ipi_spec_dst: in_addr(p.spec_dst),
            ipi_addr: in_addr(p.addr),
        };
        put(libc::IPPROTO_IP, libc::IP_PKTINFO, as_bytes(&v));
    }
    if let Some(a) = m.dstaddr {
        put(libc::IPPROTO_IP, names.recvdstaddr, as_bytes(&in_addr(a)));
    }
    (off, truncated)
}

/// A msghdr's iovec count: above UIO_MAXIOV is EMSGSIZE, as on Linux.
fn iov_count(m: &msghdr) -> Result<c_int> {
    c_int::try_from(m.msg_iovlen)
        .ok()
        .filter(|n| *n <= 1024)
        .ok_or(Errno::EMSGSIZE)
}

/// sendmsg with the cmsg numbers of one API.
///
/// # Safety
/// `msg` is null or points to a valid msghdr whose pointers describe
/// readable memory of the lengths given.
pub(crate) unsafe fn sendmsg_with(
    fd: c_int,
    msg: *const msghdr,
    flags: c_int,
    names: CmsgNames,
) -> isize {
    let r = (|| {
        if msg.is_null() {
            return Err(EFAULT);
        }
        // SAFETY: a valid msghdr (the caller's promise).
        let m = unsafe { &*msg };
        // SAFETY: the msghdr's iovecs describe readable memory.
        let bufs = unsafe { iovecs(m.msg_iov, iov_count(m)?)? };
        let mut out = SendMsg::default();
        if m.msg_controllen > 0 {
            if m.msg_control.is_null() {
                return Err(EFAULT);
            }
            // SAFETY: `msg_controllen` readable bytes at `msg_control`.
            let control =
                unsafe { std::slice::from_raw_parts(m.msg_control.cast::<u8>(), m.msg_controllen) };
            parse_control(control, names, &mut out)?;
        }
        if m.msg_name.is_null() {
            return api::sendmsg(fd, &bufs, flags, &out);
        }
        // SAFETY: `msg_namelen` readable bytes at `msg_name`.
        unsafe {
            addr::with(
                fd,
                m.msg_name.cast::<sockaddr>(),
                m.msg_namelen,
                Call::Send,
                |dest| {
                    out.addr = dest;
                    api::sendmsg(fd, &bufs, flags, &out)
                },
            )
        }
    })();
    ret_size(r)
}

/// recvmsg with the cmsg numbers of one API.
///
/// # Safety
/// `msg` is null or points to a valid, writable msghdr whose pointers
/// describe writable memory of the lengths given.
pub(crate) unsafe fn recvmsg_with(
    fd: c_int,
    msg: *mut msghdr,
    flags: c_int,
    names: CmsgNames,
) -> isize {
    let r = (|| {
        if msg.is_null() {
            return Err(EFAULT);
        }
        // SAFETY: a valid, writable msghdr (the caller's promise).
        let m = unsafe { &mut *msg };
        // SAFETY: the msghdr's iovecs describe writable memory.
        let mut bufs = unsafe { iovecs_mut(m.msg_iov, iov_count(m)?)? };
        if !m.msg_name.is_null() && (m.msg_namelen as i32) < 0 {
            return Err(Errno::EINVAL);
        }
        let got = api::recvmsg(fd, &mut bufs, flags)?;
        let mut msg_flags = got.flags;
        match got.addr {
            Some(a) if !m.msg_name.is_null() => {
                let mut len: socklen_t = m.msg_namelen;
                // SAFETY: `msg_namelen` writable bytes at `msg_name`.
                unsafe { addr::write(&a, m.msg_name.cast::<sockaddr>(), &mut len) };
                m.msg_namelen = len;
            }
            _ => m.msg_namelen = 0,
        }
        if m.msg_control.is_null() || m.msg_controllen == 0 {
            if got.pktinfo.is_some() || got.dstaddr.is_some() || got.pktinfo6.is_some() {
                msg_flags |= libc::MSG_CTRUNC;
            }
            m.msg_controllen = 0;
        } else {
            // SAFETY: `msg_controllen` writable bytes at `msg_control`.
            let control = unsafe {
                std::slice::from_raw_parts_mut(m.msg_control.cast::<u8>(), m.msg_controllen)
            };
            let (n, truncated) = build_control(&got, names, control);
            if truncated {
                msg_flags |= libc::MSG_CTRUNC;
            }
            m.msg_controllen = n;
        }
        m.msg_flags = msg_flags;
        Ok(got.len)
    })();
    ret_size(r)
}

/// sendmsg: ancillary data IP_PKTINFO and USTACK_IP_SENDSRCADDR.
///
/// # Safety
/// As `sendmsg(2)`: `msg` points to a valid msghdr.
#[no_mangle]
pub unsafe extern "C" fn ustack_sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> isize {
    // SAFETY: passed on from the caller.
    unsafe { sendmsg_with(fd, msg, flags, NATIVE) }
}

/// recvmsg: ancillary data IP_PKTINFO and USTACK_IP_RECVDSTADDR when the
/// socket asked for them.
///
/// # Safety
/// As `recvmsg(2)`: `msg` points to a valid, writable msghdr.
#[no_mangle]
pub unsafe extern "C" fn ustack_recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> isize {
    // SAFETY: passed on from the caller.
    unsafe { recvmsg_with(fd, msg, flags, NATIVE) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::{Pkt6Info, PktInfo};
    use std::net::{SocketAddr, SocketAddrV4};

    #[test]
    fn cmsgs_round_trip() {
        let m = RecvMsg {
            len: 3,
            addr: Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::new(10, 99, 0, 1),
                5,
            ))),
            flags: 0,
            pktinfo: Some(PktInfo {
                ifindex: 1,
                spec_dst: Ipv4Addr::new(10, 99, 0, 2),
                addr: Ipv4Addr::new(10, 99, 0, 2),
            }),
            dstaddr: Some(Ipv4Addr::new(10, 99, 0, 3)),
            pktinfo6: None,
        };
        let mut control = [0u8; 64];
        let (n, truncated) = build_control(&m, NATIVE, &mut control);
        assert!(!truncated);
        assert_eq!(n, cmsg_space(12) + cmsg_space(4));
        // What a sender would hand back: the pktinfo picks the source, the
        // dstaddr cmsg has the receive type, which is also the send type.
        let mut out = SendMsg::default();
        parse_control(&control[..n], NATIVE, &mut out).unwrap();
        assert_eq!(out.src, Some(IpAddr::V4(Ipv4Addr::new(10, 99, 0, 3))));
        assert_eq!(out.ifindex, Some(1));

        // Room for the first only: it is written, the flag says the rest
        // was cut.
        let mut small = [0u8; 32];
        let (n, truncated) = build_control(&m, NATIVE, &mut small);
        assert!(truncated);
        assert_eq!(n, cmsg_space(12));
        // A cmsg of an unknown type or a bad length is refused.
        let mut bad = control;
        bad[0] = 200;
        assert_eq!(
            parse_control(&bad[..n], NATIVE, &mut out),
            Err(Errno::EINVAL)
        );
    }

    #[test]
    fn ipv6_pktinfo_round_trip() {
        let dst: Ipv6Addr = "fd99::2".parse().unwrap();
        let m = RecvMsg {
            len: 1,
            pktinfo6: Some(Pkt6Info {
                ifindex: 2,
                addr: dst,
            }),
            pktinfo: Some(PktInfo {
                ifindex: 2,
                spec_dst: Ipv4Addr::new(10, 99, 0, 2),
                addr: Ipv4Addr::new(10, 99, 0, 2),
            }),
            ..RecvMsg::default()
        };
        let mut control = [0u8; 128];
        let (n, truncated) = build_control(&m, NATIVE, &mut control);
        assert!(!truncated);
        assert_eq!(n, cmsg_space(20) + cmsg_space(12));
        // SAFETY: the first cmsg header is in the buffer.
        let h: libc::cmsghdr =
            unsafe { std::ptr::read_unaligned(control.as_ptr().cast::<libc::cmsghdr>()) };
        assert_eq!(
            (h.cmsg_level, h.cmsg_type, h.cmsg_len),
            (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO, cmsg_len(20))
        );
        // Sent back, the IPv6 one picks the source; the IPv4 one after it
        // too (the socket layer keeps the one of the datagram's family).
        let mut out = SendMsg::default();
        parse_control(&control[..cmsg_space(20)], NATIVE, &mut out).unwrap();
        assert_eq!(out.src, Some(IpAddr::V6(dst)));
        assert_eq!(out.ifindex, Some(2));
        // An in6_pktinfo cut short, or another IPv6 cmsg type, is refused.
        let mut bad = control;
        bad[..8].copy_from_slice(&cmsg_len(19).to_ne_bytes());
        assert_eq!(
            parse_control(&bad[..cmsg_space(20)], NATIVE, &mut out),
            Err(Errno::EINVAL)
        );
        let mut bad = control;
        bad[12..16].copy_from_slice(&libc::IPV6_TCLASS.to_ne_bytes());
        assert_eq!(
            parse_control(&bad[..cmsg_space(20)], NATIVE, &mut out),
            Err(Errno::EINVAL)
        );
    }
}
