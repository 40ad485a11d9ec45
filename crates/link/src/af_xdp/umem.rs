//! The UMEM: one anonymous mapping cut into equal chunks, shared with the
//! kernel by `XDP_UMEM_REG`, and the frame handles that are the link's
//! packet buffers.
//!
//! Every chunk is, at any time, in exactly one place: our free list, a ring
//! the kernel owns (fill, RX, TX, completion), or an [`XdpFrame`] handed to
//! the engine. A frame is the exclusive handle on its chunk: the kernel
//! writes a chunk only while it sits in the fill ring, and reads it only
//! while it sits in the TX ring, so the bytes a frame shows are the engine's
//! alone.
//!
//! The mapping must outlive every frame. Frames cannot borrow the link (the
//! engine keeps them in its own queues), so the link counts the frames it
//! has handed out and not got back; if any are still out when the link is
//! dropped, the mapping is left mapped (leaked, and said on stderr) rather
//! than pulled from under them.

use std::io;
use std::ptr::NonNull;

use crate::PacketBuffer;

/// The UMEM mapping.
pub struct Umem {
    base: NonNull<u8>,
    len: usize,
    chunk_size: usize,
    chunks: u32,
    /// Leave the mapping in place on drop (frames are still out).
    pub(super) leak: bool,
}

impl Umem {
    /// Maps `chunks` chunks of `chunk_size` bytes (a power of two, 2048 or
    /// 4096 for aligned chunks).
    pub fn new(chunk_size: usize, chunks: u32) -> io::Result<Umem> {
        if !(2048..=4096).contains(&chunk_size) || !chunk_size.is_power_of_two() || chunks == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("UMEM of {chunks} chunks of {chunk_size} bytes: chunks must be 2048 or 4096 bytes, and some"),
            ));
        }
        let len = chunk_size * chunks as usize;
        // SAFETY: an anonymous private mapping; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Umem {
            base: NonNull::new(p.cast()).ok_or_else(|| io::Error::other("mmap gave NULL"))?,
            len,
            chunk_size,
            chunks,
            leak: false,
        })
    }

    pub fn base(&self) -> NonNull<u8> {
        self.base
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn chunk_size(&self) -> usize {
        self.chunk_size
    }

    pub fn chunks(&self) -> u32 {
        self.chunks
    }

    /// The chunk that UMEM offset `addr` lies in, if it lies in one.
    pub fn chunk_of(&self, addr: u64) -> Option<u32> {
        let c = addr / self.chunk_size as u64;
        (c < u64::from(self.chunks)).then_some(c as u32)
    }

    /// A frame handle on chunk `chunk` with data at `offset` in it. The
    /// caller gives each chunk to one handle at a time.
    pub fn frame(&self, chunk: u32, offset: usize, len: usize) -> XdpFrame {
        debug_assert!(chunk < self.chunks && offset + len <= self.chunk_size);
        XdpFrame {
            umem: self.base,
            chunk,
            chunk_size: self.chunk_size as u32,
            offset: offset as u32,
            len: len as u32,
            csum_partial: false,
        }
    }

    /// Whether `frame` is a handle on one of this UMEM's chunks.
    pub fn owns(&self, frame: &XdpFrame) -> bool {
        frame.umem == self.base && frame.chunk < self.chunks
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        if self.leak {
            return;
        }
        // SAFETY: `base`/`len` are what mmap returned, unmapped once; no
        // frame handle is out (`leak` is false), the socket that shared it
        // with the kernel is closed before this runs (field order of the
        // link).
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// A frame in a UMEM chunk: the AF_XDP link's packet buffer.
///
/// Received frames are handed to the engine where the kernel put them (no
/// copy); frames to send are written in place and their chunk goes to the
/// TX ring as it is.
#[derive(Debug)]
pub struct XdpFrame {
    /// The UMEM's base: where the bytes are, and whose chunk this is.
    umem: NonNull<u8>,
    chunk: u32,
    chunk_size: u32,
    /// Where the frame starts in its chunk.
    offset: u32,
    len: u32,
    csum_partial: bool,
}

// SAFETY: a frame is the only handle on its chunk (see the module comment),
// and the mapping stays valid as long as any frame exists (the link leaks
// it otherwise), so a frame may move to another thread with its engine.
unsafe impl Send for XdpFrame {}

impl XdpFrame {
    pub fn chunk(&self) -> u32 {
        self.chunk
    }

    /// Where the frame starts in its chunk.
    pub fn offset(&self) -> usize {
        self.offset as usize
    }

    /// The frame's UMEM offset, as the rings carry it.
    pub fn addr(&self) -> u64 {
        u64::from(self.chunk) * u64::from(self.chunk_size) + u64::from(self.offset)
    }

    /// Writes `meta` into the bytes just before the frame, inside its
    /// chunk, where the kernel reads a TX frame's `xsk_tx_metadata`.
    /// Returns false (nothing written) when the frame starts too close to
    /// its chunk's start for them.
    pub fn write_before(&mut self, meta: &[u8]) -> bool {
        let Some(at) = (self.offset as usize).checked_sub(meta.len()) else {
            return false;
        };
        let chunk_start = self.chunk as usize * self.chunk_size as usize;
        // SAFETY: `at + meta.len() == offset < chunk_size`, so the bytes lie
        // in this frame's chunk, which this handle alone owns (module
        // comment; `&mut self` makes the write unique), and the mapping
        // outlives the frame.
        unsafe {
            std::ptr::copy_nonoverlapping(
                meta.as_ptr(),
                self.umem.as_ptr().add(chunk_start + at),
                meta.len(),
            );
        }
        true
    }

    fn start(&self) -> *mut u8 {
        let at = self.chunk as usize * self.chunk_size as usize + self.offset as usize;
        // SAFETY: `chunk < chunks` and `offset < chunk_size` (made so by
        // `Umem::frame`), so the address is inside the mapping.
        unsafe { self.umem.as_ptr().add(at) }
    }
}

impl PacketBuffer for XdpFrame {
    fn data(&self) -> &[u8] {
        // SAFETY: `offset + len <= chunk_size` (set_len checks capacity), so
        // the bytes lie in this frame's chunk, which no one else writes while
        // the frame exists (module comment); the mapping outlives the frame.
        unsafe { std::slice::from_raw_parts(self.start(), self.len as usize) }
    }

    fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `data`; `&mut self` makes the slice unique.
        unsafe { std::slice::from_raw_parts_mut(self.start(), self.len as usize) }
    }

    fn set_len(&mut self, len: usize) {
        assert!(
            len <= self.capacity(),
            "XdpFrame::set_len({len}) past capacity {}",
            self.capacity()
        );
        self.len = len as u32;
    }

    fn capacity(&self) -> usize {
        (self.chunk_size - self.offset) as usize
    }

    fn csum_partial(&self) -> bool {
        self.csum_partial
    }

    fn set_csum_partial(&mut self, partial: bool) {
        self.csum_partial = partial;
    }
}
