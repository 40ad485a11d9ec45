//! The socket layer of ustack: POSIX sockets with Linux's semantics and
//! errno values, epoll with Linux's, kqueue with FreeBSD's, usable from any
//! thread.  The C ABI, the F-Stack `ff_*` layer, the async Rust API and the
//! LD_PRELOAD library are thin wrappers over these calls.
//!
//! # Shape of the calls
//!
//! The calls mirror the C ones: an fd is an `i32`, an error is an
//! [`Errno`] holding the Linux value, addresses are [`SocketAddr`]s,
//! flags and option names are Linux's constants ([`consts`]), option
//! values are the bytes of their C structs ([`setsockopt`],
//! [`getsockopt`]; [`setsockopt_int`] for ints).  The ancillary data of
//! [`recvmsg`] and [`sendmsg`] comes typed ([`RecvMsg::pktinfo`],
//! [`RecvMsg::dstaddr`], [`RecvMsg::pktinfo6`], [`SendMsg::src`]); a C
//! wrapper encodes it as cmsgs (`IP_PKTINFO` and `IPV6_PKTINFO` for Linux
//! programs, `IP_RECVDSTADDR` / `IP_SENDSRCADDR` for F-Stack ones).
//!
//! # IPv4 and IPv6
//!
//! A socket is AF_INET or AF_INET6, as Linux's: an AF_INET one takes and
//! shows IPv4 addresses only (an IPv6 one is EAFNOSUPPORT); an AF_INET6
//! one takes IPv6 addresses, and reaches IPv4 through IPv4-mapped ones
//! (`::ffff:a.b.c.d`).  Bound to `[::]` without IPV6_V6ONLY (off by
//! default, as on Linux; it must be set before the socket has a port) it
//! also takes IPv4 connections and datagrams, which it shows mapped; such
//! a socket conflicts with one on `0.0.0.0` and the same port.  Bound to
//! one IPv6 address it is v6-only.  IPV6_UNICAST_HOPS and IPV6_TCLASS
//! mark its IPv6 packets, IP_TTL and IP_TOS its IPv4 ones;
//! IPV6_RECVPKTINFO reports each datagram's destination (`struct
//! in6_pktinfo`, mapped for IPv4) and IPV6_PKTINFO on send picks the
//! source.  The errno for a mismatched family is Linux's for each call
//! (see `family.rs`).
//!
//! Every ustack fd is a number reserved from the kernel (a duplicate of
//! one placeholder socket: an fd-table slot, not a kernel object per
//! socket), so it never collides with a kernel fd: a program can hold
//! both, and [`is_ustack_fd`] tells them apart.  [`dup`], [`dup2`],
//! [`dup3`] and fcntl's F_DUPFD give an object more numbers, with POSIX's
//! semantics (see `dup.rs`); [`poll`] is poll(2) over ustack fds.
//!
//! # Engines, workers and threads
//!
//! A thread becomes an engine thread with [`attach`], which hands it an
//! engine (`runtime::Engine` over any link).  The thread's *worker* holds
//! its engines and every socket, epoll and kqueue created on them.  Then:
//!
//! - **Run to completion (RTC)**, the fast path: code on the engine's own
//!   thread calls the socket layer directly.  [`run`] is F-Stack's
//!   `ff_run`: it steps the engines (rx, stack, timers, tx), then calls
//!   the application, which makes non-blocking calls and `epoll_wait` /
//!   `kevent` with a zero timeout.  A call checks one thing to take this
//!   path: that the fd's owner (two atomic loads in the fd table) is the
//!   calling thread's worker.
//! - **Run to wait (RTW)**: any other thread may use the same fds.  Its
//!   call is posted to the owning worker's queue, which the worker runs on
//!   its next step, and the caller waits for the answer.  The socket's
//!   state lives only on its worker; this is a transport, not a second
//!   implementation.  Objects created by a thread that has no worker go to
//!   the first worker.  A call from another thread runs in place when
//!   nobody holds the worker at that moment (the worker is behind a lock
//!   its thread takes for each call, step and sleep).
//! - **Adoption**: when the owning thread has left the socket layer for
//!   [`ADOPT_AFTER`] (blocked in a join, a sleep, a file), a thread waiting
//!   on one of the worker's objects (a blocking call, `epoll_wait`,
//!   [`poll`], [`ProgressWatch::drive`]) steps the worker and sleeps on its
//!   links in its place, trying the lock, never waiting for it.  The
//!   owning thread, back, takes its worker again (a thread asleep on it
//!   wakes and lets go).  So no engine is left undriven while a thread
//!   waits for it.
//!
//! A blocking call (a blocking socket without MSG_DONTWAIT, `epoll_wait`
//! or `kevent` with a timeout) on the engine's thread drives the engine
//! while it waits; on another thread it waits for the worker's progress.
//! SO_RCVTIMEO and SO_SNDTIMEO bound the wait (then EAGAIN, or EINPROGRESS
//! for connect).
//!
//! # Readiness
//!
//! epoll and kqueue are woken by events, as in the kernels: data arriving,
//! send space freed, a state change (see `events.rs`).  So an
//! edge-triggered item or an EV_CLEAR knote is reported again only after
//! new data, not after a partial read; EPOLLONESHOT disarms an item until
//! EPOLL_CTL_MOD; EPOLLERR and EPOLLHUP are always reported.
//!
//! # Zero-copy send
//!
//! [`zc_send_reserve`] lends a region of a TCP connection's send buffer,
//! the application writes its data there in place, and [`zc_send_commit`]
//! sends it (run to completion only; see `zero_copy.rs`).
//!
//! # Not yet
//!
//! Of IPv6's options only those above: not the sticky IPV6_PKTINFO,
//! IPV6_RECVTCLASS, IPV6_RECVHOPLIMIT, extension headers (IPV6_HOPOPTS,
//! IPV6_RTHDR, ...), multicast or flow labels (ENOPROTOOPT); SO_LINGER
//! with a timeout closes in the background (only a zero timeout changes
//! close: it resets); SO_REUSEPORT sockets share one listener (or one UDP
//! socket) and its queue rather than splitting the flows; UDP sockets get
//! no ICMP errors; epoll sets cannot hold kernel fds or other epoll sets;
//! an epoll or kqueue watches sockets of its own worker only.

#![deny(unsafe_op_in_unsafe_fn)]

mod calls;
pub mod consts;
mod driver;
mod dup;
mod epoll;
mod errno;
mod events;
mod family;
mod fdtable;
mod int_map;
mod io;
mod kqueue;
mod os;
mod poll;
mod sock_ops;
mod socket;
mod sockopt;
mod stack_ip;
mod worker;
mod zero_copy;

pub use calls::*;
pub use driver::Driver;
pub use dup::{dup, dup2, dup3, dup_from, fd_limit};
pub use epoll::epoll_event;
pub use errno::{Errno, Result};
pub use int_map::IntMap;
pub use io::{Pkt6Info, PktInfo, RecvMsg, SendMsg};
pub use kqueue::KEvent;
pub use os::{move_placeholder, placeholder_fd};
pub use poll::{engines_busy_poll, idle_wait, poll, readiness};
pub use sockopt::TCP_INFO_LEN;
pub use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
pub use worker::{hold_for_fork, Drive, ForkHold, Inherited, ProgressWatch, ADOPT_AFTER};
pub use zero_copy::{zc_send_commit, zc_send_fill, zc_send_reserve, ZcSendBuf};
