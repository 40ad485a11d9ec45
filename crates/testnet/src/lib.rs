//! Test support shared by the two places that run the same socket calls
//! on ustack and on the Linux kernel and compare what each returned: the
//! differential API fuzzer (`crates/apidiff`) and `crates/api`'s tests.
//! [`engines`] attaches ustack's two engines to the calling thread,
//! [`linux`] makes the kernel's calls in api's types (in a network
//! namespace of the thread's own), [`errno_name`] names an errno in a
//! trace.

pub mod engines;
pub mod linux;

/// The name of an errno, as a trace shows it (`errno N` for one not
/// listed).
pub fn errno_name(e: i32) -> String {
    let names = [
        (libc::EAGAIN, "EAGAIN"),
        (libc::EBADF, "EBADF"),
        (libc::EINVAL, "EINVAL"),
        (libc::ENOTSOCK, "ENOTSOCK"),
        (libc::ENOTCONN, "ENOTCONN"),
        (libc::EISCONN, "EISCONN"),
        (libc::EPIPE, "EPIPE"),
        (libc::EOPNOTSUPP, "EOPNOTSUPP"),
        (libc::ENOPROTOOPT, "ENOPROTOOPT"),
        (libc::EADDRINUSE, "EADDRINUSE"),
        (libc::EADDRNOTAVAIL, "EADDRNOTAVAIL"),
        (libc::EAFNOSUPPORT, "EAFNOSUPPORT"),
        (libc::EINPROGRESS, "EINPROGRESS"),
        (libc::EALREADY, "EALREADY"),
        (libc::ECONNREFUSED, "ECONNREFUSED"),
        (libc::ECONNRESET, "ECONNRESET"),
        (libc::ECONNABORTED, "ECONNABORTED"),
        (libc::EDESTADDRREQ, "EDESTADDRREQ"),
        (libc::EEXIST, "EEXIST"),
        (libc::ENOENT, "ENOENT"),
        (libc::EPERM, "EPERM"),
        (libc::EDOM, "EDOM"),
        (libc::EMSGSIZE, "EMSGSIZE"),
        (libc::EPROTONOSUPPORT, "EPROTONOSUPPORT"),
        (libc::ESOCKTNOSUPPORT, "ESOCKTNOSUPPORT"),
        (libc::EACCES, "EACCES"),
        (libc::EFAULT, "EFAULT"),
        (libc::ENETUNREACH, "ENETUNREACH"),
        (libc::ETIMEDOUT, "ETIMEDOUT"),
        (libc::ENOTTY, "ENOTTY"),
    ];
    names
        .iter()
        .find(|(n, _)| *n == e)
        .map_or_else(|| format!("errno {e}"), |(_, s)| s.to_string())
}
