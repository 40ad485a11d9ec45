/* fortified_calls: the forms of the socket calls a glibc program links to
 * when it is built with -O2 -D_FORTIFY_SOURCE=2 (`__read_chk`, `__recv_chk`,
 * `__recvfrom_chk`, `__poll_chk`, `__ppoll_chk`, `__fdelt_chk` for FD_SET),
 * glibc's public `__` names of the calls (`__connect`, `__write`, `__send`,
 * `__read`, `__poll`, `__select`, `__fcntl`, `__dup2`, `__close`) and
 * `epoll_pwait2`, on ustack sockets.
 *
 * A plain Linux program that tests/interop/cases_preload.py runs under
 * `ustack run` (preload_fortified_calls), as a client of a TCP echo server
 * and a UDP echo server on PEER:7 (the kernel's side):
 *
 *     fortified_calls PEER
 *
 * One line per check, "check NAME ok" or "check NAME FAIL ...", then
 * "done checks=N failures=M" (exit status 1 when M > 0).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#if !defined(__USE_FORTIFY_LEVEL) || __USE_FORTIFY_LEVEL < 2
#error "build with -O2 -D_FORTIFY_SOURCE=2: the fortified forms are what this program tests"
#endif

/* glibc exports these as public symbols; its headers do not declare them. */
extern ssize_t __read(int fd, void *buf, size_t n);
extern ssize_t __write(int fd, const void *buf, size_t n);
extern ssize_t __send(int fd, const void *buf, size_t n, int flags);
extern int __connect(int fd, const struct sockaddr *addr, socklen_t len);
extern int __close(int fd);
extern int __dup2(int fd, int new_fd);
extern int __fcntl(int fd, int cmd, ...);
extern int __poll(struct pollfd *fds, nfds_t n, int timeout);
extern int __select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t);

static int checks, failures;

/* Lengths the compiler cannot see: with a constant within the buffer it
 * calls the plain function (nothing to check at run time), with these the
 * fortified one. */
static volatile size_t buf_len = 64;
static volatile nfds_t one_fd = 1;

static void check(const char *name, int ok, const char *fmt, ...) {
    checks++;
    if (ok) {
        printf("check %s ok\n", name);
        return;
    }
    failures++;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    printf("check %s FAIL: %s\n", name, what);
}

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Reads the echo of `want` on `fd` with `how` (each way reads into a
 * buffer whose size the compiler knows, so the fortified form is called). */
enum { BY_READ, BY_RECV, BY_LIBC_READ };

static void echoed(const char *name, int fd, const char *want, int how) {
    char buf[64];
    size_t got = 0, n = strlen(want);
    char all[64] = {0};
    uint64_t end = now_ms() + 5000;
    while (got < n && now_ms() < end) {
        ssize_t r;
        if (how == BY_READ)
            r = read(fd, buf, buf_len);
        else if (how == BY_RECV)
            r = recv(fd, buf, buf_len, 0);
        else
            r = __read(fd, buf, sizeof buf);
        if (r <= 0) {
            check(name, 0, "read gave %zd (%s) after %zu of %zu bytes", r, strerror(errno), got, n);
            return;
        }
        if (got + (size_t)r > sizeof all - 1)
            break;
        memcpy(all + got, buf, (size_t)r);
        got += (size_t)r;
    }
    check(name, got == n && memcmp(all, want, n) == 0, "echo %zu bytes '%.*s', want '%s'", got, (int)got, all, want);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fortified_calls PEER\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(7)};
    if (inet_pton(AF_INET, argv[1], &peer.sin_addr) != 1) {
        fprintf(stderr, "not an IPv4 address: %s\n", argv[1]);
        return 2;
    }

    /* TCP through the __ names. */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    check("socket", s >= 0, "%s", strerror(errno));
    int fl = __fcntl(s, F_GETFL);
    check("__fcntl-getfl", fl >= 0 && (fl & O_ACCMODE) == O_RDWR && !(fl & O_NONBLOCK), "F_GETFL 0x%x (%s)", fl,
          strerror(errno));
    int r = __connect(s, (struct sockaddr *)&peer, sizeof peer);
    check("__connect", r == 0, "returned %d (%s)", r, strerror(errno));
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    r = getsockname(s, (struct sockaddr *)&me, &ml);
    check("getsockname", r == 0 && me.sin_family == AF_INET && me.sin_port != 0, "returned %d family %d", r,
          me.sin_family);

    check("__write", __write(s, "one\n", 4) == 4, "%s", strerror(errno));
    struct pollfd pf[1] = {{s, POLLIN, 0}};
    r = poll(pf, one_fd, 5000);
    check("poll(__poll_chk)", r == 1 && (pf[0].revents & POLLIN), "returned %d revents 0x%x", r, pf[0].revents);
    echoed("read(__read_chk)", s, "one\n", BY_READ);

    check("__send", __send(s, "two\n", 4, 0) == 4, "%s", strerror(errno));
    struct timespec ts = {5, 0};
    pf[0].revents = 0;
    r = ppoll(pf, one_fd, &ts, NULL);
    check("ppoll(__ppoll_chk)", r == 1 && (pf[0].revents & POLLIN), "returned %d revents 0x%x", r, pf[0].revents);
    echoed("recv(__recv_chk)", s, "two\n", BY_RECV);

    check("__write-3", __write(s, "three\n", 6) == 6, "%s", strerror(errno));
    fd_set rd;
    FD_ZERO(&rd);
    FD_SET(s, &rd);
    struct timeval tv = {5, 0};
    r = __select(s + 1, &rd, NULL, NULL, &tv);
    check("__select(FD_SET: __fdelt_chk)", r == 1 && FD_ISSET(s, &rd), "returned %d", r);
    echoed("__read", s, "three\n", BY_LIBC_READ);

    r = __dup2(s, 150);
    check("__dup2", r == 150, "returned %d (%s)", r, strerror(errno));
    check("__write-dup", __write(150, "four\n", 5) == 5, "%s", strerror(errno));
    struct pollfd pd = {150, POLLIN, 0};
    r = __poll(&pd, 1, 5000);
    check("__poll", r == 1 && (pd.revents & POLLIN), "returned %d revents 0x%x", r, pd.revents);
    echoed("read-dup", 150, "four\n", BY_READ);
    check("__close-dup", __close(150) == 0, "%s", strerror(errno));

    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = s};
    check("epoll_ctl", epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) == 0, "%s", strerror(errno));
    struct epoll_event evs[4];
    struct timespec short_wait = {0, 50 * 1000 * 1000};
    uint64_t t0 = now_ms();
    r = epoll_pwait2(ep, evs, 4, &short_wait, NULL);
    uint64_t took = now_ms() - t0;
    check("epoll_pwait2-timeout", r == 0 && took >= 50, "returned %d after %llu ms (want 0 after 50 ms)", r,
          (unsigned long long)took);
    check("__write-5", __write(s, "five\n", 5) == 5, "%s", strerror(errno));
    r = epoll_pwait2(ep, evs, 4, &ts, NULL);
    check("epoll_pwait2", r == 1 && evs[0].data.fd == s && (evs[0].events & EPOLLIN), "returned %d", r);
    echoed("read-5", s, "five\n", BY_READ);
    struct timespec bad = {0, 1000 * 1000 * 1000};
    r = epoll_pwait2(ep, evs, 4, &bad, NULL);
    check("epoll_pwait2-einval", r == -1 && errno == EINVAL, "returned %d (%s)", r, strerror(errno));
    close(ep);

    /* UDP: recvfrom's fortified form. */
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    ssize_t n = sendto(u, "six", 3, 0, (struct sockaddr *)&peer, sizeof peer);
    check("sendto", n == 3, "returned %zd (%s)", n, strerror(errno));
    struct pollfd pu[1] = {{u, POLLIN, 0}};
    r = poll(pu, one_fd, 5000);
    check("poll-udp", r == 1, "returned %d", r);
    char buf[64];
    struct sockaddr_in from;
    socklen_t froml = sizeof from;
    n = recvfrom(u, buf, buf_len, 0, (struct sockaddr *)&from, &froml);
    check("recvfrom(__recvfrom_chk)",
          n == 3 && memcmp(buf, "six", 3) == 0 && from.sin_addr.s_addr == peer.sin_addr.s_addr &&
              from.sin_port == htons(7),
          "returned %zd from %s:%d", n, inet_ntoa(from.sin_addr), ntohs(from.sin_port));
    check("__close-udp", __close(u) == 0, "%s", strerror(errno));

    check("shutdown", shutdown(s, SHUT_WR) == 0, "%s", strerror(errno));
    n = read(s, buf, buf_len);
    check("eof", n == 0, "read gave %zd (%s)", n, strerror(errno));
    check("__close", __close(s) == 0, "%s", strerror(errno));
    printf("done checks=%d failures=%d\n", checks, failures);
    return failures ? 1 : 0;
}
