//! Errors as Linux errno values.

use core::fmt;

use stack::SocketError;

/// A Linux errno value (`libc::EAGAIN`, ...): what a call failed with.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

impl Errno {
    pub const EAGAIN: Errno = Errno(libc::EAGAIN);
    pub const EBADF: Errno = Errno(libc::EBADF);
    pub const EINVAL: Errno = Errno(libc::EINVAL);
    pub const ENOTSOCK: Errno = Errno(libc::ENOTSOCK);
    pub const ENOTCONN: Errno = Errno(libc::ENOTCONN);
    pub const EISCONN: Errno = Errno(libc::EISCONN);
    pub const EPIPE: Errno = Errno(libc::EPIPE);
    pub const EOPNOTSUPP: Errno = Errno(libc::EOPNOTSUPP);
    pub const ENOPROTOOPT: Errno = Errno(libc::ENOPROTOOPT);
    pub const EADDRINUSE: Errno = Errno(libc::EADDRINUSE);
    pub const EADDRNOTAVAIL: Errno = Errno(libc::EADDRNOTAVAIL);
    pub const EAFNOSUPPORT: Errno = Errno(libc::EAFNOSUPPORT);
    pub const EINPROGRESS: Errno = Errno(libc::EINPROGRESS);
    pub const EALREADY: Errno = Errno(libc::EALREADY);
    pub const ECONNABORTED: Errno = Errno(libc::ECONNABORTED);
    pub const EDESTADDRREQ: Errno = Errno(libc::EDESTADDRREQ);
    pub const EEXIST: Errno = Errno(libc::EEXIST);
    pub const ENOENT: Errno = Errno(libc::ENOENT);
    pub const EPERM: Errno = Errno(libc::EPERM);
    pub const ENOTTY: Errno = Errno(libc::ENOTTY);
    pub const EDOM: Errno = Errno(libc::EDOM);
    pub const EMSGSIZE: Errno = Errno(libc::EMSGSIZE);
    pub const ENXIO: Errno = Errno(libc::ENXIO);
    pub const ESOCKTNOSUPPORT: Errno = Errno(libc::ESOCKTNOSUPPORT);
    pub const EPROTONOSUPPORT: Errno = Errno(libc::EPROTONOSUPPORT);
    pub const ENETUNREACH: Errno = Errno(libc::ENETUNREACH);
    pub const EXDEV: Errno = Errno(libc::EXDEV);
    pub const ENODEV: Errno = Errno(libc::ENODEV);

    /// The last error of a libc call on this thread.
    pub fn last_os_error() -> Errno {
        Errno(
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
        )
    }
}

impl From<SocketError> for Errno {
    fn from(e: SocketError) -> Errno {
        Errno(e.errno())
    }
}

impl From<Errno> for std::io::Error {
    fn from(e: Errno) -> std::io::Error {
        std::io::Error::from_raw_os_error(e.0)
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Errno({}: {})",
            self.0,
            std::io::Error::from_raw_os_error(self.0)
        )
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&std::io::Error::from_raw_os_error(self.0), f)
    }
}

impl std::error::Error for Errno {}

/// What every call returns.
pub type Result<T> = core::result::Result<T, Errno>;
