//! `struct sockaddr` in and out, with Linux's checks and its rules for
//! the length argument (F-Stack's `struct linux_sockaddr` has the same
//! layout).

use std::net::{Ipv4Addr, SocketAddrV4};

use api::{Errno, Result};
use libc::{sockaddr, sockaddr_in, socklen_t};

use crate::EFAULT;

const SOCKADDR_IN_LEN: usize = std::mem::size_of::<sockaddr_in>();

/// What a caller's address turned out to be.
pub(crate) enum Addr {
    V4(SocketAddrV4),
    /// AF_UNSPEC (connect: dissolve the association).
    Unspec,
}

/// Reads an address the caller passed in (bind, connect, sendto).
///
/// # Safety
/// `addr` is null or points to `len` readable bytes.
pub(crate) unsafe fn read(addr: *const sockaddr, len: socklen_t) -> Result<Addr> {
    let len = len as usize;
    if (len as i32) < 0 {
        return Err(Errno::EINVAL);
    }
    if len < std::mem::size_of::<libc::sa_family_t>() {
        return Err(Errno::EINVAL);
    }
    if addr.is_null() {
        return Err(EFAULT);
    }
    // SAFETY: the caller gave `len` readable bytes, at least the family.
    let family = unsafe { std::ptr::read_unaligned(addr.cast::<libc::sa_family_t>()) };
    match i32::from(family) {
        libc::AF_UNSPEC => Ok(Addr::Unspec),
        libc::AF_INET if len < SOCKADDR_IN_LEN => Err(Errno::EINVAL),
        libc::AF_INET => {
            // SAFETY: the caller gave at least a whole sockaddr_in.
            let sin = unsafe { std::ptr::read_unaligned(addr.cast::<sockaddr_in>()) };
            Ok(Addr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                u16::from_be(sin.sin_port),
            )))
        }
        _ => Err(Errno::EAFNOSUPPORT),
    }
}

/// Reads an address that must be IPv4 (bind, sendto).  AF_UNSPEC is
/// accepted with the any address, as Linux's bind does for compatibility.
///
/// # Safety
/// As [`read`].
pub(crate) unsafe fn read_v4(addr: *const sockaddr, len: socklen_t) -> Result<SocketAddrV4> {
    // SAFETY: passed on from our caller.
    match unsafe { read(addr, len)? } {
        Addr::V4(a) => Ok(a),
        Addr::Unspec if len as usize >= SOCKADDR_IN_LEN => {
            // SAFETY: a whole sockaddr_in is readable (checked above).
            let sin = unsafe { std::ptr::read_unaligned(addr.cast::<sockaddr_in>()) };
            if sin.sin_addr.s_addr == 0 {
                Ok(SocketAddrV4::new(
                    Ipv4Addr::UNSPECIFIED,
                    u16::from_be(sin.sin_port),
                ))
            } else {
                Err(Errno::EAFNOSUPPORT)
            }
        }
        Addr::Unspec => Err(Errno::EAFNOSUPPORT),
    }
}

/// The C form of an address.
pub(crate) fn to_c(a: &SocketAddrV4) -> sockaddr_in {
    // SAFETY: sockaddr_in is plain data; all zeroes is a valid value.
    let mut sin: sockaddr_in = unsafe { std::mem::zeroed() };
    sin.sin_family = libc::AF_INET as libc::sa_family_t;
    sin.sin_port = a.port().to_be();
    sin.sin_addr.s_addr = u32::from(*a.ip()).to_be();
    sin
}

/// Checks an (address, length) pair the call will write to: Linux
/// reads `*len` first (EFAULT, EINVAL) before it does anything.
///
/// # Safety
/// `len` is null or points to a readable socklen_t.
pub(crate) unsafe fn check_out(addr: *mut sockaddr, len: *mut socklen_t) -> Result<()> {
    if addr.is_null() {
        return Ok(());
    }
    if len.is_null() {
        return Err(EFAULT);
    }
    // SAFETY: the caller gave a readable length.
    if (unsafe { len.read_unaligned() } as i32) < 0 {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// Writes an address out as Linux does: at most `*len` bytes of it, and
/// `*len` set to its whole length.  Nothing happens when `addr` is null.
///
/// # Safety
/// `addr` is null or points to `*len` writable bytes; `len` is null only
/// when `addr` is, else points to a readable and writable socklen_t
/// ([`check_out`] passed).
pub(crate) unsafe fn write(a: &SocketAddrV4, addr: *mut sockaddr, len: *mut socklen_t) {
    if addr.is_null() || len.is_null() {
        return;
    }
    let sin = to_c(a);
    // SAFETY: `len` is readable and writable (our caller's promise).
    let room = unsafe { len.read_unaligned() } as usize;
    let n = room.min(SOCKADDR_IN_LEN);
    // SAFETY: `addr` has `room` >= `n` writable bytes; the source is a
    // whole sockaddr_in of which `n` bytes are copied.
    unsafe {
        std::ptr::copy_nonoverlapping(
            (&sin as *const sockaddr_in).cast::<u8>(),
            addr.cast::<u8>(),
            n,
        );
        len.write_unaligned(SOCKADDR_IN_LEN as socklen_t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_in_and_out() {
        let a = SocketAddrV4::new(Ipv4Addr::new(10, 99, 1, 2), 8080);
        let sin = to_c(&a);
        let p = (&sin as *const sockaddr_in).cast::<sockaddr>();
        // SAFETY: `p` points to a whole sockaddr_in.
        let back = unsafe { read_v4(p, SOCKADDR_IN_LEN as socklen_t) }.unwrap();
        assert_eq!(back, a);
        // SAFETY: as above; shorter lengths are refused before reading.
        unsafe {
            assert_eq!(read_v4(p, 15).err(), Some(Errno::EINVAL));
            assert_eq!(read_v4(p, 1).err(), Some(Errno::EINVAL));
            assert_eq!(read_v4(std::ptr::null(), 16).err(), Some(EFAULT));
        }
        let mut six = sin;
        six.sin_family = libc::AF_INET6 as libc::sa_family_t;
        let p6 = (&six as *const sockaddr_in).cast::<sockaddr>();
        // SAFETY: `p6` points to 16 readable bytes.
        assert_eq!(unsafe { read_v4(p6, 16) }.err(), Some(Errno::EAFNOSUPPORT));

        // Out: truncated to the room given, the length set to the whole.
        let mut out = [0xffu8; 16];
        let mut len: socklen_t = 4;
        // SAFETY: 16 writable bytes, `len` says 4 of them may be written.
        unsafe { write(&a, out.as_mut_ptr().cast(), &mut len) };
        assert_eq!(len, 16);
        assert_eq!(&out[..4], &[2, 0, 0x1f, 0x90]);
        assert_eq!(out[4], 0xff, "nothing past the room given");
    }
}
