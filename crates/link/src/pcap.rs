//! Frame capture to a classic pcap file (LINKTYPE_ETHERNET, microsecond
//! timestamps, little-endian), and a link wrapper that captures both ways.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::{Link, LinkInfo, LinkStats, PacketBuffer};

/// The classic pcap magic, microsecond timestamps.
const MAGIC: u32 = 0xa1b2_c3d4;
const VERSION_MAJOR: u16 = 2;
const VERSION_MINOR: u16 = 4;
/// LINKTYPE_ETHERNET.
const LINKTYPE_ETHERNET: u32 = 1;

/// Writes frames as pcap records.
pub struct PcapWriter<W: Write> {
    out: W,
    snaplen: u32,
}

impl PcapWriter<BufWriter<File>> {
    /// Creates (truncates) the file at `path` and writes the file header.
    pub fn create(path: impl AsRef<Path>, snaplen: u32) -> io::Result<Self> {
        PcapWriter::new(BufWriter::new(File::create(path)?), snaplen)
    }
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header to `out`; frames are cut to `snaplen` bytes
    /// (0 means 65535).
    pub fn new(mut out: W, snaplen: u32) -> io::Result<Self> {
        let snaplen = if snaplen == 0 { 65535 } else { snaplen };
        let mut hdr = [0u8; 24];
        hdr[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        hdr[4..6].copy_from_slice(&VERSION_MAJOR.to_le_bytes());
        hdr[6..8].copy_from_slice(&VERSION_MINOR.to_le_bytes());
        // thiszone (8..12) and sigfigs (12..16) stay zero.
        hdr[16..20].copy_from_slice(&snaplen.to_le_bytes());
        hdr[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&hdr)?;
        Ok(PcapWriter { out, snaplen })
    }

    /// Appends one frame, stamped `ts` after the Unix epoch.
    pub fn write_frame(&mut self, ts: Duration, frame: &[u8]) -> io::Result<()> {
        self.write_cut_frame(ts, frame.len(), frame)
    }

    /// Appends the first bytes of a frame `orig_len` long (cut already
    /// by whoever captured it), stamped `ts` after the Unix epoch.
    pub fn write_cut_frame(
        &mut self,
        ts: Duration,
        orig_len: usize,
        data: &[u8],
    ) -> io::Result<()> {
        let caplen = data.len().min(self.snaplen as usize);
        let mut rec = [0u8; 16];
        rec[0..4].copy_from_slice(&(ts.as_secs() as u32).to_le_bytes());
        rec[4..8].copy_from_slice(&ts.subsec_micros().to_le_bytes());
        rec[8..12].copy_from_slice(&(caplen as u32).to_le_bytes());
        rec[12..16].copy_from_slice(&(orig_len.max(caplen) as u32).to_le_bytes());
        self.out.write_all(&rec)?;
        self.out.write_all(&data[..caplen])
    }

    /// Flushes buffered records.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The underlying writer.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Where a [`PcapLink`] puts its frames: one pcap file, or a series.
pub trait FrameRecorder {
    /// Records one frame, stamped `ts` after the Unix epoch.
    fn record(&mut self, ts: Duration, frame: &[u8]) -> io::Result<()>;
    /// Writes out what is buffered.
    fn flush(&mut self) -> io::Result<()>;
}

impl<W: Write> FrameRecorder for PcapWriter<W> {
    fn record(&mut self, ts: Duration, frame: &[u8]) -> io::Result<()> {
        self.write_frame(ts, frame)
    }

    fn flush(&mut self) -> io::Result<()> {
        PcapWriter::flush(self)
    }
}

/// Bytes of a pcap file's header, and of a record's.
const FILE_HEADER: u64 = 24;
const RECORD_HEADER: u64 = 16;

/// A series of pcap files of at most `savelen` bytes each (F-Stack's
/// `[pcap] savelen`): `PREFIX-0.pcap`, `PREFIX-1.pcap`, ... each a whole
/// pcap file with its own header.  What is buffered is written out at
/// least once a second, so a reader sees frames while the capture runs.
pub struct PcapSeries {
    prefix: PathBuf,
    snaplen: u32,
    savelen: u64,
    index: u32,
    file: PcapWriter<BufWriter<File>>,
    written: u64,
    last_flush: Duration,
}

impl PcapSeries {
    /// Starts the series with `PREFIX-0.pcap` (`prefix` is a path without
    /// the extension).
    pub fn create(prefix: impl Into<PathBuf>, snaplen: u32, savelen: u64) -> io::Result<Self> {
        let prefix = prefix.into();
        let file = PcapWriter::create(Self::path_of(&prefix, 0), snaplen)?;
        Ok(PcapSeries {
            prefix,
            snaplen,
            savelen,
            index: 0,
            file,
            written: FILE_HEADER,
            last_flush: Duration::ZERO,
        })
    }

    fn path_of(prefix: &Path, index: u32) -> PathBuf {
        let mut name = prefix.as_os_str().to_owned();
        name.push(format!("-{index}.pcap"));
        PathBuf::from(name)
    }

    /// The file being written.
    pub fn current_path(&self) -> PathBuf {
        Self::path_of(&self.prefix, self.index)
    }
}

impl FrameRecorder for PcapSeries {
    fn record(&mut self, ts: Duration, frame: &[u8]) -> io::Result<()> {
        let size = RECORD_HEADER + frame.len().min(self.snaplen as usize) as u64;
        // A file holds at least one record, whatever `savelen` says.
        if self.written > FILE_HEADER && self.written + size > self.savelen {
            self.file.flush()?;
            self.index += 1;
            self.file = PcapWriter::create(Self::path_of(&self.prefix, self.index), self.snaplen)?;
            self.written = FILE_HEADER;
        }
        self.file.write_frame(ts, frame)?;
        self.written += size;
        if ts.saturating_sub(self.last_flush) >= Duration::from_secs(1) {
            self.last_flush = ts;
            self.file.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// A link that writes every frame it receives or sends to a pcap file.
///
/// Transmitted frames are captured when handed to the inner link; frames the
/// inner link leaves in the vector are not captured again on the retry that
/// follows (they are assumed to be the front of the next `tx_burst`).
pub struct PcapLink<L: Link, R: FrameRecorder = PcapWriter<BufWriter<File>>> {
    inner: L,
    writer: R,
    /// Frames at the front of the caller's vector captured already.
    tx_captured_front: usize,
    write_errors: u64,
}

impl<L: Link, R: FrameRecorder> PcapLink<L, R> {
    /// Wraps `inner`, capturing into `writer`.
    pub fn new(inner: L, writer: R) -> Self {
        PcapLink {
            inner,
            writer,
            tx_captured_front: 0,
            write_errors: 0,
        }
    }

    /// Records that could not be written.
    pub fn write_errors(&self) -> u64 {
        self.write_errors
    }

    /// Flushes the capture.
    pub fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }

    /// The link wrapped.
    pub fn inner(&self) -> &L {
        &self.inner
    }

    /// The link wrapped, mutably (frames sent through it are not captured).
    pub fn inner_mut(&mut self) -> &mut L {
        &mut self.inner
    }

    /// Takes the link and the writer apart.
    pub fn into_parts(self) -> (L, R) {
        (self.inner, self.writer)
    }

    fn capture(&mut self, ts: Duration, frame: &[u8]) {
        if self.writer.record(ts, frame).is_err() {
            self.write_errors += 1;
        }
    }
}

fn now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

impl<L: Link, R: FrameRecorder> Link for PcapLink<L, R> {
    type Buf = L::Buf;

    fn tx_checksum_offload(&self) -> bool {
        self.inner.tx_checksum_offload()
    }

    fn rx_ip_checksum_offload(&self) -> bool {
        self.inner.rx_ip_checksum_offload()
    }

    fn lend_budget(&self) -> usize {
        self.inner().lend_budget()
    }

    fn rx_burst(&mut self, out: &mut Vec<L::Buf>, max: usize) -> io::Result<usize> {
        let start = out.len();
        let n = self.inner.rx_burst(out, max)?;
        if n > 0 {
            let ts = now();
            for b in &out[start..] {
                self.capture(ts, b.data());
            }
        }
        Ok(n)
    }

    fn alloc_tx(&mut self) -> Option<L::Buf> {
        self.inner.alloc_tx()
    }

    fn alloc_tx_reserved(&mut self) -> Option<L::Buf> {
        self.inner.alloc_tx_reserved()
    }

    fn tx_burst(&mut self, bufs: &mut Vec<L::Buf>) -> io::Result<usize> {
        let ts = now();
        let skip = self.tx_captured_front.min(bufs.len());
        for b in &bufs[skip..] {
            self.capture(ts, b.data());
        }
        let result = self.inner.tx_burst(bufs);
        self.tx_captured_front = bufs.len();
        result
    }

    fn recycle(&mut self, buf: L::Buf) {
        self.inner.recycle(buf);
    }

    fn info(&self) -> &LinkInfo {
        self.inner.info()
    }

    fn stats(&self) -> LinkStats {
        self.inner.stats()
    }

    fn service(&mut self) -> io::Result<()> {
        self.inner.service()
    }

    fn next_event(&self) -> Option<std::time::Instant> {
        self.inner.next_event()
    }

    fn rx_fd(&self) -> Option<RawFd> {
        self.inner.rx_fd()
    }

    fn serve_addresses(
        &self,
        v4: &[std::net::Ipv4Addr],
        v6: &[std::net::Ipv6Addr],
    ) -> std::io::Result<bool> {
        self.inner.serve_addresses(v4, v6)
    }

    fn serve_kernel_ports(
        &self,
        mode: crate::KernelPorts,
        tcp: &[u16],
        udp: &[u16],
    ) -> std::io::Result<bool> {
        self.inner.serve_kernel_ports(mode, tcp, udp)
    }
}

impl<L: Link, R: FrameRecorder> PcapLink<L, R> {
    /// Captures a frame the engine handled outside the link (for example
    /// one consumed by the dispatcher hook), stamped now.
    pub fn capture_frame(&mut self, frame: &[u8]) {
        self.capture(now(), frame);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryLink;
    use crate::MAX_BURST;

    #[test]
    fn header_and_records_are_classic_pcap() {
        let mut w = PcapWriter::new(Vec::new(), 0).unwrap();
        w.write_frame(Duration::new(1_700_000_000, 123_456_000), &[1, 2, 3])
            .unwrap();
        let bytes = w.into_inner();
        assert_eq!(&bytes[0..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(u16::from_le_bytes([bytes[4], bytes[5]]), 2);
        assert_eq!(u16::from_le_bytes([bytes[6], bytes[7]]), 4);
        assert_eq!(&bytes[16..20], &65535u32.to_le_bytes());
        assert_eq!(&bytes[20..24], &1u32.to_le_bytes());
        let rec = &bytes[24..];
        assert_eq!(&rec[0..4], &1_700_000_000u32.to_le_bytes());
        assert_eq!(&rec[4..8], &123_456u32.to_le_bytes());
        assert_eq!(&rec[8..12], &3u32.to_le_bytes());
        assert_eq!(&rec[12..16], &3u32.to_le_bytes());
        assert_eq!(&rec[16..], &[1, 2, 3]);
    }

    #[test]
    fn snaplen_cuts_frames() {
        let mut w = PcapWriter::new(Vec::new(), 2).unwrap();
        w.write_frame(Duration::ZERO, &[9, 8, 7]).unwrap();
        let bytes = w.into_inner();
        assert_eq!(&bytes[24 + 8..24 + 12], &2u32.to_le_bytes());
        assert_eq!(&bytes[24 + 12..24 + 16], &3u32.to_le_bytes());
        assert_eq!(bytes.len(), 24 + 16 + 2);
    }

    #[test]
    fn link_captures_both_ways() {
        let (a, mut b) = MemoryLink::pair(1500, 16);
        let mut cap = PcapLink::new(a, PcapWriter::new(Vec::new(), 0).unwrap());
        let mut f = cap.alloc_tx().unwrap();
        f.set_len(20);
        f.data_mut().fill(0x11);
        cap.tx_burst(&mut vec![f]).unwrap();
        let mut g = b.alloc_tx().unwrap();
        g.set_len(30);
        g.data_mut().fill(0x22);
        b.tx_burst(&mut vec![g]).unwrap();
        let mut out = Vec::new();
        assert_eq!(cap.rx_burst(&mut out, MAX_BURST).unwrap(), 1);
        let (_, w) = cap.into_parts();
        let bytes = w.into_inner();
        assert_eq!(bytes.len(), 24 + 16 + 20 + 16 + 30);
        assert_eq!(bytes[24 + 16], 0x11);
        assert_eq!(bytes[24 + 16 + 20 + 16], 0x22);
    }

    #[test]
    fn a_series_starts_a_whole_file_when_the_next_record_would_pass_savelen() {
        let dir = std::env::temp_dir().join(format!("ustack-pcap-series-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // Header 24 + two records of 16 + 100 = 256: a third goes on.
        let mut s = PcapSeries::create(dir.join("cap"), 65535, 256).unwrap();
        for i in 0..5u8 {
            s.record(Duration::from_secs(u64::from(i)), &[i; 100])
                .unwrap();
        }
        // A record bigger than savelen still gets a file of its own.
        s.record(Duration::from_secs(9), &[9; 400]).unwrap();
        assert_eq!(s.current_path(), dir.join("cap-3.pcap"));
        drop(s);
        let sizes: Vec<u64> = (0..4)
            .map(|i| {
                std::fs::metadata(dir.join(format!("cap-{i}.pcap")))
                    .unwrap()
                    .len()
            })
            .collect();
        assert_eq!(sizes, vec![256, 256, 140, 24 + 16 + 400]);
        let second = std::fs::read(dir.join("cap-1.pcap")).unwrap();
        assert_eq!(&second[..4], &MAGIC.to_le_bytes());
        assert_eq!(second[24 + 16], 2, "the third frame opens the second file");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
