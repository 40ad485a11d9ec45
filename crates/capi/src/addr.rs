//! `struct sockaddr` in and out (`sockaddr_in`, `sockaddr_in6`), with
//! Linux's checks and its rules for the length argument (F-Stack's
//! `struct linux_sockaddr` has the same layout, AF_INET6 being Linux's
//! 10 there too).
//!
//! Linux checks an address's length against the *socket's* family: an
//! AF_INET6 socket wants at least the 24 bytes of RFC 2133's
//! `sockaddr_in6` (the scope id came later) for bind and a TCP connect,
//! where an AF_INET one wants the 16 of a `sockaddr_in` and then a family
//! of its own.  The socket's family is asked only on the error paths whose
//! errno depends on it, so a good address costs no extra call.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use api::{Errno, Result};
use libc::{sockaddr, sockaddr_in, sockaddr_in6, socklen_t};

use crate::EFAULT;

const SIN_LEN: usize = std::mem::size_of::<sockaddr_in>();
const SIN6_LEN: usize = std::mem::size_of::<sockaddr_in6>();
/// `sockaddr_in6` without `sin6_scope_id` (Linux's SIN6_LEN_RFC2133).
const SIN6_LEN_RFC2133: usize = 24;

/// What a caller's address turned out to be.
#[derive(Debug, PartialEq, Eq)]
enum Addr {
    Inet(SocketAddr),
    /// AF_UNSPEC, with the `sockaddr_in` it would be if long enough (an
    /// AF_INET socket's bind and sendto take it as AF_INET, for old
    /// programs).
    Unspec(Option<SocketAddrV4>),
}

/// The family of an address passed in, once its length and pointer are
/// checked as Linux checks them before anything else.
///
/// # Safety
/// `addr` is null or points to `len` readable bytes.
unsafe fn family(addr: *const sockaddr, len: socklen_t) -> Result<i32> {
    // move_addr_to_kernel: no more than a sockaddr_storage.
    let most = std::mem::size_of::<libc::sockaddr_storage>();
    if (len as i32) < 0
        || (len as usize) < std::mem::size_of::<libc::sa_family_t>()
        || len as usize > most
    {
        return Err(Errno::EINVAL);
    }
    if addr.is_null() {
        return Err(EFAULT);
    }
    // SAFETY: the caller gave `len` readable bytes, at least the family.
    Ok(i32::from(unsafe {
        std::ptr::read_unaligned(addr.cast::<libc::sa_family_t>())
    }))
}

/// Reads an address, checked as its own family wants (EINVAL when short).
///
/// # Safety
/// As [`family`].
unsafe fn read(addr: *const sockaddr, len: socklen_t) -> Result<Addr> {
    // SAFETY: passed on.
    let family = unsafe { family(addr, len)? };
    let len = len as usize;
    let sin = || {
        // SAFETY: only called when `len` covers a sockaddr_in.
        let sin = unsafe { std::ptr::read_unaligned(addr.cast::<sockaddr_in>()) };
        SocketAddrV4::new(
            Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
            u16::from_be(sin.sin_port),
        )
    };
    match family {
        libc::AF_UNSPEC => Ok(Addr::Unspec((len >= SIN_LEN).then(sin))),
        libc::AF_INET if len < SIN_LEN => Err(Errno::EINVAL),
        libc::AF_INET => Ok(Addr::Inet(SocketAddr::V4(sin()))),
        libc::AF_INET6 if len < SIN6_LEN_RFC2133 => Err(Errno::EINVAL),
        libc::AF_INET6 => {
            let mut six = [0u8; SIN6_LEN];
            // SAFETY: `len` >= 24 bytes are readable; at most 28 are copied
            // into a local buffer of 28.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    addr.cast::<u8>(),
                    six.as_mut_ptr(),
                    len.min(SIN6_LEN),
                )
            };
            // SAFETY: `six` holds a whole sockaddr_in6 (its scope id zero
            // when the caller's was the shorter RFC 2133 form).
            let s = unsafe { std::ptr::read_unaligned(six.as_ptr().cast::<sockaddr_in6>()) };
            Ok(Addr::Inet(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(s.sin6_addr.s6_addr),
                u16::from_be(s.sin6_port),
                u32::from_be(s.sin6_flowinfo),
                s.sin6_scope_id,
            ))))
        }
        _ => Err(Errno::EAFNOSUPPORT),
    }
}

/// What an address is given to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Bind,
    Connect,
    /// A datagram's destination (sendto, sendmsg's `msg_name`).
    Send,
}

fn domain(fd: i32) -> Result<i32> {
    api::getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_DOMAIN)
}

fn stream(fd: i32) -> bool {
    api::getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_TYPE) == Ok(libc::SOCK_STREAM)
}

/// Reads the address a `call` on socket `fd` was given and runs `f` with
/// it: `Some(address)`, or `None` for AF_UNSPEC where it means no address
/// (connect: dissolve the association; an AF_INET6 socket's send: none
/// given).  The errno of a bad address is the one Linux gives for the
/// socket's family.
///
/// # Safety
/// `addr` is null or points to `len` readable bytes.
pub(crate) unsafe fn with<T>(
    fd: i32,
    addr: *const sockaddr,
    len: socklen_t,
    call: Call,
    f: impl FnOnce(Option<SocketAddr>) -> Result<T>,
) -> Result<T> {
    // SAFETY: passed on from our caller.
    unsafe { with_socket(|| domain(fd), || stream(fd), addr, len, call, f) }
}

/// [`with`] for a socket the socket layer does not have yet (the preload
/// library's sockets before they are placed): its `domain` and whether it
/// is a stream one are given, and the address is checked as Linux checks
/// it for such a socket before the call looks at the socket's state.  A
/// family the socket cannot take is refused here (EAFNOSUPPORT, or EINVAL
/// for a `sockaddr_in` too short for an AF_INET6 socket); what depends on
/// its options is left to the call itself (an AF_INET6 datagram socket's
/// connect or send to an IPv4 address is allowed unless IPV6_V6ONLY).
///
/// # Safety
/// `addr` is null or points to `len` readable bytes.
pub unsafe fn read_for(
    domain: i32,
    stream: bool,
    addr: *const sockaddr,
    len: socklen_t,
    call: Call,
) -> Result<Option<SocketAddr>> {
    let takes = |a: Option<SocketAddr>| match (domain, a) {
        (libc::AF_INET, Some(SocketAddr::V6(_))) => Err(Errno::EAFNOSUPPORT),
        (libc::AF_INET6, Some(SocketAddr::V4(_))) if call == Call::Bind || stream => {
            Err(Errno::EAFNOSUPPORT)
        }
        _ => Ok(a),
    };
    // SAFETY: passed on from our caller.
    unsafe { with_socket(|| Ok(domain), || stream, addr, len, call, takes) }
}

/// [`with`], the socket's family and kind asked through `domain` and
/// `stream` (only on the paths whose errno depends on them).
///
/// # Safety
/// As [`with`].
unsafe fn with_socket<T>(
    domain: impl Fn() -> Result<i32>,
    stream: impl Fn() -> bool,
    addr: *const sockaddr,
    len: socklen_t,
    call: Call,
    f: impl FnOnce(Option<SocketAddr>) -> Result<T>,
) -> Result<T> {
    // SAFETY: passed on from our caller.
    let parsed = unsafe { read(addr, len) };
    let long = |n: usize| len as usize >= n;
    match parsed {
        // A short sockaddr_in6: an AF_INET socket has its 16 bytes and
        // looks at the family next.
        // SAFETY: `read` got as far as the length check: the family is
        // readable.
        Err(Errno::EINVAL)
            if long(SIN_LEN)
                && unsafe { family(addr, len) } == Ok(libc::AF_INET6)
                && domain() == Ok(libc::AF_INET) =>
        {
            Err(Errno::EAFNOSUPPORT)
        }
        Err(e) => Err(e),
        Ok(Addr::Inet(a)) => match f(Some(a)) {
            // A sockaddr_in to an AF_INET6 socket's bind or TCP connect:
            // Linux finds it too short before it looks at the family.
            Err(Errno::EAFNOSUPPORT)
                if a.is_ipv4()
                    && !long(SIN6_LEN_RFC2133)
                    && call != Call::Send
                    && domain() == Ok(libc::AF_INET6)
                    && (call == Call::Bind || stream()) =>
            {
                Err(Errno::EINVAL)
            }
            r => r,
        },
        Ok(Addr::Unspec(sin)) => match (call, domain()?) {
            (Call::Connect, _) => f(None),
            // inet_bind and udp_sendmsg: AF_UNSPEC is AF_INET for the any
            // address (compatibility with old programs).
            (Call::Bind | Call::Send, libc::AF_INET) => match sin {
                Some(s) if s.ip().is_unspecified() => f(Some(SocketAddr::V4(s))),
                Some(_) => Err(Errno::EAFNOSUPPORT),
                None => Err(Errno::EINVAL),
            },
            (Call::Bind, _) if !long(SIN6_LEN_RFC2133) => Err(Errno::EINVAL),
            (Call::Bind, _) => Err(Errno::EAFNOSUPPORT),
            // udpv6_sendmsg: AF_UNSPEC is no address.
            (Call::Send, _) => f(None),
        },
    }
}

/// The C form of an IPv4 address.
pub fn to_c4(a: &SocketAddrV4) -> sockaddr_in {
    // SAFETY: sockaddr_in is plain data; all zeroes is a valid value.
    let mut sin: sockaddr_in = unsafe { std::mem::zeroed() };
    sin.sin_family = libc::AF_INET as libc::sa_family_t;
    sin.sin_port = a.port().to_be();
    sin.sin_addr.s_addr = u32::from(*a.ip()).to_be();
    sin
}

/// The C form of an IPv6 address.
pub fn to_c6(a: &SocketAddrV6) -> sockaddr_in6 {
    // SAFETY: sockaddr_in6 is plain data; all zeroes is a valid value.
    let mut sin6: sockaddr_in6 = unsafe { std::mem::zeroed() };
    sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    sin6.sin6_port = a.port().to_be();
    sin6.sin6_flowinfo = a.flowinfo().to_be();
    sin6.sin6_addr.s6_addr = a.ip().octets();
    sin6.sin6_scope_id = a.scope_id();
    sin6
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
/// `*len` set to its whole length (16 for IPv4, 28 for IPv6).  Nothing
/// happens when `addr` is null.
///
/// # Safety
/// `addr` is null or points to `*len` writable bytes; `len` is null only
/// when `addr` is, else points to a readable and writable socklen_t
/// ([`check_out`] passed).
pub unsafe fn write(a: &SocketAddr, addr: *mut sockaddr, len: *mut socklen_t) {
    if addr.is_null() || len.is_null() {
        return;
    }
    let (v4, v6);
    let bytes: &[u8] = match a {
        SocketAddr::V4(a) => {
            v4 = to_c4(a);
            as_bytes(&v4)
        }
        SocketAddr::V6(a) => {
            v6 = to_c6(a);
            as_bytes(&v6)
        }
    };
    // SAFETY: `len` is readable and writable (our caller's promise).
    let room = unsafe { len.read_unaligned() } as usize;
    let n = room.min(bytes.len());
    // SAFETY: `addr` has `room` >= `n` writable bytes; `bytes` has `n`.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr.cast::<u8>(), n);
        len.write_unaligned(bytes.len() as socklen_t);
    }
}

/// The bytes of a plain C struct.
pub fn as_bytes<T: Copy>(v: &T) -> &[u8] {
    // SAFETY: `v` is a valid T; T is one of the libc address structs or
    // cmsg payloads, plain data whose padding (sin_zero) is zeroed by
    // their constructors here.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p<T>(v: &T) -> *const sockaddr {
        (v as *const T).cast()
    }

    #[test]
    fn ipv4_addresses_in_and_out() {
        let a = SocketAddrV4::new(Ipv4Addr::new(10, 99, 1, 2), 8080);
        let sin = to_c4(&a);
        // SAFETY (the block): the pointers are to live locals of at least
        // the lengths given, or null.
        unsafe {
            assert_eq!(read(p(&sin), 16), Ok(Addr::Inet(SocketAddr::V4(a))));
            assert_eq!(read(p(&sin), 15), Err(Errno::EINVAL));
            assert_eq!(read(p(&sin), 1), Err(Errno::EINVAL));
            assert_eq!(read(p(&sin), u32::MAX), Err(Errno::EINVAL));
            assert_eq!(read(std::ptr::null(), 16), Err(EFAULT));
            let mut other = sin;
            other.sin_family = libc::AF_UNIX as libc::sa_family_t;
            assert_eq!(read(p(&other), 16), Err(Errno::EAFNOSUPPORT));
            other.sin_family = libc::AF_UNSPEC as libc::sa_family_t;
            assert_eq!(read(p(&other), 16), Ok(Addr::Unspec(Some(a))));
            assert_eq!(read(p(&other), 2), Ok(Addr::Unspec(None)));
        }

        // Out: truncated to the room given, the length set to the whole.
        let mut out = [0xffu8; 16];
        let mut len: socklen_t = 4;
        // SAFETY: 16 writable bytes, `len` says 4 of them may be written.
        unsafe { write(&SocketAddr::V4(a), out.as_mut_ptr().cast(), &mut len) };
        assert_eq!(len, 16);
        assert_eq!(&out[..4], &[2, 0, 0x1f, 0x90]);
        assert_eq!(out[4], 0xff, "nothing past the room given");
    }

    #[test]
    fn ipv6_addresses_in_and_out() {
        let a = SocketAddrV6::new("fe80::1:2".parse().unwrap(), 443, 0x12345, 3);
        let sin6 = to_c6(&a);
        assert_eq!(sin6.sin6_family, 10, "Linux's AF_INET6, as F-Stack's");
        // SAFETY (the block): the pointers are to live locals of at least
        // the lengths given.
        unsafe {
            assert_eq!(read(p(&sin6), 28), Ok(Addr::Inet(SocketAddr::V6(a))));
            // RFC 2133's form has no scope id.
            let short = SocketAddrV6::new(*a.ip(), 443, 0x12345, 0);
            assert_eq!(read(p(&sin6), 24), Ok(Addr::Inet(SocketAddr::V6(short))));
            // Longer than the struct is fine (a sockaddr_storage).
            let mut storage: libc::sockaddr_storage = std::mem::zeroed();
            std::ptr::copy_nonoverlapping(
                p(&sin6).cast::<u8>(),
                (&mut storage as *mut libc::sockaddr_storage).cast::<u8>(),
                28,
            );
            let len = std::mem::size_of_val(&storage) as socklen_t;
            assert_eq!(read(p(&storage), len), Ok(Addr::Inet(SocketAddr::V6(a))));
            for bad in [23, 16, 3] {
                assert_eq!(read(p(&sin6), bad), Err(Errno::EINVAL), "{bad}");
            }
        }
        let mut out = [0u8; 32];
        let mut len: socklen_t = 32;
        // SAFETY: 32 writable bytes.
        unsafe { write(&SocketAddr::V6(a), out.as_mut_ptr().cast(), &mut len) };
        assert_eq!(len, 28);
        assert_eq!(&out[..4], &[10, 0, 0x01, 0xbb]);
        assert_eq!(&out[4..8], &0x12345u32.to_be_bytes());
        assert_eq!(out[8], 0xfe);
        assert_eq!(&out[24..28], &3u32.to_ne_bytes());
        // A sockaddr_in's room gets the first 16 bytes; the length says 28.
        let mut small = [0u8; 16];
        let mut len: socklen_t = 16;
        // SAFETY: 16 writable bytes, `len` says so.
        unsafe { write(&SocketAddr::V6(a), small.as_mut_ptr().cast(), &mut len) };
        assert_eq!((len, &small[..],), (28, &out[..16]));
    }

    #[test]
    fn addresses_for_a_socket_not_made_yet() {
        let v4 = SocketAddrV4::new(Ipv4Addr::new(10, 99, 1, 2), 80);
        let v6 = SocketAddrV6::new("fd99::2".parse().unwrap(), 80, 0, 0);
        let (sin, sin6) = (to_c4(&v4), to_c6(&v6));
        let mut unspec = sin;
        unspec.sin_family = libc::AF_UNSPEC as libc::sa_family_t;
        let (inet, inet6) = (libc::AF_INET, libc::AF_INET6);
        // SAFETY (the block): the pointers are to live locals of at least
        // the lengths given.
        unsafe {
            let r = |d, stream, a, len, call| read_for(d, stream, a, len, call);
            assert_eq!(
                r(inet6, true, p(&sin6), 28, Call::Bind),
                Ok(Some(v6.into()))
            );
            assert_eq!(r(inet6, true, p(&sin6), 23, Call::Bind), Err(Errno::EINVAL));
            // A sockaddr_in to an AF_INET6 socket's bind or TCP connect:
            // too short first, then the wrong family.
            for call in [Call::Bind, Call::Connect] {
                assert_eq!(r(inet6, true, p(&sin), 16, call), Err(Errno::EINVAL));
            }
            let mut storage: libc::sockaddr_storage = std::mem::zeroed();
            std::ptr::copy_nonoverlapping(
                p(&sin).cast::<u8>(),
                (&mut storage as *mut libc::sockaddr_storage).cast::<u8>(),
                16,
            );
            assert_eq!(
                r(inet6, true, p(&storage), 28, Call::Bind),
                Err(Errno::EAFNOSUPPORT)
            );
            assert_eq!(r(inet6, false, p(&sin), 16, Call::Bind), Err(Errno::EINVAL));
            // A datagram socket's connect and send take it (IPV6_V6ONLY is
            // the call's to check).
            for call in [Call::Connect, Call::Send] {
                assert_eq!(r(inet6, false, p(&sin), 16, call), Ok(Some(v4.into())));
            }
            // AF_UNSPEC: no address for connect and an AF_INET6 send.
            assert_eq!(r(inet6, true, p(&unspec), 16, Call::Connect), Ok(None));
            assert_eq!(r(inet6, false, p(&unspec), 16, Call::Send), Ok(None));
            // A sockaddr_in6 to an AF_INET socket.
            for call in [Call::Bind, Call::Connect, Call::Send] {
                assert_eq!(r(inet, true, p(&sin6), 28, call), Err(Errno::EAFNOSUPPORT));
                // Shorter than a sockaddr_in6, as long as a sockaddr_in.
                assert_eq!(r(inet, false, p(&sin6), 16, call), Err(Errno::EAFNOSUPPORT));
                assert_eq!(r(inet, false, p(&sin6), 15, call), Err(Errno::EINVAL));
            }
            assert_eq!(
                r(inet, true, p(&sin), 16, Call::Connect),
                Ok(Some(v4.into()))
            );
        }
    }
}
