//! The socket calls: `ustack_socket` ... `ustack_fcntl`, each the POSIX
//! call of the same name over the socket layer.

use std::borrow::Cow;
use std::io::{IoSlice, IoSliceMut};
use std::os::raw::{c_int, c_ulong, c_void};

use api::{Errno, Result};
use libc::{iovec, sockaddr, socklen_t};

use crate::addr::{self, Call};
use crate::{ret_int, ret_size, ret_unit, EFAULT};

/// Linux's limit on the number of iovecs of one call (UIO_MAXIOV).
const IOV_MAX: c_int = 1024;

/// A caller's buffer as a slice (empty when `len` is 0, whatever `buf`).
///
/// # Safety
/// `buf` is null or points to `len` readable bytes that stay valid and
/// unaliased by writers for `'a`.
pub(crate) unsafe fn bytes<'a>(buf: *const c_void, len: usize) -> Result<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if buf.is_null() {
        return Err(EFAULT);
    }
    // SAFETY: non-null, `len` readable bytes (our caller's promise).
    Ok(unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) })
}

/// A caller's buffer as a writable slice.
///
/// # Safety
/// `buf` is null or points to `len` writable bytes that nothing else uses
/// for `'a`.
pub(crate) unsafe fn bytes_mut<'a>(buf: *mut c_void, len: usize) -> Result<&'a mut [u8]> {
    if len == 0 {
        return Ok(&mut []);
    }
    if buf.is_null() {
        return Err(EFAULT);
    }
    // SAFETY: non-null, `len` writable bytes used by nobody else.
    Ok(unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len) })
}

/// The iovecs of readv/writev/sendmsg/recvmsg, checked as Linux does.
///
/// # Safety
/// `iov` is null or points to `count` iovecs, each of which describes
/// memory valid as in [`bytes`] (or [`bytes_mut`] for `_mut`).
pub(crate) unsafe fn iovecs<'a>(iov: *const iovec, count: c_int) -> Result<Cow<'a, [IoSlice<'a>]>> {
    // SAFETY: passed on.
    let raw = unsafe { iov_array(iov, count)? };
    if raw.iter().all(|v| !v.iov_base.is_null()) {
        // The common case, without a copy (a writev per response): the
        // caller's array itself.  SAFETY: `IoSlice` is ABI-compatible with
        // `iovec` on Unix (std's promise), every base is non-null and
        // describes `iov_len` readable bytes for `'a` (our caller's).
        return Ok(Cow::Borrowed(unsafe {
            std::slice::from_raw_parts(raw.as_ptr().cast::<IoSlice<'a>>(), raw.len())
        }));
    }
    // A null base: EFAULT unless its length is 0 (then an empty slice).
    raw.iter()
        // SAFETY: each iovec describes readable memory (our caller's promise).
        .map(|v| unsafe { bytes(v.iov_base, v.iov_len) }.map(IoSlice::new))
        .collect()
}

/// As [`iovecs`], writable.
///
/// # Safety
/// As [`iovecs`], the memory writable and not used by anything else.
pub(crate) unsafe fn iovecs_mut<'a>(
    iov: *const iovec,
    count: c_int,
) -> Result<Vec<IoSliceMut<'a>>> {
    // SAFETY: passed on.
    let raw = unsafe { iov_array(iov, count)? };
    raw.iter()
        // SAFETY: each iovec describes writable memory (our caller's promise).
        .map(|v| unsafe { bytes_mut(v.iov_base, v.iov_len) }.map(IoSliceMut::new))
        .collect()
}

/// # Safety
/// `iov` is null or points to `count` iovecs.
unsafe fn iov_array<'a>(iov: *const iovec, count: c_int) -> Result<&'a [iovec]> {
    if !(0..=IOV_MAX).contains(&count) {
        return Err(Errno::EINVAL);
    }
    if count == 0 {
        return Ok(&[]);
    }
    if iov.is_null() {
        return Err(EFAULT);
    }
    // SAFETY: `count` iovecs are readable (our caller's promise).
    let v = unsafe { std::slice::from_raw_parts(iov, count as usize) };
    // Linux: the total must fit in an ssize_t.
    let mut total: usize = 0;
    for x in v {
        total = total.checked_add(x.iov_len).ok_or(Errno::EINVAL)?;
    }
    if total > isize::MAX as usize {
        return Err(Errno::EINVAL);
    }
    Ok(v)
}

#[no_mangle]
pub extern "C" fn ustack_socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    ret_int(api::socket(domain, ty, protocol))
}

/// # Safety
/// `addr` is null or points to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn ustack_bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    // SAFETY: passed on from the caller.
    let r = unsafe {
        addr::with(fd, addr, len, Call::Bind, |a| match a {
            Some(a) => api::bind(fd, &a),
            None => Err(Errno::EAFNOSUPPORT),
        })
    };
    ret_unit(r)
}

#[no_mangle]
pub extern "C" fn ustack_listen(fd: c_int, backlog: c_int) -> c_int {
    ret_unit(api::listen(fd, backlog))
}

/// # Safety
/// `addr` is null or points to `*len` writable bytes; `len` is null only
/// when `addr` is, else points to a readable and writable socklen_t.
#[no_mangle]
pub unsafe extern "C" fn ustack_accept(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> c_int {
    // SAFETY: passed on from the caller.
    unsafe { ustack_accept4(fd, addr, len, 0) }
}

/// # Safety
/// As [`ustack_accept`].
#[no_mangle]
pub unsafe extern "C" fn ustack_accept4(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    // SAFETY: passed on from the caller.
    let r = unsafe { addr::check_out(addr, len) }
        .and_then(|()| api::accept4(fd, flags))
        .map(|(nfd, peer)| {
            // SAFETY: checked above; the caller's promise for the rest.
            unsafe { addr::write(&peer, addr, len) };
            nfd
        });
    ret_int(r)
}

/// # Safety
/// `addr` is null or points to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn ustack_connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    // SAFETY: passed on from the caller.
    let r = unsafe {
        addr::with(fd, addr, len, Call::Connect, |a| match a {
            Some(a) => api::connect(fd, &a),
            None => api::disconnect(fd),
        })
    };
    ret_unit(r)
}

/// # Safety
/// `buf` is null or points to `n` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn ustack_read(fd: c_int, buf: *mut c_void, n: usize) -> isize {
    // SAFETY: passed on from the caller.
    unsafe { ustack_recv(fd, buf, n, 0) }
}

/// # Safety
/// `buf` is null or points to `n` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn ustack_write(fd: c_int, buf: *const c_void, n: usize) -> isize {
    // SAFETY: passed on from the caller.
    unsafe { ustack_send(fd, buf, n, 0) }
}

/// # Safety
/// `iov` is null or points to `count` iovecs of writable memory.
#[no_mangle]
pub unsafe extern "C" fn ustack_readv(fd: c_int, iov: *const iovec, count: c_int) -> isize {
    // SAFETY: passed on from the caller.
    let r = unsafe { iovecs_mut(iov, count) }.and_then(|mut v| api::readv(fd, &mut v));
    ret_size(r)
}

/// # Safety
/// `iov` is null or points to `count` iovecs of readable memory.
#[no_mangle]
pub unsafe extern "C" fn ustack_writev(fd: c_int, iov: *const iovec, count: c_int) -> isize {
    // SAFETY: passed on from the caller.
    let r = unsafe { iovecs(iov, count) }.and_then(|v| api::writev(fd, &v));
    ret_size(r)
}

/// # Safety
/// `buf` is null or points to `n` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn ustack_recv(fd: c_int, buf: *mut c_void, n: usize, flags: c_int) -> isize {
    // SAFETY: passed on from the caller.
    let r = unsafe { bytes_mut(buf, n) }.and_then(|b| api::recv(fd, b, flags));
    ret_size(r)
}

/// # Safety
/// `buf` is null or points to `n` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn ustack_send(
    fd: c_int,
    buf: *const c_void,
    n: usize,
    flags: c_int,
) -> isize {
    // SAFETY: passed on from the caller.
    let r = unsafe { bytes(buf, n) }.and_then(|b| api::send(fd, b, flags));
    ret_size(r)
}

/// # Safety
/// `buf` is null or points to `n` readable bytes; `to` is null or points
/// to `tolen` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn ustack_sendto(
    fd: c_int,
    buf: *const c_void,
    n: usize,
    flags: c_int,
    to: *const sockaddr,
    tolen: socklen_t,
) -> isize {
    let r = (|| {
        // SAFETY: passed on from the caller.
        let b = unsafe { bytes(buf, n)? };
        if to.is_null() {
            return api::sendto(fd, b, flags, None);
        }
        // SAFETY: passed on from the caller.
        unsafe {
            addr::with(fd, to, tolen, Call::Send, |dest| {
                api::sendto(fd, b, flags, dest.as_ref())
            })
        }
    })();
    ret_size(r)
}

/// # Safety
/// `buf` is null or points to `n` writable bytes; `from` and `fromlen` as
/// for [`ustack_accept`].
#[no_mangle]
pub unsafe extern "C" fn ustack_recvfrom(
    fd: c_int,
    buf: *mut c_void,
    n: usize,
    flags: c_int,
    from: *mut sockaddr,
    fromlen: *mut socklen_t,
) -> isize {
    let r = (|| {
        // SAFETY: passed on from the caller.
        let b = unsafe { bytes_mut(buf, n)? };
        // SAFETY: passed on from the caller.
        unsafe { addr::check_out(from, fromlen)? };
        let (len, src) = api::recvfrom(fd, b, flags)?;
        match src {
            // SAFETY: checked above; the caller's promise for the rest.
            Some(src) => unsafe { addr::write(&src, from, fromlen) },
            // A stream socket: Linux leaves the address alone and says
            // its length is 0.
            None if !from.is_null() => {
                // SAFETY: `fromlen` is writable when `from` is non-null
                // (checked above).
                unsafe { fromlen.write_unaligned(0) }
            }
            None => {}
        }
        Ok(len)
    })();
    ret_size(r)
}

#[no_mangle]
pub extern "C" fn ustack_shutdown(fd: c_int, how: c_int) -> c_int {
    ret_unit(api::shutdown(fd, how))
}

#[no_mangle]
pub extern "C" fn ustack_close(fd: c_int) -> c_int {
    ret_unit(api::close(fd))
}

/// # Safety
/// As [`ustack_accept`].
#[no_mangle]
pub unsafe extern "C" fn ustack_getsockname(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> c_int {
    // SAFETY: passed on from the caller.
    unsafe { name_call(addr, len, || api::getsockname(fd)) }
}

/// # Safety
/// As [`ustack_accept`].
#[no_mangle]
pub unsafe extern "C" fn ustack_getpeername(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> c_int {
    // SAFETY: passed on from the caller.
    unsafe { name_call(addr, len, || api::getpeername(fd)) }
}

/// # Safety
/// As [`ustack_accept`].
unsafe fn name_call(
    addr: *mut sockaddr,
    len: *mut socklen_t,
    f: impl FnOnce() -> Result<std::net::SocketAddr>,
) -> c_int {
    // getsockname/getpeername need somewhere to write.
    let r = if addr.is_null() || len.is_null() {
        Err(EFAULT)
    } else {
        // SAFETY: passed on from the caller.
        unsafe { addr::check_out(addr, len) }
            .and_then(|()| f())
            .map(|a| {
                // SAFETY: checked above; the caller's promise for the rest.
                unsafe { addr::write(&a, addr, len) }
            })
    };
    ret_unit(r)
}

/// # Safety
/// `val` is null or points to `*len` writable bytes; `len` points to a
/// readable and writable socklen_t.
#[no_mangle]
pub unsafe extern "C" fn ustack_getsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    let r = (|| {
        if len.is_null() {
            return Err(EFAULT);
        }
        // SAFETY: `len` is readable (the caller's promise).
        let room = unsafe { len.read_unaligned() } as i32;
        if room < 0 {
            return Err(Errno::EINVAL);
        }
        // SAFETY: `val` has `room` writable bytes (the caller's promise).
        let buf = unsafe { bytes_mut(val, room as usize)? };
        let n = api::getsockopt(fd, level, name, buf)?;
        // SAFETY: `len` is writable (the caller's promise).
        unsafe { len.write_unaligned(n as socklen_t) };
        Ok(())
    })();
    ret_unit(r)
}

/// # Safety
/// `val` is null or points to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn ustack_setsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *const c_void,
    len: socklen_t,
) -> c_int {
    let r = (|| {
        if (len as i32) < 0 {
            return Err(Errno::EINVAL);
        }
        // SAFETY: `val` has `len` readable bytes (the caller's promise).
        let v = unsafe { bytes(val, len as usize)? };
        api::setsockopt(fd, level, name, v)
    })();
    ret_unit(r)
}

/// ioctl: FIONBIO reads an int at `argp`, FIONREAD and SIOCATMARK (1 when
/// the read position is at the urgent mark) write one there.
///
/// # Safety
/// For FIONBIO, FIONREAD and SIOCATMARK, `argp` is null or points to a
/// readable and writable int; for other requests it is not used.
#[no_mangle]
pub unsafe extern "C" fn ustack_ioctl(fd: c_int, request: c_ulong, argp: *mut c_void) -> c_int {
    let r = (|| {
        // c_ulong is u64 on 64-bit Linux, u32 elsewhere.
        #[allow(clippy::useless_conversion)]
        let request: u64 = request.into();
        let writes_arg = request == libc::FIONREAD || request == api::consts::SIOCATMARK;
        let uses_arg = request == libc::FIONBIO || writes_arg;
        let mut v: i32 = 0;
        if uses_arg {
            if argp.is_null() {
                return Err(EFAULT);
            }
            if request == libc::FIONBIO {
                // SAFETY: a readable int (the caller's promise).
                v = unsafe { argp.cast::<c_int>().read_unaligned() };
            }
        }
        api::ioctl(fd, request, &mut v)?;
        if writes_arg {
            // SAFETY: a writable int (the caller's promise), non-null.
            unsafe { argp.cast::<c_int>().write_unaligned(v) };
        }
        Ok(())
    })();
    ret_unit(r)
}

/// fcntl: F_GETFL, F_SETFL (O_NONBLOCK), F_GETFD, F_SETFD (FD_CLOEXEC),
/// F_SETOWN, F_GETOWN (who gets SIGURG when urgent data comes).
#[no_mangle]
pub extern "C" fn ustack_fcntl(fd: c_int, cmd: c_int, arg: c_int) -> c_int {
    ret_int(api::fcntl(fd, cmd, arg))
}

/// Whether `fd` is a ustack fd (socket, epoll or kqueue): 1 or 0.
#[no_mangle]
pub extern "C" fn ustack_is_fd(fd: c_int) -> c_int {
    c_int::from(api::is_ustack_fd(fd))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iov(base: *const u8, len: usize) -> iovec {
        iovec {
            iov_base: base as *mut c_void,
            iov_len: len,
        }
    }

    #[test]
    fn iovecs_borrow_the_callers_array_and_check_as_linux() {
        let (a, b) = (*b"head", *b"body!");
        let v = [iov(a.as_ptr(), 4), iov(b.as_ptr(), 5), iov(b.as_ptr(), 0)];
        // SAFETY: three iovecs over live arrays.
        let got = unsafe { iovecs(v.as_ptr(), 3) }.unwrap();
        assert!(matches!(got, Cow::Borrowed(_)), "no copy of the array");
        let joined: Vec<u8> = got.iter().flat_map(|s| s.iter().copied()).collect();
        assert_eq!(joined, b"headbody!");
        // A null base of length 0 is an empty buffer (copied form).
        let v = [iov(a.as_ptr(), 4), iov(std::ptr::null(), 0)];
        // SAFETY: as above; the null one has no bytes.
        let got = unsafe { iovecs(v.as_ptr(), 2) }.unwrap();
        assert_eq!(got.iter().map(|s| s.len()).collect::<Vec<_>>(), [4, 0]);
        // A null base with bytes: EFAULT; a bad count: EINVAL.
        let v = [iov(std::ptr::null(), 1)];
        // SAFETY: one iovec; its null base is refused before any read.
        assert_eq!(unsafe { iovecs(v.as_ptr(), 1) }.err(), Some(EFAULT));
        // SAFETY: the count is refused before the array is read.
        assert_eq!(
            unsafe { iovecs(v.as_ptr(), IOV_MAX + 1) }.err(),
            Some(Errno::EINVAL)
        );
    }
}
