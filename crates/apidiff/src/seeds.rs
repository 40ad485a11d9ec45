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

// Short forms of the calls most seeds make (a struct literal of three
// fields takes five lines), their arguments in the fields' order.
const fn bind_any(s: u8, port: u8) -> Op {
    Bind { s, any: true, port }
}
/// Binds the server's address, not the any address.
const fn bind_server(s: u8, port: u8) -> Op {
    Bind {
        s,
        any: false,
        port,
    }
}
const fn accept(s: u8) -> Op {
    Accept { s, cloexec: false }
}
const fn send(s: u8, len: u8, flags: u8) -> Op {
    Send { s, len, flags }
}
const fn recv(s: u8, len: u8, flags: u8) -> Op {
    Recv { s, len, flags }
}
const fn send_to(s: u8, len: u8, to: u8) -> Op {
    SendTo { s, len, to }
}
const fn set_opt(s: u8, opt: u8, val: u8) -> Op {
    SetOpt { s, opt, val }
}
const fn get_opt(s: u8, opt: u8, len: u8) -> Op {
    GetOpt { s, opt, len }
}
const fn epoll_ctl(ep: u8, s: u8, op: u8, events: u8) -> Op {
    EpollCtl { ep, s, op, events }
}

/// A listener in s0 on P0, a client in s1 connected to it, the accepted
/// socket in s2.
fn tcp_pair() -> Vec<Op> {
    vec![
        STREAM,
        bind_any(0, 0),
        Listen { s: 0, backlog: 2 },
        STREAM,
        Connect { s: 1, port: 0 },
        accept(0),
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
            vec![DGRAM, get_opt(0, IP_TTL, LEN_2)],
        ),
        (
            "seed_fix_udp_recv_oob",
            vec![
                DGRAM,
                bind_any(0, 0),
                DGRAM,
                recv(0, 10, RECV_OOB),
                send_to(1, 20, 0),
                recv(0, 10, RECV_OOB_PEEK),
                recv(0, 30, RECV_OOB),
            ],
        ),
        (
            "seed_fix_udp_shut_for_reading_nonblocking",
            vec![
                DGRAM,
                Shutdown { s: 0, how: 0 },
                Connect { s: 0, port: 0 },
                recv(0, 10, 0),
            ],
        ),
        (
            "seed_fix_udp_send_without_destination",
            vec![
                DGRAM,
                Shutdown { s: 0, how: 1 },
                send(0, 5, 0),
                send_to(0, 5, 0),
            ],
        ),
        (
            "seed_fix_tcp_shut_before_connecting",
            vec![
                STREAM,
                Shutdown { s: 0, how: 2 },
                recv(0, 10, 0),
                send(0, 5, SEND_NOSIGNAL),
                STREAM,
                Shutdown { s: 1, how: 1 },
                recv(1, 10, 0),
            ],
        ),
        (
            "seed_fix_peek_takes_the_error",
            vec![
                STREAM,
                Connect { s: 0, port: 2 },
                recv(0, 10, RECV_PEEK),
                Poll { s: 0, events: 3 },
                get_opt(0, SO_ERROR, 0),
            ],
        ),
        (
            "seed_fix_tcp_read_of_no_bytes",
            with(
                tcp_pair(),
                &[
                    recv(2, 0, 0),
                    send(1, 5, 0),
                    recv(2, 0, 0),
                    STREAM,
                    Connect { s: 3, port: 2 },
                    recv(3, 0, 0),
                    Connect { s: 3, port: 2 },
                ],
            ),
        ),
        (
            "seed_fix_shutdown_wakes_every_waiter",
            vec![
                STREAM,
                EpollCreate,
                epoll_ctl(0, 0, 0, 0b1_0011),
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
                get_opt(0, SO_ERROR, 0),
            ],
        ),
        (
            "seed_fix_tcp_recv_msg_trunc_copies_nothing",
            with(
                tcp_pair(),
                &[
                    send(1, 100, 0),
                    recv(2, 255, 4),
                    send(1, 30, 0),
                    recv(2, 255, 6),
                    recv(2, 255, 0),
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
                    send(1, 100, 0),
                    recv(2, 255, 0),
                    send(2, 50, 0),
                    recv(1, 20, 1),
                    recv(1, 255, 0),
                    Name { s: 1, peer: true },
                    Name { s: 2, peer: false },
                    Shutdown { s: 1, how: 1 },
                    recv(2, 255, 0),
                    send(1, 1, 2),
                    Close { s: 2 },
                    recv(1, 255, 0),
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
                get_opt(0, 7, 0),
                get_opt(0, 7, 0),
                send(0, 10, 2),
                recv(0, 10, 0),
                Name { s: 0, peer: true },
                Connect { s: 0, port: 1 },
                Poll { s: 0, events: 3 },
            ],
        ),
        (
            "seed_udp_exchange",
            vec![
                DGRAM,
                bind_any(0, 0),
                DGRAM,
                send_to(1, 50, 0),
                RecvFrom { s: 0, len: 255 },
                send_to(0, 20, 3),
                RecvFrom { s: 1, len: 10 },
                RecvFrom { s: 1, len: 255 },
                Connect { s: 1, port: 0 },
                send(1, 0, 0),
                Ioctl { s: 0, req: 0 },
                RecvFrom { s: 0, len: 255 },
                Name { s: 1, peer: true },
                recv(0, 255, 4),
            ],
        ),
        (
            "seed_epoll",
            with(
                tcp_pair(),
                &[
                    EpollCreate,
                    epoll_ctl(0, 2, 0, 0b0000_0101),
                    epoll_ctl(0, 1, 0, 0b0001_0011),
                    epoll_ctl(0, 0, 0, 0b0010_0001),
                    EpollWait { ep: 0, wait: false },
                    send(1, 30, 0),
                    EpollWait { ep: 0, wait: false },
                    recv(2, 10, 0),
                    EpollWait { ep: 0, wait: false },
                    STREAM,
                    Connect { s: 3, port: 0 },
                    EpollWait { ep: 0, wait: false },
                    epoll_ctl(0, 0, 1, 0b0000_0001),
                    EpollWait { ep: 0, wait: true },
                    epoll_ctl(0, 0, 2, 0),
                    epoll_ctl(0, 0, 2, 0),
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
                set_opt(0, 0, 1),
                get_opt(0, 0, 0),
                set_opt(0, 2, 1),
                get_opt(0, 2, 0),
                set_opt(0, 3, 3),
                get_opt(0, 3, 0),
                set_opt(0, 14, 1),
                get_opt(0, 14, 0),
                set_opt(0, 15, 9),
                get_opt(0, 15, 0),
                get_opt(0, 8, 0),
                get_opt(1, 8, 0),
                get_opt(1, 12, 0),
                get_opt(0, 11, 0),
                set_opt(1, 10, 1),
                get_opt(1, 10, 2),
                set_opt(0, 19, 4),
                get_opt(0, 19, 0),
                set_opt(0, 20, 5),
                get_opt(0, 20, 0),
                set_opt(0, 13, 2),
                get_opt(0, 13, 0),
                set_opt(0, 14, 0x81),
                get_opt(1, 14, 0),
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
                    send(1, 40, 0),
                    recv(3, 255, 0),
                    Fcntl { s: 3, cmd: 2 },
                    Fcntl { s: 3, cmd: 0 },
                    Fcntl { s: 3, cmd: 7 },
                    EpollCreate,
                    epoll_ctl(0, 3, 0, 1),
                    Fcntl { s: 3, cmd: 6 },
                    epoll_ctl(0, 2, 0, 1),
                    send(1, 10, 0),
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
                    set_opt(1, 3, 1),
                    Close { s: 1 },
                    Poll { s: 2, events: 15 },
                    recv(2, 255, 0),
                    recv(2, 255, 0),
                    send(2, 10, 2),
                    get_opt(2, 7, 0),
                    Name { s: 2, peer: true },
                ],
            ),
        ),
        (
            "seed_urgent",
            with(
                tcp_pair(),
                &[
                    send(1, 10, 0),
                    send(1, 3, 3),
                    send(1, 5, 0),
                    Poll { s: 2, events: 5 },
                    Ioctl { s: 2, req: 1 },
                    recv(2, 255, 0),
                    Ioctl { s: 2, req: 1 },
                    recv(2, 1, 3),
                    recv(2, 1, 3),
                    recv(2, 255, 0),
                    set_opt(2, 4, 1),
                    send(1, 2, 3),
                    recv(2, 255, 0),
                ],
            ),
        ),
        (
            "seed_backlog",
            vec![
                STREAM,
                bind_server(0, 1),
                accept(0),
                Listen { s: 0, backlog: 0 },
                STREAM,
                STREAM,
                Connect { s: 1, port: 1 },
                Connect { s: 2, port: 1 },
                Connect { s: 1, port: 1 },
                Connect { s: 1, port: 1 },
                Close { s: 1 },
                accept(0),
                recv(1, 10, 0),
                accept(0),
                accept(0),
                STREAM,
                bind_any(4, 1),
                bind_any(4, 2),
                bind_any(4, 2),
            ],
        ),
        (
            // Linux's accept queue holds backlog + 1 connections
            // (sk_acceptq_is_full is `>`): with backlog 1 two handshakes
            // complete and the third SYN goes unanswered.
            "seed_fix_accept_queue_holds_backlog_plus_one",
            vec![
                STREAM,
                bind_any(0, 0),
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
                accept(0),
                accept(0),
                Close { s: 4 },
                accept(0),
            ],
        ),
        (
            "seed_shutdown",
            with(
                tcp_pair(),
                &[
                    Shutdown { s: 2, how: 0 },
                    Poll { s: 2, events: 15 },
                    recv(2, 10, 0),
                    send(1, 10, 0),
                    Shutdown { s: 2, how: 1 },
                    recv(1, 10, 0),
                    send(2, 1, 2),
                    Shutdown { s: 2, how: 2 },
                    Shutdown { s: 2, how: 3 },
                    Shutdown { s: 0, how: 2 },
                    accept(0),
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
                send(0, 1, 0),
                recv(0, 1, 0),
                bind_any(0, 0),
                Listen { s: 0, backlog: 1 },
                accept(0),
                Connect { s: 0, port: 0 },
                get_opt(0, 0, 0),
                set_opt(0, 0, 0),
                Fcntl { s: 0, cmd: 0 },
                Ioctl { s: 0, req: 0 },
                Name { s: 0, peer: false },
                EpollWait { ep: 0, wait: false },
                epoll_ctl(0, 0, 0, 1),
                EpollCreate,
                epoll_ctl(0, 0, 0, 1),
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
                    bind_any(0, 0),
                    Close { s: 2 },
                    bind_server(0, 0),
                    Close { s: 1 },
                    bind_any(0, 0),
                ],
            ),
        ),
        (
            "seed_fix_bind_beside_accepted_connections_reuseaddr",
            vec![
                STREAM,
                set_opt(0, SO_REUSEADDR, 1),
                bind_any(0, 1),
                Listen { s: 0, backlog: 2 },
                STREAM,
                Connect { s: 1, port: 1 },
                accept(0),
                Close { s: 0 },
                STREAM,
                bind_any(0, 1),
                set_opt(0, SO_REUSEADDR, 1),
                bind_any(0, 1),
                Listen { s: 0, backlog: 2 },
                STREAM,
                set_opt(3, SO_REUSEADDR, 1),
                bind_server(3, 1),
            ],
        ),
        (
            "seed_fix_name_after_a_refused_connect",
            vec![
                STREAM,
                Connect { s: 0, port: 2 },
                Name { s: 0, peer: false },
                get_opt(0, SO_ERROR, 0),
                Name { s: 0, peer: false },
                Connect { s: 0, port: 2 },
                Name { s: 0, peer: false },
                bind_any(0, 2),
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
                get_opt(0, TCP_MAXSEG, 0),
                set_opt(0, TCP_MAXSEG, INT_64),
                set_opt(0, TCP_MAXSEG, INT_100000),
                set_opt(0, TCP_MAXSEG, INT_255),
                get_opt(0, TCP_MAXSEG, LEN_2),
                bind_any(0, 0),
                Listen { s: 0, backlog: 2 },
                get_opt(0, TCP_MAXSEG, 0),
                STREAM,
                set_opt(1, TCP_MAXSEG, INT_0),
                get_opt(1, TCP_MAXSEG, 0),
                Connect { s: 1, port: 0 },
                get_opt(1, TCP_MAXSEG, 0),
                accept(0),
                get_opt(2, TCP_MAXSEG, 0),
                DGRAM,
                get_opt(3, TCP_MAXSEG, 0),
                set_opt(3, TCP_MAXSEG, INT_255),
                set_opt(1, TCP_MAXSEG, 128 + INT_255),
            ],
        ),
        (
            "seed_fix_send_to_a_peer_shut_both_ways",
            with(
                tcp_pair(),
                &[
                    Shutdown { s: 2, how: 2 },
                    send(1, 5, SEND_NOSIGNAL),
                    recv(1, 10, 0),
                    recv(2, 10, 0),
                    Poll { s: 1, events: 15 },
                    send(1, 5, SEND_NOSIGNAL),
                    send(1, 5, SEND_NOSIGNAL),
                    get_opt(1, SO_ERROR, 0),
                    recv(2, 10, 0),
                    send(2, 5, SEND_NOSIGNAL),
                ],
            ),
        ),
        (
            "seed_fix_send_to_a_closed_peer",
            with(
                tcp_pair(),
                &[
                    Close { s: 2 },
                    send(1, 5, SEND_NOSIGNAL),
                    get_opt(1, SO_ERROR, 0),
                    recv(1, 10, 0),
                    send(1, 5, SEND_NOSIGNAL),
                    STREAM,
                    Connect { s: 2, port: 0 },
                    accept(0),
                    Close { s: 3 },
                    send(2, 5, 0),
                    recv(2, 10, 0),
                    send(2, 5, 0),
                ],
            ),
        ),
        (
            "seed_fix_udp_connected_to_a_closed_port",
            vec![
                DGRAM,
                Connect { s: 0, port: 1 },
                send(0, 3, 0),
                Poll { s: 0, events: 3 },
                send(0, 3, 0),
                send(0, 3, 0),
                recv(0, 10, 0),
                get_opt(0, SO_ERROR, 0),
                EpollCreate,
                epoll_ctl(0, 0, 0, 1),
                send(0, 3, 0),
                EpollWait { ep: 0, wait: false },
                get_opt(0, SO_ERROR, 0),
                get_opt(0, SO_ERROR, 0),
                DGRAM,
                bind_any(1, 1),
                send(0, 3, 0),
                recv(0, 10, 0),
                RecvFrom { s: 1, len: 10 },
                Close { s: 1 },
                send(0, 3, 0),
                send_to(0, 3, 2),
                recv(0, 10, 0),
            ],
        ),
        (
            "seed_ipv6_stream",
            vec![
                STREAM6,
                bind_server(0, 0),
                Listen { s: 0, backlog: 2 },
                STREAM6,
                Connect { s: 1, port: 0 },
                accept(0),
                Name { s: 1, peer: false },
                Name { s: 1, peer: true },
                Name { s: 2, peer: false },
                send(1, 100, 0),
                recv(2, 200, 0),
                Shutdown { s: 2, how: 1 },
                recv(1, 200, 0),
                Poll { s: 1, events: 15 },
                Close { s: 2 },
                Close { s: 1 },
                STREAM6,
                bind_any(1, 0),
            ],
        ),
        (
            "seed_ipv6_dual_stack",
            vec![
                STREAM6,
                bind_any(0, 1),
                Listen { s: 0, backlog: 2 },
                STREAM,
                bind_any(1, 1),
                Connect { s: 1, port: 1 },
                Close { s: 1 },
                STREAM,
                Connect { s: 1, port: 1 },
                accept(0),
                Name { s: 2, peer: false },
                DGRAM6,
                bind_any(3, 2),
                DGRAM,
                send_to(4, 10, 2),
                RecvFrom { s: 3, len: 20 },
                send_to(3, 7, 3),
                RecvFrom { s: 4, len: 20 },
            ],
        ),
        (
            "seed_ipv6_udp_connected_to_a_closed_port",
            vec![
                DGRAM6,
                Connect { s: 0, port: 1 },
                send(0, 3, 0),
                Poll { s: 0, events: 3 },
                send(0, 3, 0),
                send(0, 3, 0),
                recv(0, 10, 0),
                Name { s: 0, peer: true },
            ],
        ),
    ]
}
