//! Handing frames between the processes of one fanout group.  The group's
//! program sends each flow to the member its hash picks modulo the number
//! of members, so when a process joins or leaves (nginx starting its
//! workers, a reload) some flows arrive at a process that does not have
//! them.  That process offers the frame to the others over this channel
//! (a Unix datagram socket per process, named in the abstract namespace
//! after the group and the process), and the one that has the flow claims
//! it.
//!
//! A flow that moved keeps arriving at the wrong process for the rest of
//! its life: a 10 MB download hands over every ACK.  A Unix datagram
//! socket queues only `net.unix.max_dgram_qlen` datagrams (10 by default),
//! so records (offers and claims) are not sent one per datagram: each
//! member has an outbox of datagrams packed with records, sent as the
//! receiver's queue takes them.  Under load the records wait and pack
//! tighter instead of being lost.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use crate::ifreq::cvt;

/// How often the list of the other members may be read again.
const REFRESH: Duration = Duration::from_millis(100);

/// The header of each record: its kind, whether the frame's L4 checksum
/// was left partial, the port, the offer's number, the frame's length.
const RECORD_HEADER: usize = 12;
const OFFER: u8 = 0;
const CLAIM: u8 = 1;
const NEIGHBOR: u8 = 2;
const DECLINE: u8 = 3;

/// The largest frame handed over (a jumbo frame and more).
pub const MAX_FRAME: usize = 16 * 1024;

/// The largest datagram: records are packed up to this size.
const MAX_DATAGRAM: usize = 64 * 1024;

/// Bytes waiting for one member at most; records past it are not queued
/// for that member (it is not reading).
const MAX_OUTBOX: usize = 4 * 1024 * 1024;

/// This process's end of the group's handoff channel.
#[derive(Debug)]
pub struct FlowHandoff {
    fd: OwnedFd,
    /// "ustack-g{group}-p": the prefix of every member's name.
    prefix: String,
    own: String,
    peers: Vec<Peer>,
    refreshed: Option<Instant>,
    buf: Vec<u8>,
    next_id: u32,
    /// Some member's outbox holds a datagram.
    pending: bool,
}

/// Another member and what waits to be sent to it.
#[derive(Debug)]
struct Peer {
    addr: libc::sockaddr_un,
    len: libc::socklen_t,
    /// Datagrams not yet sent, oldest first; the last one is still filled.
    outbox: VecDeque<Vec<u8>>,
    queued: usize,
}

impl Peer {
    fn new(addr: libc::sockaddr_un, len: libc::socklen_t) -> Peer {
        Peer {
            addr,
            len,
            outbox: VecDeque::new(),
            queued: 0,
        }
    }

    fn is(&self, addr: &libc::sockaddr_un, len: libc::socklen_t) -> bool {
        self.len == len && name_of(&self.addr, self.len).eq(name_of(addr, len))
    }

    /// Queues one record; false when the outbox is full.
    fn queue(&mut self, head: &[u8; RECORD_HEADER], frame: &[u8]) -> bool {
        let size = RECORD_HEADER + frame.len();
        if self.queued + size > MAX_OUTBOX {
            return false;
        }
        let fits = self
            .outbox
            .back()
            .is_some_and(|d| d.len() + size <= MAX_DATAGRAM);
        if !fits {
            self.outbox.push_back(Vec::with_capacity(MAX_DATAGRAM));
        }
        let Some(d) = self.outbox.back_mut() else {
            return false;
        };
        d.extend_from_slice(head);
        d.extend_from_slice(frame);
        self.queued += size;
        true
    }
}

/// The bytes of an address's abstract name.
fn name_of(a: &libc::sockaddr_un, len: libc::socklen_t) -> impl Iterator<Item = u8> + '_ {
    let n = (len as usize).saturating_sub(std::mem::size_of::<libc::sa_family_t>());
    a.sun_path.iter().take(n).map(|c| *c as u8)
}

/// What another member sent: one record of a datagram.
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
    /// Our offer `id` is not this member's: once every member it went to
    /// has declined, nobody has the flow.
    Decline { id: u32 },
    /// An ARP or neighbour discovery frame it received on `port`, to be
    /// learned from (not answered: it answered) where the link gives each
    /// process only its own queue's frames (AF_XDP).
    Neighbor { port: u16, frame: &'a [u8] },
}

/// The member that offered a frame.
#[derive(Clone, Copy)]
pub struct Sender {
    addr: libc::sockaddr_un,
    len: libc::socklen_t,
    id: u32,
}

/// What [`FlowHandoff::offer`] did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offered {
    /// The offer's number, named by the claim.
    pub id: u32,
    /// The other members of the group.
    pub members: usize,
    /// The members it was queued for (fewer when an outbox is full or the
    /// frame is larger than [`MAX_FRAME`]).
    pub queued: usize,
}

/// The records of one datagram another member sent.
pub struct Datagram<'a> {
    from: libc::sockaddr_un,
    from_len: libc::socklen_t,
    rest: &'a [u8],
}

/// A record that does not parse: the rest of its datagram is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

impl<'a> Iterator for Datagram<'a> {
    type Item = Result<Message<'a>, Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let Some((head, body)) = self.rest.split_first_chunk::<RECORD_HEADER>() else {
            self.rest = &[];
            return Some(Err(Malformed));
        };
        let id = u32::from_ne_bytes([head[4], head[5], head[6], head[7]]);
        let len = u32::from_ne_bytes([head[8], head[9], head[10], head[11]]) as usize;
        let Some(frame) = body.get(..len) else {
            self.rest = &[];
            return Some(Err(Malformed));
        };
        self.rest = &body[len..];
        match head[0] {
            OFFER => Some(Ok(Message::Offer {
                port: u16::from_ne_bytes([head[2], head[3]]),
                csum_partial: head[1] != 0,
                frame,
                from: Sender {
                    addr: self.from,
                    len: self.from_len,
                    id,
                },
            })),
            CLAIM if len == 0 => Some(Ok(Message::Claim { id })),
            DECLINE if len == 0 => Some(Ok(Message::Decline { id })),
            NEIGHBOR => Some(Ok(Message::Neighbor {
                port: u16::from_ne_bytes([head[2], head[3]]),
                frame,
            })),
            _ => {
                self.rest = &[];
                Some(Err(Malformed))
            }
        }
    }
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
        // Several full datagrams in flight to each member: the send buffer
        // counts every datagram until its receiver reads it.
        let sndbuf: libc::c_int = (8 * MAX_DATAGRAM) as libc::c_int;
        // SAFETY: `sndbuf` is a live c_int of the size given.
        let _ = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                (&sndbuf as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
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
            refreshed: None,
            buf: vec![0; MAX_DATAGRAM],
            next_id: 0,
            pending: false,
        })
    }

    /// The socket, for an idle wait.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Whether records wait to be sent ([`FlowHandoff::flush`]).
    pub fn has_pending(&self) -> bool {
        self.pending
    }

    /// Reads who the other members are from /proc/net/unix (abstract names
    /// show there with a leading '@'); a member that stays keeps its
    /// outbox.
    fn refresh(&mut self) {
        let now = Instant::now();
        if self.refreshed.is_some_and(|t| now < t + REFRESH) {
            return;
        }
        self.refreshed = Some(now);
        let Ok(table) = std::fs::read_to_string("/proc/net/unix") else {
            return;
        };
        let mut peers = Vec::new();
        for line in table.lines() {
            let Some(path) = line.split_whitespace().nth(7) else {
                continue;
            };
            let Some(name) = path.strip_prefix('@') else {
                continue;
            };
            if name.starts_with(&self.prefix) && name != self.own {
                let (a, l) = abstract_addr(name);
                let known = self.peers.iter().position(|p| p.is(&a, l));
                peers.push(match known {
                    Some(i) => self.peers.swap_remove(i),
                    None => Peer::new(a, l),
                });
            }
        }
        self.peers = peers;
        self.pending = self.peers.iter().any(|p| !p.outbox.is_empty());
    }

    /// Queues `frame`, received on `port`, for every other member; it is
    /// sent by [`FlowHandoff::flush`].
    pub fn offer(&mut self, port: u16, csum_partial: bool, frame: &[u8]) -> Offered {
        self.next_id = self.next_id.wrapping_add(1);
        let id = self.next_id;
        self.refresh();
        let members = self.peers.len();
        if frame.len() > MAX_FRAME {
            return Offered {
                id,
                members,
                queued: 0,
            };
        }
        let head = record_header(OFFER, csum_partial, port, id, frame.len());
        let mut queued = 0;
        for p in &mut self.peers {
            if p.queue(&head, frame) {
                queued += 1;
            }
        }
        self.pending |= queued > 0;
        Offered {
            id,
            members,
            queued,
        }
    }

    /// Queues a copy of neighbour frame `frame`, received on `port`, for
    /// every other member; returns how many it was queued for.
    pub fn share_neighbor(&mut self, port: u16, frame: &[u8]) -> usize {
        self.refresh();
        if frame.len() > MAX_FRAME {
            return 0;
        }
        let head = record_header(NEIGHBOR, false, port, 0, frame.len());
        let queued = self
            .peers
            .iter_mut()
            .filter_map(|p| p.queue(&head, frame).then_some(()))
            .count();
        self.pending |= queued > 0;
        queued
    }

    /// Tells the member that offered a frame that its flow is ours.
    pub fn claim(&mut self, to: &Sender) {
        self.answer(CLAIM, to);
    }

    /// Tells the member that offered a frame that its flow is not ours.
    pub fn decline(&mut self, to: &Sender) {
        self.answer(DECLINE, to);
    }

    fn answer(&mut self, kind: u8, to: &Sender) {
        let head = record_header(kind, false, 0, to.id, 0);
        let i = match self.peers.iter().position(|p| p.is(&to.addr, to.len)) {
            Some(i) => i,
            None => {
                // It joined after our last look at the members.
                self.peers.push(Peer::new(to.addr, to.len));
                self.peers.len() - 1
            }
        };
        if self.peers[i].queue(&head, &[]) {
            self.pending = true;
        }
    }

    /// Sends what the outboxes hold, as far as the receivers' queues take
    /// it.  Returns the datagrams sent and the records dropped because
    /// their member is gone.
    pub fn flush(&mut self) -> (usize, usize) {
        if !self.pending {
            return (0, 0);
        }
        let fd = self.fd.as_raw_fd();
        let (mut sent, mut lost) = (0, 0);
        let mut pending = false;
        let mut gone = false;
        for p in &mut self.peers {
            while let Some(d) = p.outbox.front() {
                match send_to(fd, d, &p.addr, p.len) {
                    Ok(()) => {
                        sent += 1;
                        p.queued -= d.len();
                        p.outbox.pop_front();
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => {
                        lost += 1;
                        p.queued -= d.len();
                        p.outbox.pop_front();
                    }
                    Err(_) => {
                        // The member left: what waited for it goes.
                        lost += p.outbox.len();
                        p.outbox.clear();
                        p.queued = 0;
                        gone = true;
                    }
                }
            }
            pending |= !p.outbox.is_empty();
        }
        self.pending = pending;
        if gone {
            self.refreshed = None;
        }
        (sent, lost)
    }

    /// The next datagram another member sent, if one waits: its records.
    pub fn receive(&mut self) -> io::Result<Option<Datagram<'_>>> {
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
        let n = (n as usize).min(self.buf.len());
        Ok(Some(Datagram {
            from,
            from_len,
            rest: &self.buf[..n],
        }))
    }
}

fn record_header(
    kind: u8,
    csum_partial: bool,
    port: u16,
    id: u32,
    len: usize,
) -> [u8; RECORD_HEADER] {
    let mut h = [0u8; RECORD_HEADER];
    h[0] = kind;
    h[1] = u8::from(csum_partial);
    h[2..4].copy_from_slice(&port.to_ne_bytes());
    h[4..8].copy_from_slice(&id.to_ne_bytes());
    h[8..12].copy_from_slice(&(len as u32).to_ne_bytes());
    h
}

fn send_to(fd: RawFd, msg: &[u8], a: &libc::sockaddr_un, l: libc::socklen_t) -> io::Result<()> {
    // SAFETY: `msg` is a live buffer of its length; `a` a live sockaddr_un
    // of `l` bytes.
    let r = unsafe {
        libc::sendto(
            fd,
            msg.as_ptr().cast(),
            msg.len(),
            libc::MSG_DONTWAIT,
            (a as *const libc::sockaddr_un).cast(),
            l,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offers(h: &mut FlowHandoff) -> Vec<(u16, bool, Vec<u8>, Sender)> {
        let mut got = Vec::new();
        while let Some(d) = h.receive().unwrap() {
            for m in d {
                match m.unwrap() {
                    Message::Offer {
                        port,
                        csum_partial,
                        frame,
                        from,
                    } => got.push((port, csum_partial, frame.to_vec(), from)),
                    Message::Claim { .. } | Message::Decline { .. } | Message::Neighbor { .. } => {
                        panic!("an answer or neighbour frame where offers were expected")
                    }
                }
            }
        }
        got
    }

    #[test]
    fn offers_pack_into_few_datagrams_and_claims_come_back() {
        let group = 60_000 + (std::process::id() % 5000) as u16;
        let mut a = FlowHandoff::open(group, 0).unwrap();
        let mut b = FlowHandoff::open(group, 1).unwrap();
        // More offers than a Unix datagram queue holds as datagrams.
        let mut ids = Vec::new();
        for i in 0..500u32 {
            let frame = vec![(i % 251) as u8; 60 + (i as usize % 40)];
            let o = a.offer(3, i % 2 == 0, &frame);
            assert_eq!((o.members, o.queued), (1, 1));
            ids.push(o.id);
        }
        let (sent, lost) = a.flush();
        assert_eq!(lost, 0);
        assert!(sent < 10, "500 small offers went as {sent} datagrams");
        assert!(!a.has_pending());
        let got = offers(&mut b);
        assert_eq!(got.len(), 500);
        for (i, (port, partial, frame, _)) in got.iter().enumerate() {
            assert_eq!(*port, 3);
            assert_eq!(*partial, i % 2 == 0);
            assert_eq!(frame, &vec![(i % 251) as u8; 60 + (i % 40)]);
        }
        for (_, _, _, from) in &got {
            b.claim(from);
        }
        b.flush();
        let mut claimed = Vec::new();
        while let Some(d) = a.receive().unwrap() {
            for m in d {
                match m.unwrap() {
                    Message::Claim { id } => claimed.push(id),
                    Message::Decline { .. } | Message::Offer { .. } | Message::Neighbor { .. } => {
                        panic!("another record where claims were expected")
                    }
                }
            }
        }
        assert_eq!(claimed, ids);
    }

    #[test]
    fn a_full_receiver_queue_keeps_records_waiting() {
        let group = 55_000 + (std::process::id() % 5000) as u16;
        let mut a = FlowHandoff::open(group, 0).unwrap();
        let mut b = FlowHandoff::open(group, 1).unwrap();
        let frame = vec![7u8; 9000];
        // 100 jumbo frames: 15 datagrams, more than the receiver's queue.
        for _ in 0..100 {
            assert_eq!(a.offer(0, false, &frame).queued, 1);
        }
        let mut received = 0;
        for _ in 0..100 {
            a.flush();
            received += offers(&mut b).len();
            if !a.has_pending() {
                break;
            }
        }
        assert_eq!(received, 100);
    }

    #[test]
    fn neighbour_frames_reach_every_other_member() {
        let group = 45_000 + (std::process::id() % 5000) as u16;
        let mut a = FlowHandoff::open(group, 0).unwrap();
        let mut b = FlowHandoff::open(group, 1).unwrap();
        let mut c = FlowHandoff::open(group, 2).unwrap();
        let arp = [0x42u8; 60];
        assert_eq!(a.share_neighbor(1, &arp), 2);
        a.flush();
        for h in [&mut b, &mut c] {
            let d = h.receive().unwrap().expect("a datagram");
            let got: Vec<_> = d
                .map(|m| match m.unwrap() {
                    Message::Neighbor { port, frame } => (port, frame.to_vec()),
                    _ => panic!("not a neighbour frame"),
                })
                .collect();
            assert_eq!(got, vec![(1, arp.to_vec())]);
        }
        assert!(a.receive().unwrap().is_none());
    }

    /// Each member an offer went to answers it: the one with the flow
    /// claims, the others decline, so the offerer knows when nobody has
    /// it without a time limit.
    #[test]
    fn every_member_answers_an_offer() {
        let group = 40_000 + (std::process::id() % 5000) as u16;
        let mut a = FlowHandoff::open(group, 0).unwrap();
        let mut b = FlowHandoff::open(group, 1).unwrap();
        let mut c = FlowHandoff::open(group, 2).unwrap();
        let first = a.offer(0, false, &[1; 60]);
        let second = a.offer(0, false, &[2; 60]);
        assert_eq!((first.members, first.queued), (2, 2));
        a.flush();
        // b has the first flow, c neither.
        for (i, (_, _, frame, from)) in offers(&mut b).iter().enumerate() {
            assert_eq!(frame[0] as usize, i + 1);
            if i == 0 {
                b.claim(from);
            } else {
                b.decline(from);
            }
        }
        for (_, _, _, from) in &offers(&mut c) {
            c.decline(from);
        }
        b.flush();
        c.flush();
        let mut answers = Vec::new();
        while let Some(d) = a.receive().unwrap() {
            for m in d {
                match m.unwrap() {
                    Message::Claim { id } => answers.push(("claim", id)),
                    Message::Decline { id } => answers.push(("decline", id)),
                    Message::Offer { .. } | Message::Neighbor { .. } => {
                        panic!("another record where answers were expected")
                    }
                }
            }
        }
        answers.sort();
        assert_eq!(
            answers,
            vec![
                ("claim", first.id),
                ("decline", first.id),
                ("decline", second.id),
                ("decline", second.id),
            ]
        );
    }

    #[test]
    fn alone_in_the_group_an_offer_reaches_nobody() {
        let group = 50_000 + (std::process::id() % 5000) as u16;
        let mut a = FlowHandoff::open(group, 0).unwrap();
        let o = a.offer(0, false, &[1, 2, 3]);
        assert_eq!((o.members, o.queued), (0, 0));
        assert!(!a.has_pending());
    }

    #[test]
    fn a_truncated_record_is_malformed() {
        let head = record_header(OFFER, false, 0, 1, 100);
        let mut bytes = head.to_vec();
        bytes.extend_from_slice(&[0; 50]);
        // SAFETY: sockaddr_un is plain data; all-zero is a valid value.
        let from: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        let mut d = Datagram {
            from,
            from_len: 0,
            rest: &bytes,
        };
        assert!(matches!(d.next(), Some(Err(Malformed))));
        assert!(d.next().is_none());
        let mut d = Datagram {
            from,
            from_len: 0,
            rest: &[1, 2, 3],
        };
        assert!(matches!(d.next(), Some(Err(Malformed))));
    }
}
