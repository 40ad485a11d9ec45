/*
 * abi_test: libustack's C ABI called from C, compiled with -Wall -Wextra
 * -Werror against include/ustack.h and linked against libustack.so.
 *
 *     abi_test --conf config.ini --peer A.B.C.D
 *
 * The peer (the kernel) runs a TCP echo server and a UDP echo on port 7.
 * Checks results and errno values of the calls before and after
 * ustack_init, a non-blocking connect through epoll, UDP with IP_PKTINFO
 * and IP_RECVDSTADDR cmsgs and kqueue, zero-copy sends (ustack_zc_send_*
 * written in place, F-Stack's ff_zc_mbuf_* through ff_write) echoed intact, a call from another thread while
 * ustack_run runs, the dispatcher's registration and the counters.
 * Prints "abi_test: N checks passed" and exits 0, or names the first
 * failed check and exits 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>

#include "ustack.h"
#include "fstack/ff_api.h"

#include "check.h"

static int dispatch_nothing(void *frame, uint16_t *len, uint16_t room, uint16_t port, void *arg)
{
    (void)frame;
    (void)len;
    (void)room;
    (void)port;
    ++*(int *)arg;
    return USTACK_DISPATCH_PASS;
}

/* ustack_run's loop: waits for an epoll event on one fd (or a deadline). */
struct wait_for {
    int epfd;
    uint32_t want;
    uint32_t got;
    struct timespec deadline;
};

static int wait_loop(void *arg)
{
    struct wait_for *w = arg;
    struct epoll_event ev;
    struct timespec now;
    int n = ustack_epoll_wait(w->epfd, &ev, 1, 0);
    if (n == 1 && (ev.events & w->want)) {
        w->got = ev.events;
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec > w->deadline.tv_sec)
        return 2;
    return 0;
}

static int run_until(int epfd, uint32_t want)
{
    struct wait_for w = { epfd, want, 0, { 0, 0 } };
    clock_gettime(CLOCK_MONOTONIC, &w.deadline);
    w.deadline.tv_sec += 5;
    return ustack_run(wait_loop, &w) == 1 ? (int)w.got : 0;
}

/* Another thread's calls go to the engine thread while it runs. */
struct other {
    int fd;
    int port;
    int done;
};

static int other_loop(void *arg)
{
    return ((struct other *)arg)->done ? 1 : 0;
}

static void *other_thread(void *arg)
{
    struct other *o = arg;
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    if (ustack_getsockname(o->fd, (struct sockaddr *)&a, &len) == 0)
        o->port = ntohs(a.sin_port);
    __atomic_store_n(&o->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

int main(int argc, char *argv[])
{
    const char *peer = NULL;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--peer") == 0)
            peer = argv[i + 1];
    if (peer == NULL) {
        fprintf(stderr, "usage: abi_test --conf FILE --peer ADDR\n");
        return 2;
    }

    /* Before ustack_init: no engine. */
    FAILS(ustack_socket(AF_INET, SOCK_STREAM, 0), ENODEV);
    FAILS(ustack_run(NULL, NULL), ENODEV);
    FAILS(ustack_close(1000000), EBADF);
    FAILS(ustack_init_conf("/nonexistent/ustack.ini"), EINVAL);

    CHECK(ustack_init(argc, argv) == 0);
    FAILS(ustack_init(argc, argv), EALREADY);

    /* Sockets, options, errno values. */
    FAILS(ustack_socket(AF_PACKET, SOCK_STREAM, 0), EAFNOSUPPORT);
    int t = ustack_socket(AF_INET, SOCK_STREAM, 0);
    CHECK(t >= 0 && ustack_is_fd(t) == 1 && ustack_is_fd(0) == 0);
    FAILS(ustack_close(0), ENOTSOCK);
    struct sockaddr_in any = sin4("0.0.0.0", 0);
    FAILS(ustack_bind(t, (struct sockaddr *)&any, 4), EINVAL);
    FAILS(ustack_bind(t, NULL, sizeof(any)), EFAULT);
    int v = 0;
    socklen_t vlen = sizeof(v);
    CHECK(ustack_getsockopt(t, SOL_SOCKET, SO_TYPE, &v, &vlen) == 0 && v == SOCK_STREAM && vlen == sizeof(int));
    int on = 1;
    CHECK(ustack_setsockopt(t, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on)) == 0);
    vlen = sizeof(v);
    CHECK(ustack_getsockopt(t, IPPROTO_TCP, TCP_NODELAY, &v, &vlen) == 0 && v == 1);
    FAILS(ustack_getsockopt(t, SOL_SOCKET, SO_TYPE, &v, NULL), EFAULT);
    CHECK(ustack_ioctl(t, FIONBIO, &on) == 0);
    CHECK((ustack_fcntl(t, F_GETFL, 0) & O_NONBLOCK) != 0);
    FAILS(ustack_ioctl(t, FIONBIO, NULL), EFAULT);
    FAILS(ustack_listen(ustack_socket(AF_INET, SOCK_DGRAM, 0), 5), EOPNOTSUPP);

    /* A listener: accept says EAGAIN, getsockname has its port. */
    int l = ustack_socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in la = sin4("0.0.0.0", 8080);
    CHECK(ustack_bind(l, (struct sockaddr *)&la, sizeof(la)) == 0);
    CHECK(ustack_listen(l, 16) == 0);
    FAILS(ustack_accept(l, NULL, NULL), EAGAIN);
    struct sockaddr_in got;
    socklen_t glen = 2; /* truncated, the whole length said */
    memset(&got, 0, sizeof(got));
    CHECK(ustack_getsockname(l, (struct sockaddr *)&got, &glen) == 0 && glen == sizeof(got) && got.sin_family == AF_INET);
    FAILS(ustack_getpeername(l, (struct sockaddr *)&got, &glen), ENOTCONN);

    /* Non-blocking connect to the peer's echo: EINPROGRESS, EPOLLOUT,
     * SO_ERROR 0, then an echo. */
    int ep = ustack_epoll_create1(0);
    CHECK(ep >= 0);
    FAILS(ustack_epoll_create(0), EINVAL);
    struct sockaddr_in pa = sin4(peer, 7);
    FAILS(ustack_connect(t, (struct sockaddr *)&pa, sizeof(pa)), EINPROGRESS);
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLOUT;
    ev.data.fd = t;
    CHECK(ustack_epoll_ctl(ep, EPOLL_CTL_ADD, t, &ev) == 0);
    FAILS(ustack_epoll_ctl(ep, EPOLL_CTL_ADD, t, &ev), EEXIST);
    CHECK(run_until(ep, EPOLLOUT) & EPOLLOUT);
    vlen = sizeof(v);
    CHECK(ustack_getsockopt(t, SOL_SOCKET, SO_ERROR, &v, &vlen) == 0 && v == 0);
    glen = sizeof(got);
    CHECK(ustack_getpeername(t, (struct sockaddr *)&got, &glen) == 0 && got.sin_port == htons(7) &&
          got.sin_addr.s_addr == pa.sin_addr.s_addr);
    struct iovec wv[2] = { { "hello, ", 7 }, { "kernel", 6 } };
    CHECK(ustack_writev(t, wv, 2) == 13);
    ev.events = EPOLLIN;
    CHECK(ustack_epoll_ctl(ep, EPOLL_CTL_MOD, t, &ev) == 0);
    char buf[64];
    size_t have = 0;
    while (have < 13 && run_until(ep, EPOLLIN)) {
        ssize_t n = ustack_recv(t, buf + have, sizeof(buf) - have, MSG_DONTWAIT);
        if (n > 0)
            have += (size_t)n;
    }
    CHECK(have == 13 && memcmp(buf, "hello, kernel", 13) == 0);

    /* Zero-copy sends, echoed back intact: 600 + 100 bytes written in the
     * send buffer in place (the second region starts where the first
     * commit ended), then 300 through F-Stack's ff_zc_mbuf and ff_write. */
    char zc_want[1000];
    for (int i = 0; i < 1000; i++)
        zc_want[i] = (char)('a' + (i * 7) % 26);
    void *zb1 = NULL, *zb2 = NULL;
    FAILS(ustack_zc_send_get(t, 10, NULL), EFAULT);
    CHECK(ustack_zc_send_get(t, 1000, &zb1) == 1000 && zb1 != NULL);
    memcpy(zb1, zc_want, 600);
    CHECK(ustack_zc_send_commit(t, 600) == 600);
    CHECK(ustack_zc_send_get(t, 100, &zb2) == 100);
    CHECK((char *)zb2 == (char *)zb1 + 600);
    memcpy(zb2, zc_want + 600, 100);
    FAILS(ustack_zc_send_commit(t, 101), EINVAL);
    CHECK(ustack_zc_send_commit(t, 100) == 100);
    FAILS(ustack_zc_send_commit(t, 1), EINVAL);
    struct ff_zc_mbuf zm;
    FAILS(ff_zc_mbuf_get(&zm, 0), EINVAL);
    CHECK(ff_zc_mbuf_get(&zm, 300) == 0 && zm.bsd_mbuf != NULL && zm.off == 0 && zm.len == 300);
    CHECK(ff_zc_mbuf_write(&zm, zc_want + 700, 200) == 200 && zm.off == 200);
    CHECK(ff_zc_mbuf_write(&zm, zc_want + 900, 100) == 100 && zm.off == 300);
    FAILS(ff_zc_mbuf_write(&zm, zc_want, 1), EINVAL);
    CHECK(ff_write(t, zm.bsd_mbuf, 300) == 300);
    char zc_got[1000];
    have = 0;
    while (have < 1000 && run_until(ep, EPOLLIN)) {
        ssize_t n = ustack_recv(t, zc_got + have, sizeof(zc_got) - have, MSG_DONTWAIT);
        if (n > 0)
            have += (size_t)n;
    }
    CHECK(have == 1000 && memcmp(zc_got, zc_want, 1000) == 0);
    int zu = ustack_socket(AF_INET, SOCK_DGRAM, 0);
    FAILS(ustack_zc_send_get(zu, 10, &zb1), EOPNOTSUPP);
    CHECK(ustack_close(zu) == 0);
    int zt = ustack_socket(AF_INET, SOCK_STREAM, 0);
    FAILS(ustack_zc_send_get(zt, 10, &zb1), ENOTCONN);
    CHECK(ustack_close(zt) == 0);
    FAILS(ustack_zc_send_get(zt, 10, &zb1), EBADF);

    CHECK(ustack_shutdown(t, SHUT_WR) == 0);
    FAILS(ustack_send(t, "x", 1, MSG_NOSIGNAL), EPIPE);
    FAILS(ustack_zc_send_get(t, 1, &zb1), EPIPE);
    CHECK(run_until(ep, EPOLLIN) & EPOLLIN);
    CHECK(ustack_read(t, buf, sizeof(buf)) == 0); /* the peer's EOF */
    CHECK(ustack_close(t) == 0);
    FAILS(ustack_close(t), EBADF);

    /* UDP: IP_PKTINFO and IP_RECVDSTADDR cmsgs, kqueue's data. */
    int u = ustack_socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    CHECK(ustack_setsockopt(u, IPPROTO_IP, IP_PKTINFO, &on, sizeof(on)) == 0);
    CHECK(ustack_setsockopt(u, IPPROTO_IP, USTACK_IP_RECVDSTADDR, &on, sizeof(on)) == 0);
    struct sockaddr_in ua = sin4("0.0.0.0", 5353);
    CHECK(ustack_bind(u, (struct sockaddr *)&ua, sizeof(ua)) == 0);
    CHECK(ustack_sendto(u, "datagram", 8, 0, (struct sockaddr *)&pa, sizeof(pa)) == 8);
    int kq = ustack_kqueue();
    struct ustack_kevent kev, out;
    USTACK_EV_SET(&kev, (uintptr_t)u, USTACK_EVFILT_READ, USTACK_EV_ADD, 0, 0, &ua);
    CHECK(ustack_kevent(kq, &kev, 1, NULL, 0, NULL) == 0);
    ev.events = EPOLLIN;
    ev.data.fd = u;
    CHECK(ustack_epoll_ctl(ep, EPOLL_CTL_ADD, u, &ev) == 0);
    CHECK(run_until(ep, EPOLLIN) & EPOLLIN);
    struct timespec zero = { 0, 0 };
    CHECK(ustack_kevent(kq, NULL, 0, &out, 1, &zero) == 1 && out.ident == (uintptr_t)u &&
          out.filter == USTACK_EVFILT_READ && out.data == 8 && out.udata == &ua);
    int pending = 0;
    CHECK(ustack_ioctl(u, FIONREAD, &pending) == 0 && pending == 8);
    struct sockaddr_in from;
    char control[128];
    struct iovec iov = { buf, sizeof(buf) };
    struct msghdr msg;
    memset(&msg, 0, sizeof(msg));
    msg.msg_name = &from;
    msg.msg_namelen = sizeof(from);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    CHECK(ustack_recvmsg(u, &msg, 0) == 8 && memcmp(buf, "datagram", 8) == 0);
    CHECK(from.sin_addr.s_addr == pa.sin_addr.s_addr && from.sin_port == htons(7));
    int saw_pktinfo = 0, saw_dstaddr = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
            struct in_pktinfo pi;
            memcpy(&pi, CMSG_DATA(c), sizeof(pi));
            saw_pktinfo = pi.ipi_ifindex == 1 && pi.ipi_addr.s_addr != 0;
        }
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == USTACK_IP_RECVDSTADDR)
            saw_dstaddr = c->cmsg_len == CMSG_LEN(sizeof(struct in_addr));
    }
    CHECK(saw_pktinfo && saw_dstaddr && (msg.msg_flags & MSG_CTRUNC) == 0);
    FAILS(ustack_recv(u, buf, sizeof(buf), 0), EAGAIN);
    CHECK(ustack_close(kq) == 0 && ustack_close(u) == 0);

    /* Another thread's call while the engine runs. */
    struct other o = { l, 0, 0 };
    pthread_t th;
    CHECK(pthread_create(&th, NULL, other_thread, &o) == 0);
    CHECK(ustack_run(other_loop, &o) == 1);
    pthread_join(th, NULL);
    CHECK(o.port == 8080);

    /* The dispatcher sees each received frame: the peer's echo of a
     * datagram passes through it. */
    int frames = 0;
    CHECK(ustack_regist_packet_dispatcher(dispatch_nothing, &frames) == 0);
    int u2 = ustack_socket(AF_INET, SOCK_DGRAM, 0);
    CHECK(ustack_sendto(u2, "again", 5, 0, (struct sockaddr *)&pa, sizeof(pa)) == 5);
    CHECK(ustack_recv(u2, buf, sizeof(buf), 0) == 5); /* blocking: drives the engine */
    CHECK(frames >= 1);
    CHECK(ustack_regist_packet_dispatcher(NULL, NULL) == 0);
    CHECK(ustack_close(u2) == 0);

    /* Counters. */
    struct ustack_stat stats[512];
    int n = ustack_stats(stats, 512);
    CHECK(n > 20 && n <= 512);
    uint64_t opens = 0;
    CHECK(ustack_stat("tcp_active_opens", &opens) == 0 && opens == 1);
    FAILS(ustack_stat("no_such_counter", &opens), ENOENT);
    int found = 0;
    for (int i = 0; i < n; i++)
        found |= strcmp(stats[i].name, "udp_datagrams_sent") == 0 && stats[i].value == 2;
    CHECK(found);

    CHECK(ustack_close(ep) == 0 && ustack_close(l) == 0);
    CHECK(ustack_fini() == 0);
    FAILS(ustack_socket(AF_INET, SOCK_STREAM, 0), ENODEV);
    printf("abi_test: %d checks passed\n", checks);
    return 0;
}
