//! A live capture of one port's frames for `ustack pcap`: the frames that
//! pass the filter, cut to the snap length, held in a bounded queue until
//! the client reads them over the control socket.
//!
//! The engine never waits for the reader: a frame that finds the queue
//! full ([`MAX_QUEUED_BYTES`] or [`MAX_QUEUED_FRAMES`]) is dropped and
//! counted, and a capture nobody has read for [`READER_TIMEOUT`] (a
//! client killed, a stalled pipe) ends by itself.

use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::filter::Filter;

/// Bytes of frame data a capture holds for its reader at most.
pub const MAX_QUEUED_BYTES: usize = 4 << 20;
/// Frames a capture holds for its reader at most.
pub const MAX_QUEUED_FRAMES: usize = 16 * 1024;
/// Bytes of frame data one read takes at most (its reply stays small).
pub const MAX_READ_BYTES: usize = 256 * 1024;
/// A capture not read for this long ends.
pub const READER_TIMEOUT: Duration = Duration::from_secs(3);
/// The snap length when none is asked for, and the largest.
pub const MAX_SNAPLEN: u32 = 65535;

/// One captured frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedFrame {
    /// When it was seen, after the Unix epoch.
    pub ts: Duration,
    /// Its length on the wire.
    pub orig_len: u32,
    /// Its first `snaplen` bytes.
    pub data: Vec<u8>,
    /// Sent by the engine (else received).
    pub outgoing: bool,
}

/// A port's capture.
#[derive(Debug)]
pub struct LiveCapture {
    /// Says which client owns it (its reads name it).
    pub id: u64,
    filter: Filter,
    snaplen: u32,
    queue: VecDeque<CapturedFrame>,
    queued_bytes: usize,
    /// Frames that passed the filter and found the queue full.
    pub dropped: u64,
    /// Frames that passed the filter.
    pub matched: u64,
    last_read: Instant,
}

impl LiveCapture {
    pub fn new(id: u64, filter: Filter, snaplen: u32, now: Instant) -> Self {
        LiveCapture {
            id,
            filter,
            snaplen: snaplen.clamp(1, MAX_SNAPLEN),
            queue: VecDeque::new(),
            queued_bytes: 0,
            dropped: 0,
            matched: 0,
            last_read: now,
        }
    }

    /// Looks at one frame of the port: kept if it passes the filter and
    /// fits.
    #[cold]
    #[inline(never)]
    pub fn record(&mut self, frame: &[u8], outgoing: bool) {
        if !self.filter.matches(frame) {
            return;
        }
        self.matched += 1;
        let keep = frame.len().min(self.snaplen as usize);
        if self.queue.len() >= MAX_QUEUED_FRAMES || self.queued_bytes + keep > MAX_QUEUED_BYTES {
            self.dropped += 1;
            return;
        }
        let ts = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        self.queued_bytes += keep;
        self.queue.push_back(CapturedFrame {
            ts,
            orig_len: frame.len() as u32,
            data: frame[..keep].to_vec(),
            outgoing,
        });
    }

    /// Takes the frames queued, up to [`MAX_READ_BYTES`] of them (at
    /// least one), and notes the reader is alive.
    pub fn take(&mut self, now: Instant) -> Vec<CapturedFrame> {
        self.last_read = now;
        let mut out = Vec::new();
        let mut bytes = 0;
        while let Some(f) = self.queue.front() {
            if !out.is_empty() && bytes + f.data.len() > MAX_READ_BYTES {
                break;
            }
            bytes += f.data.len();
            self.queued_bytes -= f.data.len();
            if let Some(f) = self.queue.pop_front() {
                out.push(f);
            }
        }
        out
    }

    /// Frames still queued.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Nobody has read it for [`READER_TIMEOUT`].
    pub fn abandoned(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last_read) > READER_TIMEOUT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_drops_and_counts_and_reads_are_bounded() {
        let now = Instant::now();
        let mut c = LiveCapture::new(1, Filter::Any, 100_000, now);
        let frame = vec![0u8; 1500];
        let fits = MAX_QUEUED_BYTES / 1500;
        for _ in 0..fits + 10 {
            c.record(&frame, false);
        }
        assert_eq!(c.queued(), fits);
        assert_eq!(c.dropped, 10);
        assert_eq!(c.matched, fits as u64 + 10);
        let first = c.take(now);
        assert_eq!(first.len(), MAX_READ_BYTES / 1500);
        // Room again: the next frame is kept.
        c.record(&frame, true);
        assert_eq!(c.dropped, 10);
        let mut total = first.len();
        loop {
            let got = c.take(now);
            if got.is_empty() {
                break;
            }
            total += got.len();
        }
        assert_eq!(total, fits + 1);
    }

    #[test]
    fn frames_are_cut_to_the_snap_length_and_filtered() {
        let now = Instant::now();
        let mut c = LiveCapture::new(1, Filter::parse("arp").unwrap(), 20, now);
        let mut arp = vec![0u8; 60];
        arp[12] = 0x08;
        arp[13] = 0x06;
        c.record(&arp, true);
        c.record(&[0u8; 60], false);
        let got = c.take(now);
        assert_eq!(got.len(), 1);
        assert_eq!(
            (got[0].orig_len, got[0].data.len(), got[0].outgoing),
            (60, 20, true)
        );
        assert_eq!(c.matched, 1);
    }

    #[test]
    fn an_unread_capture_is_abandoned() {
        let t0 = Instant::now();
        let mut c = LiveCapture::new(1, Filter::Any, 0, t0);
        assert!(!c.abandoned(t0 + READER_TIMEOUT));
        assert!(c.abandoned(t0 + READER_TIMEOUT + Duration::from_millis(1)));
        c.take(t0 + READER_TIMEOUT);
        assert!(!c.abandoned(t0 + READER_TIMEOUT + Duration::from_millis(1)));
    }
}
