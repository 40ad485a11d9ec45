//! Data calls: read, write and their vector, socket and message forms,
//! recvmmsg/sendmmsg, the fortified `__*_chk` forms, and sendfile and
//! splice (copied through the stack: a file's bytes go straight into the
//! connection's send buffer).

use std::os::fd::RawFd;
use std::os::raw::{c_int, c_uint, c_void};
use std::time::Instant;

use api::Errno;
use libc::{iovec, mmsghdr, msghdr, off64_t, off_t, sockaddr, socklen_t, timespec};

use crate::guard::{self, Inside};
use crate::place::{self, inside};
use crate::sockets::by_fd;
use crate::{classify, real, ret, ret_size, Fd};

/// # Safety
/// As read(2).
#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: usize) -> isize {
    // SAFETY: the caller's arguments.
    by_fd!(
        fd,
        unsafe { real::read(fd, buf, n) },
        unsafe { capi::ustack_read(fd, buf, n) },
        -1
    )
}

/// # Safety
/// As write(2).
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: usize) -> isize {
    // SAFETY: the caller's arguments.
    by_fd!(
        fd,
        unsafe { real::write(fd, buf, n) },
        sent(unsafe { capi::ustack_write(fd, buf, n) }),
        -1
    )
}

/// # Safety
/// As readv(2).
#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, n: c_int) -> isize {
    // SAFETY: the caller's arguments.
    by_fd!(
        fd,
        unsafe { real::readv(fd, iov, n) },
        unsafe { capi::ustack_readv(fd, iov, n) },
        -1
    )
}

/// # Safety
/// As writev(2).
#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, n: c_int) -> isize {
    // SAFETY: the caller's arguments.
    by_fd!(
        fd,
        unsafe { real::writev(fd, iov, n) },
        sent(unsafe { capi::ustack_writev(fd, iov, n) }),
        -1
    )
}

/// # Safety
/// As recv(2).
#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, n: usize, flags: c_int) -> isize {
    by_fd!(
        fd,
        // SAFETY: the caller's arguments.
        unsafe { real::recv(fd, buf, n, flags) },
        // SAFETY: the caller's arguments.
        unsafe { capi::ustack_recv(fd, buf, n, flags) },
        -1
    )
}

/// # Safety
/// As send(2).
#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, n: usize, flags: c_int) -> isize {
    by_fd!(
        fd,
        // SAFETY: the caller's arguments.
        unsafe { real::send(fd, buf, n, flags) },
        // SAFETY: the caller's arguments.
        sent(unsafe { capi::ustack_send(fd, buf, n, flags) }),
        -1
    )
}

/// # Safety
/// As recvfrom(2).
#[no_mangle]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    n: usize,
    flags: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> isize {
    by_fd!(
        fd,
        // SAFETY: the caller's arguments.
        unsafe { real::recvfrom(fd, buf, n, flags, addr, len) },
        // SAFETY: the caller's arguments.
        unsafe { capi::ustack_recvfrom(fd, buf, n, flags, addr, len) },
        -1
    )
}

/// Places a pending socket by the destination of its first send.
///
/// # Safety
/// `addr` is null or `len` readable bytes.
unsafe fn place_for_send(fd: RawFd, addr: *const sockaddr, len: socklen_t) -> Result<(), Errno> {
    if classify(fd) != Fd::Pending {
        return Ok(());
    }
    let dst = if addr.is_null() {
        None
    } else {
        // SAFETY: the caller's address.
        unsafe { place::pending_addr(fd, addr, len, capi::addr::Call::Send) }?
    };
    inside(|| place::for_use(fd, dst))
}

/// # Safety
/// As sendto(2).
#[no_mangle]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    n: usize,
    flags: c_int,
    addr: *const sockaddr,
    len: socklen_t,
) -> isize {
    if !guard::inside() {
        // SAFETY: the caller's address.
        if let Err(e) = unsafe { place_for_send(fd, addr, len) } {
            return ret_size(Err(e));
        }
    }
    by_fd!(
        fd,
        // SAFETY: the caller's arguments.
        unsafe { real::sendto(fd, buf, n, flags, addr, len) },
        // SAFETY: the caller's arguments.
        sent(unsafe { capi::ustack_sendto(fd, buf, n, flags, addr, len) }),
        -1
    )
}

/// # Safety
/// As recvmsg(2).
#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> isize {
    by_fd!(
        fd,
        // SAFETY: the caller's arguments.
        unsafe { real::recvmsg(fd, msg, flags) },
        // SAFETY: the caller's arguments.
        unsafe { capi::ustack_recvmsg(fd, msg, flags) },
        -1
    )
}

/// # Safety
/// As sendmsg(2).
#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> isize {
    if !guard::inside() && !msg.is_null() {
        // SAFETY: `msg` points to a msghdr (the caller's promise).
        let (addr, len) = unsafe { ((*msg).msg_name as *const sockaddr, (*msg).msg_namelen) };
        // SAFETY: the caller's address.
        if let Err(e) = unsafe { place_for_send(fd, addr, len) } {
            return ret_size(Err(e));
        }
    }
    by_fd!(
        fd,
        // SAFETY: the caller's arguments.
        unsafe {
            crate::epoll::passing_fds(msg);
            real::sendmsg(fd, msg, flags)
        },
        // SAFETY: the caller's arguments.
        sent(unsafe { capi::ustack_sendmsg(fd, msg, flags) }),
        -1
    )
}

/// `r`, after what the call queued has been sent if the engine sends at
/// once: this thread may block elsewhere before its engine turns again.
pub(crate) fn sent<T>(r: T) -> T {
    if crate::process::sends_at_once() {
        api::flush_tx();
    }
    r
}

/// Linux's limit on the messages of one recvmmsg/sendmmsg (UIO_MAXIOV).
const MMSG_MAX: c_uint = 1024;

/// # Safety
/// As recvmmsg(2).
#[no_mangle]
pub unsafe extern "C" fn recvmmsg(
    fd: c_int,
    v: *mut mmsghdr,
    n: c_uint,
    flags: c_int,
    t: *mut timespec,
) -> c_int {
    by_fd!(
        fd,
        // SAFETY: the caller's arguments.
        unsafe { real::recvmmsg(fd, v, n, flags, t) },
        // SAFETY: the caller's arguments.
        unsafe { recvmmsg_ustack(fd, v, n, flags, t) },
        -1
    )
}

/// recvmmsg on a ustack socket: recvmsg for each message, as the kernel
/// does: after the first, MSG_WAITFORONE makes the rest non-blocking; an
/// error after at least one message ends the batch (the count is
/// returned); the timeout is looked at after each message.
///
/// # Safety
/// As recvmmsg(2).
unsafe fn recvmmsg_ustack(
    fd: c_int,
    v: *mut mmsghdr,
    n: c_uint,
    flags: c_int,
    t: *mut timespec,
) -> c_int {
    if n == 0 {
        return 0;
    }
    if v.is_null() {
        return ret(Err(Errno(libc::EFAULT)));
    }
    let n = n.min(MMSG_MAX);
    let deadline = if t.is_null() {
        None
    } else {
        // SAFETY: `t` points to a timespec (the caller's promise).
        let ts = unsafe { *t };
        if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
            return ret(Err(Errno::EINVAL));
        }
        Some(Instant::now() + std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
    };
    let mut flags_now = flags & !libc::MSG_WAITFORONE;
    let mut got = 0;
    while got < n {
        // SAFETY: `v` has `n` mmsghdrs (the caller's promise).
        let m = unsafe { &mut *v.add(got as usize) };
        // SAFETY: the message's buffers are the caller's.
        let r = unsafe { capi::ustack_recvmsg(fd, &mut m.msg_hdr, flags_now) };
        if r < 0 {
            if got == 0 {
                return -1;
            }
            break;
        }
        m.msg_len = r as c_uint;
        got += 1;
        if flags & libc::MSG_WAITFORONE != 0 {
            flags_now |= libc::MSG_DONTWAIT;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
    }
    got as c_int
}

/// # Safety
/// As sendmmsg(2).
#[no_mangle]
pub unsafe extern "C" fn sendmmsg(fd: c_int, v: *mut mmsghdr, n: c_uint, flags: c_int) -> c_int {
    if !guard::inside() && !v.is_null() && n > 0 {
        // SAFETY: `v` points to at least one mmsghdr (the caller's promise).
        let (addr, len) = unsafe {
            (
                (*v).msg_hdr.msg_name as *const sockaddr,
                (*v).msg_hdr.msg_namelen,
            )
        };
        // SAFETY: the caller's address.
        if let Err(e) = unsafe { place_for_send(fd, addr, len) } {
            return ret(Err(e));
        }
    }
    by_fd!(
        fd,
        // SAFETY: the caller's arguments.
        unsafe {
            if !v.is_null() {
                for i in 0..n as usize {
                    crate::epoll::passing_fds(&(*v.add(i)).msg_hdr);
                }
            }
            real::sendmmsg(fd, v, n, flags)
        },
        // SAFETY: the caller's arguments.
        sent(unsafe { sendmmsg_ustack(fd, v, n, flags) }),
        -1
    )
}

/// # Safety
/// As sendmmsg(2).
unsafe fn sendmmsg_ustack(fd: c_int, v: *mut mmsghdr, n: c_uint, flags: c_int) -> c_int {
    if n == 0 {
        return 0;
    }
    if v.is_null() {
        return ret(Err(Errno(libc::EFAULT)));
    }
    let n = n.min(MMSG_MAX);
    let mut sent = 0;
    while sent < n {
        // SAFETY: `v` has `n` mmsghdrs (the caller's promise).
        let m = unsafe { &mut *v.add(sent as usize) };
        // SAFETY: the message's buffers are the caller's.
        let r = unsafe { capi::ustack_sendmsg(fd, &m.msg_hdr, flags) };
        if r < 0 {
            if sent == 0 {
                return -1;
            }
            break;
        }
        m.msg_len = r as c_uint;
        sent += 1;
    }
    sent as c_int
}

/// # Safety
/// As glibc's `__read_chk`.
#[no_mangle]
pub unsafe extern "C" fn __read_chk(fd: c_int, buf: *mut c_void, n: usize, buflen: usize) -> isize {
    if n > buflen {
        fortify_fail();
    }
    // SAFETY: the caller's arguments.
    unsafe { read(fd, buf, n) }
}

/// # Safety
/// As glibc's `__recv_chk`.
#[no_mangle]
pub unsafe extern "C" fn __recv_chk(
    fd: c_int,
    buf: *mut c_void,
    n: usize,
    buflen: usize,
    flags: c_int,
) -> isize {
    if n > buflen {
        fortify_fail();
    }
    // SAFETY: the caller's arguments.
    unsafe { recv(fd, buf, n, flags) }
}

/// # Safety
/// As glibc's `__recvfrom_chk`.
#[no_mangle]
pub unsafe extern "C" fn __recvfrom_chk(
    fd: c_int,
    buf: *mut c_void,
    n: usize,
    buflen: usize,
    flags: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> isize {
    if n > buflen {
        fortify_fail();
    }
    // SAFETY: the caller's arguments.
    unsafe { recvfrom(fd, buf, n, flags, addr, len) }
}

/// What glibc does when a fortified call's buffer is too small.
pub(crate) fn fortify_fail() -> ! {
    let msg = b"*** buffer overflow detected ***: terminated\n";
    // SAFETY: writes a static buffer to stderr.
    unsafe { libc::syscall(libc::SYS_write, 2, msg.as_ptr(), msg.len()) };
    std::process::abort()
}

/// # Safety
/// As sendfile(2).
#[no_mangle]
pub unsafe extern "C" fn sendfile(out: c_int, inp: c_int, off: *mut off_t, n: usize) -> isize {
    if guard::inside() || classify(out) == Fd::Kernel && classify(inp) == Fd::Kernel {
        // SAFETY: the caller's arguments.
        return unsafe { real::sendfile(out, inp, off, n) };
    }
    // SAFETY: the caller's offset (off_t is 64 bits here, as off64_t).
    ret_size(sent(unsafe {
        copy_file_to_ustack(out, inp, off.cast::<off64_t>(), n)
    }))
}

/// # Safety
/// As sendfile64(2).
#[no_mangle]
pub unsafe extern "C" fn sendfile64(out: c_int, inp: c_int, off: *mut off64_t, n: usize) -> isize {
    if guard::inside() || classify(out) == Fd::Kernel && classify(inp) == Fd::Kernel {
        // SAFETY: the caller's arguments.
        return unsafe { real::sendfile64(out, inp, off, n) };
    }
    // SAFETY: the caller's offset.
    ret_size(sent(unsafe { copy_file_to_ustack(out, inp, off, n) }))
}

/// The most one sendfile or splice moves through a buffer of its own
/// (when the send buffer cannot be written in place).
const COPY_CHUNK: usize = 64 * 1024;

/// sendfile to a ustack socket: the file's bytes are read straight into
/// the connection's send buffer (`api::zc_send_reserve`) on the engine's
/// thread, through a buffer elsewhere; as much as the socket takes (all
/// of it on a blocking socket).  The file offset (or `*off`) moves past
/// what was sent.
///
/// # Safety
/// `off` is null or points to an off64_t.
unsafe fn copy_file_to_ustack(
    out: RawFd,
    inp: RawFd,
    off: *mut off64_t,
    n: usize,
) -> Result<isize, Errno> {
    match crate::sockets::placed(out)? {
        Fd::Ustack => {}
        // A ustack socket as the source: sendfile needs a file (as Linux).
        _ => return Err(Errno::EINVAL),
    }
    if classify(inp) != Fd::Kernel {
        return Err(Errno::EINVAL);
    }
    let _g = Inside::enter();
    let start = if off.is_null() {
        // SAFETY: no pointers.
        let cur = unsafe { libc::lseek64(inp, 0, libc::SEEK_CUR) };
        if cur < 0 {
            return Err(crate::last_errno());
        }
        cur
    } else {
        // SAFETY: `off` points to an off64_t (the caller's promise).
        let o = unsafe { *off };
        if o < 0 {
            return Err(Errno::EINVAL);
        }
        o
    };
    let r = copy_loop(out, n, false, |dst: &mut [u8], at: usize| {
        // SAFETY: `dst` is writable memory of its length.
        let r = unsafe {
            libc::pread64(
                inp,
                dst.as_mut_ptr().cast(),
                dst.len(),
                start + at as off64_t,
            )
        };
        if r < 0 {
            Err(crate::last_errno())
        } else {
            Ok(r as usize)
        }
    });
    let sent = match r {
        Ok(s) => s,
        Err((0, e)) => return Err(e),
        Err((s, _)) => s,
    };
    if off.is_null() {
        // SAFETY: no pointers.
        unsafe { libc::lseek64(inp, start + sent as off64_t, libc::SEEK_SET) };
    } else {
        // SAFETY: as above.
        unsafe { *off = start + sent as off64_t };
    }
    Ok(sent as isize)
}

/// Moves up to `n` bytes from `fill` (which reads into a buffer at the
/// stream position it is given and says how much it read; 0 is the end)
/// into ustack socket `out`.  Returns the bytes sent, or the error with
/// the bytes sent before it.  `source_may_block`: `fill` may wait (a
/// pipe), so the worker is not held while it runs.
fn copy_loop(
    out: RawFd,
    n: usize,
    source_may_block: bool,
    mut fill: impl FnMut(&mut [u8], usize) -> Result<usize, Errno> + Send,
) -> Result<usize, (usize, Errno)> {
    let mut sent = 0usize;
    let mut bounce: Vec<u8> = Vec::new();
    while sent < n {
        let want = n - sent;
        let step = if source_may_block {
            reserve_fill_commit(out, want.min(1 << 20), |dst| fill(dst, sent))
        } else {
            // A file read does not block: reserve, fill and commit in one
            // hold of the worker.
            api::zc_send_fill(out, want.min(1 << 20), |dst| fill(dst, sent))
        };
        match step {
            Ok(Ok(0)) => break,
            Ok(Ok(got)) => sent += got,
            Ok(Err(e)) => return Err((sent, e)),
            // Not the engine's thread, or UDP: through a buffer.
            Err(Errno::EOPNOTSUPP) => {
                bounce.resize(want.min(COPY_CHUNK), 0);
                let got = fill(&mut bounce, sent).map_err(|e| (sent, e))?;
                if got == 0 {
                    break;
                }
                let w = api::write(out, &bounce[..got]).map_err(|e| (sent, e))?;
                sent += w;
                if w < got {
                    break;
                }
            }
            Err(e) => return Err((sent, e)),
        }
    }
    Ok(sent)
}

/// As `api::zc_send_fill`, with the worker not held while `fill` runs (a
/// pipe's read may block, and another thread may then drive the engine).
fn reserve_fill_commit(
    out: RawFd,
    want: usize,
    fill: impl FnOnce(&mut [u8]) -> Result<usize, Errno>,
) -> Result<Result<usize, Errno>, Errno> {
    let region = api::zc_send_reserve(out, want)?;
    // SAFETY: the socket layer lends `len` writable bytes at `ptr` until
    // the commit, touched by nothing else meanwhile.
    let dst = unsafe { std::slice::from_raw_parts_mut(region.ptr.as_ptr(), region.len) };
    match fill(dst) {
        Ok(got) => api::zc_send_commit(out, got).map(Ok),
        Err(e) => {
            let _ = api::zc_send_commit(out, 0);
            Ok(Err(e))
        }
    }
}

/// # Safety
/// As splice(2).
#[no_mangle]
pub unsafe extern "C" fn splice(
    fin: c_int,
    oin: *mut off64_t,
    fout: c_int,
    oout: *mut off64_t,
    n: usize,
    flags: c_uint,
) -> isize {
    // SAFETY: the caller's arguments.
    let kernel = || unsafe { real::splice(fin, oin, fout, oout, n, flags) };
    if guard::inside() || classify(fin) == Fd::Kernel && classify(fout) == Fd::Kernel {
        return kernel();
    }
    match (classify(fin), classify(fout)) {
        // A file or pipe into a ustack socket.
        (Fd::Kernel, Fd::Ustack | Fd::Pending) => {
            if !oout.is_null() {
                return ret_size(Err(Errno(libc::ESPIPE)));
            }
            if !oin.is_null() {
                // SAFETY: the caller's offset.
                return ret_size(sent(unsafe { copy_file_to_ustack(fout, fin, oin, n) }));
            }
            if let Err(e) = crate::sockets::placed(fout) {
                return ret_size(Err(e));
            }
            let _g = Inside::enter();
            let r = copy_loop(fout, n, true, |dst: &mut [u8], _| {
                // SAFETY: `dst` is writable memory of its length.
                let r = unsafe { real::read(fin, dst.as_mut_ptr().cast(), dst.len()) };
                if r < 0 {
                    Err(crate::last_errno())
                } else {
                    Ok(r as usize)
                }
            });
            ret_size(sent(match r {
                Ok(s) => Ok(s as isize),
                Err((0, e)) => Err(e),
                Err((s, _)) => Ok(s as isize),
            }))
        }
        // A ustack socket into a pipe or file: what the socket holds, up to
        // `n`, written on (a short write keeps the rest for later reads of
        // the socket: only what the pipe takes is read).
        (Fd::Ustack | Fd::Pending, Fd::Kernel) => {
            if !oin.is_null() {
                return ret_size(Err(Errno(libc::ESPIPE)));
            }
            if let Err(e) = crate::sockets::placed(fin) {
                return ret_size(Err(e));
            }
            let _g = Inside::enter();
            let mut buf = vec![0u8; n.min(COPY_CHUNK)];
            let dontwait = if flags & libc::SPLICE_F_NONBLOCK != 0 {
                libc::MSG_DONTWAIT
            } else {
                0
            };
            let got = match api::recv(fin, &mut buf, libc::MSG_PEEK | dontwait) {
                Ok(g) => g,
                Err(e) => return ret_size(Err(e)),
            };
            if got == 0 {
                return 0;
            }
            // SAFETY: `buf` holds `got` bytes; `oout` is the caller's.
            let w = unsafe {
                if oout.is_null() {
                    real::write(fout, buf.as_ptr().cast(), got)
                } else {
                    let r = libc::pwrite64(fout, buf.as_ptr().cast(), got, *oout);
                    if r > 0 {
                        *oout += r as off64_t;
                    }
                    r
                }
            };
            if w <= 0 {
                return w;
            }
            // Consume exactly what was written.
            let mut sink = vec![0u8; w as usize];
            let _ = api::recv(fin, &mut sink, libc::MSG_DONTWAIT);
            w
        }
        _ => ret_size(Err(Errno::EINVAL)),
    }
}
