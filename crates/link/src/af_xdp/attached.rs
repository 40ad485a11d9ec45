//! Which XDP program an interface of this network namespace runs, and in
//! which mode: asked of rtnetlink (`RTM_GETLINK`, its `IFLA_XDP`
//! attributes), the only place that answers per namespace.  (BPF link and
//! program ids are global, and an XDP link only records an ifindex, which
//! every namespace reuses: a veth is interface 2 in many of them.)

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::program::XdpMode;
use crate::ifreq::cvt;

const RTM_GETLINK: u16 = 18;
const RTM_SETLINK: u16 = 19;
const NLM_F_ACK: u16 = 4;
const NLA_F_NESTED: u16 = 0x8000;
const IFLA_XDP_FD: u16 = 1;
const IFLA_XDP_FLAGS: u16 = 3;
const IFLA_XDP_EXPECTED_FD: u16 = 8;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
const XDP_FLAGS_REPLACE: u32 = 1 << 4;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLMSG_HDRLEN: usize = 16;
const IFINFOMSG_LEN: usize = 16;
const IFLA_XDP: u16 = 43;
const IFLA_XDP_ATTACHED: u16 = 2;
const IFLA_XDP_PROG_ID: u16 = 4;
const IFLA_XDP_DRV_PROG_ID: u16 = 5;
const IFLA_XDP_SKB_PROG_ID: u16 = 6;
const XDP_ATTACHED_DRV: u8 = 1;
const XDP_ATTACHED_SKB: u8 = 2;
const XDP_ATTACHED_MULTI: u8 = 4;
/// The attribute type's flag bits (`NLA_F_NESTED`, `NLA_F_NET_BYTEORDER`).
const NLA_TYPE_MASK: u16 = 0x3fff;

/// The XDP program interface `ifindex` runs in the driver or on socket
/// buffers (its id and mode), if any.
pub fn attached_program(ifindex: u32) -> io::Result<Option<(u32, XdpMode)>> {
    let reply = get_link(ifindex)?;
    Ok(parse_link_reply(&reply))
}

/// Puts program `fd` on interface `ifindex` in `mode` in place of program
/// `expected` in one step (`XDP_FLAGS_REPLACE`: the kernel refuses when
/// `expected` is no longer the interface's program).
pub fn replace_program(
    ifindex: u32,
    mode: XdpMode,
    fd: std::os::fd::RawFd,
    expected: std::os::fd::RawFd,
) -> io::Result<()> {
    let flags = XDP_FLAGS_REPLACE
        | match mode {
            XdpMode::Native => XDP_FLAGS_DRV_MODE,
            XdpMode::Generic => XDP_FLAGS_SKB_MODE,
        };
    let mut xdp = Vec::new();
    push_attr(&mut xdp, IFLA_XDP_FD, &fd.to_ne_bytes());
    push_attr(&mut xdp, IFLA_XDP_FLAGS, &flags.to_ne_bytes());
    push_attr(&mut xdp, IFLA_XDP_EXPECTED_FD, &expected.to_ne_bytes());
    let mut req = vec![0u8; NLMSG_HDRLEN + IFINFOMSG_LEN];
    push_attr(&mut req, IFLA_XDP | NLA_F_NESTED, &xdp);
    let len = req.len() as u32;
    req[0..4].copy_from_slice(&len.to_ne_bytes());
    req[4..6].copy_from_slice(&RTM_SETLINK.to_ne_bytes());
    req[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes());
    req[NLMSG_HDRLEN + 4..NLMSG_HDRLEN + 8].copy_from_slice(&(ifindex as i32).to_ne_bytes());
    exchange(&req).map(|_| ())
}

fn push_attr(buf: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    buf.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(payload);
    while !buf.len().is_multiple_of(4) {
        buf.push(0);
    }
}

fn get_link(ifindex: u32) -> io::Result<Vec<u8>> {
    const REQ_LEN: usize = NLMSG_HDRLEN + IFINFOMSG_LEN;
    let mut req = [0u8; REQ_LEN];
    req[0..4].copy_from_slice(&(REQ_LEN as u32).to_ne_bytes());
    req[4..6].copy_from_slice(&RTM_GETLINK.to_ne_bytes());
    req[6..8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes());
    // ifinfomsg: family AF_UNSPEC, index.
    req[NLMSG_HDRLEN + 4..NLMSG_HDRLEN + 8].copy_from_slice(&(ifindex as i32).to_ne_bytes());
    exchange(&req)
}

/// Sends one request to the kernel's rtnetlink and returns its reply (an
/// error reply as the error).
fn exchange(req: &[u8]) -> io::Result<Vec<u8>> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let raw = cvt(unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    })?;
    // SAFETY: `raw` is a fresh descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: sockaddr_nl is plain data; all-zero addresses the kernel.
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: `req` is a live buffer of its length; `kernel` a live
    // sockaddr_nl of the size given.
    let sent = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            req.as_ptr().cast(),
            req.len(),
            0,
            (&kernel as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; 64 * 1024];
    // SAFETY: `buf` is writable for its length.
    let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    if let Some(errno) = netlink_error(&buf) {
        return Err(io::Error::from_raw_os_error(errno));
    }
    Ok(buf)
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The errno of an `NLMSG_ERROR` reply (nonzero), if it is one.
fn netlink_error(msg: &[u8]) -> Option<i32> {
    if u16_at(msg, 4)? != NLMSG_ERROR {
        return None;
    }
    let e = u32_at(msg, NLMSG_HDRLEN)? as i32;
    (e != 0).then_some(-e)
}

/// The attributes in `b`: (type without flag bits, payload).
fn attributes(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = usize::from(u16_at(b, 0)?);
        let ty = u16_at(b, 2)? & NLA_TYPE_MASK;
        if len < 4 || len > b.len() {
            return None;
        }
        let payload = &b[4..len];
        b = b.get(len.next_multiple_of(4)..).unwrap_or(&[]);
        Some((ty, payload))
    })
}

/// The program id and mode in an `RTM_NEWLINK` reply's `IFLA_XDP`.
fn parse_link_reply(msg: &[u8]) -> Option<(u32, XdpMode)> {
    let len = (u32_at(msg, 0)? as usize).min(msg.len());
    let attrs = msg.get(NLMSG_HDRLEN + IFINFOMSG_LEN..len)?;
    let (_, xdp) = attributes(attrs).find(|(t, _)| *t == IFLA_XDP)?;
    let (mut attached, mut id, mut drv, mut skb) = (0u8, None, None, None);
    for (t, p) in attributes(xdp) {
        match t {
            IFLA_XDP_ATTACHED => attached = *p.first()?,
            IFLA_XDP_PROG_ID => id = u32_at(p, 0),
            IFLA_XDP_DRV_PROG_ID => drv = u32_at(p, 0),
            IFLA_XDP_SKB_PROG_ID => skb = u32_at(p, 0),
            _ => {}
        }
    }
    match attached {
        XDP_ATTACHED_DRV => Some((id?, XdpMode::Native)),
        XDP_ATTACHED_SKB => Some((id?, XdpMode::Generic)),
        // Programs in two modes (one offloaded): the driver's, else the
        // generic one.
        XDP_ATTACHED_MULTI => drv
            .map(|d| (d, XdpMode::Native))
            .or(skb.map(|s| (s, XdpMode::Generic))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(ty: u16, payload: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
        a.extend_from_slice(&ty.to_ne_bytes());
        a.extend_from_slice(payload);
        while a.len() % 4 != 0 {
            a.push(0);
        }
        a
    }

    fn reply(xdp: &[u8]) -> Vec<u8> {
        let mut m = vec![0u8; NLMSG_HDRLEN + IFINFOMSG_LEN];
        m.extend(attr(3, b"veth0\0"));
        m.extend(attr(IFLA_XDP | 0x8000, xdp));
        let len = m.len() as u32;
        m[0..4].copy_from_slice(&len.to_ne_bytes());
        m
    }

    #[test]
    fn reads_program_and_mode() {
        let mut x = attr(IFLA_XDP_ATTACHED, &[XDP_ATTACHED_SKB]);
        x.extend(attr(IFLA_XDP_PROG_ID, &77u32.to_ne_bytes()));
        assert_eq!(parse_link_reply(&reply(&x)), Some((77, XdpMode::Generic)));
        let mut x = attr(IFLA_XDP_ATTACHED, &[XDP_ATTACHED_DRV]);
        x.extend(attr(IFLA_XDP_PROG_ID, &9u32.to_ne_bytes()));
        assert_eq!(parse_link_reply(&reply(&x)), Some((9, XdpMode::Native)));
        let none = attr(IFLA_XDP_ATTACHED, &[0]);
        assert_eq!(parse_link_reply(&reply(&none)), None);
    }

    #[test]
    fn truncated_replies_give_nothing() {
        let mut x = attr(IFLA_XDP_ATTACHED, &[XDP_ATTACHED_DRV]);
        x.extend(attr(IFLA_XDP_PROG_ID, &9u32.to_ne_bytes()));
        let r = reply(&x);
        for n in 0..r.len() {
            let _ = parse_link_reply(&r[..n]);
        }
        assert_eq!(parse_link_reply(&r[..r.len() - 8]), None);
    }

    #[test]
    fn loopback_has_no_program() {
        // Interface 1 is the namespace's loopback.
        assert_eq!(attached_program(1).unwrap(), None);
    }
}
