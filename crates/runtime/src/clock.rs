//! The engine's clock: monotonic time since the engine started, in the
//! stack's units.

use stack::Instant;

#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: std::time::Instant,
}

impl Clock {
    pub fn new() -> Self {
        Clock {
            start: std::time::Instant::now(),
        }
    }

    pub fn now(&self) -> Instant {
        Instant::from_micros(self.start.elapsed().as_micros() as u64)
    }

    /// The wall-clock instant of a stack instant.
    pub fn to_std(&self, t: Instant) -> std::time::Instant {
        self.start + std::time::Duration::from_micros(t.total_micros())
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}
