//! Zero-copy send from C: `ustack_zc_send_get` / `ustack_zc_send_commit`
//! (the application writes into the connection's send buffer in place),
//! and F-Stack's `ff_zc_mbuf_get` / `ff_zc_mbuf_write` with `ff_write`
//! taking the buffer they filled (`ff_zc_mbuf_read` copies back out what
//! was written).
//!
//! F-Stack's buffer is not tied to a socket when it is made (`ff_zc_mbuf_get`
//! has no fd), so here it is a buffer of ustack's that `ff_write` recognises
//! by its address, as F-Stack's `ff_write` recognises its mbuf chain: the
//! bytes `ff_zc_mbuf_write` copied in go from there to the connection.  The
//! in-place path with no copy at all is `ustack_zc_send_get`.

use std::collections::HashMap;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use api::Errno;

use crate::sockets::bytes;
use crate::{ret_size, set_errno, EFAULT};

/// Lends a writable region of TCP socket `fd`'s send buffer: `*buf` is
/// its first byte and the result its length (at most `want`), or -1 with
/// errno (see `api::zc_send_reserve`).
///
/// # Safety
/// `buf` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn ustack_zc_send_get(
    fd: c_int,
    want: usize,
    buf: *mut *mut c_void,
) -> isize {
    if buf.is_null() {
        return ret_size(Err(EFAULT));
    }
    let r = api::zc_send_reserve(fd, want).map(|b| {
        // SAFETY: non-null and writable (the caller's promise).
        unsafe { buf.write_unaligned(b.ptr.as_ptr().cast()) };
        b.len
    });
    ret_size(r)
}

/// Sends the first `n` bytes of the region `ustack_zc_send_get` lent.
#[no_mangle]
pub extern "C" fn ustack_zc_send_commit(fd: c_int, n: usize) -> isize {
    ret_size(api::zc_send_commit(fd, n))
}

/// F-Stack's `struct ff_zc_mbuf`: `bsd_mbuf` names the buffer (here its
/// first byte), `off` the bytes written, `len` its size.
#[repr(C)]
pub struct FfZcMbuf {
    pub bsd_mbuf: *mut c_void,
    pub bsd_mbuf_off: *mut c_void,
    pub off: c_int,
    pub len: c_int,
}

/// A buffer of `ff_zc_mbuf_get`, until `ff_write` has sent all of it.
struct Staged {
    data: Box<[u8]>,
    /// Bytes `ff_zc_mbuf_write` filled.
    written: usize,
    /// Bytes `ff_write` has sent.
    sent: usize,
    /// Bytes `ff_zc_mbuf_read` has copied out.
    read: usize,
}

/// The buffers `ff_zc_mbuf_get` handed out, by address; `STAGED_COUNT`
/// lets `ff_write` skip the lock when there are none.
static STAGED: Mutex<Option<HashMap<usize, Staged>>> = Mutex::new(None);
static STAGED_COUNT: AtomicUsize = AtomicUsize::new(0);

fn staged<R>(f: impl FnOnce(&mut HashMap<usize, Staged>) -> R) -> R {
    let mut g = STAGED.lock().unwrap_or_else(|p| p.into_inner());
    let r = f(g.get_or_insert_with(HashMap::new));
    STAGED_COUNT.store(g.as_ref().map_or(0, HashMap::len), Ordering::Release);
    r
}

/// The largest buffer `ff_zc_mbuf_get` hands out (F-Stack's comes from
/// its mbuf pool, which runs dry long before a caller's INT_MAX).
pub const MAX_ZC_MBUF_LEN: usize = 64 << 20;

/// `ff_zc_mbuf_get(m, len)`: a buffer of `len` bytes for
/// `ff_zc_mbuf_write`, then `ff_write(fd, m->bsd_mbuf, n)`.  0, or -1
/// with errno EFAULT (`m` null), EINVAL (`len` not positive) or ENOBUFS
/// (`len` above [`MAX_ZC_MBUF_LEN`], 64 MiB).
///
/// # Safety
/// `m` is null or a writable `struct ff_zc_mbuf`.
#[no_mangle]
pub unsafe extern "C" fn ff_zc_mbuf_get(m: *mut FfZcMbuf, len: c_int) -> c_int {
    if m.is_null() {
        set_errno(EFAULT);
        return -1;
    }
    let Ok(size) = usize::try_from(len) else {
        set_errno(Errno::EINVAL);
        return -1;
    };
    if size == 0 {
        set_errno(Errno::EINVAL);
        return -1;
    }
    // The caller's count sizes the buffer: bounded, so a huge count is an
    // error, not an allocation that aborts the process.
    if size > MAX_ZC_MBUF_LEN {
        set_errno(Errno(libc::ENOBUFS));
        return -1;
    }
    let mut data = vec![0u8; size].into_boxed_slice();
    let at = data.as_mut_ptr();
    staged(|s| {
        s.insert(
            at as usize,
            Staged {
                data,
                written: 0,
                sent: 0,
                read: 0,
            },
        )
    });
    let zm = FfZcMbuf {
        bsd_mbuf: at.cast(),
        bsd_mbuf_off: at.cast(),
        off: 0,
        len,
    };
    // SAFETY: non-null and writable (the caller's promise).
    unsafe { m.write_unaligned(zm) };
    0
}

/// `ff_zc_mbuf_write(m, data, len)`: copies `data` after what was written
/// before.  Returns `len`, or -1 with errno EFAULT (null pointers) or
/// EINVAL (not a buffer of `ff_zc_mbuf_get`, a negative `len`, or more
/// than its size).
///
/// # Safety
/// `m` is null or a `struct ff_zc_mbuf` filled by `ff_zc_mbuf_get`;
/// `data` is null or has `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn ff_zc_mbuf_write(
    m: *mut FfZcMbuf,
    data: *const c_char,
    len: c_int,
) -> c_int {
    if m.is_null() {
        set_errno(EFAULT);
        return -1;
    }
    // SAFETY: non-null, a readable ff_zc_mbuf (the caller's promise).
    let mut zm = unsafe { m.read_unaligned() };
    let (Ok(n), Ok(off), Ok(size)) = (
        usize::try_from(len),
        usize::try_from(zm.off),
        usize::try_from(zm.len),
    ) else {
        set_errno(Errno::EINVAL);
        return -1;
    };
    // SAFETY: `len` readable bytes at `data` (the caller's promise).
    let src = match unsafe { bytes(data.cast(), n) } {
        Ok(b) => b,
        Err(e) => {
            set_errno(e);
            return -1;
        }
    };
    let copied = staged(|s| {
        let b = s.get_mut(&(zm.bsd_mbuf as usize))?;
        if off + n > size.min(b.data.len()) {
            return None;
        }
        b.data[off..off + n].copy_from_slice(src);
        b.written = off + n;
        Some(b.data[off + n..].as_mut_ptr())
    });
    let Some(next) = copied else {
        set_errno(Errno::EINVAL);
        return -1;
    };
    zm.off += len;
    zm.bsd_mbuf_off = next.cast();
    // SAFETY: as read above.
    unsafe { m.write_unaligned(zm) };
    len
}

/// `ff_zc_mbuf_read(m, data, len)`: copies into `data` the next `len`
/// bytes at most of what `ff_zc_mbuf_write` put into buffer `m`, after
/// what earlier reads took.  Returns the count (0: all was read), or -1
/// with errno EFAULT (`m` null, `data` null with `len` positive) or
/// EINVAL (`len` negative; not a buffer of `ff_zc_mbuf_get`, or one that
/// `ff_write` sent whole and freed).  `data` is `const` in F-Stack's
/// declaration and written through all the same.
///
/// # Safety
/// `m` is null or a readable `struct ff_zc_mbuf`; `data` is null or has
/// `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn ff_zc_mbuf_read(
    m: *mut FfZcMbuf,
    data: *const c_char,
    len: c_int,
) -> c_int {
    if m.is_null() {
        set_errno(EFAULT);
        return -1;
    }
    let Ok(n) = usize::try_from(len) else {
        set_errno(Errno::EINVAL);
        return -1;
    };
    // SAFETY: `len` writable bytes at `data` (the caller's promise; F-Stack
    // declares the pointer const but the call writes there).
    let out = match unsafe { crate::sockets::bytes_mut(data.cast_mut().cast(), n) } {
        Ok(b) => b,
        Err(e) => {
            set_errno(e);
            return -1;
        }
    };
    // SAFETY: non-null, a readable ff_zc_mbuf (the caller's promise).
    let zm = unsafe { m.read_unaligned() };
    let copied = staged(|s| {
        let b = s.get_mut(&(zm.bsd_mbuf as usize))?;
        let k = n.min(b.written - b.read);
        out[..k].copy_from_slice(&b.data[b.read..b.read + k]);
        b.read += k;
        Some(k)
    });
    match copied {
        // At most `len` bytes, which is an int.
        Some(k) => k as c_int,
        None => {
            set_errno(Errno::EINVAL);
            -1
        }
    }
}

/// `ff_write`'s side: when `buf` is a buffer of `ff_zc_mbuf_get`, sends
/// `n` of its bytes from where the last such write stopped (so a partial
/// write is finished by `ff_write(fd, m->bsd_mbuf, rest)`), and frees it
/// once everything written into it is sent.  `None` when `buf` is not
/// one: a plain buffer.
pub(crate) fn ff_write_staged(fd: c_int, buf: *const c_void, n: usize) -> Option<isize> {
    if STAGED_COUNT.load(Ordering::Acquire) == 0 {
        return None;
    }
    // Taken out while it is sent, so a blocking send holds no lock.
    let mut b = staged(|s| s.remove(&(buf as usize)))?;
    let r = if n > b.written - b.sent {
        Err(Errno::EINVAL)
    } else {
        api::write(fd, &b.data[b.sent..b.sent + n])
    };
    if let Ok(k) = r {
        b.sent += k;
    }
    if b.sent < b.written || b.written == 0 {
        staged(|s| s.insert(buf as usize, b));
    }
    Some(ret_size(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_zero_copy_buffer_is_refused_not_allocated() {
        let mut m = FfZcMbuf {
            bsd_mbuf: std::ptr::null_mut(),
            bsd_mbuf_off: std::ptr::null_mut(),
            off: 0,
            len: 0,
        };
        // SAFETY: `m` is a writable ff_zc_mbuf.
        let r = unsafe { ff_zc_mbuf_get(&mut m, c_int::MAX) };
        assert_eq!(r, -1);
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::ENOBUFS)
        );
        assert!(m.bsd_mbuf.is_null());
        // The largest allowed size is handed out.
        // SAFETY: as above.
        let r = unsafe { ff_zc_mbuf_get(&mut m, MAX_ZC_MBUF_LEN as c_int) };
        assert_eq!(r, 0);
        assert!(!m.bsd_mbuf.is_null());
    }
}
