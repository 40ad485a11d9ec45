//! The engine's counters for C: by name, or all of them into an array;
//! F-Stack's `ff_get_traffic`.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};

use api::Errno;
use runtime::PortLink;

use crate::{ret_int, ret_unit, EFAULT};

/// Longest counter name `struct ustack_stat` holds, NUL included.
pub const USTACK_STAT_NAME_MAX: usize = 64;

/// `struct ustack_stat`: one counter.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CStat {
    pub name: [c_char; USTACK_STAT_NAME_MAX],
    pub value: u64,
}

/// Every counter of the engine (the stack's, the loop's, the ports', the
/// dispatcher's), on the engine thread.
fn counters() -> api::Result<Vec<(String, u64)>> {
    api::with_engine::<PortLink, _>(0, |e| runtime::cores::engine_snapshot(e))?.ok_or(Errno::ENODEV)
}

/// Fills `out[..max]` with counters; returns how many there are (which
/// may be more than `max`: call again with a larger array).
///
/// # Safety
/// `out` is null (with `max` 0) or points to `max` writable ustack_stat.
#[no_mangle]
pub unsafe extern "C" fn ustack_stats(out: *mut CStat, max: c_int) -> c_int {
    let r = (|| {
        if max < 0 {
            return Err(Errno::EINVAL);
        }
        if max > 0 && out.is_null() {
            return Err(EFAULT);
        }
        let all = counters()?;
        for (i, (name, value)) in all.iter().take(max as usize).enumerate() {
            let mut s = CStat {
                name: [0; USTACK_STAT_NAME_MAX],
                value: *value,
            };
            for (d, b) in s
                .name
                .iter_mut()
                .zip(name.bytes().take(USTACK_STAT_NAME_MAX - 1))
            {
                *d = b as c_char;
            }
            // SAFETY: i < max writable entries (the caller's promise).
            unsafe { out.add(i).write(s) };
        }
        Ok(all.len() as c_int)
    })();
    ret_int(r)
}

/// One counter by name into `*value`; ENOENT when there is none.
///
/// # Safety
/// `name` is a readable C string; `value` a writable u64.
#[no_mangle]
pub unsafe extern "C" fn ustack_stat(name: *const c_char, value: *mut u64) -> c_int {
    let r = (|| {
        if name.is_null() || value.is_null() {
            return Err(EFAULT);
        }
        // SAFETY: a NUL-terminated string (the caller's promise).
        let name = unsafe { CStr::from_ptr(name) }.to_bytes();
        let v = counters()?
            .into_iter()
            .find(|(n, _)| n.as_bytes() == name)
            .map(|(_, v)| v)
            .ok_or(Errno::ENOENT)?;
        // SAFETY: a writable u64 (the caller's promise).
        unsafe { value.write_unaligned(v) };
        Ok(())
    })();
    ret_unit(r)
}

/// F-Stack's `struct ff_traffic_args`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FfTrafficArgs {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
}

/// The frames and bytes every port of the calling thread's engines
/// received and sent; EBADF off an engine's thread.
fn traffic() -> api::Result<FfTrafficArgs> {
    let mut t = FfTrafficArgs::default();
    let mut any = false;
    for i in 0.. {
        let Some(stats) = api::with_engine::<PortLink, _>(i, |e| e.link_stats())? else {
            break;
        };
        any = true;
        for s in stats {
            t.rx_packets += s.rx_frames;
            t.rx_bytes += s.rx_bytes;
            t.tx_packets += s.tx_frames;
            t.tx_bytes += s.tx_bytes;
        }
    }
    if any {
        Ok(t)
    } else {
        Err(Errno::EBADF)
    }
}

/// `ff_get_traffic(buffer)`: the engine's traffic into `buffer` as
/// `struct ff_traffic_args` (F-Stack's 32 bytes).  Off the engine's
/// thread: zeros, errno EBADF.  `buffer` NULL: nothing.
///
/// # Safety
/// `buffer` is null or points to 32 writable bytes.
#[no_mangle]
pub unsafe extern "C" fn ff_get_traffic(buffer: *mut c_void) {
    if buffer.is_null() {
        return;
    }
    let t = traffic().unwrap_or_else(|e| {
        crate::set_errno(e);
        FfTrafficArgs::default()
    });
    // SAFETY: 32 writable bytes (the caller's promise).
    unsafe { buffer.cast::<FfTrafficArgs>().write_unaligned(t) };
}
