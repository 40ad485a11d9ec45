//! The links a port can be opened on, behind one type, so one engine can
//! drive ports of different kinds (a TAP and an AF_PACKET port together).

use std::io;
use std::os::fd::RawFd;

use link::{AfPacketLink, FaultLink, Link, LinkInfo, LinkStats, MemoryLink, PoolBuf, TapLink};

/// A link whose frames live in pool buffers.
pub enum PortLink {
    Tap(TapLink),
    AfPacket(AfPacketLink),
    Memory(MemoryLink),
    /// Any of the above behind the fault injector (`[fault]`).
    Faulty(Box<FaultLink<PortLink>>),
}

macro_rules! each {
    ($self:expr, $l:ident => $e:expr) => {
        match $self {
            PortLink::Tap($l) => $e,
            PortLink::AfPacket($l) => $e,
            PortLink::Memory($l) => $e,
            PortLink::Faulty($l) => $e,
        }
    };
}

impl PortLink {
    /// The fault injector's counters, when there is one.
    pub fn fault_stats(&self) -> Option<link::FaultStats> {
        match self {
            PortLink::Faulty(f) => Some(f.fault_stats()),
            _ => None,
        }
    }

    /// The kind of link, as the config names it.
    pub fn kind(&self) -> &'static str {
        match self {
            PortLink::Tap(_) => "tap",
            PortLink::AfPacket(_) => "af_packet",
            PortLink::Memory(_) => "memory",
            PortLink::Faulty(f) => f.inner().kind(),
        }
    }
}

impl Link for PortLink {
    type Buf = PoolBuf;

    fn rx_burst(&mut self, out: &mut Vec<PoolBuf>, max: usize) -> io::Result<usize> {
        each!(self, l => l.rx_burst(out, max))
    }

    fn alloc_tx(&mut self) -> Option<PoolBuf> {
        each!(self, l => l.alloc_tx())
    }

    fn alloc_tx_reserved(&mut self) -> Option<PoolBuf> {
        each!(self, l => l.alloc_tx_reserved())
    }

    fn tx_burst(&mut self, bufs: &mut Vec<PoolBuf>) -> io::Result<usize> {
        each!(self, l => l.tx_burst(bufs))
    }

    fn recycle(&mut self, buf: PoolBuf) {
        each!(self, l => l.recycle(buf))
    }

    fn info(&self) -> &LinkInfo {
        each!(self, l => l.info())
    }

    fn stats(&self) -> LinkStats {
        each!(self, l => l.stats())
    }

    fn service(&mut self) -> io::Result<()> {
        match self {
            PortLink::Faulty(f) => f.poll(),
            _ => Ok(()),
        }
    }

    fn next_event(&self) -> Option<std::time::Instant> {
        match self {
            PortLink::Faulty(f) => f.next_event(),
            _ => None,
        }
    }

    fn rx_fd(&self) -> Option<RawFd> {
        each!(self, l => l.rx_fd())
    }

    fn tx_checksum_offload(&self) -> bool {
        each!(self, l => l.tx_checksum_offload())
    }
}
