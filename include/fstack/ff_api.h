/*
 * ff_api.h: F-Stack's application API over ustack (libustack; pkg-config
 * ustack-fstack).  A program written against F-Stack's documented API
 * builds with it unchanged apart from DPDK's own headers (rte_*.h).
 *
 * As in F-Stack: the calls take Linux's constants (from the system's
 * <sys/socket.h>, <netinet/in.h>, <sys/ioctl.h>, <fcntl.h>), addresses in
 * Linux's layout (struct linux_sockaddr: a 16-bit family, as struct
 * sockaddr), and set errno to Linux's values.  ff_init reads --conf FILE
 * (a config.ini), --proc-type and --proc-id, and exits the process when it
 * fails.  ff_run calls the loop after each step of the engine, until
 * ff_stop_run; inside it, ff_kevent and ff_epoll_wait never block (their
 * timeout is ignored, as in F-Stack).  A socket from ff_accept inherits the
 * listener's non-blocking mode (FreeBSD's rule).
 *
 * Where ustack differs: epoll has Linux's exact semantics (edge triggered,
 * EPOLLONESHOT, EPOLLRDHUP); message flags (MSG_DONTWAIT, ...) are Linux's;
 * sockets are IPv4 only; one process serves the configuration
 * (--proc-type secondary is refused); not offered: ff_sysctl, ff_select,
 * ff_poll, ff_dup, ff_route_ctl, ff_zc_mbuf_read (zero-copy receive),
 * ff_dpdk_raw_packet_send.
 */
#ifndef USTACK_FF_API_H
#define USTACK_FF_API_H

#include <stdint.h>
#include <stdarg.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <netinet/in.h>
#include <time.h>

#include "ff_event.h"

#ifdef __cplusplus
extern "C" {
#endif

struct linux_sockaddr {
    short sa_family;
    char sa_data[14];
};

#define AF_INET6_LINUX   10
#define PF_INET6_LINUX   AF_INET6_LINUX
#define AF_INET6_FREEBSD 28
#define PF_INET6_FREEBSD AF_INET6_FREEBSD

/* FreeBSD's options for UDP servers, which Linux's headers lack (level
 * IPPROTO_IP): IP_RECVDSTADDR makes ff_recvmsg report each datagram's
 * destination (a cmsg of this type with a struct in_addr); a cmsg of type
 * IP_SENDSRCADDR on ff_sendmsg picks the source address. */
#ifndef IP_RECVDSTADDR
#define IP_RECVDSTADDR 7
#endif
#ifndef IP_SENDSRCADDR
#define IP_SENDSRCADDR IP_RECVDSTADDR
#endif

typedef int (*loop_func_t)(void *arg);

int ff_init(int argc, char *const argv[]);
void ff_run(loop_func_t loop, void *arg);
void ff_stop_run(void);

int ff_socket(int domain, int type, int protocol);
int ff_setsockopt(int s, int level, int optname, const void *optval, socklen_t optlen);
int ff_getsockopt(int s, int level, int optname, void *optval, socklen_t *optlen);
int ff_listen(int s, int backlog);
int ff_bind(int s, const struct linux_sockaddr *addr, socklen_t addrlen);
int ff_accept(int s, struct linux_sockaddr *addr, socklen_t *addrlen);
int ff_accept4(int s, struct linux_sockaddr *addr, socklen_t *addrlen, int flags);
int ff_connect(int s, const struct linux_sockaddr *name, socklen_t namelen);
int ff_close(int fd);
int ff_shutdown(int s, int how);
int ff_getpeername(int s, struct linux_sockaddr *name, socklen_t *namelen);
int ff_getsockname(int s, struct linux_sockaddr *name, socklen_t *namelen);

ssize_t ff_read(int d, void *buf, size_t nbytes);
ssize_t ff_readv(int fd, const struct iovec *iov, int iovcnt);
ssize_t ff_write(int fd, const void *buf, size_t nbytes);
ssize_t ff_writev(int fd, const struct iovec *iov, int iovcnt);
ssize_t ff_send(int s, const void *buf, size_t len, int flags);
ssize_t ff_sendto(int s, const void *buf, size_t len, int flags,
                  const struct linux_sockaddr *to, socklen_t tolen);
ssize_t ff_sendmsg(int s, const struct msghdr *msg, int flags);
ssize_t ff_recv(int s, void *buf, size_t len, int flags);
ssize_t ff_recvfrom(int s, void *buf, size_t len, int flags,
                    struct linux_sockaddr *from, socklen_t *fromlen);
ssize_t ff_recvmsg(int s, struct msghdr *msg, int flags);

/* Zero-copy send, as F-Stack's:
 *
 *     struct ff_zc_mbuf m;
 *     ff_zc_mbuf_get(&m, len);            // a buffer of len bytes
 *     ff_zc_mbuf_write(&m, data, n1);     // copies data in, after what
 *     ff_zc_mbuf_write(&m, more, n2);     //   was written before
 *     ff_write(fd, m.bsd_mbuf, n1 + n2);  // sends it
 *
 * ff_write recognises the buffer by m.bsd_mbuf (its first byte here; a
 * struct mbuf in F-Stack: do not look inside) and takes it: once all that
 * was written into it is sent it is freed, so get a new one for the next
 * message.  A partial ff_write (a non-blocking socket with a full send
 * buffer) is finished by ff_write(fd, m.bsd_mbuf, rest), which goes on
 * where the last one stopped.  A buffer never handed to ff_write is not
 * freed (as an mbuf chain in F-Stack).  Its bytes are copied into the
 * connection's send buffer by ff_write; ustack's own ustack_zc_send_get
 * (ustack.h) lets the application write into that buffer in place.
 * ff_zc_mbuf_get returns 0, or -1 (errno EFAULT: m NULL; EINVAL: len not
 * positive); ff_zc_mbuf_write returns len, or -1 (errno EINVAL: not a
 * buffer of ff_zc_mbuf_get, or more than its len in all). */
struct ff_zc_mbuf {
    void *bsd_mbuf;     /* the buffer: pass it to ff_write */
    void *bsd_mbuf_off; /* where the next ff_zc_mbuf_write goes */
    int off;            /* bytes written */
    int len;            /* the buffer's size */
};

int ff_zc_mbuf_get(struct ff_zc_mbuf *m, int len);
int ff_zc_mbuf_write(struct ff_zc_mbuf *m, const char *data, int len);

int ff_kqueue(void);
int ff_kevent(int kq, const struct kevent *changelist, int nchanges,
              struct kevent *eventlist, int nevents, const struct timespec *timeout);

int ff_gettimeofday(struct timeval *tv, void *tz);

/* 1 if fd is one of ustack's. */
int ff_fdisused(int fd);

/* ff_ioctl and ff_fcntl are variadic, as F-Stack's: defined here over
 * ustack's fixed-argument calls.  ff_ioctl: FIONBIO and FIONREAD (an int
 * pointer); ff_fcntl: F_GETFL, F_SETFL (O_NONBLOCK), F_GETFD, F_SETFD. */
int ustack_ioctl(int fd, unsigned long request, void *argp);
int ustack_fcntl(int fd, int cmd, int arg);

static inline int ff_ioctl(int fd, unsigned long request, ...)
{
    va_list ap;
    void *argp;
    va_start(ap, request);
    argp = va_arg(ap, void *);
    va_end(ap);
    return ustack_ioctl(fd, request, argp);
}

static inline int ff_fcntl(int fd, int cmd, ...)
{
    va_list ap;
    long arg;
    va_start(ap, cmd);
    arg = va_arg(ap, long);
    va_end(ap);
    return ustack_fcntl(fd, cmd, (int)arg);
}

/* The packet dispatcher: sees each received frame (data[0..*len)) before
 * the stack.  Returns the queue to hand it to (0: this process's stack),
 * FF_DISPATCH_ERROR (the application took it: dropped) or
 * FF_DISPATCH_RESPONSE (answered in place, *len its length: sent back out
 * of the port it came in on); other queue numbers drop it.  queue_id is 0,
 * nb_queues 1.  It runs inside the engine's step: it must not block.
 * Register it after ff_init, on the same thread. */
#define FF_DISPATCH_ERROR    (-1)
#define FF_DISPATCH_RESPONSE (-2)

typedef int (*dispatch_func_t)(void *data, uint16_t *len, uint16_t queue_id, uint16_t nb_queues);

void ff_regist_packet_dispatcher(dispatch_func_t func);

#ifdef __cplusplus
}
#endif

#endif /* USTACK_FF_API_H */
