//! Runs a sequence on one implementation and writes down what each call
//! returned, in words both implementations share: handles for fds,
//! `LOCAL` for our addresses, `P0`.. for the sequence's ports and `EPH`
//! for ephemeral ones, a hash for the bytes received, epoll's events in
//! handle order.

use std::net::{IpAddr, SocketAddr};

use api::consts::*;
use api::{epoll_event, Errno};

use crate::ops::{Op, EPOLLS, PORTS, SOCKETS};
use crate::sys::Sys;

/// Which engine a ustack socket lives on, as the calls so far decided:
/// a bound, listening or accepted socket is the server's; one that
/// connected or sent to the server is the client's.  The kernel has one
/// address for both; ustack two hosts, and a host does not talk to
/// itself.  So a call that would have a host talk to itself is not made
/// on either side (see `lib.rs`, "topology").
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Unplaced,
    Server,
    Client,
}

/// What the runner knows of one handle's socket.  Duplicates (fcntl
/// F_DUPFD_CLOEXEC) are one socket: a call on one updates them all (see
/// [`Runner::share_with_duplicates`]).
#[derive(Clone, Copy)]
struct Slot {
    fd: i32,
    /// Which socket of the sequence (the same for its duplicates).
    socket: u32,
    /// AF_INET6 (dual-stack).
    v6: bool,
    side: Side,
    dgram: bool,
    /// The sequence's port it is bound to (bind succeeded).
    port: Option<u8>,
    /// A stream socket that tried to connect (see [`FAILED_CONNECT`]).
    connect_tried: bool,
    /// A stream socket whose connect() reported its connection's failure
    /// (see [`FAILED_CONNECT`]).
    connect_failed: bool,
    /// A stream socket with a connection (connected or accepted): its
    /// TCP_MAXSEG is the path's (see [`Kind::Mss`]).
    connection: bool,
    /// TCP_MAXSEG values set on it or, accepted, on its listener.
    mss_set: [Option<i32>; 2],
    /// A datagram socket without a port whose send failed (see
    /// [`FAILED_SEND`]).
    failed_send: bool,
    /// shutdown() succeeded for reading, for writing.
    shut_rd: bool,
    shut_wr: bool,
    /// A stream socket shut both ways before it had a connection
    /// (shutdown() says ENOTCONN but takes effect): see [`SHUT_LISTENER`].
    shut_unconnected: [bool; 2],
}

const EMPTY: Slot = Slot {
    fd: -1,
    socket: 0,
    v6: false,
    side: Side::Unplaced,
    dgram: false,
    port: None,
    connect_tried: false,
    connect_failed: false,
    connection: false,
    mss_set: [None; 2],
    failed_send: false,
    shut_rd: false,
    shut_wr: false,
    shut_unconnected: [false; 2],
};

const SEND_FLAGS: [i32; 6] = [
    0,
    MSG_DONTWAIT,
    MSG_NOSIGNAL,
    MSG_OOB,
    MSG_OOB | MSG_DONTWAIT,
    MSG_PEEK,
];
const RECV_FLAGS: [i32; 8] = [
    0,
    MSG_PEEK,
    MSG_DONTWAIT,
    MSG_OOB,
    MSG_TRUNC,
    MSG_WAITALL,
    MSG_PEEK | MSG_TRUNC,
    MSG_OOB | MSG_PEEK,
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// An int, its value compared.
    Int,
    /// TCP_MAXSEG: on a socket that has had a connection, Linux reports
    /// the MSS the connection sends, which the path's MTU decides
    /// (loopback's 65536, ustack's link 1500 here): shown only when it is
    /// a value set by the sequence, "the path's" otherwise.  Before a
    /// connection (fresh, bound, listening) the value is compared: the
    /// one set, or 536.
    Mss,
    /// A buffer size: set only to sizes no sequence fills; read back as
    /// success and length, the value not compared (the sizes differ by
    /// design, and Linux doubles what it is given).
    Buffer,
    /// struct linger.
    Linger,
    /// struct timeval, whole seconds (Linux rounds to its clock tick).
    Timeval,
}

const OPTS: [(i32, i32, Kind, &str); 22] = [
    (SOL_SOCKET, SO_REUSEADDR, Kind::Int, "SO_REUSEADDR"),
    (SOL_SOCKET, SO_REUSEPORT, Kind::Int, "SO_REUSEPORT"),
    (SOL_SOCKET, SO_KEEPALIVE, Kind::Int, "SO_KEEPALIVE"),
    (SOL_SOCKET, SO_LINGER, Kind::Linger, "SO_LINGER"),
    (SOL_SOCKET, SO_OOBINLINE, Kind::Int, "SO_OOBINLINE"),
    (SOL_SOCKET, SO_RCVBUF, Kind::Buffer, "SO_RCVBUF"),
    (SOL_SOCKET, SO_SNDBUF, Kind::Buffer, "SO_SNDBUF"),
    (SOL_SOCKET, SO_ERROR, Kind::Int, "SO_ERROR"),
    (SOL_SOCKET, SO_TYPE, Kind::Int, "SO_TYPE"),
    (SOL_SOCKET, SO_ACCEPTCONN, Kind::Int, "SO_ACCEPTCONN"),
    (SOL_SOCKET, SO_BROADCAST, Kind::Int, "SO_BROADCAST"),
    (SOL_SOCKET, SO_DOMAIN, Kind::Int, "SO_DOMAIN"),
    (SOL_SOCKET, SO_PROTOCOL, Kind::Int, "SO_PROTOCOL"),
    (SOL_SOCKET, SO_RCVTIMEO, Kind::Timeval, "SO_RCVTIMEO"),
    (IPPROTO_TCP, TCP_NODELAY, Kind::Int, "TCP_NODELAY"),
    (IPPROTO_TCP, TCP_KEEPIDLE, Kind::Int, "TCP_KEEPIDLE"),
    (IPPROTO_TCP, TCP_KEEPINTVL, Kind::Int, "TCP_KEEPINTVL"),
    (IPPROTO_TCP, TCP_KEEPCNT, Kind::Int, "TCP_KEEPCNT"),
    (IPPROTO_TCP, TCP_CORK, Kind::Int, "TCP_CORK"),
    (IPPROTO_IP, IP_TTL, Kind::Int, "IP_TTL"),
    (IPPROTO_IP, IP_TOS, Kind::Int, "IP_TOS"),
    (IPPROTO_TCP, TCP_MAXSEG, Kind::Mss, "TCP_MAXSEG"),
];

const INT_VALUES: [i32; 12] = [0, 1, 2, 5, 64, 255, 256, -1, 100_000, 7200, i32::MAX, 32767];
const BUFFER_VALUES: [i32; 3] = [65_536, 131_072, 262_144];
/// setsockopt's option lengths: the struct's, then short and long ones.
const SET_LENGTHS: [usize; 4] = [0, 0, 1, 12];
/// getsockopt's buffer lengths (0: the struct's).
const GET_LENGTHS: [usize; 5] = [0, 0, 1, 12, 2];

/// fcntl's commands: (cmd, arg, name).  The runner keeps every socket
/// non-blocking (a blocking call could wait for ever on both sides).
const FCNTLS: [(i32, i32, &str); 8] = [
    (F_GETFL, 0, "F_GETFL"),
    (F_SETFL, O_NONBLOCK, "F_SETFL O_NONBLOCK"),
    (
        F_SETFL,
        O_NONBLOCK | libc::O_APPEND,
        "F_SETFL O_NONBLOCK|O_APPEND",
    ),
    (F_GETFD, 0, "F_GETFD"),
    (F_SETFD, FD_CLOEXEC, "F_SETFD FD_CLOEXEC"),
    (F_SETFD, 0, "F_SETFD 0"),
    (F_DUPFD_CLOEXEC, 0, "F_DUPFD_CLOEXEC"),
    (9999, 0, "cmd 9999"),
];

const EPOLL_BITS: [(u32, &str); 8] = [
    (EPOLLIN as u32, "IN"),
    (EPOLLOUT as u32, "OUT"),
    (EPOLLRDHUP as u32, "RDHUP"),
    (EPOLLPRI as u32, "PRI"),
    (EPOLLET as u32, "ET"),
    (EPOLLONESHOT as u32, "ONESHOT"),
    (EPOLLERR as u32, "ERR"),
    (EPOLLHUP as u32, "HUP"),
];

const POLL_BITS: [(i16, &str); 6] = [
    (libc::POLLIN, "IN"),
    (libc::POLLOUT, "OUT"),
    (libc::POLLPRI, "PRI"),
    (libc::POLLRDHUP, "RDHUP"),
    (libc::POLLERR, "ERR"),
    (libc::POLLHUP, "HUP"),
];

/// Why bind after a connect is not made until connect() reported the
/// connection's failure: Linux frees a failed or reset connection's port
/// when the connection ends, so bind works again at once; ustack frees it
/// when connect() reports the failure (the pending error lives on the
/// connection until then).  After that report bind works on both, and
/// getsockname shows the any address with the failed connection's port.
const FAILED_CONNECT: &str = "ustack frees a failed connection's port when connect() reports it";

/// Why accept is not made on a listener that was shut both ways before
/// it listened: an open difference.  Its connections inherit the
/// shutdown (sk_clone); data from the peer then resets an accepted one on
/// Linux (recv says ECONNRESET), while ustack queues it (its inherited
/// SEND_SHUTDOWN sends no FIN, so the connection stays ESTABLISHED, where
/// the stack resets only a connection in FIN-WAIT).
const SHUT_LISTENER: &str = "open: data to a connection accepted from a listener shut both ways";

/// Why bind and getsockname are not made on a UDP socket whose first
/// send failed (no destination, MSG_OOB): Linux's inet_sendmsg gives it a
/// port before udp_sendmsg refuses the call; ustack binds a UDP socket at
/// the first datagram that goes out, on the engine that reaches its
/// destination, so that a failed send never pins it to the wrong engine
/// of several.  By design.
const FAILED_SEND: &str =
    "a failed first send: Linux gave it a port, ustack gives one at the first datagram";

pub struct Runner<'a> {
    sys: &'a mut dyn Sys,
    socks: [Slot; SOCKETS as usize],
    eps: [i32; EPOLLS as usize],
    last_peer: Option<SocketAddr>,
    /// Bytes sent so far: the next send's bytes continue the pattern.
    sent: u32,
    /// Sockets made so far (socket() and accept()), for [`Slot::socket`].
    sockets: u32,
    slow: bool,
}

fn errno_name(e: Errno) -> String {
    testnet::errno_name(e.0)
}

fn bits<T: Copy + Into<u32>>(v: u32, table: &[(T, &str)]) -> String {
    let mut out: Vec<&str> = table
        .iter()
        .filter(|(b, _)| v & (*b).into() != 0)
        .map(|(_, n)| *n)
        .collect();
    let known = table.iter().fold(0u32, |m, (b, _)| m | (*b).into());
    let rest = format!("{:#x}", v & !known);
    if v & !known != 0 {
        out.push(&rest);
    }
    if out.is_empty() {
        "0".to_string()
    } else {
        out.join("|")
    }
}

/// FNV-1a: bytes received, short enough to read in a trace.
fn hash(b: &[u8]) -> u32 {
    b.iter().fold(0x811c_9dc5u32, |h, &x| {
        (h ^ u32::from(x)).wrapping_mul(0x0100_0193)
    })
}

impl<'a> Runner<'a> {
    pub fn new(sys: &'a mut dyn Sys, slow: bool) -> Runner<'a> {
        Runner {
            sys,
            socks: [EMPTY; SOCKETS as usize],
            eps: [-1; EPOLLS as usize],
            last_peer: None,
            sent: 0,
            sockets: 0,
            slow,
        }
    }

    /// Runs `ops` and then closes what is left; one line per call.
    pub fn run(mut self, ops: &[Op]) -> Vec<String> {
        let mut lines = Vec::with_capacity(ops.len());
        for (i, op) in ops.iter().enumerate() {
            let what = self.call(op);
            if let Some(s) = op.handle() {
                self.share_with_duplicates(s);
            }
            self.sys.settle(self.slow);
            lines.push(format!("#{i} {what}"));
        }
        for s in 0..SOCKETS {
            let fd = self.socks[s as usize].fd;
            if fd >= 0 {
                let _ = self.sys.close(fd);
            }
        }
        for fd in self.eps {
            if fd >= 0 {
                let _ = self.sys.close(fd);
            }
        }
        self.sys.settle(false);
        lines
    }

    fn addr(&self, a: &SocketAddr) -> String {
        let local4 = |ip| ip == self.sys.server_ip() || ip == self.sys.client_ip();
        let ip = match a.ip() {
            IpAddr::V4(ip) if local4(ip) => "LOCAL".to_string(),
            IpAddr::V6(ip) if ip == self.sys.server_ip6() || ip == self.sys.client_ip6() => {
                "LOCAL6".to_string()
            }
            IpAddr::V6(ip) if ip.to_ipv4_mapped().is_some_and(local4) => "::ffff:LOCAL".to_string(),
            ip => ip.to_string(),
        };
        let port = match (0..PORTS).find(|&i| self.sys.port(usize::from(i)) == a.port()) {
            Some(i) => format!("P{i}"),
            None if a.port() == 0 => "0".to_string(),
            None => "EPH".to_string(),
        };
        format!("{ip}:{port}")
    }

    /// The server's address at the sequence's port `port`, in socket
    /// `s`'s family.
    fn server(&self, s: u8, port: u8) -> SocketAddr {
        let port = self.sys.port(usize::from(port));
        if self.socks[usize::from(s)].v6 {
            SocketAddr::from((self.sys.server_ip6(), port))
        } else {
            SocketAddr::from((self.sys.server_ip(), port))
        }
    }

    fn fd(&self, s: u8) -> i32 {
        self.socks[usize::from(s)].fd
    }

    fn new_socket(&mut self) -> u32 {
        self.sockets += 1;
        self.sockets
    }

    /// What a call on handle `s` learnt of its socket holds for the
    /// socket's other handles (duplicates) too.
    fn share_with_duplicates(&mut self, s: u8) {
        let slot = self.socks[usize::from(s)];
        if slot.fd < 0 {
            return;
        }
        for other in self.socks.iter_mut() {
            if other.fd >= 0 && other.socket == slot.socket {
                *other = Slot {
                    fd: other.fd,
                    ..slot
                };
            }
        }
    }

    /// A new fd into the first free handle (closed again when none is);
    /// `like` says which socket it is (a new one for socket() and
    /// accept(), the original's for a duplicate).
    fn place(&mut self, fd: i32, like: Slot) -> String {
        match self.socks.iter().position(|sl| sl.fd < 0) {
            Some(i) => {
                self.socks[i] = Slot { fd, ..like };
                format!("s{i}")
            }
            None => {
                let _ = self.sys.close(fd);
                "no free handle".to_string()
            }
        }
    }

    fn pattern(&mut self, len: u8) -> Vec<u8> {
        let start = self.sent;
        self.sent = self.sent.wrapping_add(u32::from(len));
        (0..u32::from(len))
            .map(|i| (start.wrapping_add(i).wrapping_mul(7) % 251) as u8)
            .collect()
    }

    fn call(&mut self, op: &Op) -> String {
        let show = |r: api::Result<String>| r.unwrap_or_else(errno_name);
        match *op {
            Op::Socket { dgram, cloexec, v6 } => {
                let ty = if dgram { SOCK_DGRAM } else { SOCK_STREAM };
                let flags = SOCK_NONBLOCK | if cloexec { SOCK_CLOEXEC } else { 0 };
                let domain = if v6 { AF_INET6 } else { AF_INET };
                let r = self.sys.socket(domain, ty | flags, 0).map(|fd| {
                    let socket = self.new_socket();
                    self.place(
                        fd,
                        Slot {
                            socket,
                            v6,
                            dgram,
                            ..EMPTY
                        },
                    )
                });
                format!(
                    "socket {}{} = {}",
                    if v6 { "inet6 " } else { "" },
                    if dgram { "dgram" } else { "stream" },
                    show(r)
                )
            }
            Op::Bind { s, any, port } => {
                let slot = self.socks[usize::from(s)];
                if slot.connect_tried && !slot.connect_failed {
                    return format!("bind s{s}: not made (after a connect: {FAILED_CONNECT})");
                }
                if self.socks[usize::from(s)].failed_send {
                    return format!("bind s{s}: not made ({FAILED_SEND})");
                }
                let ip: IpAddr = match (slot.v6, any) {
                    (true, true) => std::net::Ipv6Addr::UNSPECIFIED.into(),
                    (true, false) => self.sys.server_ip6().into(),
                    (false, true) => std::net::Ipv4Addr::UNSPECIFIED.into(),
                    (false, false) => self.sys.server_ip().into(),
                };
                let p = if port < PORTS {
                    self.sys.port(usize::from(port))
                } else {
                    0
                };
                let a = SocketAddr::from((ip, p));
                let r = self.sys.bind(self.fd(s), &a);
                if r.is_ok() {
                    let slot = &mut self.socks[usize::from(s)];
                    slot.side = Side::Server;
                    slot.port = (port < PORTS).then_some(port);
                }
                format!(
                    "bind s{s} {} = {}",
                    self.addr(&a),
                    show(r.map(|_| "ok".into()))
                )
            }
            Op::Listen { s, backlog } => {
                let r = self.sys.listen(self.fd(s), i32::from(backlog));
                if r.is_ok() && self.socks[usize::from(s)].side == Side::Unplaced {
                    self.socks[usize::from(s)].side = Side::Server;
                }
                format!("listen s{s} {backlog} = {}", show(r.map(|_| "ok".into())))
            }
            Op::Connect { s, port } => {
                if self.socks[usize::from(s)].side == Side::Server {
                    return format!("connect s{s} P{port}: not made (the server's own address)");
                }
                let a = self.server(s, port);
                let r = self.sys.connect(self.fd(s), &a);
                if self.fd(s) >= 0 {
                    let slot = &mut self.socks[usize::from(s)];
                    slot.side = Side::Client;
                    slot.connect_tried = !slot.dgram;
                    slot.connection = !slot.dgram;
                    let failed = |e: &Errno| e.0 == libc::ECONNREFUSED || e.0 == libc::ECONNABORTED;
                    slot.connect_failed = matches!(&r, Err(e) if failed(e));
                }
                format!("connect s{s} P{port} = {}", show(r.map(|_| "ok".into())))
            }
            Op::Accept { s, cloexec } => {
                let flags = SOCK_NONBLOCK | if cloexec { SOCK_CLOEXEC } else { 0 };
                let listener = self.socks[usize::from(s)];
                if listener.shut_unconnected == [true; 2] {
                    return format!("accept s{s}: not made ({SHUT_LISTENER})");
                }
                let r = self.sys.accept4(self.fd(s), flags).map(|(fd, a)| {
                    self.last_peer = Some(a);
                    let socket = self.new_socket();
                    let h = self.place(
                        fd,
                        Slot {
                            socket,
                            v6: listener.v6,
                            side: Side::Server,
                            connection: true,
                            mss_set: [None, listener.mss_set[0]],
                            ..EMPTY
                        },
                    );
                    format!("{h} from {}", self.addr(&a))
                });
                format!("accept s{s} = {}", show(r))
            }
            Op::Send { s, len, flags } => {
                let f = SEND_FLAGS[usize::from(flags) % SEND_FLAGS.len()];
                let data = self.pattern(len);
                let r = self.sys.sendto(self.fd(s), &data, f, None);
                self.sent_datagram(s, r.is_ok());
                format!(
                    "send s{s} {len} flags {f:#x} = {}",
                    show(r.map(|n| n.to_string()))
                )
            }
            Op::Recv { s, len, flags } => {
                let f = RECV_FLAGS[usize::from(flags) % RECV_FLAGS.len()];
                let mut buf = [0u8; 256];
                let r = self
                    .sys
                    .recvfrom(self.fd(s), &mut buf[..usize::from(len)], f);
                let r =
                    r.map(|(n, _)| format!("{n} #{:08x}", hash(&buf[..n.min(usize::from(len))])));
                format!("recv s{s} {len} flags {f:#x} = {}", show(r))
            }
            Op::SendTo { s, len, to } => {
                let side = self.socks[usize::from(s)].side;
                let a = if to < PORTS {
                    if side == Side::Server {
                        return format!("sendto s{s} P{to}: not made (the server's own address)");
                    }
                    self.server(s, to)
                } else {
                    match self.last_peer {
                        Some(a) if side != Side::Client => a,
                        Some(_) => {
                            return format!("sendto s{s} peer: not made (the client's own address)")
                        }
                        None => return format!("sendto s{s} peer: no peer seen"),
                    }
                };
                let data = self.pattern(len);
                let r = self.sys.sendto(self.fd(s), &data, 0, Some(&a));
                self.sent_datagram(s, r.is_ok());
                if self.fd(s) >= 0 && side == Side::Unplaced {
                    self.socks[usize::from(s)].side = if to < PORTS {
                        Side::Client
                    } else {
                        Side::Server
                    };
                }
                format!(
                    "sendto s{s} {len} {} = {}",
                    self.addr(&a),
                    show(r.map(|n| n.to_string()))
                )
            }
            Op::RecvFrom { s, len } => {
                let mut buf = [0u8; 256];
                let r = self
                    .sys
                    .recvfrom(self.fd(s), &mut buf[..usize::from(len)], 0)
                    .map(|(n, a)| {
                        let from = match a {
                            Some(a) => {
                                self.last_peer = Some(a);
                                self.addr(&a)
                            }
                            None => "-".to_string(),
                        };
                        format!(
                            "{n} #{:08x} from {from}",
                            hash(&buf[..n.min(usize::from(len))])
                        )
                    });
                format!("recvfrom s{s} {len} = {}", show(r))
            }
            Op::Shutdown { s, how } => {
                let r = self.sys.shutdown(self.fd(s), i32::from(how));
                let slot = &mut self.socks[usize::from(s)];
                if r.is_ok() {
                    slot.shut_rd |= how == 0 || how == 2;
                    slot.shut_wr |= how == 1 || how == 2;
                }
                if matches!(&r, Err(e) if e.0 == libc::ENOTCONN) && !slot.dgram {
                    slot.shut_unconnected[0] |= how == 0 || how == 2;
                    slot.shut_unconnected[1] |= how == 1 || how == 2;
                }
                format!("shutdown s{s} {how} = {}", show(r.map(|_| "ok".into())))
            }
            Op::Close { s } => {
                let r = self.sys.close(self.fd(s));
                self.socks[usize::from(s)] = EMPTY;
                format!("close s{s} = {}", show(r.map(|_| "ok".into())))
            }
            Op::SetOpt { s, opt, val } => self.setopt(s, opt, val),
            Op::GetOpt { s, opt, len } => self.getopt(s, opt, len),
            Op::Fcntl { s, cmd } => {
                let (c, arg, name) = FCNTLS[usize::from(cmd) % FCNTLS.len()];
                let r = self.sys.fcntl(self.fd(s), c, arg);
                let r = match c {
                    F_DUPFD_CLOEXEC => r.map(|fd| {
                        let like = self.socks[usize::from(s)];
                        self.place(fd, like)
                    }),
                    F_GETFL => r.map(|v| format!("{v:#x}")),
                    _ => r.map(|v| v.to_string()),
                };
                format!("fcntl s{s} {name} = {}", show(r))
            }
            Op::Ioctl { s, req } => {
                let (r, name) = match req % 3 {
                    0 => (FIONREAD, "FIONREAD"),
                    1 => (api::consts::SIOCATMARK, "SIOCATMARK"),
                    _ => (FIONBIO, "FIONBIO 1"),
                };
                let mut v = 1;
                let res = self.sys.ioctl(self.fd(s), r, &mut v);
                format!("ioctl s{s} {name} = {}", show(res.map(|_| v.to_string())))
            }
            Op::Name { s, peer } => {
                if !peer && self.socks[usize::from(s)].failed_send {
                    return format!("getsockname s{s}: not made ({FAILED_SEND})");
                }
                let r = if peer {
                    self.sys.getpeername(self.fd(s))
                } else {
                    self.sys.getsockname(self.fd(s))
                };
                let r = r.map(|a| self.addr(&a));
                format!(
                    "{} s{s} = {}",
                    if peer { "getpeername" } else { "getsockname" },
                    show(r)
                )
            }
            Op::EpollCreate => {
                let r = self.sys.epoll_create1(EPOLL_CLOEXEC).map(|fd| {
                    match self.eps.iter().position(|&e| e < 0) {
                        Some(i) => {
                            self.eps[i] = fd;
                            format!("e{i}")
                        }
                        None => {
                            let _ = self.sys.close(fd);
                            "no free handle".to_string()
                        }
                    }
                });
                format!("epoll_create1 = {}", show(r))
            }
            Op::EpollCtl { ep, s, op, events } => {
                let ev_mask = EPOLL_BITS
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| events & (1 << i) != 0)
                    .fold(0u32, |m, (_, (b, _))| m | b);
                let (code, name) = [
                    (EPOLL_CTL_ADD, "ADD"),
                    (EPOLL_CTL_MOD, "MOD"),
                    (EPOLL_CTL_DEL, "DEL"),
                ][usize::from(op)];
                let ev = epoll_event {
                    events: ev_mask,
                    u64: u64::from(s),
                };
                let r = self
                    .sys
                    .epoll_ctl(self.eps[usize::from(ep)], code, self.fd(s), Some(&ev));
                format!(
                    "epoll_ctl e{ep} {name} s{s} {} = {}",
                    bits(ev_mask, &EPOLL_BITS),
                    show(r.map(|_| "ok".into()))
                )
            }
            Op::EpollWait { ep, wait } => {
                let mut evs = [epoll_event { events: 0, u64: 0 }; 8];
                let timeout = i32::from(wait);
                let r = self
                    .sys
                    .epoll_wait(self.eps[usize::from(ep)], &mut evs, timeout)
                    .map(|n| {
                        let mut got: Vec<(u64, u32)> =
                            evs[..n].iter().map(|e| (e.u64, e.events)).collect();
                        got.sort_unstable();
                        let list: Vec<String> = got
                            .iter()
                            .map(|(d, e)| format!("s{d} {}", bits(*e, &EPOLL_BITS)))
                            .collect();
                        format!("{n} [{}]", list.join(", "))
                    });
                format!("epoll_wait e{ep} {timeout}ms = {}", show(r))
            }
            Op::EpollClose { ep } => {
                let r = self.sys.close(self.eps[usize::from(ep)]);
                self.eps[usize::from(ep)] = -1;
                format!("close e{ep} = {}", show(r.map(|_| "ok".into())))
            }
            Op::Poll { s, events } => {
                let mask = POLL_BITS[..4]
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| events & (1 << i) != 0)
                    .fold(0i16, |m, (_, (b, _))| m | b);
                let mut fds = [libc::pollfd {
                    fd: self.fd(s),
                    events: mask,
                    revents: 0,
                }];
                let r = self.sys.poll(&mut fds, 0).map(|n| {
                    format!(
                        "{n} {}",
                        bits(
                            fds[0].revents as u16 as u32,
                            &POLL_BITS.map(|(b, n)| (b as u16, n))
                        )
                    )
                });
                format!(
                    "poll s{s} {} = {}",
                    bits(mask as u16 as u32, &POLL_BITS.map(|(b, n)| (b as u16, n))),
                    show(r)
                )
            }
        }
    }

    /// Notes a send on datagram socket `s` (see [`FAILED_SEND`]).
    fn sent_datagram(&mut self, s: u8, ok: bool) {
        let slot = &mut self.socks[usize::from(s)];
        if slot.fd >= 0 && slot.dgram {
            if ok {
                slot.failed_send = false;
            } else if slot.side == Side::Unplaced {
                slot.failed_send = true;
            }
        }
    }

    fn setopt(&mut self, s: u8, opt: u8, val: u8) -> String {
        let (level, name, kind, label) = OPTS[usize::from(opt) % OPTS.len()];
        let mut bytes: Vec<u8> = match kind {
            Kind::Int | Kind::Mss => INT_VALUES[usize::from(val % 16) % INT_VALUES.len()]
                .to_ne_bytes()
                .to_vec(),
            Kind::Buffer => BUFFER_VALUES[usize::from(val % 16) % BUFFER_VALUES.len()]
                .to_ne_bytes()
                .to_vec(),
            Kind::Linger => [i32::from(val & 1), i32::from((val >> 1) % 3) * 5]
                .iter()
                .flat_map(|v| v.to_ne_bytes())
                .collect(),
            Kind::Timeval => [i64::from((val >> 1) % 3), 0]
                .iter()
                .flat_map(|v| v.to_ne_bytes())
                .collect(),
        };
        let value = match kind {
            Kind::Linger | Kind::Timeval => format!(
                "{:?}",
                bytes
                    .chunks(if kind == Kind::Linger { 4 } else { 8 })
                    .map(|c| c[0])
                    .collect::<Vec<_>>()
            ),
            _ => i32::from_ne_bytes(bytes[..4].try_into().expect("4 bytes")).to_string(),
        };
        let len = SET_LENGTHS[usize::from(val >> 6)];
        if len != 0 {
            bytes.resize(len, 0);
        }
        let r = self.sys.setsockopt(self.fd(s), level, name, &bytes);
        if kind == Kind::Mss && r.is_ok() && self.fd(s) >= 0 {
            let v = i32::from_ne_bytes(bytes[..4].try_into().expect("4 bytes"));
            self.socks[usize::from(s)].mss_set[0] = Some(v);
        }
        let r = r.map(|_| "ok".to_string()).unwrap_or_else(errno_name);
        format!("setsockopt s{s} {label} {value} len {} = {r}", bytes.len())
    }

    fn getopt(&mut self, s: u8, opt: u8, len: u8) -> String {
        let (level, name, kind, label) = OPTS[usize::from(opt) % OPTS.len()];
        let natural = match kind {
            Kind::Linger => 8,
            Kind::Timeval => 16,
            _ => 4,
        };
        let want = match GET_LENGTHS[usize::from(len) % GET_LENGTHS.len()] {
            0 => natural,
            n => n,
        };
        let mut buf = [0u8; 16];
        let r = self
            .sys
            .getsockopt(self.fd(s), level, name, &mut buf[..want]);
        let r = r.map(|n| {
            let got = &buf[..n.min(want)];
            let slot = self.socks[usize::from(s)];
            let set = |v: i32| slot.mss_set.contains(&Some(v));
            let value = match kind {
                Kind::Buffer => "(value not compared)".to_string(),
                Kind::Mss if slot.connection && n >= 4 => {
                    let v = i32::from_ne_bytes(buf[..4].try_into().expect("4 bytes"));
                    if set(v) {
                        v.to_string()
                    } else {
                        "(the path's MSS, not compared)".to_string()
                    }
                }
                Kind::Mss if slot.connection => "(a part of the path's MSS)".to_string(),
                _ => format!("{got:?}"),
            };
            format!("len {n} {value}")
        });
        format!(
            "getsockopt s{s} {label} len {want} = {}",
            r.unwrap_or_else(errno_name)
        )
    }
}
