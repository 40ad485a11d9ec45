//! `ff_route_ctl`: F-Stack's route calls (add, delete, change an IPv4
//! route) on the stacks of the calling thread's engines, with FreeBSD's
//! meanings of its two flags and FreeBSD's errno values.

use std::net::{IpAddr, Ipv4Addr};
use std::os::raw::c_int;

use api::Errno;
use libc::sockaddr;
use runtime::PortLink;
use stack::iface::prefix_len_of;
use stack::route::{IpCidr, Route, RouteError};
use stack::Stack;

use crate::ret_unit;

/// `enum FF_ROUTE_CTL`.
pub const FF_ROUTE_ADD: c_int = 0;
pub const FF_ROUTE_DEL: c_int = 1;
pub const FF_ROUTE_CHANGE: c_int = 2;
/// `enum FF_ROUTE_FLAG`.
pub const FF_RTF_HOST: c_int = 0;
pub const FF_RTF_GATEWAY: c_int = 1;

/// An IPv4 address from a `struct linux_sockaddr` (`sockaddr_in`'s
/// layout); `None` for a null pointer.
///
/// # Safety
/// `sa` is null or points to 16 readable bytes.
unsafe fn ipv4(sa: *const sockaddr) -> api::Result<Option<Ipv4Addr>> {
    if sa.is_null() {
        return Ok(None);
    }
    // SAFETY: 16 readable bytes (the caller's promise): a sockaddr_in.
    let sin = unsafe { sa.cast::<libc::sockaddr_in>().read_unaligned() };
    if c_int::from(sin.sin_family) != libc::AF_INET {
        return Err(Errno::EAFNOSUPPORT);
    }
    Ok(Some(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))))
}

/// What a call asks for, checked.
struct Request {
    req: c_int,
    dest: IpCidr,
    /// The gateway (FF_RTF_GATEWAY) or the interface's address
    /// (FF_RTF_HOST).
    via: Option<Ipv4Addr>,
    gateway: bool,
}

/// The route `r` makes on `stack`: through its gateway, which a connected
/// subnet must reach (FreeBSD: ENETUNREACH), or on the link of the
/// interface that has the address given or the subnet it is on.
fn route_for(stack: &Stack, r: &Request) -> api::Result<Route> {
    let via = r.via.ok_or(Errno::EINVAL)?;
    let iface = stack
        .interfaces()
        .iter()
        .find(|i| i.has_addr(via))
        .or_else(|| stack.interfaces().iter().find(|i| i.on_link(via)))
        .ok_or(Errno::ENETUNREACH)?;
    Ok(Route {
        dest: r.dest,
        gateway: r.gateway.then_some(IpAddr::V4(via)),
        iface: iface.id,
    })
}

fn errno(e: RouteError) -> Errno {
    match e {
        RouteError::Exists => Errno::EEXIST,
        RouteError::NotFound => Errno(libc::ESRCH),
        RouteError::Full => Errno(libc::ENOBUFS),
        RouteError::FamilyMismatch => Errno::EAFNOSUPPORT,
    }
}

/// Applies `r` to one stack.
fn apply(stack: &mut Stack, r: &Request) -> api::Result<()> {
    match r.req {
        FF_ROUTE_ADD => {
            let route = route_for(stack, r)?;
            stack.routes_mut().add(route).map_err(errno)
        }
        FF_ROUTE_DEL => {
            let existing = stack
                .routes()
                .iter()
                .find(|x| x.dest == r.dest)
                .copied()
                .ok_or(Errno(libc::ESRCH))?;
            // A gateway given must be the route's (FreeBSD's check).
            if let (true, Some(gw)) = (r.gateway, r.via) {
                if existing.gateway != Some(IpAddr::V4(gw)) {
                    return Err(Errno(libc::ESRCH));
                }
            }
            stack.routes_mut().remove(r.dest).map(|_| ()).map_err(errno)
        }
        FF_ROUTE_CHANGE => {
            let route = route_for(stack, r)?;
            let old = stack.routes_mut().remove(r.dest).map_err(errno)?;
            stack.routes_mut().add(route).map_err(|e| {
                let _ = stack.routes_mut().add(old);
                errno(e)
            })
        }
        _ => Err(Errno::EINVAL),
    }
}

/// `ff_route_ctl(req, flag, dst, gw, netmask)`: see ff_api.h.  Applied to
/// every engine of the calling thread; they hold the same routes, so what
/// fails fails on the first and changes nothing.
///
/// # Safety
/// `dst`, `gw` and `netmask` are each null or point to a readable
/// `struct linux_sockaddr` (16 bytes).
#[no_mangle]
pub unsafe extern "C" fn ff_route_ctl(
    req: c_int,
    flag: c_int,
    dst: *mut sockaddr,
    gw: *mut sockaddr,
    netmask: *mut sockaddr,
) -> c_int {
    let r = (|| {
        if !(FF_ROUTE_ADD..=FF_ROUTE_CHANGE).contains(&req)
            || !(FF_RTF_HOST..=FF_RTF_GATEWAY).contains(&flag)
        {
            return Err(Errno::EINVAL);
        }
        // SAFETY: passed on from the caller.
        let (dst, via, mask) = unsafe { (ipv4(dst)?, ipv4(gw)?, mask(netmask)?) };
        let dst = dst.ok_or(Errno::EINVAL)?;
        let gateway = flag == FF_RTF_GATEWAY;
        // FF_RTF_HOST: a host route whatever the netmask; without a
        // netmask, a host route too (FreeBSD's rule).
        let prefix = if gateway { mask.unwrap_or(32) } else { 32 };
        let dest = IpCidr::new(IpAddr::V4(dst), prefix).map_err(|_| Errno::EINVAL)?;
        let request = Request {
            req,
            dest,
            via,
            gateway,
        };
        let mut any = false;
        for i in 0.. {
            match api::with_engine::<PortLink, _>(i, |e| apply(&mut e.stack, &request))? {
                Some(r) => r?,
                None => break,
            }
            any = true;
        }
        if any {
            Ok(())
        } else {
            Err(Errno::EBADF)
        }
    })();
    ret_unit(r)
}

/// The prefix length of a netmask sockaddr (its family is not looked at,
/// as FreeBSD's); `None` for a null pointer.
///
/// # Safety
/// `sa` is null or points to 16 readable bytes.
unsafe fn mask(sa: *const sockaddr) -> api::Result<Option<u8>> {
    if sa.is_null() {
        return Ok(None);
    }
    // SAFETY: 16 readable bytes (the caller's promise): a sockaddr_in.
    let sin = unsafe { sa.cast::<libc::sockaddr_in>().read_unaligned() };
    let m = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
    prefix_len_of(m).map(Some).ok_or(Errno::EINVAL)
}
