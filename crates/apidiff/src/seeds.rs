//! Hand-written sequences: the seeds of the kept corpus
//! (`fuzz/seeds/api_diff/seed_*`, written from here, checked by
//! `tests/corpus.rs` to be what these encode to), each reaching a part of
//! the API a random start would take long to find.

use crate::ops::Op::{self, *};

const STREAM: Op = Socket {
    dgram: false,
    cloexec: false,
    v6: false,
};
const DGRAM: Op = Socket {
    dgram: true,
    cloexec: false,
    v6: false,
};
const STREAM6: Op = Socket {
    dgram: false,
    cloexec: false,
    v6: true,
};
const DGRAM6: Op = Socket {
    dgram: true,
    cloexec: false,
    v6: true,
};

/// A listener in s0 on P0, a client in s1 connected to it, the accepted
/// socket in s2.
fn tcp_pair() -> Vec<Op> {
    vec![
        STREAM,
        Bind {
            s: 0,
            any: true,
            port: 0,
        },
        Listen { s: 0, backlog: 2 },
        STREAM,
        Connect { s: 1, port: 0 },
        Accept {
            s: 0,
            cloexec: false,
        },
    ]
}

fn with(mut a: Vec<Op>, b: &[Op]) -> Vec<Op> {
    a.extend_from_slice(b);
    a
}

// Indices into `run.rs`'s tables, for the seeds below.
const IP_TTL: u8 = 19;
const SO_ERROR: u8 = 7;
const SO_REUSEADDR: u8 = 0;
const TCP_MAXSEG: u8 = 21;
/// Values of `run.rs`'s INT_VALUES: 64 (too small for TCP_MAXSEG), 255,
/// 100000 (too large), 0.
const INT_64: u8 = 4;
const INT_255: u8 = 5;
const INT_100000: u8 = 8;
const INT_0: u8 = 0;
const LEN_2: u8 = 4;
const RECV_OOB: u8 = 3;
const RECV_OOB_PEEK: u8 = 7;
const RECV_PEEK: u8 = 1;
const SEND_NOSIGNAL: u8 = 2;
const F_SETFL_APPEND: u8 = 2;
const F_GETFL: u8 = 0;

/// (name, calls) of every seed.  `seed_fix_*` are the differences the
/// fuzzer found that were fixed in ustack, each the shortest sequence
/// that showed it.
pub fn seeds() -> Vec<(&'static str, Vec<Op>)> {
    vec![
        (
            "seed_fix_ip_option_into_a_short_buffer",
            vec![
                DGRAM,
                GetOpt {
                    s: 0,
                    opt: IP_TTL,
                    len: LEN_2,
                },
            ],
        ),
        (
            "seed_fix_udp_recv_oob",
            vec![
                DGRAM,
                Bind {
                    s: 0,
                    any: true,
                    port: 0,
                },
                DGRAM,
                Recv {
                    s: 0,
                    len: 10,
                    flags: RECV_OOB,
                },
                SendTo {
                    s: 1,
                    len: 20,
                    to: 0,
                },
                Recv {
                    s: 0,
                    len: 10,
                    flags: RECV_OOB_PEEK,
                },
                Recv {
                    s: 0,
                    len: 30,
                    flags: RECV_OOB,
                },
            ],
        ),
        (
            "seed_fix_udp_shut_for_reading_nonblocking",
            vec![
                DGRAM,
                Shutdown { s: 0, how: 0 },
                Connect { s: 0, port: 0 },
                Recv {
                    s: 0,
                    len: 10,
                    flags: 0,
                },
            ],
        ),
        (
            "seed_fix_udp_send_without_destination",
            vec![
                DGRAM,
                Shutdown { s: 0, how: 1 },
                Send {
                    s: 0,
                    len: 5,
                    flags: 0,
                },
                SendTo {
                    s: 0,
                    len: 5,
                    to: 0,
                },
            ],
        ),
        (
            "seed_fix_tcp_shut_before_connecting",
            vec![
                STREAM,
                Shutdown { s: 0, how: 2 },
                Recv {
                    s: 0,
                    len: 10,
                    flags: 0,
                },
                Send {
                    s: 0,
                    len: 5,
                    flags: SEND_NOSIGNAL,
                },
                STREAM,
                Shutdown { s: 1, how: 1 },
                Recv {
                    s: 1,
                    len: 10,
                    flags: 0,
                },
            ],
        ),
        (
            "seed_fix_peek_takes_the_error",
            vec![
                STREAM,
                Connect { s: 0, port: 2 },
                Recv {
                    s: 0,
                    len: 10,
                    flags: RECV_PEEK,
                },
                Poll { s: 0, events: 3 },
                GetOpt {
                    s: 0,
                    opt: SO_ERROR,
                    len: 0,
                },
            ],
        ),
        (
            "seed_fix_tcp_read_of_no_bytes",
            with(
                tcp_pair(),
                &[
                    Recv {
                        s: 2,
                        len: 0,
                        flags: 0,
                    },
                    Send {
                        s: 1,
                        len: 5,
                        flags: 0,
                    },
                    Recv {
                        s: 2,
                        len: 0,
                        flags: 0,
                    },
                    STREAM,
                    Connect { s: 3, port: 2 },
                    Recv {
                        s: 3,
                        len: 0,
                        flags: 0,
                    },
                    Connect { s: 3, port: 2 },
                ],
            ),
        ),
        (
            "seed_fix_shutdown_wakes_every_waiter",
            vec![
                STREAM,
                EpollCreate,
                EpollCtl {
                    ep: 0,
                    s: 0,
                    op: 0,
                    events: 0b1_0011,
                },
                EpollWait { ep: 0, wait: false },
                EpollWait { ep: 0, wait: false },
                Shutdown { s: 0, how: 1 },
                EpollWait { ep: 0, wait: false },
                Shutdown { s: 0, how: 0 },
                EpollWait { ep: 0, wait: false },
            ],
        ),
        (
            "seed_fix_connect_after_shutdown_of_a_failed_attempt",
            vec![
                STREAM,
                Connect { s: 0, port: 2 },
                Shutdown { s: 0, how: 2 },
                Connect { s: 0, port: 2 },
                GetOpt {
                    s: 0,
                    opt: SO_ERROR,
                    len: 0,
                },
            ],
        ),
        (
            "seed_fix_tcp_recv_msg_trunc_copies_nothing",
            with(
                tcp_pair(),
                &[
                    Send {
                        s: 1,
                        len: 100,
                        flags: 0,
                    },
                    Recv {
                        s: 2,
                        len: 255,
                        flags: 4,
                    },
                    Send {
                        s: 1,
                        len: 30,
                        flags: 0,
                    },
                    Recv {
                        s: 2,
                        len: 255,
                        flags: 6,
                    },
                    Recv {
                        s: 2,
                        len: 255,
                        flags: 0,
                    },
                ],
            ),
        ),
        (
            "seed_fix_fcntl_status_flags",
            vec![
                STREAM,
                Fcntl {
                    s: 0,
                    cmd: F_SETFL_APPEND,
                },
                Fcntl { s: 0, cmd: F_GETFL },
            ],
        ),
        (
            "seed_tcp_exchange",
            with(
                tcp_pair(),
                &[
                    Send {
                        s: 1,
                        len: 100,
                        flags: 0,
                    },
                    Recv {
                        s: 2,
                        len: 255,
                        flags: 0,
                    },
                    Send {
                        s: 2,
                        len: 50,
                        flags: 0,
                    },
                    Recv {
                        s: 1,
                        len: 20,
                        flags: 1,
                    },
                    Recv {
                        s: 1,
                        len: 255,
                        flags: 0,
                    },
                    Name { s: 1, peer: true },
                    Name { s: 2, peer: false },
                    Shutdown { s: 1, how: 1 },
                    Recv {
                        s: 2,
                        len: 255,
                        flags: 0,
                    },
                    Send {
                        s: 1,
                        len: 1,
                        flags: 2,
                    },
                    Close { s: 2 },
                    Recv {
                        s: 1,
                        len: 255,
                        flags: 0,
                    },
                    Close { s: 1 },
                    Accept {
                        s: 0,
                        cloexec: true,
                    },
                ],
            ),
        ),
        (
            "seed_tcp_refused",
            vec![
                STREAM,
                Connect { s: 0, port: 1 },
                GetOpt {
                    s: 0,
                    opt: 7,
                    len: 0,
                },
                GetOpt {
                    s: 0,
                    opt: 7,
                    len: 0,
                },
                Send {
                    s: 0,
                    len: 10,
                    flags: 2,
                },
                Recv {
                    s: 0,
                    len: 10,
                    flags: 0,
                },
                Name { s: 0, peer: true },
                Connect { s: 0, port: 1 },
                Poll { s: 0, events: 3 },
            ],
        ),
        (
            "seed_udp_exchange",
            vec![
                DGRAM,
                Bind {
                    s: 0,
                    any: true,
                    port: 0,
                },
                DGRAM,
                SendTo {
                    s: 1,
                    len: 50,
                    to: 0,
                },
                RecvFrom { s: 0, len: 255 },
                SendTo {
                    s: 0,
                    len: 20,
                    to: 3,
                },
                RecvFrom { s: 1, len: 10 },
                RecvFrom { s: 1, len: 255 },
                Connect { s: 1, port: 0 },
                Send {
                    s: 1,
                    len: 0,
                    flags: 0,
                },
                Ioctl { s: 0, req: 0 },
                RecvFrom { s: 0, len: 255 },
                Name { s: 1, peer: true },
                Recv {
                    s: 0,
                    len: 255,
                    flags: 4,
                },
            ],
        ),
        (
            "seed_epoll",
            with(
                tcp_pair(),
                &[
                    EpollCreate,
                    EpollCtl {
                        ep: 0,
                        s: 2,
                        op: 0,
                        events: 0b0000_0101,
                    },
                    EpollCtl {
                        ep: 0,
                        s: 1,
                        op: 0,
                        events: 0b0001_0011,
                    },
                    EpollCtl {
                        ep: 0,
                        s: 0,
                        op: 0,
                        events: 0b0010_0001,
                    },
                    EpollWait { ep: 0, wait: false },
                    Send {
                        s: 1,
                        len: 30,
                        flags: 0,
                    },
                    EpollWait { ep: 0, wait: false },
                    Recv {
                        s: 2,
                        len: 10,
                        flags: 0,
                    },
                    EpollWait { ep: 0, wait: false },
                    STREAM,
                    Connect { s: 3, port: 0 },
                    EpollWait { ep: 0, wait: false },
                    EpollCtl {
                        ep: 0,
                        s: 0,
                        op: 1,
                        events: 0b0000_0001,
                    },
                    EpollWait { ep: 0, wait: true },
                    EpollCtl {
                        ep: 0,
                        s: 0,
                        op: 2,
                        events: 0,
                    },
                    EpollCtl {
                        ep: 0,
                        s: 0,
                        op: 2,
                        events: 0,
                    },
                    Shutdown { s: 1, how: 1 },
                    EpollWait { ep: 0, wait: false },
                    Close { s: 2 },
                    EpollWait { ep: 0, wait: false },
                ],
            ),
        ),
        (
            "seed_options",
            vec![
                STREAM,
                DGRAM,
                SetOpt {
                    s: 0,
                    opt: 0,
                    val: 1,
                },
                GetOpt {
                    s: 0,
                    opt: 0,
                    len: 0,
                },
                SetOpt {
                    s: 0,
                    opt: 2,
                    val: 1,
                },
                GetOpt {
                    s: 0,
                    opt: 2,
                    len: 0,
                },
                SetOpt {
                    s: 0,
                    opt: 3,
                    val: 3,
                },
                GetOpt {
                    s: 0,
                    opt: 3,
                    len: 0,
                },
                SetOpt {
                    s: 0,
                    opt: 14,
                    val: 1,
                },
                GetOpt {
                    s: 0,
                    opt: 14,
                    len: 0,
                },
                SetOpt {
                    s: 0,
                    opt: 15,
                    val: 9,
                },
                GetOpt {
                    s: 0,
                    opt: 15,
                    len: 0,
                },
                GetOpt {
                    s: 0,
                    opt: 8,
                    len: 0,
                },
                GetOpt {
                    s: 1,
                    opt: 8,
                    len: 0,
                },
                GetOpt {
                    s: 1,
                    opt: 12,
                    len: 0,
                },
                GetOpt {
                    s: 0,
                    opt: 11,
                    len: 0,
                },
                SetOpt {
                    s: 1,
                    opt: 10,
                    val: 1,
                },
                GetOpt {
                    s: 1,
                    opt: 10,
                    len: 2,
                },
                SetOpt {
                    s: 0,
                    opt: 19,
                    val: 4,
                },
                GetOpt {
                    s: 0,
                    opt: 19,
                    len: 0,
                },
                SetOpt {
                    s: 0,
                    opt: 20,
                    val: 5,
                },
                GetOpt {
                    s: 0,
                    opt: 20,
                    len: 0,
                },
                SetOpt {
                    s: 0,
                    opt: 13,
                    val: 2,
                },
                GetOpt {
                    s: 0,
                    opt: 13,
                    len: 0,
                },
                SetOpt {
                    s: 0,
                    opt: 14,
                    val: 0x81,
                },
                GetOpt {
                    s: 1,
                    opt: 14,
                    len: 0,
                },
            ],
        ),
        (
            "seed_dup_and_fcntl",
            with(
                tcp_pair(),
                &[
                    Fcntl { s: 2, cmd: 0 },
                    Fcntl { s: 2, cmd: 6 },
                    Fcntl { s: 3, cmd: 3 },
                    Close { s: 2 },
                    Send {
                        s: 1,
                        len: 40,
                        flags: 0,
                    },
                    Recv {
                        s: 3,
                        len: 255,
                        flags: 0,
                    },
                    Fcntl { s: 3, cmd: 2 },
                    Fcntl { s: 3, cmd: 0 },
                    Fcntl { s: 3, cmd: 7 },
                    EpollCreate,
                    EpollCtl {
                        ep: 0,
                        s: 3,
                        op: 0,
                        events: 1,
                    },
                    Fcntl { s: 3, cmd: 6 },
                    EpollCtl {
                        ep: 0,
                        s: 2,
                        op: 0,
                        events: 1,
                    },
                    Send {
                        s: 1,
                        len: 10,
                        flags: 0,
                    },
                    EpollWait { ep: 0, wait: false },
                    Close { s: 3 },
                    EpollWait { ep: 0, wait: false },
                ],
            ),
        ),
        (
            "seed_reset",
            with(
                tcp_pair(),
                &[
                    SetOpt {
                        s: 1,
                        opt: 3,
                        val: 1,
                    },
                    Close { s: 1 },
                    Poll { s: 2, events: 15 },
                    Recv {
                        s: 2,
                        len: 255,
                        flags: 0,
                    },
                    Recv {
                        s: 2,
                        len: 255,
                        flags: 0,
                    },
                    Send {
                        s: 2,
                        len: 10,
                        flags: 2,
                    },
                    GetOpt {
                        s: 2,
                        opt: 7,
                        len: 0,
                    },
                    Name { s: 2, peer: true },
                ],
            ),
        ),
        (
            "seed_urgent",
            with(
                tcp_pair(),
                &[
                    Send {
                        s: 1,
                        len: 10,
                        flags: 0,
                    },
                    Send {
                        s: 1,
                        len: 3,
                        flags: 3,
                    },
                    Send {
                        s: 1,
                        len: 5,
                        flags: 0,
                    },
                    Poll { s: 2, events: 5 },
                    Ioctl { s: 2, req: 1 },
                    Recv {
                        s: 2,
                        len: 255,
                        flags: 0,
                    },
                    Ioctl { s: 2, req: 1 },
                    Recv {
                        s: 2,
                        len: 1,
                        flags: 3,
                    },
                    Recv {
                        s: 2,
                        len: 1,
                        flags: 3,
                    },
                    Recv {
                        s: 2,
                        len: 255,
                        flags: 0,
                    },
                    SetOpt {
                        s: 2,
                        opt: 4,
                        val: 1,
                    },
                    Send {
                        s: 1,
                        len: 2,
                        flags: 3,
                    },
                    Recv {
                        s: 2,
                        len: 255,
                        flags: 0,
                    },
                ],
            ),
        ),
        (
            "seed_backlog",
            vec![
                STREAM,
                Bind {
                    s: 0,
                    any: false,
                    port: 1,
                },
                Accept {
                    s: 0,
                    cloexec: false,
                },
                Listen { s: 0, backlog: 0 },
                STREAM,
                STREAM,
                Connect { s: 1, port: 1 },
                Connect { s: 2, port: 1 },
                Connect { s: 1, port: 1 },
                Connect { s: 1, port: 1 },
                Close { s: 1 },
                Accept {
                    s: 0,
                    cloexec: false,
                },
                Recv {
                    s: 1,
                    len: 10,
                    flags: 0,
                },
                Accept {
                    s: 0,
                    cloexec: false,
                },
                Accept {
                    s: 0,
                    cloexec: false,
                },
                STREAM,
                Bind {
                    s: 4,
                    any: true,
                    port: 1,
                },
                Bind {
                    s: 4,
                    any: true,
                    port: 2,
                },
                Bind {
                    s: 4,
                    any: true,
                    port: 2,
                },
            ],
        ),
        (
            // Linux's accept queue holds backlog + 1 connections
            // (sk_acceptq_is_full is `>`): with backlog 1 two handshakes
            // complete and the third SYN goes unanswered.
            "seed_fix_accept_queue_holds_backlog_plus_one",
            vec![
                STREAM,
                Bind {
                    s: 0,
                    any: true,
                    port: 0,
                },
                Listen { s: 0, backlog: 1 },
                STREAM,
                STREAM,
                STREAM,
                Connect { s: 1, port: 0 },
                Connect { s: 2, port: 0 },
                Connect { s: 3, port: 0 },
                Poll { s: 1, events: 2 },
                Poll { s: 2, events: 2 },
                Poll { s: 3, events: 2 },
                Accept {
                    s: 0,
                    cloexec: false,
                },
                Accept {
                    s: 0,
                    cloexec: false,
                },
                Close { s: 4 },
                Accept {
                    s: 0,
                    cloexec: false,
                },
            ],
        ),
        (
            "seed_shutdown",
            with(
                tcp_pair(),
                &[
                    Shutdown { s: 2, how: 0 },
                    Poll { s: 2, events: 15 },
                    Recv {
                        s: 2,
                        len: 10,
                        flags: 0,
                    },
                    Send {
                        s: 1,
                        len: 10,
                        flags: 0,
                    },
                    Shutdown { s: 2, how: 1 },
                    Recv {
                        s: 1,
                        len: 10,
                        flags: 0,
                    },
                    Send {
                        s: 2,
                        len: 1,
                        flags: 2,
                    },
                    Shutdown { s: 2, how: 2 },
                    Shutdown { s: 2, how: 3 },
                    Shutdown { s: 0, how: 2 },
                    Accept {
                        s: 0,
                        cloexec: false,
                    },
                    Poll { s: 0, events: 15 },
                    STREAM,
                    Shutdown { s: 3, how: 2 },
                ],
            ),
        ),
        (
            "seed_bad_handles",
            vec![
                Close { s: 0 },
                Send {
                    s: 0,
                    len: 1,
                    flags: 0,
                },
                Recv {
                    s: 0,
                    len: 1,
                    flags: 0,
                },
                Bind {
                    s: 0,
                    any: true,
                    port: 0,
                },
                Listen { s: 0, backlog: 1 },
                Accept {
                    s: 0,
                    cloexec: false,
                },
                Connect { s: 0, port: 0 },
                GetOpt {
                    s: 0,
                    opt: 0,
                    len: 0,
                },
                SetOpt {
                    s: 0,
                    opt: 0,
                    val: 0,
                },
                Fcntl { s: 0, cmd: 0 },
                Ioctl { s: 0, req: 0 },
                Name { s: 0, peer: false },
                EpollWait { ep: 0, wait: false },
                EpollCtl {
                    ep: 0,
                    s: 0,
                    op: 0,
                    events: 1,
                },
                EpollCreate,
                EpollCtl {
                    ep: 0,
                    s: 0,
                    op: 0,
                    events: 1,
                },
                EpollClose { ep: 1 },
                Poll { s: 0, events: 1 },
            ],
        ),
        (
            "seed_fix_bind_beside_accepted_connections",
            with(
                tcp_pair(),
                &[
                    Close { s: 0 },
                    STREAM,
                    Bind {
                        s: 0,
                        any: true,
                        port: 0,
                    },
                    Close { s: 2 },
                    Bind {
                        s: 0,
                        any: false,
                        port: 0,
                    },
                    Close { s: 1 },
                    Bind {
                        s: 0,
                        any: true,
                        port: 0,
                    },
                ],
            ),
        ),
        (
            "seed_fix_bind_beside_accepted_connections_reuseaddr",
            vec![
                STREAM,
                SetOpt {
                    s: 0,
                    opt: SO_REUSEADDR,
                    val: 1,
                },
                Bind {
                    s: 0,
                    any: true,
                    port: 1,
                },
                Listen { s: 0, backlog: 2 },
                STREAM,
                Connect { s: 1, port: 1 },
                Accept {
                    s: 0,
                    cloexec: false,
                },
                Close { s: 0 },
                STREAM,
                Bind {
                    s: 0,
                    any: true,
                    port: 1,
                },
                SetOpt {
                    s: 0,
                    opt: SO_REUSEADDR,
                    val: 1,
                },
                Bind {
                    s: 0,
                    any: true,
                    port: 1,
                },
                Listen { s: 0, backlog: 2 },
                STREAM,
                SetOpt {
                    s: 3,
                    opt: SO_REUSEADDR,
                    val: 1,
                },
                Bind {
                    s: 3,
                    any: false,
                    port: 1,
                },
            ],
        ),
        (
            "seed_fix_name_after_a_refused_connect",
            vec![
                STREAM,
                Connect { s: 0, port: 2 },
                Name { s: 0, peer: false },
                GetOpt {
                    s: 0,
                    opt: SO_ERROR,
                    len: 0,
                },
                Name { s: 0, peer: false },
                Connect { s: 0, port: 2 },
                Name { s: 0, peer: false },
                Bind {
                    s: 0,
                    any: true,
                    port: 2,
                },
                Name { s: 0, peer: false },
                STREAM,
                Connect { s: 1, port: 2 },
                Connect { s: 1, port: 2 },
                Name { s: 1, peer: false },
                Name { s: 1, peer: true },
            ],
        ),
        (
            "seed_fix_tcp_maxseg",
            vec![
                STREAM,
                GetOpt {
                    s: 0,
                    opt: TCP_MAXSEG,
                    len: 0,
                },
                SetOpt {
                    s: 0,
                    opt: TCP_MAXSEG,
                    val: INT_64,
                },
                SetOpt {
                    s: 0,
                    opt: TCP_MAXSEG,
                    val: INT_100000,
                },
                SetOpt {
                    s: 0,
                    opt: TCP_MAXSEG,
                    val: INT_255,
                },
                GetOpt {
                    s: 0,
                    opt: TCP_MAXSEG,
                    len: LEN_2,
                },
                Bind {
                    s: 0,
                    any: true,
                    port: 0,
                },
                Listen { s: 0, backlog: 2 },
                GetOpt {
                    s: 0,
                    opt: TCP_MAXSEG,
                    len: 0,
                },
                STREAM,
                SetOpt {
                    s: 1,
                    opt: TCP_MAXSEG,
                    val: INT_0,
                },
                GetOpt {
                    s: 1,
                    opt: TCP_MAXSEG,
                    len: 0,
                },
                Connect { s: 1, port: 0 },
                GetOpt {
                    s: 1,
                    opt: TCP_MAXSEG,
                    len: 0,
                },
                Accept {
                    s: 0,
                    cloexec: false,
                },
                GetOpt {
                    s: 2,
                    opt: TCP_MAXSEG,
                    len: 0,
                },
                DGRAM,
                GetOpt {
                    s: 3,
                    opt: TCP_MAXSEG,
                    len: 0,
                },
                SetOpt {
                    s: 3,
                    opt: TCP_MAXSEG,
                    val: INT_255,
                },
                SetOpt {
                    s: 1,
                    opt: TCP_MAXSEG,
                    val: 128 + INT_255,
                },
            ],
        ),
        (
            "seed_fix_send_to_a_peer_shut_both_ways",
            with(
                tcp_pair(),
                &[
                    Shutdown { s: 2, how: 2 },
                    Send {
                        s: 1,
                        len: 5,
                        flags: SEND_NOSIGNAL,
                    },
                    Recv {
                        s: 1,
                        len: 10,
                        flags: 0,
                    },
                    Recv {
                        s: 2,
                        len: 10,
                        flags: 0,
                    },
                    Poll { s: 1, events: 15 },
                    Send {
                        s: 1,
                        len: 5,
                        flags: SEND_NOSIGNAL,
                    },
                    Send {
                        s: 1,
                        len: 5,
                        flags: SEND_NOSIGNAL,
                    },
                    GetOpt {
                        s: 1,
                        opt: SO_ERROR,
                        len: 0,
                    },
                    Recv {
                        s: 2,
                        len: 10,
                        flags: 0,
                    },
                    Send {
                        s: 2,
                        len: 5,
                        flags: SEND_NOSIGNAL,
                    },
                ],
            ),
        ),
        (
            "seed_fix_send_to_a_closed_peer",
            with(
                tcp_pair(),
                &[
                    Close { s: 2 },
                    Send {
                        s: 1,
                        len: 5,
                        flags: SEND_NOSIGNAL,
                    },
                    GetOpt {
                        s: 1,
                        opt: SO_ERROR,
                        len: 0,
                    },
                    Recv {
                        s: 1,
                        len: 10,
                        flags: 0,
                    },
                    Send {
                        s: 1,
                        len: 5,
                        flags: SEND_NOSIGNAL,
                    },
                    STREAM,
                    Connect { s: 2, port: 0 },
                    Accept {
                        s: 0,
                        cloexec: false,
                    },
                    Close { s: 3 },
                    Send {
                        s: 2,
                        len: 5,
                        flags: 0,
                    },
                    Recv {
                        s: 2,
                        len: 10,
                        flags: 0,
                    },
                    Send {
                        s: 2,
                        len: 5,
                        flags: 0,
                    },
                ],
            ),
        ),
        (
            "seed_fix_udp_connected_to_a_closed_port",
            vec![
                DGRAM,
                Connect { s: 0, port: 1 },
                Send {
                    s: 0,
                    len: 3,
                    flags: 0,
                },
                Poll { s: 0, events: 3 },
                Send {
                    s: 0,
                    len: 3,
                    flags: 0,
                },
                Send {
                    s: 0,
                    len: 3,
                    flags: 0,
                },
                Recv {
                    s: 0,
                    len: 10,
                    flags: 0,
                },
                GetOpt {
                    s: 0,
                    opt: SO_ERROR,
                    len: 0,
                },
                EpollCreate,
                EpollCtl {
                    ep: 0,
                    s: 0,
                    op: 0,
                    events: 1,
                },
                Send {
                    s: 0,
                    len: 3,
                    flags: 0,
                },
                EpollWait { ep: 0, wait: false },
                GetOpt {
                    s: 0,
                    opt: SO_ERROR,
                    len: 0,
                },
                GetOpt {
                    s: 0,
                    opt: SO_ERROR,
                    len: 0,
                },
                DGRAM,
                Bind {
                    s: 1,
                    any: true,
                    port: 1,
                },
                Send {
                    s: 0,
                    len: 3,
                    flags: 0,
                },
                Recv {
                    s: 0,
                    len: 10,
                    flags: 0,
                },
                RecvFrom { s: 1, len: 10 },
                Close { s: 1 },
                Send {
                    s: 0,
                    len: 3,
                    flags: 0,
                },
                SendTo {
                    s: 0,
                    len: 3,
                    to: 2,
                },
                Recv {
                    s: 0,
                    len: 10,
                    flags: 0,
                },
            ],
        ),
        (
            "seed_ipv6_stream",
            vec![
                STREAM6,
                Bind {
                    s: 0,
                    any: false,
                    port: 0,
                },
                Listen { s: 0, backlog: 2 },
                STREAM6,
                Connect { s: 1, port: 0 },
                Accept {
                    s: 0,
                    cloexec: false,
                },
                Name { s: 1, peer: false },
                Name { s: 1, peer: true },
                Name { s: 2, peer: false },
                Send {
                    s: 1,
                    len: 100,
                    flags: 0,
                },
                Recv {
                    s: 2,
                    len: 200,
                    flags: 0,
                },
                Shutdown { s: 2, how: 1 },
                Recv {
                    s: 1,
                    len: 200,
                    flags: 0,
                },
                Poll { s: 1, events: 15 },
                Close { s: 2 },
                Close { s: 1 },
                STREAM6,
                Bind {
                    s: 1,
                    any: true,
                    port: 0,
                },
            ],
        ),
        (
            "seed_ipv6_dual_stack",
            vec![
                STREAM6,
                Bind {
                    s: 0,
                    any: true,
                    port: 1,
                },
                Listen { s: 0, backlog: 2 },
                STREAM,
                Bind {
                    s: 1,
                    any: true,
                    port: 1,
                },
                Connect { s: 1, port: 1 },
                Close { s: 1 },
                STREAM,
                Connect { s: 1, port: 1 },
                Accept {
                    s: 0,
                    cloexec: false,
                },
                Name { s: 2, peer: false },
                DGRAM6,
                Bind {
                    s: 3,
                    any: true,
                    port: 2,
                },
                DGRAM,
                SendTo {
                    s: 4,
                    len: 10,
                    to: 2,
                },
                RecvFrom { s: 3, len: 20 },
                SendTo {
                    s: 3,
                    len: 7,
                    to: 3,
                },
                RecvFrom { s: 4, len: 20 },
            ],
        ),
        (
            "seed_ipv6_udp_connected_to_a_closed_port",
            vec![
                DGRAM6,
                Connect { s: 0, port: 1 },
                Send {
                    s: 0,
                    len: 3,
                    flags: 0,
                },
                Poll { s: 0, events: 3 },
                Send {
                    s: 0,
                    len: 3,
                    flags: 0,
                },
                Send {
                    s: 0,
                    len: 3,
                    flags: 0,
                },
                Recv {
                    s: 0,
                    len: 10,
                    flags: 0,
                },
                Name { s: 0, peer: true },
            ],
        ),
    ]
}
