/*
 * ustack.h: the C API of ustack, a userspace TCP/IP stack (libustack.so,
 * libustack.a; pkg-config: ustack).
 *
 * The calls are the POSIX ones with a ustack_ prefix and Linux's semantics:
 * the same arguments, the same constants (from the system's headers:
 * AF_INET, SOCK_STREAM, SOL_SOCKET, MSG_DONTWAIT, EPOLLIN, FIONBIO, ...),
 * the same results, and on failure -1 with errno set to Linux's value.
 * Sockets are AF_INET or AF_INET6 (struct sockaddr_in6; Linux's dual stack:
 * an AF_INET6 socket on [::] takes IPv4 too, shown as ::ffff:a.b.c.d,
 * unless IPV6_V6ONLY is set before bind).  Options: IPV6_V6ONLY,
 * IPV6_RECVPKTINFO (an IPV6_PKTINFO cmsg on ustack_recvmsg; on
 * ustack_sendmsg it picks the source), IPV6_TCLASS, IPV6_UNICAST_HOPS.
 *
 * A program:
 *
 *     ustack_init(argc, argv);          // --conf config.ini
 *     int s = ustack_socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
 *     ... ustack_bind, ustack_listen, ustack_epoll_create1, ustack_epoll_ctl
 *     ustack_run(loop, state);          // loop(state) after each engine step
 *
 * Threads: ustack_init makes the calling thread the engine thread.  Calls
 * made there (from main before ustack_run, and from the loop callback) run
 * directly.  Calls from any other thread work too: they are handed to the
 * engine thread, which runs them on its next step, while the caller waits;
 * so the engine thread must keep running (ustack_run, or ustack_step in a
 * loop of its own).
 *
 * Blocking: a socket is blocking unless SOCK_NONBLOCK, O_NONBLOCK or
 * FIONBIO say otherwise; a blocking call on the engine thread drives the
 * engine while it waits (so it works, but the loop callback is not called
 * meanwhile).  Inside the loop callback, use non-blocking sockets and
 * ustack_epoll_wait / ustack_kevent with a zero timeout.
 *
 * Zero-copy send: ustack_zc_send_get / ustack_zc_send_commit (below).
 * Not offered: zero-copy receive, select/poll.
 */
#ifndef USTACK_H
#define USTACK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/epoll.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------
 * Start and run
 */

/*
 * Initialises ustack from the command line: --conf FILE (also -c FILE,
 * --config FILE) names an F-Stack style config.ini; --set section.key=value
 * overrides one of its keys (repeatable); --stats FILE has every counter
 * written there as "name value" lines every 100 ms while ustack_run runs;
 * F-Stack's --proc-type primary|auto and --proc-id N (the core of
 * [dpdk] lcore_mask this process runs on) are accepted.  Other arguments
 * are left to the application.  Builds one engine over the configured
 * ports, pins the calling thread to its core when lcore_mask is set, and
 * makes the calling thread the engine thread.  Prints the interfaces on
 * stderr.
 * Returns 0, or -1 with errno: EINVAL (bad arguments or configuration, the
 * reason printed on stderr), EALREADY (already initialised), EOPNOTSUPP
 * (--proc-type secondary), or the error of opening a port (EPERM, ENODEV).
 */
int ustack_init(int argc, char *const argv[]);

/* ustack_init with only a configuration file. */
int ustack_init_conf(const char *path);

/*
 * The application's part of the engine loop: called after each engine
 * step (receive, protocol, timers, transmit).  Return 0 to go on; any
 * other value ends ustack_run, which returns it.
 */
typedef int (*ustack_loop_fn)(void *arg);

/*
 * Runs the engine loop on the calling thread (the one that called
 * ustack_init), calling loop(arg) after each step (loop may be NULL: the
 * engine alone, serving other threads' calls).  When a step found nothing
 * to do the thread sleeps as [dpdk] idle_sleep says (microseconds; 0 busy
 * polls), or until a frame arrives.
 * Returns loop's nonzero result, 0 after ustack_stop, or -1 with errno
 * ENODEV when ustack is not initialised.
 */
int ustack_run(ustack_loop_fn loop, void *arg);

/* Makes ustack_run return after the current step.  Async-signal-safe. */
void ustack_stop(void);

/*
 * One engine step, for a program that runs its own loop instead of
 * ustack_run: returns 1 if anything happened, 0 if not, -1 with errno.
 */
int ustack_step(void);

/*
 * Closes every socket, epoll and kqueue, drops the engine and prints its
 * nonzero counters on stderr ("ustack: stopped; counters: ...").
 * ustack_init may then be called again.  Returns 0 or -1 (ENODEV).
 */
int ustack_fini(void);

/* ---------------------------------------------------------------------
 * Sockets: as socket(2), bind(2), ... with Linux's semantics.
 */

int ustack_socket(int domain, int type, int protocol);
int ustack_bind(int fd, const struct sockaddr *addr, socklen_t len);
int ustack_listen(int fd, int backlog);
int ustack_accept(int fd, struct sockaddr *addr, socklen_t *len);
/* flags: SOCK_NONBLOCK, SOCK_CLOEXEC. */
int ustack_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);
/* A non-blocking TCP socket: -1 with EINPROGRESS, then poll for EPOLLOUT
 * and read SO_ERROR.  AF_UNSPEC dissolves a UDP socket's association. */
int ustack_connect(int fd, const struct sockaddr *addr, socklen_t len);
ssize_t ustack_read(int fd, void *buf, size_t n);
ssize_t ustack_write(int fd, const void *buf, size_t n);
ssize_t ustack_readv(int fd, const struct iovec *iov, int iovcnt);
ssize_t ustack_writev(int fd, const struct iovec *iov, int iovcnt);
/* flags: MSG_DONTWAIT, MSG_NOSIGNAL (without it EPIPE raises SIGPIPE),
 * MSG_OOB (TCP: the last byte sent is urgent data, RFC 6093). */
ssize_t ustack_send(int fd, const void *buf, size_t n, int flags);
/* flags: MSG_DONTWAIT, MSG_PEEK, MSG_WAITALL, MSG_TRUNC, MSG_OOB (TCP: the
 * urgent byte, as Linux: EINVAL with SO_OOBINLINE, with none, or once
 * read; EAGAIN before it arrives; never waits). */
ssize_t ustack_recv(int fd, void *buf, size_t n, int flags);
ssize_t ustack_sendto(int fd, const void *buf, size_t n, int flags,
                      const struct sockaddr *to, socklen_t tolen);
ssize_t ustack_recvfrom(int fd, void *buf, size_t n, int flags,
                        struct sockaddr *from, socklen_t *fromlen);

/*
 * FreeBSD's IP_RECVDSTADDR, which Linux lacks (level IPPROTO_IP): with it
 * on, ustack_recvmsg on a UDP socket reports each datagram's destination
 * address in a cmsg of this type holding a struct in_addr.  On send, a
 * cmsg of type USTACK_IP_SENDSRCADDR holding a struct in_addr picks the
 * source address (one of the stack's).  IP_PKTINFO works as on Linux in
 * both directions (struct in_pktinfo; ipi_spec_dst picks the source).
 */
#define USTACK_IP_RECVDSTADDR 0x75000007
#define USTACK_IP_SENDSRCADDR USTACK_IP_RECVDSTADDR

/* sendmsg(2): ancillary data IP_PKTINFO, USTACK_IP_SENDSRCADDR and
 * (level IPPROTO_IPV6) IPV6_PKTINFO. */
ssize_t ustack_sendmsg(int fd, const struct msghdr *msg, int flags);
/* recvmsg(2): ancillary data IP_PKTINFO, USTACK_IP_RECVDSTADDR and
 * IPV6_PKTINFO when the socket asked for them; MSG_CTRUNC when msg_control
 * was too small. */
ssize_t ustack_recvmsg(int fd, struct msghdr *msg, int flags);

/* how: SHUT_RD, SHUT_WR, SHUT_RDWR. */
int ustack_shutdown(int fd, int how);
/* A socket, an epoll or a kqueue. */
int ustack_close(int fd);
int ustack_getsockname(int fd, struct sockaddr *addr, socklen_t *len);
int ustack_getpeername(int fd, struct sockaddr *addr, socklen_t *len);

/*
 * Options: SOL_SOCKET SO_REUSEADDR, SO_REUSEPORT, SO_RCVBUF, SO_SNDBUF,
 * SO_LINGER, SO_KEEPALIVE, SO_ERROR, SO_TYPE, SO_RCVTIMEO, SO_SNDTIMEO,
 * SO_ACCEPTCONN, SO_BROADCAST ...; IPPROTO_TCP TCP_NODELAY, TCP_MAXSEG,
 * TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT, TCP_INFO, TCP_USER_TIMEOUT
 * (milliseconds, 0 off), TCP_SYNCNT (1..127); IPPROTO_IP IP_TOS,
 * IP_TTL, IP_PKTINFO, USTACK_IP_RECVDSTADDR; IPPROTO_IPV6 (AF_INET6)
 * IPV6_V6ONLY, IPV6_RECVPKTINFO, IPV6_TCLASS, IPV6_UNICAST_HOPS.
 */
int ustack_getsockopt(int fd, int level, int name, void *val, socklen_t *len);
int ustack_setsockopt(int fd, int level, int name, const void *val, socklen_t len);

/* FIONBIO (reads an int at argp), FIONREAD and SIOCATMARK (write one
 * there; SIOCATMARK: 1 when the next byte to read is the urgent mark). */
int ustack_ioctl(int fd, unsigned long request, void *argp);
/* F_GETFL, F_SETFL (O_NONBLOCK), F_GETFD, F_SETFD (FD_CLOEXEC), F_SETOWN,
 * F_GETOWN (the process sent SIGURG when urgent data comes). */
int ustack_fcntl(int fd, int cmd, int arg);

/*
 * 1 if fd is a ustack fd (socket, epoll or kqueue), else 0.  ustack's fd
 * numbers are reserved from the kernel, so they never equal a kernel fd
 * the program holds.
 */
int ustack_is_fd(int fd);

/* ---------------------------------------------------------------------
 * Zero-copy send on a TCP socket: instead of handing ustack_write a buffer
 * to copy, write the data straight into the connection's send buffer:
 *
 *     void *p;
 *     ssize_t room = ustack_zc_send_get(fd, want, &p);  // p[0..room)
 *     ... write n <= room bytes at p ...
 *     ustack_zc_send_commit(fd, n);                     // sends them
 *
 * Engine thread only (from ustack_run's loop callback or main): from any
 * other thread both calls fail with EOPNOTSUPP.
 */

/*
 * Lends a writable region of fd's send buffer, right after the data
 * already queued: *buf is its first byte, the result its length, at most
 * want (shorter when the buffer's free room wraps around its end: commit,
 * then ask again for the rest).  The region stays valid, in place, until
 * ustack_zc_send_commit, the next ustack_zc_send_get, a write or send on
 * fd, or its close; engine steps meanwhile do not move it.
 * Returns the length, or -1 with errno: EBADF, ENOTSOCK (a kernel fd),
 * EFAULT (buf NULL), EOPNOTSUPP (a UDP socket, or not the engine thread),
 * ENOTCONN (not connected), EPIPE (after shutdown(SHUT_WR) or the
 * connection's end; no SIGPIPE is raised), the pending error (ECONNRESET,
 * ...), EAGAIN (the send buffer is full, or still connecting, on a
 * non-blocking socket; a blocking one drives the engine until there is
 * room, or SO_SNDTIMEO passes).
 */
ssize_t ustack_zc_send_get(int fd, size_t want, void **buf);

/*
 * Sends the first n bytes of the region ustack_zc_send_get lent: they
 * join the stream as if written.  Returns n, or -1 with errno: EINVAL (n
 * more than was lent, or nothing is lent: the loan ended), or the errors
 * of ustack_zc_send_get (nothing is sent).
 */
ssize_t ustack_zc_send_commit(int fd, size_t n);

/* ---------------------------------------------------------------------
 * epoll: Linux's semantics (level and edge triggered, EPOLLONESHOT,
 * EPOLLRDHUP, EPOLLERR and EPOLLHUP always reported), over ustack sockets.
 * A timeout of 0 never blocks; a positive or -1 one drives the engine
 * while it waits.
 */

int ustack_epoll_create(int size);
int ustack_epoll_create1(int flags);
int ustack_epoll_ctl(int epfd, int op, int fd, struct epoll_event *event);
int ustack_epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout);

/* ---------------------------------------------------------------------
 * kqueue: FreeBSD's semantics for sockets.  EVFILT_READ's data is the
 * bytes readable (or connections waiting, on a listener), EVFILT_WRITE's
 * the send space; EV_EOF when the peer is done (fflags: the pending
 * error).  The struct is FreeBSD's, as F-Stack declares it.
 */

struct ustack_kevent {
    uintptr_t ident;     /* the fd */
    int16_t filter;      /* USTACK_EVFILT_READ or USTACK_EVFILT_WRITE */
    uint16_t flags;      /* USTACK_EV_* */
    uint32_t fflags;
    intptr_t data;
    void *udata;
};

#define USTACK_EVFILT_READ  (-1)
#define USTACK_EVFILT_WRITE (-2)

#define USTACK_EV_ADD      0x0001
#define USTACK_EV_DELETE   0x0002
#define USTACK_EV_ENABLE   0x0004
#define USTACK_EV_DISABLE  0x0008
#define USTACK_EV_ONESHOT  0x0010
#define USTACK_EV_CLEAR    0x0020
#define USTACK_EV_RECEIPT  0x0040
#define USTACK_EV_DISPATCH 0x0080
#define USTACK_EV_ERROR    0x4000
#define USTACK_EV_EOF      0x8000

#define USTACK_EV_SET(kevp, a, b, c, d, e, f) do { \
        struct ustack_kevent *ustack_kev_ = (kevp); \
        ustack_kev_->ident = (a);                   \
        ustack_kev_->filter = (b);                  \
        ustack_kev_->flags = (c);                   \
        ustack_kev_->fflags = (d);                  \
        ustack_kev_->data = (e);                    \
        ustack_kev_->udata = (f);                   \
    } while (0)

int ustack_kqueue(void);
/*
 * Applies changes[0..nchanges), then reports up to nevents events.
 * timeout NULL waits for ever, zero never blocks.  Errors of a change are
 * reported as EV_ERROR events (data: the errno) while there is room.
 */
int ustack_kevent(int kq, const struct ustack_kevent *changes, int nchanges,
                  struct ustack_kevent *events, int nevents,
                  const struct timespec *timeout);

/* ---------------------------------------------------------------------
 * The packet dispatcher: a callback that sees each received frame (a whole
 * Ethernet frame) before the stack does, as F-Stack's
 * ff_regist_packet_dispatcher.
 */

#define USTACK_DISPATCH_PASS    0 /* on to the stack */
#define USTACK_DISPATCH_CONSUME 1 /* taken: the frame is dropped */
#define USTACK_DISPATCH_ANSWER  2 /* answered: frame[0..*len) is sent back
                                     out of the port it came in on */

/*
 * frame[0..*len) is the frame; frame has room bytes, so an answer written
 * in place may be longer than the frame (set *len to its length).  port is
 * the port the frame came in on (0 for [port0]).  Returns
 * USTACK_DISPATCH_*; other values pass.  The callback runs inside the
 * engine's step: it must not block, and socket calls made from it fail
 * with EDEADLK.
 */
typedef int (*ustack_dispatch_fn)(void *frame, uint16_t *len, uint16_t room,
                                  uint16_t port, void *arg);

/*
 * Registers the dispatcher (NULL removes it); call it on the engine thread
 * after ustack_init.  Its doings are counted: hook_consumed, hook_answered,
 * hook_answer_drops (answers longer than room, or a full transmit queue).
 * Returns 0, or -1 with errno ENODEV (not initialised) or EBADF (not the
 * engine thread).
 */
int ustack_regist_packet_dispatcher(ustack_dispatch_fn fn, void *arg);

/* ---------------------------------------------------------------------
 * Counters: the stack's (rx_accept_*, rx_drop_* by reason, tcp_*, udp_*),
 * the loop's (engine_*), each port's (port0_link_rx_frames, ...), the
 * dispatcher's.  Call on the engine thread.
 */

#define USTACK_STAT_NAME_MAX 64

struct ustack_stat {
    char name[USTACK_STAT_NAME_MAX]; /* NUL-terminated */
    uint64_t value;
};

/*
 * Fills out[0..max) with counters and returns how many there are (more
 * than max: call again with a larger array), or -1 with errno.
 */
int ustack_stats(struct ustack_stat *out, int max);

/* One counter by name into *value: 0, or -1 with errno ENOENT. */
int ustack_stat(const char *name, uint64_t *value);

#ifdef __cplusplus
}
#endif

#endif /* USTACK_H */
