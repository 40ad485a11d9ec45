//! A bounded lock-free ring between exactly one producer thread and one
//! consumer thread: how engines hand frames (and the buffers back) to each
//! other when the NIC did not put a flow on the engine that owns it
//! (software steering, ARP copies for every engine, the exception path).
//!
//! The classic design: a power-of-two array of slots, a `head` the consumer
//! advances and a `tail` the producer advances, both free-running counters
//! (`tail - head` is the fill level). Each side caches the other's counter
//! and re-reads it only when the cached value says full (or empty), so a
//! push or pop in the common case touches one shared cache line, written
//! with Release and read with Acquire. The counters sit on cache lines of
//! their own so the two threads do not false-share.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A counter alone on its cache line (64 bytes on x86-64 and most ARM).
#[repr(align(64))]
struct Padded(AtomicUsize);

struct Shared<T> {
    /// Next slot the consumer reads; only the consumer stores it.
    head: Padded,
    /// Next slot the producer writes; only the producer stores it.
    tail: Padded,
    mask: usize,
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
}

// SAFETY: a value of `T` is written by the producer and then read (moved
// out) by the consumer, so it crosses threads once: `T: Send` is what that
// needs. Slots between `head` and `tail` belong to the consumer, the others
// to the producer; the Release/Acquire pairs on `tail` (producer -> consumer)
// and `head` (consumer -> producer) order each slot's write before its read
// and its read before its reuse. No slot is ever accessed by both at once.
unsafe impl<T: Send> Sync for Shared<T> {}
// SAFETY: as above; the ring owns its values and may be dropped by either
// side's thread.
unsafe impl<T: Send> Send for Shared<T> {}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        // Both ends are gone (this is the last Arc): drop what is still in
        // the ring.
        let head = *self.head.0.get_mut();
        let tail = *self.tail.0.get_mut();
        for i in head..tail {
            let slot = self.slots[i & self.mask].get_mut();
            // SAFETY: slots in [head, tail) hold values the producer wrote
            // and the consumer has not taken; each is dropped once here.
            unsafe { slot.assume_init_drop() };
        }
    }
}

/// The writing end.
pub struct Producer<T> {
    ring: Arc<Shared<T>>,
    tail: usize,
    /// The consumer's `head` as last seen.
    head_cache: usize,
}

/// The reading end.
pub struct Consumer<T> {
    ring: Arc<Shared<T>>,
    head: usize,
    /// The producer's `tail` as last seen.
    tail_cache: usize,
}

/// A ring of at least `capacity` slots (rounded up to a power of two, at
/// least 2), as its two ends.
pub fn ring<T: Send>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    let cap = capacity.max(2).next_power_of_two();
    let slots = (0..cap)
        .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
        .collect::<Vec<_>>()
        .into_boxed_slice();
    let shared = Arc::new(Shared {
        head: Padded(AtomicUsize::new(0)),
        tail: Padded(AtomicUsize::new(0)),
        mask: cap - 1,
        slots,
    });
    (
        Producer {
            ring: Arc::clone(&shared),
            tail: 0,
            head_cache: 0,
        },
        Consumer {
            ring: shared,
            head: 0,
            tail_cache: 0,
        },
    )
}

impl<T> Producer<T> {
    /// Appends `value`, or gives it back when the ring is full.
    pub fn push(&mut self, value: T) -> Result<(), T> {
        let cap = self.ring.mask + 1;
        if self.tail.wrapping_sub(self.head_cache) >= cap {
            self.head_cache = self.ring.head.0.load(Ordering::Acquire);
            if self.tail.wrapping_sub(self.head_cache) >= cap {
                return Err(value);
            }
        }
        let slot = &self.ring.slots[self.tail & self.ring.mask];
        // SAFETY: the slot is outside [head, tail) (checked above against a
        // `head` loaded with Acquire, so the consumer's read of its previous
        // value is complete), so it is the producer's alone until `tail` is
        // published below.
        unsafe { (*slot.get()).write(value) };
        self.tail = self.tail.wrapping_add(1);
        self.ring.tail.0.store(self.tail, Ordering::Release);
        Ok(())
    }

    /// Slots free now (at least; the consumer may free more meanwhile).
    pub fn free(&mut self) -> usize {
        self.head_cache = self.ring.head.0.load(Ordering::Acquire);
        self.ring.mask + 1 - self.tail.wrapping_sub(self.head_cache)
    }

    /// The ring's number of slots.
    pub fn capacity(&self) -> usize {
        self.ring.mask + 1
    }
}

impl<T> Consumer<T> {
    /// Takes the oldest value, if any.
    pub fn pop(&mut self) -> Option<T> {
        if self.head == self.tail_cache {
            self.tail_cache = self.ring.tail.0.load(Ordering::Acquire);
            if self.head == self.tail_cache {
                return None;
            }
        }
        let slot = &self.ring.slots[self.head & self.ring.mask];
        // SAFETY: the slot is inside [head, tail) for a `tail` loaded with
        // Acquire, so the producer's write of it is complete and visible, and
        // the producer will not touch it until `head` moves past it below.
        // The value is moved out once; the slot is then logically empty.
        let value = unsafe { (*slot.get()).assume_init_read() };
        self.head = self.head.wrapping_add(1);
        self.ring.head.0.store(self.head, Ordering::Release);
        Some(value)
    }

    /// Whether the ring looks empty now.
    pub fn is_empty(&mut self) -> bool {
        self.tail_cache = self.ring.tail.0.load(Ordering::Acquire);
        self.head == self.tail_cache
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_full_and_empty() {
        let (mut p, mut c) = ring::<u32>(3);
        assert_eq!(p.capacity(), 4);
        assert_eq!(c.pop(), None);
        for i in 0..4 {
            p.push(i).unwrap();
        }
        assert_eq!(p.push(9), Err(9));
        assert_eq!(p.free(), 0);
        assert_eq!(c.pop(), Some(0));
        p.push(4).unwrap();
        for i in 1..5 {
            assert_eq!(c.pop(), Some(i));
        }
        assert!(c.is_empty());
        assert_eq!(p.free(), 4);
    }

    #[test]
    fn values_left_in_the_ring_are_dropped() {
        let marker = Arc::new(());
        {
            let (mut p, mut c) = ring(8);
            for _ in 0..5 {
                p.push(Arc::clone(&marker)).unwrap();
            }
            drop(c.pop());
            assert_eq!(Arc::strong_count(&marker), 5);
        }
        assert_eq!(Arc::strong_count(&marker), 1);
    }

    #[test]
    fn two_threads_see_every_value_in_order() {
        const N: u64 = 200_000;
        let (mut p, mut c) = ring::<Box<u64>>(64);
        let producer = std::thread::spawn(move || {
            for i in 0..N {
                let mut v = Box::new(i);
                loop {
                    match p.push(v) {
                        Ok(()) => break,
                        Err(back) => {
                            v = back;
                            std::hint::spin_loop();
                        }
                    }
                }
            }
        });
        let mut next = 0;
        while next < N {
            if let Some(v) = c.pop() {
                assert_eq!(*v, next);
                next += 1;
            } else {
                std::thread::yield_now();
            }
        }
        producer.join().unwrap();
        assert_eq!(c.pop(), None);
    }
}
