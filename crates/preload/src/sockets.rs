//! The socket calls: socket, bind, listen, accept, connect, shutdown,
//! close, names, options, fcntl, ioctl and dup.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::RawFd;
use std::os::raw::{c_int, c_ulong, c_void};

use api::Errno;
use capi::addr::Call;
use libc::{sockaddr, socklen_t};

use crate::guard::{self, Inside};
use crate::place::{self, inside};
use crate::table::{self, Pending, SetOpt};
use crate::{classify, notes, process, real, ret, set_errno, Fd};

/// For a call that needs a placed socket: a pending one is placed on
/// ustack first.
pub(crate) fn placed(fd: RawFd) -> Result<Fd, Errno> {
    match classify(fd) {
        Fd::Pending => {
            inside(|| place::on_ustack(fd))?;
            Ok(classify(fd))
        }
        k => Ok(k),
    }
}

/// Runs `$kernel` for a kernel fd, `$ustack` (inside the guard) for a
/// ustack one (a pending one placed on ustack first); on a failed placing,
/// errno and `$err`.  The guard's one thread-local lookup serves the whole
/// call; the kernel's calls run outside it (a signal handler may
/// interrupt them and use ustack sockets).
macro_rules! by_fd {
    ($fd:expr, $kernel:expr, $ustack:expr, $err:expr) => {{
        let Some(g) = crate::guard::Inside::outside() else {
            return $kernel;
        };
        match crate::sockets::placed($fd) {
            Ok(crate::Fd::Ustack) => {
                let r = $ustack;
                drop(g);
                r
            }
            Ok(_) => {
                drop(g);
                $kernel
            }
            Err(e) => {
                drop(g);
                crate::set_errno(e);
                $err
            }
        }
    }};
}
pub(crate) use by_fd;

/// # Safety
/// As socket(2).
#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    // SAFETY: no pointers.
    let kernel = || unsafe { real::socket(domain, ty, protocol) };
    let name = match domain {
        libc::AF_INET => "AF_INET",
        libc::AF_INET6 => "AF_INET6",
        _ => return kernel(),
    };
    let Some(g) = Inside::outside() else {
        return kernel();
    };
    let base = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    let Some(settings) = process::settings() else {
        drop(g);
        return kernel();
    };
    if domain == libc::AF_INET6
        && !settings.has_ipv6()
        && (base == libc::SOCK_STREAM || base == libc::SOCK_DGRAM)
    {
        notes::once(
            "AF_INET6 sockets stay with the kernel (no port of the configuration has an \
             IPv6 address: addr6)",
        );
        drop(g);
        return kernel();
    }
    let proto_ok = match protocol {
        0 => base == libc::SOCK_STREAM || base == libc::SOCK_DGRAM,
        libc::IPPROTO_TCP => base == libc::SOCK_STREAM,
        libc::IPPROTO_UDP => base == libc::SOCK_DGRAM,
        _ => false,
    };
    if !proto_ok {
        notes::once(format!(
            "{name} {} {} sockets stay with the kernel",
            notes::socket_type_name(base),
            notes::protocol_name(protocol)
        ));
        drop(g);
        return kernel();
    }
    let r = api::reserve_fd(ty & libc::SOCK_CLOEXEC != 0).inspect(|&fd| {
        table::lock().add_pending(
            fd,
            Pending {
                domain,
                ty: base,
                protocol,
                nonblock: ty & libc::SOCK_NONBLOCK != 0,
                opts: Vec::new(),
                bound: None,
                backlog: None,
                errored_file: false,
                connection: false,
            },
        );
    });
    drop(g);
    ret(r)
}

/// # Safety
/// As bind(2).
#[no_mangle]
pub unsafe extern "C" fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    // SAFETY: the caller's arguments, passed on.
    let kernel = || unsafe { real::bind(fd, addr, len) };
    if guard::inside() {
        return kernel();
    }
    match classify(fd) {
        Fd::Ustack => inside(|| unsafe { capi::ustack_bind(fd, addr, len) }),
        Fd::Pending => {
            // SAFETY: the caller's address and length.
            let a = match unsafe { place::pending_addr(fd, addr, len, Call::Bind) } {
                Ok(Some(a)) => a,
                // The rules give no address to bind only for connect and
                // an AF_INET6 socket's send.
                Ok(None) => return ret(Err(Errno::EAFNOSUPPORT)),
                Err(e) => return ret(Err(e)),
            };
            let settings = process::settings();
            if !settings.is_some_and(|s| s.binds_here(a.ip())) {
                return match inside(|| place::on_kernel(fd)) {
                    Ok(()) => kernel(),
                    Err(e) => ret(Err(e)),
                };
            }
            ret(inside(|| bind_pending(fd, a)))
        }
        Fd::Epoll | Fd::Kernel => kernel(),
    }
}

/// bind on a pending ustack socket: placed at once when the process has
/// its engine or the port is to be chosen (the caller may ask which);
/// else recorded, with the conflicts Linux would see among the recorded.
fn bind_pending(fd: RawFd, a: SocketAddr) -> Result<c_int, Errno> {
    {
        let mut t = table::lock();
        let tab = t.get();
        let me = tab.pending.get(&fd).ok_or(Errno::EBADF)?;
        if me.bound.is_some() {
            return Err(Errno::EINVAL);
        }
        if a.port() != 0 && !process::engine_up() {
            let reuseport =
                |p: &Pending| p.int_opt(libc::SOL_SOCKET, libc::SO_REUSEPORT).unwrap_or(0) != 0;
            let mine = reuseport(me);
            let ty = me.ty;
            let me_v6only = v6only(me);
            let clash = tab.pending.iter().any(|(&other, p)| {
                other != fd
                    && p.ty == ty
                    && p.bound.is_some_and(|b| {
                        b.port() == a.port() && overlap((a, me_v6only), (b, v6only(p)))
                    })
                    && !(mine && reuseport(p))
            });
            if clash {
                return Err(Errno::EADDRINUSE);
            }
            if let Some(me) = tab.pending.get_mut(&fd) {
                me.bound = Some(a);
            }
            return Ok(0);
        }
        if let Some(me) = tab.pending.get_mut(&fd) {
            me.bound = Some(a);
        }
    }
    place::on_ustack(fd).map(|()| 0)
}

/// Whether a pending socket is AF_INET6 with IPV6_V6ONLY set (the
/// kernel's default, net.ipv6.bindv6only, is off).
fn v6only(p: &Pending) -> bool {
    p.domain == libc::AF_INET6
        && p.int_opt(libc::IPPROTO_IPV6, libc::IPV6_V6ONLY)
            .unwrap_or(0)
            != 0
}

/// The IPv4 addresses a socket bound to `a` takes (with IPV6_V6ONLY when
/// `v6only`): `Some(None)` for every one.
fn v4_side(a: SocketAddr, v6only: bool) -> Option<Option<Ipv4Addr>> {
    match a {
        SocketAddr::V4(a) => Some((!a.ip().is_unspecified()).then_some(*a.ip())),
        SocketAddr::V6(a) => match a.ip().to_ipv4_mapped() {
            Some(v4) => Some((!v4.is_unspecified()).then_some(v4)),
            None if a.ip().is_unspecified() && !v6only => Some(None),
            None => None,
        },
    }
}

/// Whether two sockets bound to one port, each (address, IPV6_V6ONLY),
/// would take the same packets, as Linux decides a bind conflict: IPv4
/// addresses (an AF_INET6 [::] without IPV6_V6ONLY takes them all) or
/// IPv6 ones.
fn overlap((a, a6only): (SocketAddr, bool), (b, b6only): (SocketAddr, bool)) -> bool {
    // `None`: every address of the family.
    fn same<T: PartialEq>(x: Option<T>, y: Option<T>) -> bool {
        x.is_none() || y.is_none() || x == y
    }
    let v6_side = |s: SocketAddr| match s {
        SocketAddr::V6(s) if s.ip().to_ipv4_mapped().is_none() => {
            Some((!s.ip().is_unspecified()).then_some(*s.ip()))
        }
        _ => None,
    };
    let v4 = matches!((v4_side(a, a6only), v4_side(b, b6only)), (Some(x), Some(y)) if same(x, y));
    let v6 = matches!((v6_side(a), v6_side(b)), (Some(x), Some(y)) if same(x, y));
    v4 || v6
}

/// # Safety
/// As listen(2).
#[no_mangle]
pub unsafe extern "C" fn listen(fd: c_int, backlog: c_int) -> c_int {
    // SAFETY: no pointers.
    let kernel = || unsafe { real::listen(fd, backlog) };
    if guard::inside() {
        return kernel();
    }
    match classify(fd) {
        Fd::Ustack => inside(|| capi::ustack_listen(fd, backlog)),
        Fd::Pending => ret(inside(|| {
            let defer = {
                let mut t = table::lock();
                let p = t.get().pending.get_mut(&fd).ok_or(Errno::EBADF)?;
                if p.ty != libc::SOCK_STREAM {
                    return Err(Errno::EOPNOTSUPP);
                }
                p.backlog = Some(backlog);
                p.bound.is_some() && !process::engine_up()
            };
            if defer {
                return Ok(0);
            }
            place::on_ustack(fd).map(|()| 0)
        })),
        Fd::Epoll | Fd::Kernel => kernel(),
    }
}

/// # Safety
/// As accept(2).
#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: the caller's arguments.
    by_fd!(
        fd,
        unsafe { real::accept(fd, addr, len) },
        unsafe { capi::ustack_accept(fd, addr, len) },
        -1
    )
}

/// # Safety
/// As accept4(2).
#[no_mangle]
pub unsafe extern "C" fn accept4(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    by_fd!(
        fd,
        // SAFETY: the caller's arguments.
        unsafe { real::accept4(fd, addr, len, flags) },
        // SAFETY: the caller's arguments.
        unsafe { capi::ustack_accept4(fd, addr, len, flags) },
        -1
    )
}

/// # Safety
/// As connect(2).
#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    // SAFETY: the caller's arguments.
    let kernel = || unsafe { real::connect(fd, addr, len) };
    let Some(g) = Inside::outside() else {
        return kernel();
    };
    // SAFETY: the caller's arguments.
    let on_ustack = || crate::io::sent(unsafe { capi::ustack_connect(fd, addr, len) });
    let r = match classify(fd) {
        Fd::Ustack => on_ustack(),
        Fd::Pending => {
            // SAFETY: the caller's address and length.
            let dst = match unsafe { place::pending_addr(fd, addr, len, Call::Connect) } {
                Ok(Some(a)) => a,
                // Dissolving an association that does not exist.
                Ok(None) => return 0,
                Err(e) => {
                    drop(g);
                    return ret(Err(e));
                }
            };
            if process::engine_failed() {
                if let Some(r) = crate::dead::connect(fd, dst) {
                    drop(g);
                    return ret(r);
                }
            }
            match place::for_use(fd, Some(dst)) {
                Err(e) => {
                    drop(g);
                    return ret(Err(e));
                }
                Ok(()) if classify(fd) == Fd::Ustack => on_ustack(),
                Ok(()) => {
                    drop(g);
                    return kernel();
                }
            }
        }
        Fd::Epoll | Fd::Kernel => {
            drop(g);
            return kernel();
        }
    };
    drop(g);
    r
}

/// # Safety
/// As shutdown(2).
#[no_mangle]
pub unsafe extern "C" fn shutdown(fd: c_int, how: c_int) -> c_int {
    if crate::dead::is_dead(fd) && !guard::inside() {
        return ret(crate::dead::shutdown(fd, how));
    }
    // SAFETY: no pointers.
    by_fd!(
        fd,
        unsafe { real::shutdown(fd, how) },
        crate::io::sent(capi::ustack_shutdown(fd, how)),
        -1
    )
}

/// # Safety
/// As close(2).
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    // SAFETY: no pointers.
    let kernel = || unsafe { real::close(fd) };
    let Some(g) = Inside::outside() else {
        return kernel();
    };
    match classify(fd) {
        Fd::Ustack => {
            let r = crate::io::sent(capi::ustack_close(fd));
            crate::process::after_close();
            drop(g);
            return r;
        }
        Fd::Pending => {
            table::lock().take_pending(fd);
        }
        Fd::Epoll => {
            let shadow = table::lock().take_epoll(fd);
            if let Some(ep) = shadow.and_then(|s| s.ustack) {
                capi::ustack_close(ep);
                crate::process::after_close();
            }
        }
        Fd::Kernel => {
            if api::placeholder_fd() == Some(fd) {
                // A program closing every number (a daemon): the
                // placeholder moves out of its way.
                if let Err(e) = api::move_placeholder() {
                    drop(g);
                    return ret(Err(e));
                }
            }
        }
    }
    drop(g);
    kernel()
}

/// # Safety
/// As getsockname(2).
#[no_mangle]
pub unsafe extern "C" fn getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: the caller's arguments.
    let kernel = || unsafe { real::getsockname(fd, addr, len) };
    if guard::inside() {
        return kernel();
    }
    match classify(fd) {
        // SAFETY: the caller's arguments.
        Fd::Ustack => inside(|| unsafe { capi::ustack_getsockname(fd, addr, len) }),
        Fd::Pending => {
            let p = inside(|| {
                table::lock()
                    .get()
                    .pending
                    .get(&fd)
                    .map(|p| (p.domain, p.bound))
            });
            let Some((domain, bound)) = p else {
                return ret(Err(Errno::EBADF));
            };
            // Not bound yet: the any address of the socket's family, port 0.
            let a = bound.unwrap_or(if domain == libc::AF_INET6 {
                SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0))
            } else {
                SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))
            });
            // SAFETY: the caller's buffer and length.
            ret(unsafe { write_addr(a, addr, len) })
        }
        Fd::Epoll | Fd::Kernel => kernel(),
    }
}

/// Writes `a` (a sockaddr_in or sockaddr_in6) into the caller's buffer,
/// truncated to its length, and the full length into `*len`, as the
/// kernel does.
///
/// # Safety
/// `len` is null or points to a socklen_t; `addr` to `*len` writable bytes.
pub(crate) unsafe fn write_addr(
    a: SocketAddr,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> Result<c_int, Errno> {
    if addr.is_null() || len.is_null() {
        return Err(Errno(libc::EFAULT));
    }
    // SAFETY: `len` points to a socklen_t (the caller's promise).
    if (unsafe { len.read_unaligned() } as c_int) < 0 {
        return Err(Errno::EINVAL);
    }
    // SAFETY: `addr` has `*len` writable bytes and `len` is readable and
    // writable (the caller's promise); both checked non-null above.
    unsafe { capi::addr::write(&a, addr, len) };
    Ok(0)
}

/// # Safety
/// As getpeername(2).
#[no_mangle]
pub unsafe extern "C" fn getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: the caller's arguments.
    let kernel = || unsafe { real::getpeername(fd, addr, len) };
    if guard::inside() {
        return kernel();
    }
    match classify(fd) {
        // SAFETY: the caller's arguments.
        Fd::Ustack => inside(|| unsafe { capi::ustack_getpeername(fd, addr, len) }),
        Fd::Pending => ret(Err(Errno::ENOTCONN)),
        Fd::Epoll | Fd::Kernel => kernel(),
    }
}

/// # Safety
/// As setsockopt(2).
#[no_mangle]
pub unsafe extern "C" fn setsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *const c_void,
    len: socklen_t,
) -> c_int {
    // SAFETY: the caller's arguments.
    let kernel = || unsafe { real::setsockopt(fd, level, name, val, len) };
    let Some(g) = Inside::outside() else {
        return kernel();
    };
    match classify(fd) {
        Fd::Ustack => {
            // SAFETY: the caller's arguments.
            let r = unsafe { capi::ustack_setsockopt(fd, level, name, val, len) };
            if r < 0 && crate::last_errno() == Errno::ENOPROTOOPT {
                notes::once(format!(
                    "{} on a ustack socket: ENOPROTOOPT (not supported)",
                    notes::option_name(level, name)
                ));
                set_errno(Errno::ENOPROTOOPT);
            }
            r
        }
        Fd::Pending => {
            if (len as c_int) < 0 {
                return ret(Err(Errno::EINVAL));
            }
            if len > 0 && val.is_null() {
                return ret(Err(Errno(libc::EFAULT)));
            }
            let bytes: &[u8] = if len == 0 {
                &[]
            } else {
                // SAFETY: `len` readable bytes at `val` (the caller's promise).
                unsafe { std::slice::from_raw_parts(val.cast::<u8>(), len as usize) }
            };
            ret(set_pending_option(fd, level, name, bytes))
        }
        Fd::Epoll | Fd::Kernel => {
            drop(g);
            kernel()
        }
    }
}

/// setsockopt on pending socket `fd`: recorded, for its placing, once the
/// kernel would take it on a socket of this kind (so a bad option fails
/// now, as on the kernel).  Inside the guard.
fn set_pending_option(fd: RawFd, level: c_int, name: c_int, val: &[u8]) -> Result<c_int, Errno> {
    let mut tab = table::lock();
    let p = tab.get().pending.get(&fd).ok_or(Errno::EBADF)?;
    let (d, t, pr) = (p.domain, p.ty, p.protocol);
    if !taken_whatever_the_value(t, level, name, val.len()) {
        // The kernel's question: a throwaway socket of this kind answers.
        drop(tab);
        check_on_kernel(d, t, pr, level, name, val)?;
        tab = table::lock();
    }
    let p = tab.get().pending.get_mut(&fd).ok_or(Errno::EBADF)?;
    p.opts.push(SetOpt::new(level, name, val));
    Ok(0)
}

/// Whether Linux takes option (level, name) with a value of `len` bytes
/// on every AF_INET and AF_INET6 socket of type `ty`, whatever the value:
/// the int options programs set on each socket (SO_REUSEADDR before a
/// bind, TCP_NODELAY before a connect), which it checks only for their
/// length (`sk_setsockopt`, `do_tcp_setsockopt`: at least an int).  These
/// need no throwaway kernel socket (a socket, a setsockopt and a close
/// per option).  `tests::fast_options_are_what_the_kernel_takes` holds
/// this to the kernel's answers.
fn taken_whatever_the_value(ty: c_int, level: c_int, name: c_int, len: usize) -> bool {
    if len < std::mem::size_of::<c_int>() {
        return false;
    }
    match level {
        libc::SOL_SOCKET => matches!(
            name,
            libc::SO_REUSEADDR
                | libc::SO_REUSEPORT
                | libc::SO_KEEPALIVE
                | libc::SO_BROADCAST
                | libc::SO_SNDBUF
                | libc::SO_RCVBUF
        ),
        libc::IPPROTO_TCP => {
            ty == libc::SOCK_STREAM && matches!(name, libc::TCP_NODELAY | libc::TCP_CORK)
        }
        _ => false,
    }
}

/// Whether the kernel takes option (level, name) = `val` on a socket of
/// this kind.
fn check_on_kernel(
    domain: c_int,
    ty: c_int,
    protocol: c_int,
    level: c_int,
    name: c_int,
    val: &[u8],
) -> Result<(), Errno> {
    // SAFETY: no pointers.
    let k = unsafe { real::socket(domain, ty | libc::SOCK_CLOEXEC, protocol) };
    if k < 0 {
        return Err(crate::last_errno());
    }
    // SAFETY: `val` is a live buffer of its length.
    let r =
        unsafe { real::setsockopt(k, level, name, val.as_ptr().cast(), val.len() as socklen_t) };
    let e = crate::last_errno();
    // SAFETY: `k` is ours.
    unsafe { real::close(k) };
    if r < 0 {
        return Err(e);
    }
    Ok(())
}

/// # Safety
/// As getsockopt(2).
#[no_mangle]
pub unsafe extern "C" fn getsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    // SAFETY: the caller's arguments.
    let kernel = || unsafe { real::getsockopt(fd, level, name, val, len) };
    if guard::inside() {
        return kernel();
    }
    match classify(fd) {
        // SAFETY: the caller's arguments.
        Fd::Ustack => inside(|| unsafe { capi::ustack_getsockopt(fd, level, name, val, len) }),
        Fd::Pending => {
            // What the kernel's socket of this kind says, with the
            // options set so far: a throwaway socket answers.
            let p = inside(|| table::lock().get().pending.get(&fd).cloned());
            let Some(p) = p else {
                return ret(Err(Errno::EBADF));
            };
            if level == libc::SOL_SOCKET && name == libc::SO_ACCEPTCONN {
                let v = c_int::from(p.backlog.is_some());
                // SAFETY: the caller's getsockopt arguments, checked for
                // null inside.
                return ret(unsafe { write_int(v, val, len) });
            }
            if level == libc::SOL_SOCKET && name == libc::SO_ERROR && process::engine_failed() {
                // SAFETY: the caller's arguments.
                return ret(unsafe { crate::dead::so_error(val, len) });
            }
            inside(|| {
                // SAFETY: no pointers.
                let k = unsafe { real::socket(p.domain, p.ty | libc::SOCK_CLOEXEC, p.protocol) };
                if k < 0 {
                    return -1;
                }
                for o in &p.opts {
                    let v = o.value();
                    // SAFETY: a live buffer of its length.
                    unsafe {
                        real::setsockopt(
                            k,
                            o.level,
                            o.name,
                            v.as_ptr().cast(),
                            v.len() as socklen_t,
                        )
                    };
                }
                // SAFETY: the caller's arguments.
                let r = unsafe { real::getsockopt(k, level, name, val, len) };
                let e = crate::last_errno();
                // SAFETY: `k` is ours.
                unsafe { real::close(k) };
                set_errno(e);
                r
            })
        }
        Fd::Epoll | Fd::Kernel => kernel(),
    }
}

/// # Safety
/// `val`/`len` as getsockopt's.
unsafe fn write_int(v: c_int, val: *mut c_void, len: *mut socklen_t) -> Result<c_int, Errno> {
    if val.is_null() || len.is_null() {
        return Err(Errno(libc::EFAULT));
    }
    // SAFETY: `len` points to a socklen_t; `val` to `*len` bytes.
    unsafe {
        let n = (*len as usize).min(4);
        std::ptr::copy_nonoverlapping(v.to_ne_bytes().as_ptr(), val.cast::<u8>(), n);
        *len = n as socklen_t;
    }
    Ok(0)
}

/// # Safety
/// As fcntl(2); `arg` is the variadic argument as a word.
#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe { fcntl_any(fd, cmd, arg) }
}

/// # Safety
/// As fcntl(2).
#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe { fcntl_any(fd, cmd, arg) }
}

unsafe fn fcntl_any(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    // SAFETY: the caller's arguments.
    let kernel = || unsafe { real::fcntl(fd, cmd, arg) };
    if guard::inside() {
        return kernel();
    }
    let k = classify(fd);
    if k == Fd::Epoll && matches!(cmd, libc::F_DUPFD | libc::F_DUPFD_CLOEXEC) {
        crate::epoll::shared_number(fd);
    }
    if k == Fd::Pending {
        match cmd {
            libc::F_GETFL => {
                let nb = inside(|| table::lock().get().pending.get(&fd).map(|p| p.nonblock));
                return match nb {
                    Some(nb) => libc::O_RDWR | if nb { libc::O_NONBLOCK } else { 0 },
                    None => ret(Err(Errno::EBADF)),
                };
            }
            libc::F_SETFL => {
                return ret(inside(|| {
                    let mut t = table::lock();
                    let p = t.get().pending.get_mut(&fd).ok_or(Errno::EBADF)?;
                    p.nonblock = arg as c_int & libc::O_NONBLOCK != 0;
                    Ok(0)
                }))
            }
            // Close-on-exec belongs to the number, which the kernel holds.
            libc::F_GETFD | libc::F_SETFD => return kernel(),
            // A dead socket's owner is its errored file's (`dead`).
            libc::F_SETOWN | libc::F_GETOWN if process::engine_failed() => {
                if let Err(e) = inside(|| crate::dead::errored_number(fd)) {
                    return ret(Err(e));
                }
                return kernel();
            }
            _ => {}
        }
    }
    match cmd {
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC if k != Fd::Kernel && k != Fd::Epoll => ret(
            crate::sockets::dup_ustack(fd, None, cmd == libc::F_DUPFD_CLOEXEC, arg as c_int),
        ),
        // F_SETOWN: the process ustack sends SIGURG to on urgent data.
        libc::F_GETFL
        | libc::F_SETFL
        | libc::F_GETFD
        | libc::F_SETFD
        | libc::F_SETOWN
        | libc::F_GETOWN => {
            by_fd!(fd, kernel(), capi::ustack_fcntl(fd, cmd, arg as c_int), -1)
        }
        _ if k == Fd::Ustack || k == Fd::Pending => {
            inside(|| notes::once(format!("fcntl command {cmd} on a ustack socket: EINVAL")));
            ret(Err(Errno::EINVAL))
        }
        _ => kernel(),
    }
}

/// # Safety
/// As ioctl(2); `arg` is the variadic argument as a word.
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, request: c_ulong, arg: usize) -> c_int {
    // SAFETY: the caller's arguments.
    let kernel = || unsafe { real::ioctl(fd, request, arg) };
    if guard::inside() {
        return kernel();
    }
    if classify(fd) == Fd::Pending {
        if request == libc::FIONBIO {
            if arg == 0 {
                return ret(Err(Errno(libc::EFAULT)));
            }
            // SAFETY: FIONBIO's argument points to an int.
            let on = unsafe { *(arg as *const c_int) } != 0;
            return ret(inside(|| {
                let mut t = table::lock();
                let p = t.get().pending.get_mut(&fd).ok_or(Errno::EBADF)?;
                p.nonblock = on;
                Ok(0)
            }));
        }
        if process::engine_failed() {
            // SAFETY: the caller's argument.
            return ret(unsafe { crate::dead::ioctl(fd, request, arg) });
        }
    }
    // SAFETY: the caller's arguments.
    by_fd!(
        fd,
        kernel(),
        unsafe { capi::ustack_ioctl(fd, request, arg as *mut c_void) },
        -1
    )
}

/// dup, dup2, dup3 and F_DUPFD of a ustack socket (a pending one is
/// placed first: its numbers must name one socket).  `target`: the number
/// dup2/dup3 make (what it named is closed first, a kernel file too, as
/// the kernel does); else the lowest free number at `min` or above.
pub(crate) fn dup_ustack(
    fd: RawFd,
    target: Option<RawFd>,
    cloexec: bool,
    min: c_int,
) -> Result<c_int, Errno> {
    if crate::dead::is_dead(fd) {
        if let Some(new) = target {
            if new == fd {
                return Ok(new);
            }
            // What the library held at `new` goes; the kernel's dup3
            // closes its file.
            // SAFETY: no pointers.
            unsafe { forget_number(new)? };
            if api::placeholder_fd() == Some(new) {
                inside(api::move_placeholder)?;
            }
        }
        return crate::dead::dup(fd, target, cloexec, min);
    }
    placed(fd)?;
    let _g = Inside::enter();
    let Some(new) = target else {
        return api::dup_from(fd, min, cloexec);
    };
    if new == fd {
        return Ok(new);
    }
    match classify(new) {
        Fd::Ustack => {}
        Fd::Pending | Fd::Epoll | Fd::Kernel => {
            // SAFETY: no pointers.
            unsafe { forget_number(new)? };
            if api::placeholder_fd() == Some(new) {
                api::move_placeholder()?;
            }
            // A kernel file (or the number a pending socket held) goes
            // first, as dup2 closes it; EBADF from a free number is fine.
            // SAFETY: no pointers.
            unsafe { real::close(new) };
        }
    }
    if cloexec {
        api::dup3(fd, new, libc::O_CLOEXEC)
    } else {
        api::dup2(fd, new)
    }
}

/// # Safety
/// As dup(2).
#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    if guard::inside() || matches!(classify(fd), Fd::Kernel | Fd::Epoll) {
        if !guard::inside() {
            crate::epoll::shared_number(fd);
        }
        // SAFETY: no pointers.
        return unsafe { real::dup(fd) };
    }
    ret(dup_ustack(fd, None, false, 0))
}

/// # Safety
/// As dup2(2).
#[no_mangle]
pub unsafe extern "C" fn dup2(fd: c_int, new: c_int) -> c_int {
    // SAFETY: no pointers.
    unsafe { dup_onto(fd, new, 0, false) }
}

/// # Safety
/// As dup3(2).
#[no_mangle]
pub unsafe extern "C" fn dup3(fd: c_int, new: c_int, flags: c_int) -> c_int {
    // SAFETY: no pointers.
    unsafe { dup_onto(fd, new, flags, true) }
}

unsafe fn dup_onto(fd: c_int, new: c_int, flags: c_int, three: bool) -> c_int {
    // SAFETY: no pointers.
    let kernel = || unsafe {
        if three {
            real::dup3(fd, new, flags)
        } else {
            real::dup2(fd, new)
        }
    };
    if guard::inside() {
        return kernel();
    }
    if matches!(classify(fd), Fd::Kernel | Fd::Epoll) {
        if fd == new {
            return kernel();
        }
        crate::epoll::shared_number(fd);
        // The number `new` is about to name a kernel file: whatever of
        // ours it named is closed first, as the kernel closes its own.
        match classify(new) {
            // SAFETY: no pointers.
            Fd::Ustack | Fd::Pending | Fd::Epoll => unsafe {
                let _ = forget_number(new);
            },
            Fd::Kernel if api::placeholder_fd() == Some(new) => {
                if let Err(e) = inside(api::move_placeholder) {
                    return ret(Err(e));
                }
            }
            Fd::Kernel => {}
        }
        return kernel();
    }
    if three && (flags & !libc::O_CLOEXEC != 0 || fd == new) {
        return ret(Err(Errno::EINVAL));
    }
    ret(dup_ustack(fd, Some(new), flags & libc::O_CLOEXEC != 0, 0))
}

/// Lets go of our object behind `fd` without giving the number back (it is
/// about to be replaced).
unsafe fn forget_number(fd: RawFd) -> Result<(), Errno> {
    let _g = Inside::enter();
    match classify(fd) {
        Fd::Ustack => {
            // The socket layer closes the number; dup2 will take it again.
            if capi::ustack_close(fd) < 0 {
                return Err(crate::last_errno());
            }
        }
        Fd::Pending => {
            table::lock().take_pending(fd);
        }
        Fd::Epoll => {
            if let Some(ep) = table::lock().take_epoll(fd).and_then(|s| s.ustack) {
                capi::ustack_close(ep);
            }
        }
        Fd::Kernel => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    /// Every option `taken_whatever_the_value` lets through without a
    /// kernel socket, the kernel takes on a socket of that kind, for any
    /// value of that length; values shorter than an int are left to the
    /// kernel (which refuses them).
    #[test]
    fn fast_options_are_what_the_kernel_takes() {
        let options = [
            (libc::SOL_SOCKET, libc::SO_REUSEADDR),
            (libc::SOL_SOCKET, libc::SO_REUSEPORT),
            (libc::SOL_SOCKET, libc::SO_KEEPALIVE),
            (libc::SOL_SOCKET, libc::SO_BROADCAST),
            (libc::SOL_SOCKET, libc::SO_SNDBUF),
            (libc::SOL_SOCKET, libc::SO_RCVBUF),
            (libc::SOL_SOCKET, libc::SO_LINGER),
            (libc::SOL_SOCKET, libc::SO_RCVTIMEO),
            (libc::IPPROTO_TCP, libc::TCP_NODELAY),
            (libc::IPPROTO_TCP, libc::TCP_CORK),
            (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE),
            (libc::IPPROTO_TCP, libc::TCP_MAXSEG),
            (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY),
            (libc::IPPROTO_IP, libc::IP_TOS),
        ];
        let mut fast = 0;
        for domain in [libc::AF_INET, libc::AF_INET6] {
            for ty in [libc::SOCK_STREAM, libc::SOCK_DGRAM] {
                for (level, name) in options {
                    for len in 0..4 {
                        // The kernel refuses these (EINVAL): its answer.
                        assert!(!taken_whatever_the_value(ty, level, name, len));
                    }
                    for len in [4usize, 8, 16] {
                        if !taken_whatever_the_value(ty, level, name, len) {
                            continue;
                        }
                        fast += 1;
                        for v in [0i32, 1, -1, i32::MAX, 7] {
                            let mut val = vec![0xa5u8; len];
                            val[..4].copy_from_slice(&v.to_ne_bytes());
                            let r = check_on_kernel(domain, ty, 0, level, name, &val);
                            assert_eq!(
                                r,
                                Ok(()),
                                "family {domain} type {ty} option {level}/{name} len {len} = {v}"
                            );
                        }
                    }
                }
            }
        }
        // Both families, both kinds for the socket options, streams for
        // TCP's, at lengths 4, 8 and 16.
        assert_eq!(fast, 2 * (2 * 6 + 2) * 3);
    }

    #[test]
    fn bind_conflicts_across_families() {
        let clash = |x: &str, x6: bool, y: &str, y6: bool| {
            let r = overlap((a(x), x6), (a(y), y6));
            assert_eq!(r, overlap((a(y), y6), (a(x), x6)), "symmetric: {x} {y}");
            r
        };
        // [::] takes IPv4 too unless IPV6_V6ONLY (nginx's `listen 80;
        // listen [::]:80 ipv6only=on;`).
        assert!(clash("0.0.0.0:80", false, "[::]:80", false));
        assert!(!clash("0.0.0.0:80", false, "[::]:80", true));
        assert!(clash("10.0.0.2:80", false, "[::]:80", false));
        assert!(clash("[::]:80", true, "[::]:80", true));
        assert!(clash("[::]:80", true, "[fd99::2]:80", false));
        assert!(!clash("[fd99::2]:80", false, "[fd99::3]:80", false));
        assert!(!clash("[fd99::2]:80", false, "0.0.0.0:80", false));
        // IPv4-mapped: the IPv4 address it names.
        assert!(clash("[::ffff:10.0.0.2]:80", false, "10.0.0.2:80", false));
        assert!(!clash("[::ffff:10.0.0.2]:80", false, "10.0.0.3:80", false));
        assert!(clash("[::ffff:10.0.0.2]:80", false, "[::]:80", false));
        assert!(!clash("[::ffff:10.0.0.2]:80", false, "[::]:80", true));
    }
}
