/*
 * fstack_api_test: the calls of F-Stack's API that its examples and
 * programs use beyond sockets (ff_log.h's log, ff_poll, ff_select, ff_dup,
 * ff_dup2, ff_getmaxfd, ff_kevent_do_each, ff_gettimeofday, ff_sysctl,
 * ff_route_ctl, ff_get_traffic, ff_pthread_create/join, ff_zc_mbuf_read,
 * ff_ioctl and ff_fcntl as the library's symbols), written against the
 * F-Stack headers only (pkg-config ustack-fstack) and compiled with -Wall
 * -Wextra -Werror.
 *
 *     fstack_api_test --conf config.ini --peer A.B.C.D --far E.F.G.H
 *
 * The peer (the kernel) runs a TCP echo server on port 7 of its address
 * and of --far, an address outside ustack's subnet that only a route
 * reaches; config.ini sets net.inet.ip.ttl=33 and
 * net.inet.tcp.cc.algorithm=newreno.  Prints "fstack_api_test: N checks
 * passed" and exits 0, or names the first failed check and exits 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "ff_config.h"
#include "ff_api.h"
#include "ff_epoll.h"
#include "ff_log.h"

#include "check.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Waits (ff_poll honours its timeout outside ff_run) for `events`. */
static short wait_for(int fd, short events, int ms)
{
    struct pollfd p = { fd, events, 0 };
    int n = ff_poll(&p, 1, ms);
    return n == 1 ? p.revents : 0;
}

/* A non-blocking TCP connection to addr:7 (-1 with errno if connect
 * fails at once), established. */
static int connect_to(const char *addr)
{
    int s = ff_socket(AF_INET, SOCK_STREAM, 0);
    int on = 1;
    if (s < 0 || ff_ioctl(s, FIONBIO, &on) != 0)
        return -1;
    struct sockaddr_in a = sin4(addr, 7);
    if (ff_connect(s, (struct linux_sockaddr *)&a, sizeof(a)) == 0)
        return s;
    if (errno != EINPROGRESS) {
        int e = errno;
        ff_close(s);
        errno = e;
        return -1;
    }
    if (!(wait_for(s, POLLOUT, 5000) & POLLOUT)) {
        ff_close(s);
        errno = ETIMEDOUT;
        return -1;
    }
    int err = 0;
    socklen_t len = sizeof(err);
    if (ff_getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
        ff_close(s);
        errno = err;
        return -1;
    }
    return s;
}

/* Sends msg on `out` and reads its echo whole on `in`. */
static int echoes(int out, int in, const char *msg)
{
    size_t len = strlen(msg), have = 0;
    char buf[256];
    if (ff_write(out, msg, len) != (ssize_t)len)
        return 0;
    while (have < len) {
        if (!(wait_for(in, POLLIN, 5000) & POLLIN))
            return 0;
        ssize_t n = ff_read(in, buf + have, sizeof(buf) - have);
        if (n <= 0)
            return 0;
        have += (size_t)n;
    }
    return have == len && memcmp(buf, msg, len) == 0;
}

static int log_v(uint32_t level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = ff_vlog(level, FF_LOGTYPE_FSTACK_APP, fmt, ap);
    va_end(ap);
    return n;
}

static void test_log(void)
{
    char path[] = "/tmp/fstack_api_test_logXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w+");
    CHECK(f != NULL);
    CHECK(ff_log_open_set() == 0);
    CHECK(ff_log_reset_stream(f) == 0);
    CHECK(ff_log(FF_LOG_INFO, FF_LOGTYPE_FSTACK_APP, "info %d\n", 1) == 7);
    CHECK(ff_log(FF_LOG_DEBUG, FF_LOGTYPE_FSTACK_APP, "debug\n") == 0); /* type's default: INFO */
    CHECK(ff_log_set_level(FF_LOGTYPE_FSTACK_APP, FF_LOG_WARNING) == 0);
    CHECK(ff_log(FF_LOG_INFO, FF_LOGTYPE_FSTACK_APP, "hidden\n") == 0);
    CHECK(ff_log(FF_LOG_ERR, FF_LOGTYPE_FSTACK_APP, "error %s\n", "two") == 10);
    CHECK(log_v(FF_LOG_WARNING, "warn %c\n", 'x') == 7);
    CHECK(ff_log(FF_LOG_INFO, FF_LOGTYPE_USER2, "other type\n") == 11);
    ff_log_set_global_level(FF_LOG_ERR);
    CHECK(ff_log(FF_LOG_WARNING, FF_LOGTYPE_USER2, "global\n") == 0);
    ff_log_set_global_level(FF_LOG_DEBUG);
    CHECK(ff_log_set_level(FF_LOGTYPE_FIRST_EXT_ID, FF_LOG_INFO) == -EINVAL);
    CHECK(ff_log_set_level(FF_LOGTYPE_USER3, FF_LOG_MAX + 1) == -EINVAL);
    FAILS(ff_log(FF_LOG_ERR, FF_LOGTYPE_USER3, NULL), EINVAL);
    ff_log_close(); /* the application's stream stays */
    CHECK(ff_log(FF_LOG_ERR, FF_LOGTYPE_USER3, "after close\n") == 12);
    CHECK(ff_openlog_stream(NULL) == 0); /* stderr again */
    CHECK(ff_log_set_level(FF_LOGTYPE_FSTACK_APP, FF_LOG_INFO) == 0);
    char text[256];
    rewind(f);
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = 0;
    CHECK(strcmp(text, "info 1\nerror two\nwarn x\nother type\nafter close\n") == 0);
    fclose(f);
    unlink(path);
}

/* sysctlbyname, as FreeBSD's C library does it: name2oid, then the key. */
static int sysctl_name(const char *name, void *old, size_t *oldlen)
{
    int mib[24], qoid[2] = { 0, 3 };
    size_t len = sizeof(mib);
    if (ff_sysctl(qoid, 2, mib, &len, name, strlen(name)) != 0)
        return -1;
    return ff_sysctl(mib, (unsigned int)(len / sizeof(int)), old, oldlen, NULL, 0);
}

static void test_sysctl(int initialised)
{
    int ttl = 0;
    size_t len = sizeof(ttl);
    CHECK(sysctl_name("net.inet.ip.ttl", &ttl, &len) == 0 && len == sizeof(int));
    CHECK(ttl == (initialised ? 33 : 64));
    char cc[32];
    len = sizeof(cc);
    CHECK(sysctl_name("net.inet.tcp.cc.algorithm", cc, &len) == 0);
    CHECK(strcmp(cc, initialised ? "newreno" : "cubic") == 0 && len == strlen(cc) + 1);
    if (!initialised)
        return;
    /* FreeBSD's fixed numbers and types. */
    int mib[] = { 4, 2, 6, 8 }; /* net.inet.tcp.sendspace, u_long */
    unsigned long space = 0;
    len = sizeof(space);
    CHECK(ff_sysctl(mib, 4, &space, &len, NULL, 0) == 0 && len == 8 && space == 32768);
    len = 0;
    CHECK(ff_sysctl(mib, 4, NULL, &len, NULL, 0) == 0 && len == 8);
    int small = 0;
    len = sizeof(small);
    FAILS(ff_sysctl(mib, 4, &small, &len, NULL, 0), ENOMEM);
    CHECK(len == sizeof(small));
    unsigned long more = 65536;
    FAILS(ff_sysctl(mib, 4, NULL, NULL, &more, sizeof(more)), EPERM);
    int tcp[] = { 4, 2, 6 };
    FAILS(ff_sysctl(tcp, 3, &space, &len, NULL, 0), EISDIR);
    int past[] = { 4, 2, 6, 8, 1 };
    FAILS(ff_sysctl(past, 5, &space, &len, NULL, 0), ENOTDIR);
    int none[] = { 4, 2, 99 };
    FAILS(ff_sysctl(none, 3, &space, &len, NULL, 0), ENOENT);
    FAILS(ff_sysctl(mib, 1, &space, &len, NULL, 0), EINVAL);
    FAILS(ff_sysctl(NULL, 4, &space, &len, NULL, 0), EFAULT);
    len = sizeof(ttl);
    FAILS(sysctl_name("net.inet.ip.nonesuch", &ttl, &len), ENOENT);
    /* sysctl.name and sysctl.oidfmt of sendspace. */
    int qname[] = { 0, 1, 4, 2, 6, 8 };
    char name[64];
    len = sizeof(name);
    CHECK(ff_sysctl(qname, 6, name, &len, NULL, 0) == 0 && strcmp(name, "net.inet.tcp.sendspace") == 0);
    int qfmt[] = { 0, 4, 4, 2, 6, 8 };
    char fmt[16];
    len = sizeof(fmt);
    CHECK(ff_sysctl(qfmt, 6, fmt, &len, NULL, 0) == 0 && strcmp(fmt + sizeof(unsigned int), "LU") == 0);
    /* sysctl.next from the first: every key, ttl among them. */
    int at[26] = { 0, 2 }, seen = 0, found_ttl = 0;
    unsigned int atlen = 2;
    for (;;) {
        int next[24];
        len = sizeof(next);
        if (ff_sysctl(at, atlen, next, &len, NULL, 0) != 0)
            break;
        seen++;
        atlen = 2 + (unsigned int)(len / sizeof(int));
        memcpy(at + 2, next, len);
        if (len == 4 * sizeof(int) && next[0] == 4 && next[1] == 2 && next[2] == 0 && next[3] == 3)
            found_ttl = 1;
    }
    CHECK(errno == ENOENT && seen >= 25 && found_ttl);
}

static void test_zc_read(int s)
{
    struct ff_zc_mbuf zm;
    char want[60], got[100];
    for (int i = 0; i < 60; i++)
        want[i] = (char)('a' + i % 26);
    CHECK(ff_zc_mbuf_get(&zm, 100) == 0);
    CHECK(ff_zc_mbuf_write(&zm, want, 60) == 60);
    CHECK(ff_zc_mbuf_read(&zm, got, 20) == 20 && memcmp(got, want, 20) == 0);
    CHECK(ff_zc_mbuf_read(&zm, got + 20, 100) == 40 && memcmp(got, want, 60) == 0);
    CHECK(ff_zc_mbuf_read(&zm, got, 10) == 0);
    CHECK(zm.off == 60);
    FAILS(ff_zc_mbuf_read(NULL, got, 10), EFAULT);
    FAILS(ff_zc_mbuf_read(&zm, got, -1), EINVAL);
    FAILS(ff_zc_mbuf_read(&zm, NULL, 10), EFAULT);
    /* Sent whole by ff_write, the buffer is freed. */
    CHECK(ff_write(s, zm.bsd_mbuf, 60) == 60);
    FAILS(ff_zc_mbuf_read(&zm, got, 10), EINVAL);
    size_t have = 0;
    while (have < 60 && (wait_for(s, POLLIN, 5000) & POLLIN)) {
        ssize_t n = ff_read(s, got + have, sizeof(got) - have);
        if (n <= 0)
            break;
        have += (size_t)n;
    }
    CHECK(have == 60 && memcmp(got, want, 60) == 0);
}

static void test_select(int s)
{
    fd_set r, w;
    struct timeval tv = { 0, 0 };
    FD_ZERO(&r);
    FD_SET(s, &r);
    CHECK(ff_select(s + 1, &r, NULL, NULL, &tv) == 0 && !FD_ISSET(s, &r));
    FD_ZERO(&r);
    FD_ZERO(&w);
    FD_SET(s, &r);
    FD_SET(s, &w);
    CHECK(ff_select(s + 1, &r, &w, NULL, &tv) == 1 && !FD_ISSET(s, &r) && FD_ISSET(s, &w));
    /* A wait that times out (and the timeout is left as it was). */
    FD_ZERO(&r);
    FD_SET(s, &r);
    tv.tv_usec = 80000;
    double t0 = now_ms();
    CHECK(ff_select(s + 1, &r, NULL, NULL, &tv) == 0 && now_ms() - t0 >= 75 && tv.tv_usec == 80000);
    /* One that data ends. */
    CHECK(ff_write(s, "ping", 4) == 4);
    FD_ZERO(&r);
    FD_SET(s, &r);
    tv.tv_sec = 5;
    tv.tv_usec = 0;
    CHECK(ff_select(s + 1, &r, NULL, NULL, &tv) == 1 && FD_ISSET(s, &r));
    char buf[8];
    CHECK(ff_read(s, buf, sizeof(buf)) == 4);
    /* A kernel fd is not ustack's. */
    int p[2];
    CHECK(pipe(p) == 0);
    int hi = p[0] > s ? p[0] : s;
    FD_ZERO(&r);
    FD_SET(s, &r);
    FD_SET(p[0], &r);
    tv.tv_sec = 0;
    FAILS(ff_select(hi + 1, &r, NULL, NULL, &tv), EBADF);
    FAILS(ff_select(-1, NULL, NULL, NULL, &tv), EINVAL);
    tv.tv_usec = 1000000;
    FAILS(ff_select(s + 1, &r, NULL, NULL, &tv), EINVAL);
    close(p[0]);
    close(p[1]);
}

static void test_poll(int s)
{
    int p[2];
    CHECK(pipe(p) == 0);
    struct pollfd fds[3] = { { s, POLLIN | POLLOUT, 0 }, { -1, POLLIN, 0 }, { p[0], POLLIN, 0 } };
    CHECK(ff_poll(fds, 3, 0) == 2);
    CHECK(fds[0].revents == POLLOUT && fds[1].revents == 0 && fds[2].revents == POLLNVAL);
    FAILS(ff_poll(NULL, 1, 0), EFAULT);
    CHECK(ff_poll(NULL, 0, 0) == 0);
    FAILS(ff_poll(fds, (nfds_t)1 << 40, 0), EINVAL);
    double t0 = now_ms();
    CHECK(ff_poll(fds, 1, 0) == 1);
    struct pollfd in = { s, POLLIN, 0 };
    CHECK(ff_poll(&in, 1, 60) == 0 && now_ms() - t0 >= 55);
    close(p[0]);
    close(p[1]);
}

static void test_dup(int s)
{
    int d = ff_dup(s);
    CHECK(d >= 0 && d != s && ff_fdisused(d));
    CHECK(echoes(d, s, "through the duplicate"));
    /* File status flags are shared, FD_CLOEXEC is the number's. */
    CHECK((ff_fcntl(d, F_GETFL) & O_NONBLOCK) != 0);
    CHECK(ff_fcntl(d, F_SETFD, FD_CLOEXEC) == 0 && ff_fcntl(d, F_GETFD) == FD_CLOEXEC && ff_fcntl(s, F_GETFD) == 0);
    int high = ff_fcntl(s, F_DUPFD, 200);
    CHECK(high >= 200 && ff_fdisused(high));
    CHECK(ff_close(high) == 0);
    /* dup2 onto a free number takes exactly it. */
    CHECK(ff_dup2(s, high) == high && echoes(s, high, "dup2"));
    /* The first number goes: the connection stays. */
    CHECK(ff_close(s) == 0 && !ff_fdisused(s));
    CHECK(echoes(d, high, "after close"));
    CHECK(ff_close(high) == 0);
    /* Not ustack's numbers: EBADF. */
    int p[2];
    CHECK(pipe(p) == 0);
    FAILS(ff_dup(p[0]), EBADF);
    FAILS(ff_dup2(d, p[1]), EBADF);
    CHECK(fcntl(p[1], F_GETFD) == 0); /* untouched */
    close(p[0]);
    close(p[1]);
    FAILS(ff_dup2(d, -1), EBADF);
    CHECK(ff_dup2(d, d) == d);
    CHECK(ff_close(d) == 0);
    FAILS(ff_dup(d), EBADF);
}

/* ff_kevent_do_each's callback: the application's own event records. */
struct my_event {
    int fd;
    int readable;
    long bytes;
};

static void to_my_event(void **cursor, struct kevent *kev)
{
    struct my_event *e = *cursor;
    e->fd = (int)kev->ident;
    e->readable = kev->filter == EVFILT_READ;
    e->bytes = (long)kev->data;
    *cursor = e + 1;
}

static void test_kevent_do_each(int s)
{
    int kq = ff_kqueue();
    CHECK(kq >= 0);
    struct kevent kev;
    EV_SET(&kev, s, EVFILT_READ, EV_ADD, 0, 0, NULL);
    struct my_event mine[4];
    memset(mine, 0, sizeof(mine));
    struct timespec zero = { 0, 0 };
    CHECK(ff_kevent_do_each(kq, &kev, 1, mine, 4, &zero, to_my_event) == 0);
    CHECK(ff_write(s, "12345", 5) == 5);
    CHECK(wait_for(s, POLLIN, 5000) & POLLIN);
    CHECK(ff_kevent_do_each(kq, NULL, 0, mine, 4, &zero, to_my_event) == 1);
    CHECK(mine[0].fd == s && mine[0].readable && mine[0].bytes == 5 && mine[1].fd == 0);
    /* Without a callback: a kevent array, as ff_kevent. */
    struct kevent out[2];
    CHECK(ff_kevent_do_each(kq, NULL, 0, out, 2, &zero, NULL) == 1 && (int)out[0].ident == s);
    FAILS(ff_kevent_do_each(kq, NULL, -1, mine, 4, &zero, to_my_event), EINVAL);
    FAILS(ff_kevent_do_each(kq, NULL, 0, NULL, 4, &zero, NULL), EFAULT);
    char buf[8];
    CHECK(ff_read(s, buf, sizeof(buf)) == 5);
    CHECK(ff_close(kq) == 0);
}

struct thread_arg {
    int fd;
    int port;
    int traffic_errno;
    struct ff_traffic_args traffic;
};

static void *thread_main(void *p)
{
    struct thread_arg *a = p;
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    /* A call from another thread goes to the engine's. */
    if (ff_getsockname(a->fd, (struct linux_sockaddr *)&sa, &len) == 0)
        __atomic_store_n(&a->port, ntohs(sa.sin_port), __ATOMIC_SEQ_CST);
    errno = 0;
    memset(&a->traffic, 0xff, sizeof(a->traffic));
    ff_get_traffic(&a->traffic);
    a->traffic_errno = errno;
    return a;
}

static void test_threads(int s)
{
    struct thread_arg a = { s, 0, 0, { 0, 0, 0, 0 } };
    pthread_t th;
    void *ret = NULL;
    CHECK(ff_pthread_create(&th, NULL, thread_main, &a) == 0);
    /* The thread's call needs the engine's thread to step: a blocking
     * wait here drives it. */
    double t0 = now_ms();
    while (__atomic_load_n(&a.port, __ATOMIC_SEQ_CST) == 0 && now_ms() - t0 < 5000)
        wait_for(s, POLLIN, 10);
    CHECK(ff_pthread_join(th, &ret) == 0 && ret == &a);
    CHECK(a.port > 0);
    /* ff_get_traffic off the engine's thread: zeros, EBADF. */
    CHECK(a.traffic_errno == EBADF && a.traffic.rx_packets == 0 && a.traffic.tx_bytes == 0);
    CHECK(ff_pthread_create(NULL, NULL, thread_main, &a) == EINVAL);
    CHECK(ff_pthread_create(&th, NULL, NULL, &a) == EINVAL);
}

static void test_traffic(int s)
{
    struct ff_traffic_args t, u;
    memset(&t, 0, sizeof(t));
    CHECK(sizeof(t) == 32);
    ff_get_traffic(&t);
    CHECK(t.rx_packets > 0 && t.tx_packets > 0);
    CHECK(t.rx_bytes >= t.rx_packets * 42 && t.tx_bytes >= t.tx_packets * 42);
    /* An echo of 100 bytes: at least a frame each way, with the bytes. */
    char msg[101];
    memset(msg, 'z', 100);
    msg[100] = 0;
    CHECK(echoes(s, s, msg));
    ff_get_traffic(&u);
    CHECK(u.rx_packets > t.rx_packets && u.tx_packets > t.tx_packets);
    CHECK(u.rx_bytes - t.rx_bytes >= 154 && u.tx_bytes - t.tx_bytes >= 154);
    ff_get_traffic(NULL);
}

static struct linux_sockaddr *sa(struct sockaddr_in *a)
{
    return (struct linux_sockaddr *)a;
}

static void test_routes(const char *peer, const char *far, const char *self)
{
    struct sockaddr_in net = sin4(far, 0), gw = sin4(peer, 0), mask = sin4("255.255.0.0", 0);
    struct sockaddr_in host = sin4(far, 0), me = sin4(self, 0);
    net.sin_addr.s_addr &= mask.sin_addr.s_addr;
    /* No route: the far address is unreachable. */
    errno = 0;
    CHECK(connect_to(far) == -1 && errno == ENETUNREACH);
    /* A network route through the peer. */
    CHECK(ff_route_ctl(FF_ROUTE_ADD, FF_RTF_GATEWAY, sa(&net), sa(&gw), sa(&mask)) == 0);
    FAILS(ff_route_ctl(FF_ROUTE_ADD, FF_RTF_GATEWAY, sa(&net), sa(&gw), sa(&mask)), EEXIST);
    int s = connect_to(far);
    CHECK(s >= 0 && echoes(s, s, "routed through the peer"));
    CHECK(ff_close(s) == 0);
    /* Change it to a gateway no subnet reaches: refused, the route stays. */
    struct sockaddr_in nowhere = sin4("192.0.2.1", 0);
    FAILS(ff_route_ctl(FF_ROUTE_CHANGE, FF_RTF_GATEWAY, sa(&net), sa(&nowhere), sa(&mask)), ENETUNREACH);
    FAILS(ff_route_ctl(FF_ROUTE_DEL, FF_RTF_GATEWAY, sa(&net), sa(&nowhere), sa(&mask)), ESRCH);
    CHECK(ff_route_ctl(FF_ROUTE_CHANGE, FF_RTF_GATEWAY, sa(&net), sa(&gw), sa(&mask)) == 0);
    CHECK(ff_route_ctl(FF_ROUTE_DEL, FF_RTF_GATEWAY, sa(&net), sa(&gw), sa(&mask)) == 0);
    FAILS(ff_route_ctl(FF_ROUTE_DEL, FF_RTF_GATEWAY, sa(&net), NULL, sa(&mask)), ESRCH);
    errno = 0;
    CHECK(connect_to(far) == -1 && errno == ENETUNREACH);
    /* A host route on the link (the peer answers ARP for it). */
    CHECK(ff_route_ctl(FF_ROUTE_ADD, FF_RTF_HOST, sa(&host), sa(&me), NULL) == 0);
    s = connect_to(far);
    CHECK(s >= 0 && echoes(s, s, "on the link"));
    CHECK(ff_close(s) == 0);
    CHECK(ff_route_ctl(FF_ROUTE_DEL, FF_RTF_HOST, sa(&host), NULL, NULL) == 0);
    /* What the call refuses. */
    struct sockaddr_in holes = sin4("255.0.255.0", 0), v6 = net;
    v6.sin_family = AF_INET6;
    FAILS(ff_route_ctl(FF_ROUTE_ADD, FF_RTF_GATEWAY, sa(&net), sa(&gw), sa(&holes)), EINVAL);
    FAILS(ff_route_ctl(FF_ROUTE_ADD, FF_RTF_GATEWAY, sa(&v6), sa(&gw), sa(&mask)), EAFNOSUPPORT);
    FAILS(ff_route_ctl(FF_ROUTE_ADD, FF_RTF_GATEWAY, NULL, sa(&gw), sa(&mask)), EINVAL);
    FAILS(ff_route_ctl(FF_ROUTE_ADD, FF_RTF_GATEWAY, sa(&net), NULL, sa(&mask)), EINVAL);
    FAILS(ff_route_ctl((enum FF_ROUTE_CTL)7, FF_RTF_GATEWAY, sa(&net), sa(&gw), sa(&mask)), EINVAL);
}

/* Inside ff_run's loop the waits never block, whatever their timeout. */
struct in_loop {
    int s;
    int turns;
    double poll_ms, select_ms, kevent_ms;
};

static int loop(void *arg)
{
    struct in_loop *l = arg;
    if (l->turns++ == 0) {
        struct pollfd p = { l->s, POLLIN, 0 };
        double t0 = now_ms();
        ff_poll(&p, 1, 2000);
        l->poll_ms = now_ms() - t0;
        fd_set r;
        FD_ZERO(&r);
        FD_SET(l->s, &r);
        t0 = now_ms();
        ff_select(l->s + 1, &r, NULL, NULL, NULL);
        l->select_ms = now_ms() - t0;
        int kq = ff_kqueue();
        struct kevent out;
        t0 = now_ms();
        ff_kevent_do_each(kq, NULL, 0, &out, 1, NULL, NULL);
        l->kevent_ms = now_ms() - t0;
        ff_close(kq);
        ff_stop_run();
    }
    return 0;
}

int main(int argc, char *argv[])
{
    const char *peer = NULL, *far = NULL;
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--peer") == 0)
            peer = argv[i + 1];
        if (strcmp(argv[i], "--far") == 0)
            far = argv[i + 1];
    }
    if (peer == NULL || far == NULL) {
        fprintf(stderr, "usage: fstack_api_test --conf FILE --peer ADDR --far ADDR\n");
        return 2;
    }

    /* Before ff_init: the system's clock, the configuration's defaults. */
    struct timeval tv, sys;
    FAILS(ff_gettimeofday(NULL, NULL), EFAULT);
    CHECK(ff_gettimeofday(&tv, NULL) == 0 && gettimeofday(&sys, NULL) == 0 && labs(tv.tv_sec - sys.tv_sec) <= 1);
    test_sysctl(0);
    test_log();

    ff_init(argc, argv);

    /* The engine's clock: the time of day, never going back. */
    CHECK(ff_gettimeofday(&tv, NULL) == 0 && gettimeofday(&sys, NULL) == 0 && labs(tv.tv_sec - sys.tv_sec) <= 1);
    struct timeval later;
    CHECK(ff_gettimeofday(&later, NULL) == 0 &&
          (later.tv_sec > tv.tv_sec || (later.tv_sec == tv.tv_sec && later.tv_usec >= tv.tv_usec)));
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0 && ff_getmaxfd() == (int)rl.rlim_cur);
    test_sysctl(1);

    int s = connect_to(peer);
    CHECK(s >= 0 && echoes(s, s, "hello"));
    struct sockaddr_in self;
    socklen_t len = sizeof(self);
    CHECK(ff_getsockname(s, (struct linux_sockaddr *)&self, &len) == 0);
    char self_ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &self.sin_addr, self_ip, sizeof(self_ip));
    /* ff_ioctl and ff_fcntl as symbols of the library. */
    int pending = -1;
    CHECK(ff_ioctl(s, FIONREAD, &pending) == 0 && pending == 0);
    CHECK((ff_fcntl(s, F_GETFL) & O_NONBLOCK) != 0);

    test_poll(s);
    test_select(s);
    test_kevent_do_each(s);
    test_zc_read(s);
    test_threads(s);
    test_traffic(s);
    test_routes(peer, far, self_ip);
    test_dup(s); /* closes s */

    s = connect_to(peer);
    CHECK(s >= 0);
    struct in_loop l = { s, 0, 0, 0, 0 };
    ff_run(loop, &l);
    CHECK(l.turns >= 1 && l.poll_ms < 500 && l.select_ms < 500 && l.kevent_ms < 500);
    CHECK(ff_close(s) == 0);

    printf("fstack_api_test: %d checks passed\n", checks);
    return 0;
}
