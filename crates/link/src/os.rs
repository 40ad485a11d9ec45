//! Small OS services the engine needs around its links: waiting for frames
//! while idle, the per-boot secret, pinning a thread to a core and the
//! open-file limit.

use std::io::{self, Read};
use std::os::fd::RawFd;
use std::time::Duration;

/// Waits until one of `fds` is readable or `timeout` passes (`None`: no
/// limit).  Returns whether a descriptor became readable.  An interrupted wait (a signal)
/// returns `Ok(false)`, so the caller can look at its stop flag.
pub fn wait_readable(fds: &[RawFd], timeout: Option<Duration>) -> io::Result<bool> {
    let mut pollfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
    });
    let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const _);
    // SAFETY: `pollfds` is a valid, exclusively borrowed array of
    // `pollfds.len()` entries for the duration of the call; `tsp` is null
    // or points at `ts`, which outlives it; a null signal mask leaves the mask unchanged.
    let n = unsafe {
        libc::ppoll(
            pollfds.as_mut_ptr(),
            pollfds.len() as libc::nfds_t,
            tsp,
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

/// Pins the calling thread to CPU `cpu` (`sched_setaffinity`), so that
/// an engine keeps its core and its caches.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // A cpu_set_t holds CPU_SETSIZE bits.
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cpu {cpu} is beyond CPU_SETSIZE"),
        ));
    }
    // SAFETY: cpu_set_t is plain data (an array of integers); all zeroes is
    // the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu < CPU_SETSIZE` (checked above), so the bit lies inside
    // `set`, which we borrow exclusively.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid, initialised cpu_set_t of the size we pass,
    // read only for the duration of the call; pid 0 is the calling thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Raises this process's soft limit on open files to its hard limit
/// (servers with many connections need more than the usual 1024).
/// Returns the limit now in force.
pub fn raise_nofile_limit() -> io::Result<libc::rlim_t> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit the call fills in.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if lim.rlim_cur < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: `lim` is a valid rlimit, read only during the call.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(lim.rlim_cur)
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
        assert!(!wait_readable(&[fds[0]], Some(Duration::from_millis(20))).unwrap());
        assert!(start.elapsed() >= Duration::from_millis(15));
        // SAFETY: fds[1] is the pipe's open write end; one byte from a static.
        assert_eq!(unsafe { libc::write(fds[1], b"x".as_ptr().cast(), 1) }, 1);
        assert!(wait_readable(&[fds[0]], Some(Duration::from_secs(1))).unwrap());
        // No limit: the data there ends the wait.
        assert!(wait_readable(&[fds[0]], None).unwrap());
        // SAFETY: both descriptors are open and closed once here.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        assert_ne!(random_seed().unwrap(), random_seed().unwrap());
    }

    #[test]
    fn pin_and_raise_limit() {
        std::thread::spawn(|| {
            pin_to_cpu(0).unwrap();
            assert!(pin_to_cpu(libc::CPU_SETSIZE as usize).is_err());
        })
        .join()
        .unwrap();
        assert!(raise_nofile_limit().unwrap() >= 64);
    }
}
