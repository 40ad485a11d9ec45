//! The process-wide fd table: which worker owns each ustack fd and what
//! kind of object it is.  Lookups are two atomic loads, so every call can
//! afford one (the fast path compares the owner with the calling thread's
//! worker).

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::OnceLock;

const CHUNK: usize = 4096;
const CHUNKS: usize = 1024;

/// The fd numbers the table can hold (the kernel's limit is usually lower).
pub(crate) const MAX_FDS: usize = CHUNK * CHUNKS;

static TABLE: [OnceLock<Box<[AtomicU32]>>; CHUNKS] = [const { OnceLock::new() }; CHUNKS];

/// How many numbers the table holds.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// What a ustack fd stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Socket,
    Epoll,
    Kqueue,
}

/// The owner and kind of a ustack fd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    pub worker: u32,
    pub kind: Kind,
}

impl Entry {
    fn pack(self) -> u32 {
        let kind = match self.kind {
            Kind::Socket => 1,
            Kind::Epoll => 2,
            Kind::Kqueue => 3,
        };
        (self.worker << 2) | kind
    }

    fn unpack(v: u32) -> Option<Entry> {
        let kind = match v & 3 {
            1 => Kind::Socket,
            2 => Kind::Epoll,
            3 => Kind::Kqueue,
            _ => return None,
        };
        Some(Entry {
            worker: v >> 2,
            kind,
        })
    }
}

fn slot(fd: RawFd, create: bool) -> Option<&'static AtomicU32> {
    let fd = usize::try_from(fd).ok().filter(|&f| f < MAX_FDS)?;
    let chunk = &TABLE[fd / CHUNK];
    let chunk = if create {
        chunk.get_or_init(|| (0..CHUNK).map(|_| AtomicU32::new(0)).collect())
    } else {
        chunk.get()?
    };
    Some(&chunk[fd % CHUNK])
}

/// The owner of `fd`, if it is a ustack fd.
pub(crate) fn lookup(fd: RawFd) -> Option<Entry> {
    Entry::unpack(slot(fd, false)?.load(Ordering::Acquire))
}

/// Records a new ustack fd; false if the number is beyond the table.
pub(crate) fn insert(fd: RawFd, entry: Entry) -> bool {
    match slot(fd, true) {
        Some(s) => {
            if s.swap(entry.pack(), Ordering::AcqRel) == 0 {
                LIVE.fetch_add(1, Ordering::AcqRel);
            }
            true
        }
        None => false,
    }
}

/// Forgets `fd` (before its number goes back to the kernel).
pub(crate) fn remove(fd: RawFd) {
    if let Some(s) = slot(fd, false) {
        if s.swap(0, Ordering::AcqRel) != 0 {
            LIVE.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// How many ustack fd numbers the process holds.
pub(crate) fn live() -> usize {
    LIVE.load(Ordering::Acquire)
}

/// Forgets every fd (a child after fork: the objects are its parent's).
pub(crate) fn clear() {
    for chunk in TABLE.iter().filter_map(|c| c.get()) {
        for s in chunk.iter() {
            s.store(0, Ordering::Release);
        }
    }
    LIVE.store(0, Ordering::Release);
}
