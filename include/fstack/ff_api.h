/*
 * ff_api.h: F-Stack's application API over ustack (libustack; pkg-config
 * ustack-fstack).  A program written against F-Stack's API (its current
 * release, 1.24 and 1.25) builds with it unchanged; DPDK's own headers
 * (rte_*.h) come from DPDK.
 *
 * As in F-Stack: the calls take Linux's constants (from the system's
 * <sys/socket.h>, <netinet/in.h>, <sys/ioctl.h>, <fcntl.h>, <poll.h>),
 * addresses in Linux's layout (struct linux_sockaddr: a 16-bit family, as
 * struct sockaddr), and set errno to Linux's values.  ff_init reads --conf
 * FILE (a config.ini), --proc-type and --proc-id, and exits the process
 * when it fails.  ff_run calls the loop after each step of the engine,
 * until ff_stop_run; inside it, ff_kevent, ff_kevent_do_each,
 * ff_epoll_wait, ff_poll and ff_select never block (their timeout is
 * ignored, as in F-Stack; outside the loop it is honoured).  A socket from
 * ff_accept inherits the listener's non-blocking mode (FreeBSD's rule).
 * IPv6: ff_socket(AF_INET6, ...) with Linux's struct sockaddr_in6 (AF_INET6
 * is AF_INET6_LINUX); such a socket is v6-only (IPV6_V6ONLY 1, FreeBSD's
 * default) unless the program sets IPV6_V6ONLY to 0, so "[::]:80" and
 * "0.0.0.0:80" can both be bound.  IPV6_RECVPKTINFO / IPV6_PKTINFO cmsgs
 * use Linux's numbers.
 * Any thread may make these calls (ff_pthread_create is pthread_create).
 *
 * Where ustack differs: epoll has Linux's exact semantics (edge triggered,
 * EPOLLONESHOT, EPOLLRDHUP); message flags (MSG_DONTWAIT, ...) are Linux's;
 * one process serves the configuration
 * (--proc-type secondary is refused); ff_sysctl reads the keys ustack has
 * (below) and changes none; not offered: ff_dpdk_raw_packet_send,
 * ff_regist_pcblddr_fun, ff_rtioctl, ff_ngctl and the *_freebsd calls.
 */
#ifndef USTACK_FF_API_H
#define USTACK_FF_API_H

#include <stdint.h>
#include <stdarg.h>
#include <pthread.h>
#include <poll.h>
#include <sys/types.h>
#include <sys/select.h>
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
/* Copies out of a buffer of ff_zc_mbuf_get, into data (written through,
 * const as F-Stack declares it), what ff_zc_mbuf_write put there: the next
 * len bytes at most after what earlier ff_zc_mbuf_read calls took.
 * Returns the bytes copied, 0 when all was read, or -1 (errno EFAULT: m
 * NULL, or data NULL with len positive; EINVAL: len negative, or not a
 * buffer of ff_zc_mbuf_get, or one ff_write has sent whole and freed).
 * m->off is not moved (it counts what was written).  F-Stack 1.24 and
 * 1.25 return 0 and read nothing; its development branch reads so. */
int ff_zc_mbuf_read(struct ff_zc_mbuf *m, const char *data, int len);

int ff_kqueue(void);
int ff_kevent(int kq, const struct kevent *changelist, int nchanges,
              struct kevent *eventlist, int nevents, const struct timespec *timeout);
/* ff_kevent, but each event is handed to do_each(&cursor, event), cursor
 * starting at eventlist: the callback writes the event where and as it
 * likes (its own event type) and moves the cursor on.  do_each NULL:
 * eventlist is a struct kevent array, as ff_kevent's. */
int ff_kevent_do_each(int kq, const struct kevent *changelist, int nchanges,
                      void *eventlist, int nevents, const struct timespec *timeout,
                      void (*do_each)(void **, struct kevent *));

/* poll and select over ustack sockets, epoll and kqueue fds, with Linux's
 * semantics (POLLERR and POLLHUP always reported; a negative fd skipped).
 * They see ustack fds only: another number reports POLLNVAL in ff_poll,
 * and makes ff_select fail with EBADF.  The fd_set is the C library's
 * (FD_SETSIZE 1024): ff_select handles numbers below nfds.  ff_poll:
 * EINVAL for nfds above RLIMIT_NOFILE, EFAULT for fds NULL with nfds
 * positive; ff_select: EINVAL for nfds negative or a timeout out of
 * range, and leaves the timeout as it was (FreeBSD's select does). */
int ff_select(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
              struct timeval *timeout);
int ff_poll(struct pollfd fds[], nfds_t nfds, int timeout);

/* The engine's clock as the time of day: the wall clock at ff_init plus
 * the engine's monotonic time since (so it never steps back when the
 * system's clock is set); before ff_init, the system's.  tz is not
 * written.  EFAULT for tv NULL. */
#if __GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 31)
int ff_gettimeofday(struct timeval *tv, void *tz);
#else
int ff_gettimeofday(struct timeval *tv, struct timezone *tz);
#endif

/* dup and dup2 of ustack fds, POSIX's: the socket is shared (O_NONBLOCK
 * too), FD_CLOEXEC is the number's, the socket closes with its last
 * number; ff_dup2 onto a ustack fd closes it first.  EBADF for an oldfd
 * that is not ustack's, and for a newfd that is an open kernel fd. */
int ff_dup(int oldfd);
int ff_dup2(int oldfd, int newfd);

/* pthread_create and pthread_join (any thread may call ustack; nothing to
 * set up).  They return an error number, as pthread's: EINVAL for thread
 * or start_routine NULL. */
int ff_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                      void *(*start_routine)(void *), void *arg);
int ff_pthread_join(pthread_t thread, void **retval);

/* 1 if fd is one of ustack's. */
int ff_fdisused(int fd);

/* One past the highest number a ustack fd can have: the process's
 * RLIMIT_NOFILE (ustack's numbers are the kernel's). */
int ff_getmaxfd(void);

/* ff_sysctl: FreeBSD's sysctl(3) by MIB over the keys ustack has, read
 * only: the values in force (config.ini's [freebsd.sysctl] and
 * [freebsd.boot], or their defaults before ff_init).  Get a MIB from a
 * name with sysctl.name2oid, {0, 3} with the name as the new value;
 * {0, 1, mib...} gives a name, {0, 2, mib...} the next key ({0, 2} the
 * first), {0, 4, mib...} the kind and format.  The keys, with FreeBSD's
 * types (and FreeBSD's numbers where it has fixed ones; the others from
 * 0x100 in each node, as FreeBSD's OID_AUTO):
 *   kern.ipc.maxsockbuf (u_long), kern.ipc.somaxconn (u_int),
 *   kern.ipc.maxsockets, net.inet.ip.ttl, net.inet.ip.maxfragpackets,
 *   net.inet.ip.maxfragsperpacket, net.inet.ip.fragttl (seconds),
 *   net.inet.ip.portrange.first, net.inet.ip.portrange.last,
 *   net.inet.icmp.icmplim (u_int), net.inet.icmp.drop_redirect,
 *   net.inet.tcp.rfc1323, net.inet.tcp.mssdflt, net.inet.tcp.keepidle,
 *   net.inet.tcp.keepintvl (ms), net.inet.tcp.keepcnt,
 *   net.inet.tcp.sendspace, net.inet.tcp.recvspace (u_long),
 *   net.inet.tcp.msl (ms), net.inet.tcp.delayed_ack,
 *   net.inet.tcp.fast_path, net.inet.tcp.sendbuf_max,
 *   net.inet.tcp.recvbuf_max, net.inet.tcp.syncookies,
 *   net.inet.tcp.cc.algorithm (a string), net.inet.tcp.sack.enable,
 *   net.inet.udp.recvspace (u_long), net.link.ether.inet.maxhold,
 *   net.link.ether.inet.max_age (ints unless said).
 * Errors (FreeBSD's): ENOENT (no such key), EISDIR (a node, not a key),
 * ENOTDIR (a MIB that goes on past a key), ENOMEM (*oldlenp too small,
 * or oldlenp NULL: nothing reported, *oldlenp unchanged), EPERM (a new
 * value: set it in config.ini), EINVAL (namelen below 2 or above 24),
 * EFAULT (name NULL).  *oldlenp gets the length on success (the length
 * needed when oldp is NULL). */
int ff_sysctl(const int *name, unsigned int namelen, void *oldp, size_t *oldlenp,
              const void *newp, size_t newlen);

/* ff_get_traffic: the frames and bytes every port of the engine received
 * and sent, into buffer as struct ff_traffic_args (32 bytes; F-Stack's
 * layout).  Call it on the thread that called ff_init; elsewhere it
 * writes zeros (errno EBADF).  buffer NULL: nothing. */
struct ff_traffic_args {
    uint64_t rx_packets;
    uint64_t rx_bytes;
    uint64_t tx_packets;
    uint64_t tx_bytes;
};

void ff_get_traffic(void *buffer);

/* ff_route_ctl: adds, deletes or changes an IPv4 route of every engine of
 * the calling thread (the thread that called ff_init).  FF_RTF_GATEWAY:
 * dst/netmask (netmask NULL: a host route) through the gateway gw, which
 * must be on a connected subnet (else ENETUNREACH).  FF_RTF_HOST: dst
 * alone, on the link of the interface that has gw as its address or on
 * its subnet (FreeBSD's interface route).  FF_ROUTE_DEL needs dst (and
 * the netmask it was added with), FF_ROUTE_CHANGE a route to change.
 * Returns 0, or -1 with errno: EEXIST (a route to that prefix exists),
 * ESRCH (no such route), ENETUNREACH, ENOBUFS (the table is full),
 * EAFNOSUPPORT (not AF_INET), EINVAL (dst or gw NULL where needed, a
 * netmask that is not a prefix, an unknown req or flag), EBADF (not an
 * engine's thread). */
enum FF_ROUTE_CTL {
    FF_ROUTE_ADD,
    FF_ROUTE_DEL,
    FF_ROUTE_CHANGE,
};

enum FF_ROUTE_FLAG {
    FF_RTF_HOST,
    FF_RTF_GATEWAY,
};

int ff_route_ctl(enum FF_ROUTE_CTL req, enum FF_ROUTE_FLAG flag,
                 struct linux_sockaddr *dst, struct linux_sockaddr *gw,
                 struct linux_sockaddr *netmask);

/* ff_ioctl and ff_fcntl are variadic, as F-Stack's.  ff_ioctl: FIONBIO,
 * FIONREAD and SIOCATMARK (an int pointer); ff_fcntl: F_GETFL, F_SETFL
 * (O_NONBLOCK), F_GETFD, F_SETFD (FD_CLOEXEC), F_SETOWN, F_GETOWN (the
 * SIGURG owner), F_DUPFD, F_DUPFD_CLOEXEC.  ustack.h's
 * fixed-argument ustack_ioctl and ustack_fcntl do the same. */
int ff_ioctl(int fd, unsigned long request, ...);
int ff_fcntl(int fd, int cmd, ...);
int ustack_ioctl(int fd, unsigned long request, void *argp);
int ustack_fcntl(int fd, int cmd, int arg);

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
