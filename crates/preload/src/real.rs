//! The C library's own functions, which this library's interposed ones
//! hand kernel fds to: looked up once with `dlsym(RTLD_NEXT)`, so they are
//! whatever the next object in the search order (normally libc) defines.

use std::os::raw::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{
    epoll_event, fd_set, iovec, mmsghdr, msghdr, nfds_t, off64_t, off_t, pollfd, sigset_t,
    sockaddr, socklen_t, timespec, timeval,
};

/// The address of the next definition of `name` (NUL-terminated).
fn resolve(name: &'static str) -> usize {
    // SAFETY: `name` is a NUL-terminated string (the macro appends the
    // NUL); RTLD_NEXT searches the objects after this one.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast::<c_char>()) };
    if p.is_null() {
        let msg = b"libustack_preload: the C library lacks a function it must have\n";
        // SAFETY: writes a static buffer to stderr.
        unsafe { libc::syscall(libc::SYS_write, 2, msg.as_ptr(), msg.len()) };
        std::process::abort();
    }
    p as usize
}

macro_rules! real_fns {
    ($( fn $name:ident($($a:ident: $t:ty),* $(, ...)?) -> $r:ty; )*) => {
        $(
            /// The C library's function of this name.
            ///
            /// # Safety
            /// As the C function's.
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn $name($($a: $t),*) -> $r {
                static PTR: AtomicUsize = AtomicUsize::new(0);
                let mut p = PTR.load(Ordering::Relaxed);
                if p == 0 {
                    p = resolve(concat!(stringify!($name), "\0"));
                    PTR.store(p, Ordering::Relaxed);
                }
                // SAFETY: `p` is the address of the C library's function
                // of this name, whose C type this is.
                let f: unsafe extern "C" fn($($t),*) -> $r = unsafe { std::mem::transmute(p) };
                // SAFETY: the caller keeps the C function's contract.
                unsafe { f($($a),*) }
            }
        )*
    };
}

real_fns! {
    fn sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int;
    fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int;
    fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
    fn listen(fd: c_int, backlog: c_int) -> c_int;
    fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int;
    fn accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int;
    fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
    fn read(fd: c_int, buf: *mut c_void, n: usize) -> isize;
    fn write(fd: c_int, buf: *const c_void, n: usize) -> isize;
    fn readv(fd: c_int, iov: *const iovec, n: c_int) -> isize;
    fn writev(fd: c_int, iov: *const iovec, n: c_int) -> isize;
    fn recv(fd: c_int, buf: *mut c_void, n: usize, flags: c_int) -> isize;
    fn send(fd: c_int, buf: *const c_void, n: usize, flags: c_int) -> isize;
    fn recvfrom(fd: c_int, buf: *mut c_void, n: usize, flags: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> isize;
    fn sendto(fd: c_int, buf: *const c_void, n: usize, flags: c_int, addr: *const sockaddr, len: socklen_t) -> isize;
    fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> isize;
    fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> isize;
    fn recvmmsg(fd: c_int, v: *mut mmsghdr, n: c_uint, flags: c_int, t: *mut timespec) -> c_int;
    fn sendmmsg(fd: c_int, v: *mut mmsghdr, n: c_uint, flags: c_int) -> c_int;
    fn shutdown(fd: c_int, how: c_int) -> c_int;
    fn close(fd: c_int) -> c_int;
    fn getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int;
    fn getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int;
    fn getsockopt(fd: c_int, level: c_int, name: c_int, val: *mut c_void, len: *mut socklen_t) -> c_int;
    fn setsockopt(fd: c_int, level: c_int, name: c_int, val: *const c_void, len: socklen_t) -> c_int;
    fn dup(fd: c_int) -> c_int;
    fn dup2(fd: c_int, new: c_int) -> c_int;
    fn dup3(fd: c_int, new: c_int, flags: c_int) -> c_int;
    fn epoll_create(size: c_int) -> c_int;
    fn epoll_create1(flags: c_int) -> c_int;
    fn epoll_ctl(epfd: c_int, op: c_int, fd: c_int, ev: *mut epoll_event) -> c_int;
    fn epoll_wait(epfd: c_int, ev: *mut epoll_event, n: c_int, timeout: c_int) -> c_int;
    fn epoll_pwait(epfd: c_int, ev: *mut epoll_event, n: c_int, timeout: c_int, mask: *const sigset_t) -> c_int;
    fn epoll_pwait2(epfd: c_int, ev: *mut epoll_event, n: c_int, t: *const timespec, mask: *const sigset_t) -> c_int;
    fn poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int;
    fn ppoll(fds: *mut pollfd, n: nfds_t, t: *const timespec, mask: *const sigset_t) -> c_int;
    fn select(n: c_int, r: *mut fd_set, w: *mut fd_set, e: *mut fd_set, t: *mut timeval) -> c_int;
    fn pselect(n: c_int, r: *mut fd_set, w: *mut fd_set, e: *mut fd_set, t: *const timespec, mask: *const sigset_t) -> c_int;
    fn sendfile(out: c_int, inp: c_int, off: *mut off_t, n: usize) -> isize;
    fn sendfile64(out: c_int, inp: c_int, off: *mut off64_t, n: usize) -> isize;
    fn setuid(uid: libc::uid_t) -> c_int;
    fn setgid(gid: libc::gid_t) -> c_int;
    fn setreuid(r: libc::uid_t, e: libc::uid_t) -> c_int;
    fn setregid(r: libc::gid_t, e: libc::gid_t) -> c_int;
    fn setresuid(r: libc::uid_t, e: libc::uid_t, s: libc::uid_t) -> c_int;
    fn setresgid(r: libc::gid_t, e: libc::gid_t, s: libc::gid_t) -> c_int;
    fn setgroups(n: usize, list: *const libc::gid_t) -> c_int;
    fn capset(hdr: *mut c_void, data: *const c_void) -> c_int;
    fn chroot(path: *const c_char) -> c_int;
    fn execve(path: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
    fn execv(path: *const c_char, argv: *const *const c_char) -> c_int;
    fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int;
    fn execvpe(file: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
    fn fexecve(fd: c_int, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
    fn splice(fin: c_int, oin: *mut off64_t, fout: c_int, oout: *mut off64_t, n: usize, flags: c_uint) -> isize;
}

/// The C library's `fcntl`, which is variadic: the third argument is an
/// int or a pointer, passed as a word.
///
/// # Safety
/// As `fcntl`'s for `cmd`.
pub unsafe fn fcntl(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    static PTR: AtomicUsize = AtomicUsize::new(0);
    let mut p = PTR.load(Ordering::Relaxed);
    if p == 0 {
        p = resolve("fcntl\0");
        PTR.store(p, Ordering::Relaxed);
    }
    // SAFETY: `p` is the C library's `fcntl`, variadic after two ints.
    let f: unsafe extern "C" fn(c_int, c_int, ...) -> c_int = unsafe { std::mem::transmute(p) };
    // SAFETY: the caller keeps fcntl's contract for `cmd`.
    unsafe { f(fd, cmd, arg) }
}

/// The C library's `ioctl` (variadic: one word after the request).
///
/// # Safety
/// As `ioctl`'s for `request`.
pub unsafe fn ioctl(fd: c_int, request: libc::c_ulong, arg: usize) -> c_int {
    static PTR: AtomicUsize = AtomicUsize::new(0);
    let mut p = PTR.load(Ordering::Relaxed);
    if p == 0 {
        p = resolve("ioctl\0");
        PTR.store(p, Ordering::Relaxed);
    }
    // SAFETY: `p` is the C library's `ioctl`, variadic after the request.
    let f: unsafe extern "C" fn(c_int, libc::c_ulong, ...) -> c_int =
        unsafe { std::mem::transmute(p) };
    // SAFETY: the caller keeps ioctl's contract for `request`.
    unsafe { f(fd, request, arg) }
}

/// The C library's `prctl` (variadic: four words after the option).
///
/// # Safety
/// As prctl's for `option`.
pub unsafe fn prctl(
    option: c_int,
    a2: libc::c_ulong,
    a3: libc::c_ulong,
    a4: libc::c_ulong,
    a5: libc::c_ulong,
) -> c_int {
    static PTR: AtomicUsize = AtomicUsize::new(0);
    let mut p = PTR.load(Ordering::Relaxed);
    if p == 0 {
        p = resolve("prctl\0");
        PTR.store(p, Ordering::Relaxed);
    }
    // SAFETY: `p` is the C library's `prctl`, variadic after the option.
    let f: unsafe extern "C" fn(c_int, ...) -> c_int = unsafe { std::mem::transmute(p) };
    // SAFETY: the caller keeps prctl's contract for `option`.
    unsafe { f(option, a2, a3, a4, a5) }
}

/// The C library's `_exit`.
///
/// # Safety
/// As `_exit`'s.
pub unsafe fn exit_now(status: c_int) -> ! {
    static PTR: AtomicUsize = AtomicUsize::new(0);
    let mut p = PTR.load(Ordering::Relaxed);
    if p == 0 {
        p = resolve("_exit\0");
        PTR.store(p, Ordering::Relaxed);
    }
    // SAFETY: `p` is the C library's `_exit`.
    let f: unsafe extern "C" fn(c_int) -> ! = unsafe { std::mem::transmute(p) };
    // SAFETY: `_exit` takes a status and ends the process.
    unsafe { f(status) }
}
