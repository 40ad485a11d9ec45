//! Handing freed heap back to the system.
//!
//! The C allocator keeps freed memory in its free lists, resident: pages a
//! burst of connections once used stay counted in the process's RSS after
//! the stack frees them. glibc's `malloc_trim` gives every whole page
//! inside its free chunks back (`MADV_DONTNEED`), not only the heap's top.

/// Gives the allocator's empty pages back to the system (glibc); nothing
/// elsewhere.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes a plain integer and only walks the
    // allocator's own free lists, under its own locks.
    unsafe {
        libc::malloc_trim(0);
    }
}
