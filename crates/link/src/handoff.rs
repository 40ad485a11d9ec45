//! Handing frames between the processes of one fanout group.  The group's
//! program sends each flow to the member its hash picks modulo the number
//! of members, so when a process joins or leaves (nginx starting its
//! workers, a reload) some flows arrive at a process that does not have
//! them.  That process offers the frame to the others over this channel
//! (a Unix datagram socket per process, named in the abstract namespace
//! after the group and the process), and the one that has the flow takes
//! it.  Frames are offered only in those moments, so the channel is
//! simple: a datagram to every other member.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use crate::ifreq::cvt;

/// How often the list of the other members may be read again.
const REFRESH: Duration = Duration::from_millis(100);

/// The header of each message: its kind, whether the frame's L4 checksum
/// was left partial, the port, the offer's number.
const HEADER: usize = 8;
const OFFER: u8 = 0;
const CLAIM: u8 = 1;

/// The largest frame handed over (a jumbo frame and more).
pub const MAX_FRAME: usize = 16 * 1024;

/// This process's end of the group's handoff channel.
#[derive(Debug)]
pub struct FlowHandoff {
    fd: OwnedFd,
    /// "ustack-g{group}-p": the prefix of every member's name.
    prefix: String,
    own: String,
    peers: Vec<libc::sockaddr_un>,
    peers_len: Vec<libc::socklen_t>,
    refreshed: Option<Instant>,
    buf: Vec<u8>,
    next_id: u32,
}

/// What another member sent.
pub enum Message<'a> {
    /// A frame of a flow it does not have; if the flow is ours, say so
    /// with [`FlowHandoff::claim`].
    Offer {
        port: u16,
        csum_partial: bool,
        frame: &'a [u8],
        /// Who offered it and its number, for the claim.
        from: Sender,
    },
    /// Our offer `id` was taken by the member that has its flow.
    Claim { id: u32 },
}

/// The member that offered a frame.
#[derive(Clone, Copy)]
pub struct Sender {
    addr: libc::sockaddr_un,
    len: libc::socklen_t,
    id: u32,
}

fn abstract_addr(name: &str) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: sockaddr_un is plain data; all-zero is a valid value.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    // sun_path[0] = 0: the abstract namespace; the name follows.
    let bytes = name.as_bytes();
    let n = bytes.len().min(a.sun_path.len() - 1);
    for (d, s) in a.sun_path[1..=n].iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + n;
    (a, len as libc::socklen_t)
}

impl FlowHandoff {
    /// Opens this process's end for fanout group `group`; `engine` tells
    /// apart the ends of several engines of one process.
    pub fn open(group: u16, engine: usize) -> io::Result<FlowHandoff> {
        // SAFETY: plain socket(2) call; the result is checked before use.
        let raw = cvt(unsafe {
            libc::socket(
                libc::AF_UNIX,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                0,
            )
        })?;
        // SAFETY: `raw` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let prefix = format!("ustack-g{group}-p");
        let own = format!("{prefix}{}.{engine}", std::process::id());
        let (addr, len) = abstract_addr(&own);
        // SAFETY: `addr` is a live sockaddr_un of `len` bytes.
        cvt(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_un).cast(),
                len,
            )
        })?;
        Ok(FlowHandoff {
            fd,
            prefix,
            own,
            peers: Vec::new(),
            peers_len: Vec::new(),
            refreshed: None,
            buf: vec![0; HEADER + MAX_FRAME],
            next_id: 0,
        })
    }

    /// The socket, for an idle wait.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Reads who the other members are from /proc/net/unix (abstract names
    /// show there with a leading '@').
    fn refresh(&mut self) {
        let now = Instant::now();
        if self.refreshed.is_some_and(|t| now < t + REFRESH) {
            return;
        }
        self.refreshed = Some(now);
        let Ok(table) = std::fs::read_to_string("/proc/net/unix") else {
            return;
        };
        self.peers.clear();
        self.peers_len.clear();
        for line in table.lines() {
            let Some(path) = line.split_whitespace().nth(7) else {
                continue;
            };
            let Some(name) = path.strip_prefix('@') else {
                continue;
            };
            if name.starts_with(&self.prefix) && name != self.own {
                let (a, l) = abstract_addr(name);
                self.peers.push(a);
                self.peers_len.push(l);
            }
        }
    }

    /// Offers `frame`, received on `port`, to every other member.  Returns
    /// the offer's number and how many members it reached.
    pub fn offer(&mut self, port: u16, csum_partial: bool, frame: &[u8]) -> (u32, usize) {
        self.next_id = self.next_id.wrapping_add(1);
        let id = self.next_id;
        if frame.len() > MAX_FRAME {
            return (id, 0);
        }
        self.refresh();
        let mut msg = Vec::with_capacity(HEADER + frame.len());
        msg.push(OFFER);
        msg.push(u8::from(csum_partial));
        msg.extend_from_slice(&port.to_ne_bytes());
        msg.extend_from_slice(&id.to_ne_bytes());
        msg.extend_from_slice(frame);
        let mut reached = 0;
        for (a, l) in self.peers.iter().zip(&self.peers_len) {
            if self.send_to(&msg, a, *l) {
                reached += 1;
            }
        }
        if reached < self.peers.len() {
            // A member left (or its queue is full): look again next time.
            self.refreshed = None;
        }
        (id, reached)
    }

    /// Tells the member that offered a frame that its flow is ours.
    pub fn claim(&mut self, to: &Sender) {
        let mut msg = [0u8; HEADER];
        msg[0] = CLAIM;
        msg[4..8].copy_from_slice(&to.id.to_ne_bytes());
        self.send_to(&msg, &to.addr, to.len);
    }

    fn send_to(&self, msg: &[u8], a: &libc::sockaddr_un, l: libc::socklen_t) -> bool {
        // SAFETY: `msg` is a live buffer of its length; `a` a live
        // sockaddr_un of `l` bytes.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                msg.as_ptr().cast(),
                msg.len(),
                libc::MSG_DONTWAIT,
                (a as *const libc::sockaddr_un).cast(),
                l,
            )
        };
        r >= 0
    }

    /// The next message another member sent, if one waits.
    pub fn receive(&mut self) -> io::Result<Option<Message<'_>>> {
        // SAFETY: sockaddr_un is plain data; all-zero is a valid value.
        let mut from: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        let mut from_len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        // SAFETY: `buf` is writable for its length; `from` for `from_len`.
        let n = unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                self.buf.as_mut_ptr().cast(),
                self.buf.len(),
                libc::MSG_DONTWAIT,
                (&mut from as *mut libc::sockaddr_un).cast(),
                &mut from_len,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(e),
            };
        }
        let n = n as usize;
        let Some(head) = self.buf.get(..HEADER).filter(|_| n >= HEADER) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "short handoff message",
            ));
        };
        let id = u32::from_ne_bytes([head[4], head[5], head[6], head[7]]);
        match head[0] {
            OFFER => Ok(Some(Message::Offer {
                port: u16::from_ne_bytes([head[2], head[3]]),
                csum_partial: head[1] != 0,
                frame: &self.buf[HEADER..n],
                from: Sender {
                    addr: from,
                    len: from_len,
                    id,
                },
            })),
            CLAIM => Ok(Some(Message::Claim { id })),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "unknown handoff message",
            )),
        }
    }
}
