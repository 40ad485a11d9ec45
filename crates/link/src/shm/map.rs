//! A shared mapping of a file, unmapped on drop.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;

/// `len` bytes of a file mapped shared and writable at `base`.
pub(super) struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: a mapping is process-wide memory with no thread affinity; the
// `Mapping` is only a handle to it (base and length) and is unmapped once,
// by whichever thread drops it.
unsafe impl Send for Mapping {}

impl Mapping {
    /// Maps the first `len` bytes of `file` read-write and shared. With
    /// `populate` the pages are faulted in now, not on the data path.
    pub fn new(file: &File, len: usize, populate: bool) -> io::Result<Mapping> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty mapping"));
        }
        let flags = libc::MAP_SHARED | if populate { libc::MAP_POPULATE } else { 0 };
        // SAFETY: a fresh mapping (null hint) of an open descriptor; the
        // kernel checks `len` and the file's mode. Nothing in this process
        // refers to the returned range yet.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                file.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            base: NonNull::new(base.cast()).ok_or_else(|| io::Error::other("mmap gave NULL"))?,
            len,
        })
    }

    pub fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Makes `[off, end)` read-only: parts only the peer writes. Both ends
    /// must be page-aligned and inside the mapping.
    pub fn protect_read_only(&self, off: usize, end: usize) -> io::Result<()> {
        if off > end || end > self.len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "protect outside the mapping",
            ));
        }
        // SAFETY: the range lies inside our own mapping (checked above) and
        // nothing in this process holds a mutable reference into it: it is
        // only ever read, through atomics and raw-pointer copies.
        let r = unsafe {
            libc::mprotect(
                self.base.as_ptr().add(off).cast(),
                end - off,
                libc::PROT_READ,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly what mmap returned, and this is
        // the only place that unmaps them; whoever handed out pointers into
        // the mapping (the link) holds this `Mapping` and drops it last.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// The system's page size.
pub(super) fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p <= 0 {
        4096
    } else {
        p as usize
    }
}
