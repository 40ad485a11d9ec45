//! Small OS services the engine needs around its links: waiting for frames
//! while idle, and the per-boot secret.

use std::io::{self, Read};
use std::os::fd::RawFd;
use std::time::Duration;

/// Waits until one of `fds` is readable or `timeout` passes.  Returns
/// whether a descriptor became readable.  An interrupted wait (a signal)
/// returns `Ok(false)`, so the caller can look at its stop flag.
pub fn wait_readable(fds: &[RawFd], timeout: Duration) -> io::Result<bool> {
    let mut pollfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: `pollfds` is a valid, exclusively borrowed array of
    // `pollfds.len()` entries for the duration of the call; `ts` outlives it;
    // a null signal mask leaves the mask unchanged.
    let n = unsafe {
        libc::ppoll(
            pollfds.as_mut_ptr(),
            pollfds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(n > 0)
}

/// A secret drawn from the kernel's random source, for keying hash tables,
/// ISNs and cookies.
pub fn random_seed() -> io::Result<u64> {
    let mut b = [0u8; 8];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(u64::from_ne_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_times_out_then_sees_data() {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe() writes.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let start = std::time::Instant::now();
        assert!(!wait_readable(&[fds[0]], Duration::from_millis(20)).unwrap());
        assert!(start.elapsed() >= Duration::from_millis(15));
        // SAFETY: fds[1] is the pipe's open write end; one byte from a static.
        assert_eq!(unsafe { libc::write(fds[1], b"x".as_ptr().cast(), 1) }, 1);
        assert!(wait_readable(&[fds[0]], Duration::from_secs(1)).unwrap());
        // SAFETY: both descriptors are open and closed once here.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        assert_ne!(random_seed().unwrap(), random_seed().unwrap());
    }
}
