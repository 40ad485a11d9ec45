//! A sequence of calls, decoded from bytes (libFuzzer's input, or a file
//! of the kept corpus): three bytes a call, an opcode and two arguments.
//! Every byte string decodes to some sequence, and every sequence encodes
//! back to bytes ([`encode`]), so seeds can be written as calls.

/// Socket handles a sequence juggles (sockets, accepted ones, duplicates).
pub const SOCKETS: u8 = 6;
/// epoll instances.
pub const EPOLLS: u8 = 2;
/// Ports a sequence binds and connects to; `PORTS` in a port argument
/// means port 0 (bind) or the last peer seen (sendto).
pub const PORTS: u8 = 3;
/// Calls in one sequence at most: with at most 255 bytes a send, no
/// buffer on either side ever fills (a full buffer's byte counts differ
/// by design: the sizes do).
pub const MAX_CALLS: usize = 64;

/// One call.  `s` is a socket handle (an empty one is fd -1), `ep` an
/// epoll handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `v6`: AF_INET6 (dual-stack, as Linux's default), else AF_INET.
    Socket {
        dgram: bool,
        cloexec: bool,
        v6: bool,
    },
    Bind {
        s: u8,
        any: bool,
        port: u8,
    },
    Listen {
        s: u8,
        backlog: i8,
    },
    Connect {
        s: u8,
        port: u8,
    },
    Accept {
        s: u8,
        cloexec: bool,
    },
    Send {
        s: u8,
        len: u8,
        flags: u8,
    },
    Recv {
        s: u8,
        len: u8,
        flags: u8,
    },
    SendTo {
        s: u8,
        len: u8,
        to: u8,
    },
    RecvFrom {
        s: u8,
        len: u8,
    },
    Shutdown {
        s: u8,
        how: u8,
    },
    Close {
        s: u8,
    },
    SetOpt {
        s: u8,
        opt: u8,
        val: u8,
    },
    GetOpt {
        s: u8,
        opt: u8,
        len: u8,
    },
    Fcntl {
        s: u8,
        cmd: u8,
    },
    Ioctl {
        s: u8,
        req: u8,
    },
    Name {
        s: u8,
        peer: bool,
    },
    EpollCreate,
    EpollCtl {
        ep: u8,
        s: u8,
        op: u8,
        events: u8,
    },
    EpollWait {
        ep: u8,
        wait: bool,
    },
    EpollClose {
        ep: u8,
    },
    Poll {
        s: u8,
        events: u8,
    },
}

const OPCODES: u8 = 21;

impl Op {
    /// The socket handle the call is on, if any.
    pub fn handle(&self) -> Option<u8> {
        match *self {
            Op::Bind { s, .. }
            | Op::Listen { s, .. }
            | Op::Connect { s, .. }
            | Op::Accept { s, .. }
            | Op::Send { s, .. }
            | Op::Recv { s, .. }
            | Op::SendTo { s, .. }
            | Op::RecvFrom { s, .. }
            | Op::Shutdown { s, .. }
            | Op::Close { s }
            | Op::SetOpt { s, .. }
            | Op::GetOpt { s, .. }
            | Op::Fcntl { s, .. }
            | Op::Ioctl { s, .. }
            | Op::Name { s, .. }
            | Op::EpollCtl { s, .. }
            | Op::Poll { s, .. } => Some(s),
            Op::Socket { .. } | Op::EpollCreate | Op::EpollWait { .. } | Op::EpollClose { .. } => {
                None
            }
        }
    }
}

/// The calls `data` stands for (a trailing partial call is dropped).
pub fn decode(data: &[u8]) -> Vec<Op> {
    data.chunks_exact(3)
        .take(MAX_CALLS)
        .map(|c| decode_one(c[0], c[1], c[2]))
        .collect()
}

fn decode_one(code: u8, a: u8, b: u8) -> Op {
    let s = a % SOCKETS;
    match code % OPCODES {
        0 => Op::Socket {
            dgram: a & 1 != 0,
            cloexec: b & 1 != 0,
            v6: a & 2 != 0,
        },
        1 => Op::Bind {
            s,
            any: b & 1 != 0,
            port: (b >> 1) % (PORTS + 1),
        },
        2 => Op::Listen {
            s,
            backlog: (b % 4) as i8 - 1,
        },
        3 => Op::Connect { s, port: b % PORTS },
        4 => Op::Accept {
            s,
            cloexec: b & 1 != 0,
        },
        5 => Op::Send {
            s,
            len: b,
            flags: a / SOCKETS,
        },
        6 => Op::Recv {
            s,
            len: b,
            flags: a / SOCKETS,
        },
        7 => Op::SendTo {
            s,
            len: b,
            to: (a / SOCKETS) % (PORTS + 1),
        },
        8 => Op::RecvFrom { s, len: b },
        9 => Op::Shutdown { s, how: b % 4 },
        10 => Op::Close { s },
        11 => Op::SetOpt {
            s,
            opt: a / SOCKETS,
            val: b,
        },
        12 => Op::GetOpt {
            s,
            opt: a / SOCKETS,
            len: b,
        },
        13 => Op::Fcntl { s, cmd: b },
        14 => Op::Ioctl { s, req: b },
        15 => Op::Name {
            s,
            peer: b & 1 != 0,
        },
        16 => Op::EpollCreate,
        17 => Op::EpollCtl {
            ep: a % EPOLLS,
            s: (a / EPOLLS) % SOCKETS,
            op: b % 3,
            events: (a / (EPOLLS * SOCKETS)) & 15 | (b / 3) << 4,
        },
        18 => Op::EpollWait {
            ep: a % EPOLLS,
            wait: b % 8 == 7,
        },
        19 => Op::EpollClose { ep: a % EPOLLS },
        _ => Op::Poll { s, events: b },
    }
}

/// Bytes that decode to `ops`.
pub fn encode(ops: &[Op]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ops.len() * 3);
    for op in ops {
        let (code, a, b) = match *op {
            Op::Socket { dgram, cloexec, v6 } => {
                (0, u8::from(dgram) | u8::from(v6) << 1, u8::from(cloexec))
            }
            Op::Bind { s, any, port } => (1, s, u8::from(any) | port << 1),
            Op::Listen { s, backlog } => (2, s, (backlog + 1) as u8),
            Op::Connect { s, port } => (3, s, port),
            Op::Accept { s, cloexec } => (4, s, u8::from(cloexec)),
            Op::Send { s, len, flags } => (5, s + flags * SOCKETS, len),
            Op::Recv { s, len, flags } => (6, s + flags * SOCKETS, len),
            Op::SendTo { s, len, to } => (7, s + to * SOCKETS, len),
            Op::RecvFrom { s, len } => (8, s, len),
            Op::Shutdown { s, how } => (9, s, how),
            Op::Close { s } => (10, s, 0),
            Op::SetOpt { s, opt, val } => (11, s + opt * SOCKETS, val),
            Op::GetOpt { s, opt, len } => (12, s + opt * SOCKETS, len),
            Op::Fcntl { s, cmd } => (13, s, cmd),
            Op::Ioctl { s, req } => (14, s, req),
            Op::Name { s, peer } => (15, s, u8::from(peer)),
            Op::EpollCreate => (16, 0, 0),
            Op::EpollCtl { ep, s, op, events } => (
                17,
                ep + s * EPOLLS + (events & 15) * EPOLLS * SOCKETS,
                op + (events >> 4) * 3,
            ),
            Op::EpollWait { ep, wait } => (18, ep, if wait { 7 } else { 0 }),
            Op::EpollClose { ep } => (19, ep, 0),
            Op::Poll { s, events } => (20, s, events),
        };
        out.extend_from_slice(&[code, a, b]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_encodes_to_bytes_that_decode_to_it() {
        // Every opcode with every argument byte pair: decode, encode,
        // decode again gives the same call.
        for code in 0..OPCODES {
            for a in 0..=255u8 {
                for b in (0..=255u8).step_by(7) {
                    let op = decode_one(code, a, b);
                    assert_eq!(decode(&encode(&[op])), vec![op], "{code} {a} {b}");
                }
            }
        }
    }

    #[test]
    fn a_partial_call_is_dropped_and_long_inputs_are_cut() {
        assert_eq!(decode(&[16, 0, 0, 1, 2]), vec![Op::EpollCreate]);
        assert_eq!(decode(&[16; 3 * (MAX_CALLS + 5)]).len(), MAX_CALLS);
    }
}
