//! The four single-producer single-consumer rings an AF_XDP socket shares
//! with the kernel: fill and TX (we produce), RX and completion (we
//! consume).
//!
//! Each ring is a mapping of the socket holding a producer index, a
//! consumer index, a flags word and a power-of-two array of entries. Indexes
//! run freely and wrap; an entry is at `index & mask`. Whoever produces
//! writes entries, then publishes its index with a Release store; the other
//! side reads that index with an Acquire load before it reads the entries.
//! Each side caches the other's index and reads it again only when the
//! cached one shows too little room or too few entries.
//!
//! The kernel's index is checked against what it can be (never more than a
//! ring's worth ahead of ours); an impossible one is counted and ignored,
//! never trusted.

use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use super::abi;

/// One ring's mapping; unmapped on drop.
pub struct RingMap {
    base: NonNull<u8>,
    len: usize,
}

impl Drop for RingMap {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are what mmap returned; unmapped once; the
        // ring that owns this mapping hands out no references that outlive it.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// A ring of entries of type `T` (u64 addresses for fill and completion,
/// [`abi::XdpDesc`] for RX and TX).
pub struct Ring<T> {
    _map: RingMap,
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    entries: NonNull<T>,
    size: u32,
    /// Our own index (producer for fill/TX, consumer for RX/completion).
    local: u32,
    /// The kernel's index as last read.
    cached: u32,
    /// Times the kernel's index was impossible.
    pub bad_index: u64,
}

impl<T: Copy> Ring<T> {
    /// Maps the ring of `size` entries at page offset `pgoff` of socket
    /// `fd`, laid out as `off` says. `producer_side` says whether we
    /// produce (fill, TX) or consume (RX, completion).
    pub fn map(
        fd: RawFd,
        pgoff: libc::off_t,
        off: &abi::RingOffset,
        size: u32,
        producer_side: bool,
    ) -> io::Result<Ring<T>> {
        let len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        // SAFETY: maps a ring the kernel created on `fd` (its size was set
        // by setsockopt before); the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base =
            NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave NULL"))?;
        let map = RingMap { base, len };
        // A forked child does not inherit the mapping: it would hold the
        // socket (and its queue) for as long as it lives, though it never
        // uses its parent's rings (a pre-fork server's workers each bind a
        // queue of their own, maybe the one their parent lets go).
        // SAFETY: advice on the mapping just made, of its length.
        if unsafe { libc::madvise(p, len, libc::MADV_DONTFORK) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let field = |o: u64| -> io::Result<NonNull<u8>> {
            if o as usize + 4 > len || !o.is_multiple_of(4) {
                return Err(io::Error::other(format!(
                    "ring offset {o} outside its {len}-byte mapping"
                )));
            }
            // SAFETY: `o` is inside the mapping (checked above).
            Ok(unsafe { base.add(o as usize) })
        };
        let producer = field(off.producer)?.cast::<AtomicU32>();
        let consumer = field(off.consumer)?.cast::<AtomicU32>();
        let flags = field(off.flags)?.cast::<AtomicU32>();
        if !(off.desc as usize).is_multiple_of(std::mem::align_of::<T>()) {
            return Err(io::Error::other("ring entries are misaligned"));
        }
        // SAFETY: `desc` plus `size` entries is the mapping's length by
        // construction above.
        let entries = unsafe { base.add(off.desc as usize) }.cast::<T>();
        let mut ring = Ring {
            _map: map,
            producer,
            consumer,
            flags,
            entries,
            size,
            local: 0,
            cached: 0,
            bad_index: 0,
        };
        // Start from where the kernel is (zero on a fresh socket).
        if producer_side {
            ring.local = ring.producer().load(Ordering::Relaxed);
            ring.cached = ring.consumer().load(Ordering::Acquire);
        } else {
            ring.local = ring.consumer().load(Ordering::Relaxed);
            ring.cached = ring.producer().load(Ordering::Acquire);
        }
        Ok(ring)
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points at a 4-aligned word inside the mapping (checked in
        // `map`), which lives as long as `self`; the kernel writes the other
        // words concurrently, so it is only accessed atomically.
        unsafe { self.producer.as_ref() }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as in `producer`.
        unsafe { self.consumer.as_ref() }
    }

    /// Whether the kernel asks for a wakeup (`XDP_RING_NEED_WAKEUP`).
    pub fn needs_wakeup(&self) -> bool {
        // SAFETY: as in `producer`.
        let flags = unsafe { self.flags.as_ref() };
        flags.load(Ordering::Relaxed) & abi::XDP_RING_NEED_WAKEUP != 0
    }

    fn slot(&self, index: u32) -> *mut T {
        let i = (index & (self.size - 1)) as usize;
        // SAFETY: `i < size`, and the mapping holds `size` entries.
        unsafe { self.entries.as_ptr().add(i) }
    }

    // ---- our side produces (fill, TX) ----

    /// Entries we may produce now; reads the kernel's index again only
    /// when the cached one shows fewer than `want`.
    pub fn free(&mut self, want: u32) -> u32 {
        let used = self.local.wrapping_sub(self.cached);
        if used <= self.size && self.size - used >= want {
            return self.size - used;
        }
        let cons = self.consumer().load(Ordering::Acquire);
        if self.local.wrapping_sub(cons) > self.size {
            // The kernel consumed entries we never produced.
            self.bad_index += 1;
            return 0;
        }
        self.cached = cons;
        self.size - self.local.wrapping_sub(cons)
    }

    /// Writes the `n`-th entry after the last published one. Only for
    /// `n < free(..)`.
    pub fn write(&mut self, n: u32, value: T) {
        // SAFETY: the slot is one the kernel has consumed (n < free(..), which
        // read the consumer index with Acquire), so it does not read it
        // until we publish; we are its only writer.
        unsafe { self.slot(self.local.wrapping_add(n)).write_volatile(value) };
    }

    /// Publishes `n` written entries.
    pub fn submit(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.producer().store(self.local, Ordering::Release);
    }

    /// Entries produced and not yet consumed by the kernel.
    pub fn outstanding(&self) -> u32 {
        let cons = self.consumer().load(Ordering::Acquire);
        self.local.wrapping_sub(cons).min(self.size)
    }

    // ---- the kernel produces (RX, completion) ----

    /// Entries ready to be consumed, at most `max`.
    pub fn ready(&mut self, max: u32) -> u32 {
        let mut n = self.cached.wrapping_sub(self.local);
        if n < max {
            let prod = self.producer().load(Ordering::Acquire);
            let m = prod.wrapping_sub(self.local);
            if m > self.size {
                self.bad_index += 1;
                return n.min(max);
            }
            self.cached = prod;
            n = m;
        }
        n.min(max)
    }

    /// Reads the `n`-th ready entry. Only for `n < ready(..)`.
    pub fn read(&self, n: u32) -> T {
        // SAFETY: the kernel published this entry (ready() read its index
        // with Acquire) and does not reuse the slot before we release it.
        unsafe { self.slot(self.local.wrapping_add(n)).read_volatile() }
    }

    /// Gives `n` consumed entries back to the kernel.
    pub fn release(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.consumer().store(self.local, Ordering::Release);
    }
}
