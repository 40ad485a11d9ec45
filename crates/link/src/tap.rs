//! A TAP device (`/dev/net/tun`): development and interop against the host.
//!
//! The device is opened with `IFF_TAP | IFF_NO_PI | IFF_VNET_HDR`, so every
//! frame is preceded by a 10-byte `struct virtio_net_hdr`. On receive its
//! `NEEDS_CSUM` flag marks frames whose L4 checksum the kernel left partial
//! (it does so once `TUN_F_CSUM` is offered, which this link does by default:
//! a real peer behaves that way, and the stack must cope); the buffer's
//! `csum_partial` is set from it. On transmit a zeroed header is written:
//! frames leave complete, no offload asked. TSO/UFO are never offered, so no
//! GSO super-frame ever arrives.
//!
//! The kernel side of a TAP is a different host on the same wire: the stack
//! gets its own locally administered MAC, not the device's.
//!
//! A device created here (not persistent) disappears when the link is
//! dropped; an existing persistent device (`ip tuntap add mode tap`) is
//! attached to and left in place.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::fault::SplitMix64;
use crate::ifreq::{cvt, ioctl_ifreq, CtlSocket, IfReq};
use crate::pool::{PacketPool, PoolBuf, PoolStats};
use crate::{Link, LinkInfo, LinkStats, PacketBuffer, MAX_BURST};

/// `sizeof(struct virtio_net_hdr)`: flags, gso_type, hdr_len, gso_size,
/// csum_start, csum_offset.
const VNET_HDR_LEN: usize = 10;
/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`, in the header's first byte.
const VNET_F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_NONE`, in the header's second byte.
const VNET_GSO_NONE: u8 = 0;
/// Ethernet header and one VLAN tag.
const FRAME_OVERHEAD: usize = 18;

/// Choices when opening a TAP device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapOptions {
    /// Offer `TUN_F_CSUM`: the kernel may then send frames with partial
    /// checksums (flagged `csum_partial`). On by default.
    pub csum_offload: bool,
    /// The stack's MAC; `None` picks a random locally administered one.
    pub mac: Option<[u8; 6]>,
    /// Open one queue of a multi-queue device (`IFF_MULTI_QUEUE`): every
    /// engine opens its own, and the kernel spreads the frames it sends
    /// over the queues by its own flow hash.
    pub multi_queue: bool,
}

impl Default for TapOptions {
    fn default() -> TapOptions {
        TapOptions {
            csum_offload: true,
            mac: None,
            multi_queue: false,
        }
    }
}

/// A link over a TAP device.
pub struct TapLink {
    fd: OwnedFd,
    pool: PacketPool,
    info: LinkInfo,
    kernel_mac: [u8; 6],
    rx_frames: u64,
    rx_bytes: u64,
    tx_frames: u64,
    tx_bytes: u64,
    tx_dropped: u64,
    rx_oversize: u64,
    /// The device's `tx_dropped` (frames the kernel could not queue to us)
    /// when the link was opened.
    kernel_drops_at_open: u64,
}

impl TapLink {
    /// Creates the TAP device `name` (or attaches to it if it exists), brings
    /// it up and offers checksum offload. `name` may hold a `%d` for the
    /// kernel to number.
    pub fn open(name: &str, pool: PacketPool) -> io::Result<TapLink> {
        TapLink::open_with(name, pool, &TapOptions::default())
    }

    /// Like [`TapLink::open`], as `options` say.
    ///
    /// The link's MTU is the device's, or less when the pool's buffers
    /// (`buf_size - 18`) cannot hold a full frame; larger frames are dropped
    /// and counted in `rx_oversize`.
    pub fn open_with(name: &str, pool: PacketPool, options: &TapOptions) -> io::Result<TapLink> {
        let path = CString::new("/dev/net/tun").expect("no NUL in a literal");
        // SAFETY: `path` is a valid NUL-terminated string; the result is
        // checked before use.
        let raw = cvt(unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        })?;
        // SAFETY: `raw` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };

        let mut req = IfReq::new(name)?;
        let mq = if options.multi_queue {
            libc::IFF_MULTI_QUEUE
        } else {
            0
        };
        req.data.flags =
            (libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_VNET_HDR | mq) as libc::c_short;

        ioctl_ifreq(fd.as_raw_fd(), libc::TUNSETIFF as libc::c_ulong, &mut req)?;
        let name = req.name();

        let hdr_len: libc::c_int = VNET_HDR_LEN as libc::c_int;
        // SAFETY: TUNSETVNETHDRSZ reads one `int` through the pointer, which
        // points at a live local.
        cvt(unsafe {
            libc::ioctl(
                fd.as_raw_fd(),
                libc::TUNSETVNETHDRSZ as _,
                &hdr_len as *const libc::c_int,
            )
        })?;
        set_offload(&fd, options.csum_offload)?;

        let ctl = CtlSocket::new()?;
        ctl.set_up(&name)?;
        let dev_mtu = ctl.mtu(&name)?;
        let kernel_mac = ctl.hwaddr(&name)?;
        let mtu = dev_mtu.min(pool.buf_size().saturating_sub(FRAME_OVERHEAD));
        let mac = options.mac.unwrap_or_else(|| random_local_mac(&name));
        let kernel_drops_at_open = read_kernel_drops(&name);
        Ok(TapLink {
            fd,
            pool,
            info: LinkInfo { name, mac, mtu },
            kernel_mac,
            rx_frames: 0,
            rx_bytes: 0,
            tx_frames: 0,
            tx_bytes: 0,
            tx_dropped: 0,
            rx_oversize: 0,
            kernel_drops_at_open,
        })
    }

    /// Offers (or withdraws) checksum offload to the kernel: with it on,
    /// the kernel may send frames with partial checksums.
    pub fn set_csum_offload(&mut self, on: bool) -> io::Result<()> {
        set_offload(&self.fd, on)
    }

    /// Sets the stack's MAC.
    pub fn set_mac(&mut self, mac: [u8; 6]) {
        self.info.mac = mac;
    }

    /// Gives the kernel's side of the device the Ethernet address `mac`: an
    /// exception path (KNI) shares the port's address with the kernel, so
    /// that frames from the wire to the port are the kernel's too.
    pub fn set_kernel_mac(&mut self, mac: [u8; 6]) -> io::Result<()> {
        CtlSocket::new()?.set_hwaddr(&self.info.name, mac)?;
        self.kernel_mac = mac;
        Ok(())
    }

    /// The MAC of the kernel's side of the device (the other host).
    pub fn kernel_mac(&self) -> [u8; 6] {
        self.kernel_mac
    }

    /// The pool's levels and counters.
    pub fn pool_stats(&self) -> PoolStats {
        self.pool.stats()
    }

    /// Reads one frame into `buf`. `Ok(None)` when nothing waits.
    fn read_one(&mut self, buf: &mut PoolBuf) -> io::Result<Option<ReadOutcome>> {
        let mut hdr = [0u8; VNET_HDR_LEN];
        let storage = buf.storage_mut();
        let cap = storage.len();
        let iov = [
            libc::iovec {
                iov_base: hdr.as_mut_ptr().cast(),
                iov_len: hdr.len(),
            },
            libc::iovec {
                iov_base: storage.as_mut_ptr().cast(),
                iov_len: cap,
            },
        ];
        loop {
            // SAFETY: both iovecs point at live, writable memory of the
            // stated lengths (`hdr` and the buffer's storage), borrowed for
            // the call only.
            let n = unsafe { libc::readv(self.fd.as_raw_fd(), iov.as_ptr(), 2) };
            if n >= 0 {
                let n = n as usize;
                if n < VNET_HDR_LEN {
                    return Ok(Some(ReadOutcome::Bad));
                }
                let len = n - VNET_HDR_LEN;
                // tun reports the frame's full length even when it had to
                // cut it short to fit our buffer.
                if len > cap || hdr[1] != VNET_GSO_NONE {
                    return Ok(Some(ReadOutcome::Oversize));
                }
                buf.set_len(len);
                buf.set_csum_partial(hdr[0] & VNET_F_NEEDS_CSUM != 0);
                return Ok(Some(ReadOutcome::Frame));
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => return Ok(None),
                Some(libc::EFAULT) | Some(libc::EINVAL) => return Ok(Some(ReadOutcome::Oversize)),
                _ => return Err(err),
            }
        }
    }

    /// Writes one frame. `Ok(false)` when the device would block.
    fn write_one(&self, frame: &[u8]) -> io::Result<bool> {
        let hdr = [0u8; VNET_HDR_LEN];
        let iov = [
            libc::iovec {
                iov_base: hdr.as_ptr() as *mut libc::c_void,
                iov_len: hdr.len(),
            },
            libc::iovec {
                iov_base: frame.as_ptr() as *mut libc::c_void,
                iov_len: frame.len(),
            },
        ];
        loop {
            // SAFETY: both iovecs point at live memory of the stated lengths;
            // writev only reads through them.
            let n = unsafe { libc::writev(self.fd.as_raw_fd(), iov.as_ptr(), 2) };
            if n >= 0 {
                return Ok(true);
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => return Ok(false),
                _ => return Err(err),
            }
        }
    }
}

enum ReadOutcome {
    Frame,
    Oversize,
    Bad,
}

impl Link for TapLink {
    type Buf = PoolBuf;

    fn rx_burst(&mut self, out: &mut Vec<PoolBuf>, max: usize) -> io::Result<usize> {
        let max = max.min(MAX_BURST);
        let mut n = 0;
        while n < max {
            // Receive may use the reserve (DESIGN.md, "Memory").
            let Some(mut buf) = self.pool.alloc_reserved() else {
                break;
            };
            match self.read_one(&mut buf) {
                Ok(Some(ReadOutcome::Frame)) => {
                    self.rx_frames += 1;
                    self.rx_bytes += buf.data().len() as u64;
                    out.push(buf);
                    n += 1;
                }
                Ok(Some(ReadOutcome::Oversize)) | Ok(Some(ReadOutcome::Bad)) => {
                    self.rx_oversize += 1;
                    self.pool.free(buf);
                }
                Ok(None) => {
                    self.pool.free(buf);
                    break;
                }
                Err(e) => {
                    self.pool.free(buf);
                    if n == 0 {
                        return Err(e);
                    }
                    break;
                }
            }
        }
        Ok(n)
    }

    fn alloc_tx(&mut self) -> Option<PoolBuf> {
        self.pool.alloc()
    }

    fn alloc_tx_reserved(&mut self) -> Option<PoolBuf> {
        self.pool.alloc_reserved()
    }

    fn tx_burst(&mut self, bufs: &mut Vec<PoolBuf>) -> io::Result<usize> {
        let mut taken = 0;
        for buf in bufs.iter() {
            match self.write_one(buf.data()) {
                Ok(true) => {
                    self.tx_frames += 1;
                    self.tx_bytes += buf.data().len() as u64;
                }
                Ok(false) => break,
                // A frame the device refuses (too short, too long, device
                // down) is dropped and counted; the rest still go.
                Err(_) => self.tx_dropped += 1,
            }
            taken += 1;
        }
        for buf in bufs.drain(..taken) {
            self.pool.free(buf);
        }
        Ok(taken)
    }

    fn recycle(&mut self, buf: PoolBuf) {
        self.pool.free(buf);
    }

    fn info(&self) -> &LinkInfo {
        &self.info
    }

    fn stats(&self) -> LinkStats {
        LinkStats {
            rx_frames: self.rx_frames,
            rx_bytes: self.rx_bytes,
            tx_frames: self.tx_frames,
            tx_bytes: self.tx_bytes,
            rx_dropped: read_kernel_drops(&self.info.name)
                .saturating_sub(self.kernel_drops_at_open),
            tx_dropped: self.tx_dropped,
            pool_exhausted: self.pool.stats().exhausted,
            rx_oversize: self.rx_oversize,
            rx_copied: 0,
            ring_errors: 0,
            rx_csum_partial_form: 0,
            rx_super_frames: 0,
            rx_super_cut: 0,
            rx_queued_whole: 0,
            rx_super_bad_checksum: 0,
            rx_gro_aggregates: 0,
            rx_gro_joined: 0,
            tx_super_frames: 0,
            tx_kick_short: 0,
            tx_csum_partial: 0,
            tx_csum_refused: 0,
            rx_vnet: Default::default(),
            kernel_rx_drop_refused: 0,
        }
    }

    fn rx_fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }
    /// Unmapping the rings and closing the fd in a child leave the
    /// parent's socket as it is.
    fn droppable_in_fork_child(&self) -> bool {
        true
    }
}

/// TUNSETOFFLOAD: `TUN_F_CSUM` or nothing (never TSO/UFO: no GSO frames).
fn set_offload(fd: &OwnedFd, csum: bool) -> io::Result<()> {
    let flags: libc::c_ulong = if csum {
        libc::TUN_F_CSUM as libc::c_ulong
    } else {
        0
    };
    // SAFETY: TUNSETOFFLOAD takes its argument by value (a flag word), not
    // through a pointer.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETOFFLOAD as _, flags) })?;
    Ok(())
}

/// Frames the kernel dropped on their way to us: the device's own transmit
/// drops. Zero when sysfs cannot tell.
fn read_kernel_drops(name: &str) -> u64 {
    fs::read_to_string(format!("/sys/class/net/{name}/statistics/tx_dropped"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// A locally administered unicast MAC that differs from run to run.
pub(crate) fn random_local_mac(salt: &str) -> [u8; 6] {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut seed = nanos ^ (u64::from(std::process::id()) << 32);
    for b in salt.bytes() {
        seed = seed.rotate_left(8) ^ u64::from(b);
    }
    let bytes = SplitMix64::new(seed).next_u64().to_le_bytes();
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&bytes[..6]);
    mac[0] = (mac[0] & 0xfc) | 0x02;
    mac
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_net::{arp_request, is_arp_reply_from, is_root, receive, run, Cleanup};
    use std::time::Duration;

    #[test]
    fn random_mac_is_local_unicast() {
        for i in 0..100 {
            let m = random_local_mac(&format!("x{i}"));
            assert_eq!(m[0] & 0x01, 0, "unicast");
            assert_eq!(m[0] & 0x02, 0x02, "locally administered");
        }
    }

    #[test]
    fn bad_names_are_refused() {
        let pool = || PacketPool::new(2048, 4);
        assert!(TapLink::open("", pool()).is_err());
        assert!(TapLink::open("a-name-far-too-long", pool()).is_err());
    }

    #[test]
    fn tap_arp_round_trip_with_kernel() {
        if !is_root() {
            eprintln!("skipped: TAP test needs root");
            return;
        }
        let pid = std::process::id();
        let name = format!("ustk{pid}");
        let x = (100 + pid % 100) as u8;
        let _guard = Cleanup::new(vec![vec![
            "ip".into(),
            "link".into(),
            "del".into(),
            name.clone(),
        ]]);
        let mut link = TapLink::open(&name, PacketPool::with_reserve(2048, 256, 16)).unwrap();
        assert_eq!(link.info().name, name);
        assert_eq!(link.info().mtu, 1500);
        assert_ne!(link.info().mac, link.kernel_mac());
        assert!(link.rx_fd().is_some());
        // Keep the kernel quiet on this device: no IPv6 chatter.
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6"), "1");
        run(&[
            "ip",
            "addr",
            "add",
            &format!("10.99.{x}.1/24"),
            "dev",
            &name,
        ]);

        let kernel_ip = [10, 99, x, 1];
        let mac = link.info().mac;
        let mut tx = link.alloc_tx().unwrap();
        let req = arp_request(mac, [10, 99, x, 2], kernel_ip);
        tx.set_len(req.len());
        tx.data_mut().copy_from_slice(&req);
        let mut v = vec![tx];
        assert_eq!(link.tx_burst(&mut v).unwrap(), 1);
        assert!(v.is_empty());

        let got = receive(&mut link, 1, Duration::from_secs(5), |b| {
            is_arp_reply_from(b.data(), mac, kernel_ip)
        });
        assert_eq!(got.len(), 1, "no ARP reply from the kernel");
        assert_eq!(got[0].0[6..12], link.kernel_mac());
        // Datagrams from the kernel: with checksum offload offered, the
        // checksum is left partial and flagged; without, it is complete.
        let mac_s = mac.map(|b| format!("{b:02x}")).join(":");
        let me = format!("10.99.{x}.2");
        run(&[
            "ip",
            "neigh",
            "replace",
            &me,
            "lladdr",
            &mac_s,
            "dev",
            &name,
            "nud",
            "permanent",
        ]);
        let sock = std::net::UdpSocket::bind(format!("10.99.{x}.1:0")).unwrap();
        for (offload, port) in [(true, 9001u16), (false, 9002u16)] {
            link.set_csum_offload(offload).unwrap();
            sock.send_to(b"hello-tap", (me.as_str(), port)).unwrap();
            let got = receive(&mut link, 1, Duration::from_secs(5), |b| {
                let d = b.data();
                d.len() >= 42
                    && d[12..14] == [0x08, 0x00]
                    && d[23] == 17
                    && d[36..38] == port.to_be_bytes()
            });
            assert_eq!(got.len(), 1, "no UDP datagram (offload {offload})");
            assert!(got[0].0.ends_with(b"hello-tap"));
            assert_eq!(got[0].1, offload, "csum_partial follows the offload");
        }

        let s = link.stats();
        assert_eq!(s.tx_frames, 1);
        assert!(s.rx_frames >= 1);
        assert_eq!(link.pool_stats().available, 256);
    }
}
