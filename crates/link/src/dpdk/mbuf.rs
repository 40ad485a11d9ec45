//! An mbuf as the engine's packet buffer, and the mempool it comes from.
//!
//! An [`Mbuf`] owns one DPDK mbuf (one segment, reference count 1): the
//! bytes the engine reads on receive are the bytes the NIC (or the PMD)
//! wrote into the mbuf, and the bytes the stack writes on transmit are the
//! ones the NIC sends. Dropping an `Mbuf` frees it to its mempool.

use std::ffi::{c_void, CString};
use std::io;
use std::ptr::NonNull;

use super::eal::dpdk_error;
use super::ffi;
use crate::PacketBuffer;

/// One mbuf: the frame at `data`, `len` bytes long, `room` bytes of
/// space from `data` to the end of the mbuf's buffer.
#[derive(Debug)]
pub struct Mbuf {
    mbuf: NonNull<ffi::RteMbuf>,
    data: NonNull<u8>,
    len: u32,
    room: u32,
    csum_partial: bool,
    /// A TCP super-frame's segment size (0: an ordinary frame).
    gso_size: u16,
}

// SAFETY: an `Mbuf` is the only handle on its mbuf; freeing an mbuf from any
// thread is safe in DPDK (a thread that is not an EAL lcore bypasses the
// per-lcore cache and uses the pool's multi-producer ring), so it may move
// to another thread.
unsafe impl Send for Mbuf {}

impl Mbuf {
    /// Takes ownership of a received mbuf.
    ///
    /// # Safety
    /// `rx.mbuf` is a live single-segment mbuf that nothing else references,
    /// `rx.data` points at its first byte of frame and `rx.room` bytes from
    /// there are inside its buffer, and `rx.len <= rx.room`.
    pub(crate) unsafe fn from_rx(rx: &ffi::Rx) -> Option<Mbuf> {
        Some(Mbuf {
            mbuf: NonNull::new(rx.mbuf)?,
            data: NonNull::new(rx.data)?,
            len: rx.len,
            room: rx.room,
            csum_partial: false,
            gso_size: 0,
        })
    }

    /// Takes ownership of a received chained mbuf (several segments) as
    /// an empty frame: dropping it frees every segment; its bytes are read
    /// only through [`Mbuf::gather_chain`].
    ///
    /// # Safety
    /// `rx.mbuf` is a live mbuf chain that nothing else references, and
    /// `rx.room` bytes from `rx.data` are inside its first segment's buffer.
    pub(crate) unsafe fn from_rx_chain(rx: &ffi::Rx) -> Option<Mbuf> {
        Some(Mbuf {
            mbuf: NonNull::new(rx.mbuf)?,
            data: NonNull::new(rx.data)?,
            len: 0,
            room: rx.room,
            csum_partial: false,
            gso_size: 0,
        })
    }

    /// Copies every segment of `chain` (an mbuf chain from
    /// [`Mbuf::from_rx_chain`]) into this buffer, which becomes the whole
    /// frame. False when the frame does not fit or the chain's segments do
    /// not add up to its length (this buffer is then left empty).
    pub(crate) fn gather_chain(&mut self, chain: &Mbuf) -> bool {
        // SAFETY: `chain` owns a live mbuf chain; `self.data` has `room`
        // bytes of this buffer's own, which the shim writes at most.
        let n = unsafe {
            ffi::ustack_dpdk_chain_copy(chain.as_mbuf_ptr(), self.data.as_ptr(), self.room)
        };
        match u32::try_from(n) {
            Ok(len) if len <= self.room => {
                self.len = len;
                true
            }
            _ => {
                self.len = 0;
                false
            }
        }
    }

    /// Takes ownership of a freshly allocated mbuf.
    ///
    /// # Safety
    /// As for [`Mbuf::from_rx`], with an empty frame.
    unsafe fn from_buf(b: &ffi::Buf) -> Option<Mbuf> {
        Some(Mbuf {
            mbuf: NonNull::new(b.mbuf)?,
            data: NonNull::new(b.data)?,
            len: 0,
            room: b.room,
            csum_partial: false,
            gso_size: 0,
        })
    }

    /// The `struct rte_mbuf *` this buffer owns (for tests and diagnostics:
    /// it stays owned by the `Mbuf`).
    pub fn as_mbuf_ptr(&self) -> *const c_void {
        self.mbuf.as_ptr().cast()
    }

    /// Gives up ownership: the caller hands the mbuf to DPDK.
    pub(crate) fn into_raw(self) -> *mut ffi::RteMbuf {
        let p = self.mbuf.as_ptr();
        std::mem::forget(self);
        p
    }

    pub(crate) fn len_u32(&self) -> u32 {
        self.len
    }
}

impl Drop for Mbuf {
    fn drop(&mut self) {
        // SAFETY: the mbuf is owned by this value alone and freed once; its
        // mempool outlives every mbuf (see `MbufPool`'s drop).
        unsafe { ffi::ustack_dpdk_free(self.mbuf.as_ptr()) }
    }
}

impl PacketBuffer for Mbuf {
    fn data(&self) -> &[u8] {
        // SAFETY: `data .. data + len` is inside the mbuf's buffer (len <=
        // room), which this value owns; nothing writes it while borrowed.
        unsafe { std::slice::from_raw_parts(self.data.as_ptr(), self.len as usize) }
    }

    fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `data`, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.data.as_ptr(), self.len as usize) }
    }

    fn set_len(&mut self, len: usize) {
        assert!(
            len <= self.room as usize,
            "frame of {len} bytes in an mbuf with room for {}",
            self.room
        );
        self.len = len as u32;
    }

    fn capacity(&self) -> usize {
        self.room as usize
    }

    fn csum_partial(&self) -> bool {
        self.csum_partial
    }

    fn set_csum_partial(&mut self, partial: bool) {
        self.csum_partial = partial;
    }

    fn gso_size(&self) -> u16 {
        self.gso_size
    }

    fn set_gso_size(&mut self, size: u16) {
        self.gso_size = size;
    }
}

/// A pktmbuf mempool made for one port queue.
pub(crate) struct MbufPool {
    pool: NonNull<ffi::RteMempool>,
    size: u32,
}

// SAFETY: the pool pointer is only used through DPDK's thread-safe mempool
// calls (multi-producer, multi-consumer ring).
unsafe impl Send for MbufPool {}

// SAFETY: every call through `&MbufPool` is a DPDK mempool call that is
// safe from several threads at once (allocation and freeing go through the
// pool's multi-producer, multi-consumer ring; a thread that is not an EAL
// lcore bypasses the per-lcore caches), or reads its fixed fields.
unsafe impl Sync for MbufPool {}

impl MbufPool {
    /// A pool of `n` mbufs with `data_room` bytes of buffer each (headroom
    /// included), on NUMA node `socket` (-1: any), with per-lcore caches
    /// when `cached`; with `packed`, its mbufs lie end to end in one chunk
    /// of memory, none skipping a page boundary (what DPDK's af_xdp driver
    /// assumes of the pool it makes its UMEM).
    pub(crate) fn create(
        name: &str,
        n: u32,
        data_room: u16,
        socket: i32,
        cached: bool,
        packed: bool,
    ) -> io::Result<MbufPool> {
        let c = CString::new(name)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pool name has a NUL"))?;
        // A per-lcore cache of up to 256, at most an eighth of the pool so a
        // small pool is not stranded in caches.
        let cache = if cached { (n / 8).min(256) } else { 0 };
        // SAFETY: `c` is a valid C string for the call; the other arguments
        // are plain values. The result is checked for NULL.
        let p = unsafe {
            ffi::ustack_dpdk_pool_create(c.as_ptr(), n, cache, data_room, socket, i32::from(packed))
        };
        match NonNull::new(p) {
            Some(pool) => Ok(MbufPool { pool, size: n }),
            None => {
                // SAFETY: reads this thread's rte_errno after the failed call.
                let err = unsafe { ffi::ustack_dpdk_errno() };
                Err(dpdk_error(
                    &format!("rte_pktmbuf_pool_create({name}, {n} mbufs of {data_room} bytes)"),
                    err,
                ))
            }
        }
    }

    pub(crate) fn as_ptr(&self) -> *mut ffi::RteMempool {
        self.pool.as_ptr()
    }

    /// A fresh mbuf, or `None` when the pool is empty.
    pub(crate) fn alloc(&self) -> Option<Mbuf> {
        let mut b = ffi::Buf {
            mbuf: std::ptr::null_mut(),
            data: std::ptr::null_mut(),
            room: 0,
            pad: 0,
        };
        // SAFETY: the pool is live; `b` is a live out-parameter.
        let r = unsafe { ffi::ustack_dpdk_alloc(self.pool.as_ptr(), &mut b) };
        if r != 0 {
            return None;
        }
        // SAFETY: the shim filled `b` with a fresh mbuf from this pool, its
        // data pointer and its tailroom.
        unsafe { Mbuf::from_buf(&b) }
    }

    /// Mbufs in the pool now (the per-lcore caches included).
    pub(crate) fn available(&self) -> u32 {
        // SAFETY: the pool is live.
        unsafe { ffi::ustack_dpdk_pool_avail(self.pool.as_ptr()) }
    }

    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// Whether `addr` lies in the memory of this pool's mbufs.
    pub(crate) fn contains(&self, addr: *const u8) -> bool {
        // SAFETY: the pool is live; the shim only compares addresses.
        unsafe { ffi::ustack_dpdk_pool_contains(self.pool.as_ptr(), addr.cast()) != 0 }
    }
}

impl Drop for MbufPool {
    fn drop(&mut self) {
        // Free the pool only when every mbuf is back: an `Mbuf` still held
        // somewhere must stay valid, so otherwise the pool is left (its
        // memory returns at exit).
        // SAFETY: the pool is live; once full, no mbuf of it is in use.
        unsafe {
            if ffi::ustack_dpdk_pool_avail(self.pool.as_ptr())
                == ffi::ustack_dpdk_pool_size(self.pool.as_ptr())
            {
                ffi::ustack_dpdk_pool_free(self.pool.as_ptr());
            }
        }
    }
}
