//! Which sockets a server looks at on a loop turn: those whose readiness
//! may have changed ([`Stack::drain_ready`]) and those it asked to see
//! again (it stopped early to be fair to the others).  Idle connections
//! cost nothing per turn.

use stack::{SocketHandle, Stack};

#[derive(Debug, Default)]
pub struct ReadySet {
    again: Vec<SocketHandle>,
    batch: Vec<SocketHandle>,
}

impl ReadySet {
    pub fn new() -> Self {
        ReadySet::default()
    }

    /// Asks to see `h` on the next turn even if nothing changes.
    pub fn again(&mut self, h: SocketHandle) {
        self.again.push(h);
    }

    /// Whether something was asked for with [`ReadySet::again`].
    pub fn has_again(&self) -> bool {
        !self.again.is_empty()
    }

    /// The sockets to look at on this turn, each once.  Give the vector
    /// back with [`ReadySet::give_back`] (it keeps its allocation).
    pub fn take(&mut self, stack: &mut Stack) -> Vec<SocketHandle> {
        let mut batch = std::mem::take(&mut self.batch);
        batch.clear();
        batch.append(&mut self.again);
        stack.drain_ready(&mut batch);
        batch.sort_unstable();
        batch.dedup();
        batch
    }

    pub fn give_back(&mut self, batch: Vec<SocketHandle>) {
        self.batch = batch;
    }
}
