//! Interface ioctls (`struct ifreq`): MTU, hardware address, flags, index.
//!
//! The kernel's `struct ifreq` is a 16-byte name followed by a 24-byte union
//! (its largest member, `struct ifmap`, holds `unsigned long`s, so the union
//! is 8-aligned). It is declared here rather than taken from `libc` so the
//! layout this crate relies on is written down in one place.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `IFNAMSIZ`: interface names are at most 15 bytes plus a NUL.
pub(crate) const IFNAMSIZ: usize = 16;

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) union IfReqData {
    pub flags: libc::c_short,
    pub value: libc::c_int,
    pub hwaddr: libc::sockaddr,
    pub data: *mut libc::c_void,
    _size: [u64; 3],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct IfReq {
    pub name: [libc::c_char; IFNAMSIZ],
    pub data: IfReqData,
}

const _: () = assert!(std::mem::size_of::<IfReq>() == 40);

impl IfReq {
    /// A zeroed request for interface `name`.
    pub fn new(name: &str) -> io::Result<IfReq> {
        if name.is_empty() || name.len() >= IFNAMSIZ || name.bytes().any(|b| b == 0 || b == b'/') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad interface name {name:?}"),
            ));
        }
        let mut req = IfReq {
            name: [0; IFNAMSIZ],
            data: IfReqData { _size: [0; 3] },
        };
        for (dst, src) in req.name.iter_mut().zip(name.bytes()) {
            *dst = src as libc::c_char;
        }
        Ok(req)
    }

    /// The name the kernel wrote back (TUNSETIFF may pick one).
    pub fn name(&self) -> String {
        // SAFETY: `name` is IFNAMSIZ bytes and `new` leaves at least the last
        // one NUL; the kernel writes back a NUL-terminated name of at most
        // IFNAMSIZ - 1 bytes.
        let c = unsafe { CStr::from_ptr(self.name.as_ptr()) };
        c.to_string_lossy().into_owned()
    }
}

/// Turns a libc return value into a `Result`, reading `errno` on -1.
pub(crate) fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Issues an ifreq ioctl on `fd`.
pub(crate) fn ioctl_ifreq(fd: RawFd, request: libc::c_ulong, req: &mut IfReq) -> io::Result<()> {
    // SAFETY: every request passed here (SIOC*IF*, TUNSETIFF) reads and
    // writes at most one `struct ifreq`, and `req` points at a live one of
    // the kernel's layout (checked by the size assertion above); for
    // SIOCETHTOOL its `data` points at a live struct of the command's
    // layout (`driver`), or at a buffer holding every byte the command's
    // header names (`ethtool`, checked by its callers).
    cvt(unsafe { libc::ioctl(fd, request as _, req as *mut IfReq) })?;
    Ok(())
}

/// `SIOCETHTOOL` (linux/sockios.h): ethtool's requests, their struct
/// pointed to by the ifreq's `ifr_data`.
const SIOCETHTOOL: libc::c_ulong = 0x8946;
/// `ETHTOOL_GDRVINFO` (linux/ethtool.h).
const ETHTOOL_GDRVINFO: u32 = 0x0000_0003;

/// `struct ethtool_drvinfo`: the command, the driver's name, then fields
/// read here as bytes (version, firmware, bus, reserved, five counts).
#[repr(C)]
struct EthtoolDrvinfo {
    cmd: u32,
    driver: [u8; 32],
    _rest: [u8; 160],
}

const _: () = assert!(std::mem::size_of::<EthtoolDrvinfo>() == 196);

/// A datagram socket to issue interface ioctls on, in the caller's network
/// namespace.
pub(crate) struct CtlSocket(OwnedFd);

impl CtlSocket {
    pub fn new() -> io::Result<CtlSocket> {
        // SAFETY: plain socket(2) call; the result is checked before use.
        let fd =
            cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        Ok(CtlSocket(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// The interface's MTU (SIOCGIFMTU).
    pub fn mtu(&self, name: &str) -> io::Result<usize> {
        let mut req = IfReq::new(name)?;
        ioctl_ifreq(self.0.as_raw_fd(), libc::SIOCGIFMTU, &mut req)?;
        // SAFETY: SIOCGIFMTU filled the union's `int` member.
        let mtu = unsafe { req.data.value };
        Ok(mtu.max(0) as usize)
    }

    /// The interface's Ethernet address (SIOCGIFHWADDR).
    pub fn hwaddr(&self, name: &str) -> io::Result<[u8; 6]> {
        let mut req = IfReq::new(name)?;
        ioctl_ifreq(self.0.as_raw_fd(), libc::SIOCGIFHWADDR, &mut req)?;
        // SAFETY: SIOCGIFHWADDR filled the union's `sockaddr` member.
        let sa = unsafe { req.data.hwaddr };
        if sa.sa_family != libc::ARPHRD_ETHER {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("{name} is not an Ethernet device (type {})", sa.sa_family),
            ));
        }
        let mut mac = [0u8; 6];
        for (m, b) in mac.iter_mut().zip(sa.sa_data.iter()) {
            *m = *b as u8;
        }
        Ok(mac)
    }

    /// Sets the interface's Ethernet address (SIOCSIFHWADDR).
    pub fn set_hwaddr(&self, name: &str, mac: [u8; 6]) -> io::Result<()> {
        let mut req = IfReq::new(name)?;
        // SAFETY: sockaddr is plain data; all-zero is a valid value.
        let mut sa: libc::sockaddr = unsafe { std::mem::zeroed() };
        sa.sa_family = libc::ARPHRD_ETHER;
        for (d, m) in sa.sa_data.iter_mut().zip(mac) {
            *d = m as libc::c_char;
        }
        req.data.hwaddr = sa;
        ioctl_ifreq(self.0.as_raw_fd(), libc::SIOCSIFHWADDR, &mut req)?;
        Ok(())
    }

    /// Sets IFF_UP on the interface (SIOCGIFFLAGS, then SIOCSIFFLAGS).
    pub fn set_up(&self, name: &str) -> io::Result<()> {
        let mut req = IfReq::new(name)?;
        ioctl_ifreq(self.0.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req)?;
        // SAFETY: SIOCGIFFLAGS filled the union's `short` member.
        let flags = unsafe { req.data.flags };
        let up = libc::IFF_UP as libc::c_short;
        if flags & up == 0 {
            req.data.flags = flags | up;
            ioctl_ifreq(self.0.as_raw_fd(), libc::SIOCSIFFLAGS, &mut req)?;
        }
        Ok(())
    }

    /// The name of the interface's driver (`ethtool -i`'s `driver`:
    /// `veth`, `virtio_net`, `ixgbe` ...), by SIOCETHTOOL's
    /// ETHTOOL_GDRVINFO.
    pub fn driver(&self, name: &str) -> io::Result<String> {
        let mut info = EthtoolDrvinfo {
            cmd: ETHTOOL_GDRVINFO,
            driver: [0; 32],
            _rest: [0; 160],
        };
        let mut req = IfReq::new(name)?;
        req.data.data = (&mut info as *mut EthtoolDrvinfo).cast();
        ioctl_ifreq(self.0.as_raw_fd(), SIOCETHTOOL, &mut req)?;
        let end = info.driver.iter().position(|&b| b == 0).unwrap_or(32);
        Ok(String::from_utf8_lossy(&info.driver[..end]).into_owned())
    }

    /// Issues the ethtool command in `buf` (its first u32) on the
    /// interface (SIOCETHTOOL); the kernel writes its answer back into
    /// `buf`.  The caller checks that `buf` holds every byte the command's
    /// header names (`nic_rss::request_len`).
    pub fn ethtool(&self, name: &str, buf: &mut [u8]) -> io::Result<()> {
        let mut req = IfReq::new(name)?;
        req.data.data = buf.as_mut_ptr().cast();
        ioctl_ifreq(self.0.as_raw_fd(), SIOCETHTOOL, &mut req)
    }

    /// The interface's index (SIOCGIFINDEX).
    pub fn index(&self, name: &str) -> io::Result<i32> {
        let mut req = IfReq::new(name)?;
        ioctl_ifreq(self.0.as_raw_fd(), libc::SIOCGIFINDEX, &mut req)?;
        // SAFETY: SIOCGIFINDEX filled the union's `int` member.
        Ok(unsafe { req.data.value })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(IfReq::new("").is_err());
        assert!(IfReq::new("0123456789abcdef").is_err());
        assert!(IfReq::new("a/b").is_err());
        let r = IfReq::new("0123456789abcde").unwrap();
        assert_eq!(r.name(), "0123456789abcde");
    }

    #[test]
    fn loopback_can_be_asked() {
        let s = CtlSocket::new().unwrap();
        assert!(s.mtu("lo").unwrap() > 0);
        assert!(s.index("lo").unwrap() > 0);
        assert!(s.hwaddr("lo").is_err(), "lo is not Ethernet");
        // lo has no ethtool driver information on some kernels; when it
        // answers, it names no driver.
        if let Ok(d) = s.driver("lo") {
            assert!(d.len() < 32);
        }
        assert!(s.driver("nosuchif0").is_err());
    }
}
