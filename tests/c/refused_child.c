/* refused_child: a pre-fork server whose children cannot have a network.
 *
 * A plain Linux program that tests/interop/cases_preload.py runs under
 * `ustack run` over DPDK (preload_prefork_dpdk), where a child forked after
 * the parent started its engine cannot start one (DPDK's EAL does not start
 * again in a forked child): its inherited sockets are as Linux's sockets
 * whose network went down.  The children check every call on them.
 *
 *     refused_child PORT REQUESTS PEER
 *
 * The parent listens on 0.0.0.0:PORT (TCP) and binds a UDP socket to
 * 0.0.0.0:PORT+1, answers REQUESTS HTTP requests ("parent"), accepts one
 * more connection and reads "hold\n" from it, then blocks SIGUSR1 and
 * forks two workers.  Each prints "forked PID" and waits for
 * SIGUSR1 (so the test can read the library's note first), then makes each
 * call on the listener, the UDP socket and the connection it inherited
 * and prints
 *   check PID NAME ok
 *   check PID NAME FAIL <what it got and what was wanted>
 * and at the end "worker PID done checks=N failures=M" (exit status 1 when
 * M > 0).  PEER is an address on ustack's network (where connect and
 * sendto go).  What a call must do is what Linux does on a socket whose network
 * went away and which holds the error ENETDOWN: a wait reports it at once
 * (epoll: EPOLLERR|EPOLLHUP; poll: POLLERR|POLLHUP; select: readable and
 * writable), epoll_ctl, names, options, fcntl, ioctl, dup, listen and close
 * work as on any socket, accept/read/write/recv/send fail with ENETDOWN,
 * shutdown is that of a socket without a connection.
 *
 * The parent prints "workers PID PID parent PID", reaps them, sends "held
 * ok\n" on the held connection (what the children did to their copies
 * must not have touched it) and closes it, answers one more request
 * ("parent after fork") and prints "parent done".
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
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int checks, failures;

static void say(const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    /* One write per line: the workers share stdout. */
    if (write(1, line, (size_t)n) != n)
        _exit(3);
}

__attribute__((noreturn)) static void die(const char *what) {
    say("error %s: %s", what, strerror(errno));
    exit(1);
}

static const char *errname(int e) {
    switch (e) {
    case 0: return "0";
    case ENETDOWN: return "ENETDOWN";
    case ENETUNREACH: return "ENETUNREACH";
    case EISCONN: return "EISCONN";
    case ENOTCONN: return "ENOTCONN";
    case EEXIST: return "EEXIST";
    case ENOENT: return "ENOENT";
    case EINVAL: return "EINVAL";
    case EBADF: return "EBADF";
    case EAGAIN: return "EAGAIN";
    case EPIPE: return "EPIPE";
    case ENOTTY: return "ENOTTY";
    default: return strerror(e);
    }
}

/* A call's result: `rc` and (when rc < 0) errno, against what Linux gives. */
static void expect(const char *name, long rc, int err, long want_rc, int want_err) {
    checks++;
    if (rc == want_rc && (rc >= 0 || err == want_err)) {
        say("check %d %s ok", (int)getpid(), name);
        return;
    }
    failures++;
    say("check %d %s FAIL: returned %ld (errno %s), want %ld (errno %s)", (int)getpid(), name, rc,
        rc < 0 ? errname(err) : "-", want_rc, want_rc < 0 ? errname(want_err) : "-");
}

/* A condition on what a call that succeeded gave. */
static void expect_that(const char *name, int ok, const char *fmt, ...) {
    checks++;
    if (ok) {
        say("check %d %s ok", (int)getpid(), name);
        return;
    }
    failures++;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    say("check %d %s FAIL: %s", (int)getpid(), name, what);
}

#define CALL(name, call, want_rc, want_err)                                                                  \
    do {                                                                                                     \
        errno = 0;                                                                                           \
        long rc_ = (long)(call);                                                                             \
        expect(name, rc_, errno, want_rc, want_err);                                                         \
    } while (0)

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int ep_ctl(int ep, int op, int fd, uint32_t events) {
    struct epoll_event ev = {.events = events, .data.fd = fd};
    return epoll_ctl(ep, op, fd, &ev);
}

static const char *peer_ip;

/* The connection it inherited: as a connection that failed. */
static void connection_checks(int cfd, int port) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1");
    CALL("conn-epoll_ctl-add", ep_ctl(ep, EPOLL_CTL_ADD, cfd, EPOLLIN | EPOLLRDHUP), 0, 0);
    struct epoll_event ev;
    int n = epoll_wait(ep, &ev, 1, 3000);
    expect_that("conn-epoll_wait", n == 1 && ev.data.fd == cfd && ev.events == (EPOLLERR | EPOLLHUP),
                "returned %d, events 0x%x", n, n == 1 ? ev.events : 0);
    close(ep);
    struct pollfd pf = {cfd, POLLIN | POLLOUT, 0};
    CALL("conn-poll", poll(&pf, 1, 3000), 1, 0);
    expect_that("conn-poll-revents", pf.revents == (POLLERR | POLLHUP), "revents 0x%x", pf.revents);
    char buf[64];
    CALL("conn-read", read(cfd, buf, sizeof buf), -1, ENETDOWN);
    CALL("conn-recv", recv(cfd, buf, sizeof buf, MSG_DONTWAIT), -1, ENETDOWN);
    CALL("conn-write", write(cfd, "x", 1), -1, ENETDOWN);
    CALL("conn-send", send(cfd, "x", 1, MSG_NOSIGNAL), -1, ENETDOWN);
    int v = -1;
    socklen_t vl = sizeof v;
    CALL("conn-so_error", getsockopt(cfd, SOL_SOCKET, SO_ERROR, &v, &vl), 0, 0);
    expect_that("conn-so_error-value", v == ENETDOWN, "SO_ERROR %d", v);
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    CALL("conn-getsockname", getsockname(cfd, (struct sockaddr *)&me, &ml), 0, 0);
    expect_that("conn-getsockname-port", me.sin_family == AF_INET && ntohs(me.sin_port) == port &&
                                             me.sin_addr.s_addr != htonl(INADDR_ANY),
                "%s:%d", inet_ntoa(me.sin_addr), ntohs(me.sin_port));
    ml = sizeof me;
    CALL("conn-getpeername", getpeername(cfd, (struct sockaddr *)&me, &ml), -1, ENOTCONN);
    int avail = -1;
    CALL("conn-ioctl-fionread", ioctl(cfd, FIONREAD, &avail), 0, 0);
    expect_that("conn-fionread-value", avail == 0, "FIONREAD %d", avail);
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(9)};
    inet_pton(AF_INET, peer_ip, &peer.sin_addr);
    CALL("conn-connect", connect(cfd, (struct sockaddr *)&peer, sizeof peer), -1, EISCONN);
    CALL("conn-shutdown", shutdown(cfd, SHUT_WR), -1, ENOTCONN);
    CALL("conn-close", close(cfd), 0, 0);
}

static void child_checks(int lfd, int ufd, int port) {
    const uint32_t errhup = EPOLLERR | EPOLLHUP;

    /* epoll: the calls work; a wait reports both at once, error and hang-up only. */
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1");
    CALL("epoll_ctl-add-listener", ep_ctl(ep, EPOLL_CTL_ADD, lfd, EPOLLIN), 0, 0);
    CALL("epoll_ctl-add-udp", ep_ctl(ep, EPOLL_CTL_ADD, ufd, EPOLLIN | EPOLLOUT), 0, 0);
    CALL("epoll_ctl-add-again", ep_ctl(ep, EPOLL_CTL_ADD, lfd, EPOLLIN), -1, EEXIST);
    CALL("epoll_ctl-mod-edge", ep_ctl(ep, EPOLL_CTL_MOD, lfd, EPOLLIN | EPOLLET), 0, 0);
    struct epoll_event evs[8];
    uint64_t t0 = now_ms();
    int n = epoll_wait(ep, evs, 8, 3000);
    uint64_t ms = now_ms() - t0;
    CALL("epoll_wait", n, 2, 0);
    expect_that("epoll_wait-at-once", ms < 1500, "took %llu ms", (unsigned long long)ms);
    for (int i = 0; i < n && i < 8; i++) {
        int fd = evs[i].data.fd;
        expect_that(fd == lfd ? "epoll_wait-listener-events" : "epoll_wait-udp-events",
                    (fd == lfd || fd == ufd) && evs[i].events == errhup, "fd %d events 0x%x, want 0x%x", fd,
                    evs[i].events, errhup);
    }
    /* Edge-triggered: the listener once; the UDP socket (level) again. */
    n = epoll_wait(ep, evs, 8, 0);
    expect_that("epoll_wait-edge-once", n == 1 && evs[0].data.fd == ufd && evs[0].events == errhup,
                "returned %d, first fd %d events 0x%x", n, n > 0 ? evs[0].data.fd : -1, n > 0 ? evs[0].events : 0);
    CALL("epoll_ctl-del", epoll_ctl(ep, EPOLL_CTL_DEL, lfd, NULL), 0, 0);
    CALL("epoll_ctl-del-again", epoll_ctl(ep, EPOLL_CTL_DEL, lfd, NULL), -1, ENOENT);
    CALL("epoll_ctl-mod-absent", ep_ctl(ep, EPOLL_CTL_MOD, lfd, EPOLLIN), -1, ENOENT);

    /* poll and select. */
    struct pollfd pf[2] = {{lfd, POLLIN, 0}, {ufd, POLLOUT, 0}};
    CALL("poll", poll(pf, 2, 3000), 2, 0);
    expect_that("poll-revents", pf[0].revents == (POLLERR | POLLHUP) && pf[1].revents == (POLLERR | POLLHUP),
                "listener 0x%x, udp 0x%x", pf[0].revents, pf[1].revents);
    fd_set rd, wr;
    FD_ZERO(&rd);
    FD_ZERO(&wr);
    FD_SET(lfd, &rd);
    FD_SET(lfd, &wr);
    FD_SET(ufd, &rd);
    int maxfd = lfd > ufd ? lfd : ufd;
    struct timeval tv = {3, 0};
    CALL("select", select(maxfd + 1, &rd, &wr, NULL, &tv), 3, 0);
    expect_that("select-sets", FD_ISSET(lfd, &rd) && FD_ISSET(lfd, &wr) && FD_ISSET(ufd, &rd),
                "listener readable %d writable %d, udp readable %d", FD_ISSET(lfd, &rd) != 0,
                FD_ISSET(lfd, &wr) != 0, FD_ISSET(ufd, &rd) != 0);

    /* The data calls fail with the error the sockets hold. */
    char buf[64];
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(9)};
    if (inet_pton(AF_INET, peer_ip, &peer.sin_addr) != 1)
        die("the peer's address");
    CALL("accept", accept(lfd, NULL, NULL), -1, ENETDOWN);
    CALL("accept4", accept4(lfd, NULL, NULL, SOCK_NONBLOCK), -1, ENETDOWN);
    CALL("read", read(lfd, buf, sizeof buf), -1, ENETDOWN);
    CALL("write", write(lfd, "x", 1), -1, ENETDOWN);
    CALL("recv-udp", recv(ufd, buf, sizeof buf, MSG_DONTWAIT), -1, ENETDOWN);
    CALL("sendto-udp", sendto(ufd, "x", 1, 0, (struct sockaddr *)&peer, sizeof peer), -1, ENETDOWN);

    /* What does not move data works. */
    int v = -1;
    socklen_t vl = sizeof v;
    CALL("getsockopt-so_error", getsockopt(lfd, SOL_SOCKET, SO_ERROR, &v, &vl), 0, 0);
    expect_that("so_error-value", v == ENETDOWN, "SO_ERROR %d (%s), want ENETDOWN", v, errname(v));
    v = -1;
    vl = sizeof v;
    CALL("getsockopt-so_acceptconn", getsockopt(lfd, SOL_SOCKET, SO_ACCEPTCONN, &v, &vl), 0, 0);
    expect_that("so_acceptconn-value", v == 1, "SO_ACCEPTCONN %d", v);
    int one = 1;
    CALL("setsockopt", setsockopt(lfd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one), 0, 0);
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    CALL("getsockname", getsockname(lfd, (struct sockaddr *)&me, &ml), 0, 0);
    expect_that("getsockname-port", ml == sizeof me && me.sin_family == AF_INET && ntohs(me.sin_port) == port,
                "family %d port %d", me.sin_family, ntohs(me.sin_port));
    ml = sizeof me;
    CALL("getpeername", getpeername(lfd, (struct sockaddr *)&me, &ml), -1, ENOTCONN);
    int fl = fcntl(lfd, F_GETFL);
    expect_that("fcntl-getfl", fl >= 0 && (fl & O_ACCMODE) == O_RDWR, "F_GETFL 0x%x", fl);
    CALL("fcntl-setfl", fcntl(lfd, F_SETFL, fl | O_NONBLOCK), 0, 0);
    fl = fcntl(lfd, F_GETFL);
    expect_that("fcntl-nonblock", fl >= 0 && (fl & O_NONBLOCK), "F_GETFL 0x%x", fl);
    CALL("fcntl-setown", fcntl(lfd, F_SETOWN, getpid()), 0, 0);
    CALL("fcntl-getown", fcntl(lfd, F_GETOWN), getpid(), 0);
    CALL("ioctl-fionbio", ioctl(lfd, FIONBIO, &one), 0, 0);
    int avail = -1;
    CALL("ioctl-fionread-listener", ioctl(lfd, FIONREAD, &avail), -1, EINVAL);
    CALL("ioctl-fionread-udp", ioctl(ufd, FIONREAD, &avail), 0, 0);
    expect_that("fionread-udp-value", avail == 0, "FIONREAD %d", avail);
    CALL("listen-again", listen(lfd, 16), 0, 0);
    CALL("connect-listener", connect(lfd, (struct sockaddr *)&peer, sizeof peer), -1, EISCONN);
    CALL("connect-udp", connect(ufd, (struct sockaddr *)&peer, sizeof peer), -1, ENETUNREACH);

    /* A duplicate is the same dead socket. */
    int d = dup(lfd);
    expect_that("dup", d >= 0 && d != lfd, "dup gave %d (%s)", d, errname(errno));
    if (d >= 0) {
        CALL("accept-dup", accept(d, NULL, NULL), -1, ENETDOWN);
        CALL("epoll_ctl-add-dup", ep_ctl(ep, EPOLL_CTL_ADD, d, EPOLLIN), 0, 0);
        n = epoll_wait(ep, evs, 8, 3000);
        int seen = 0;
        for (int i = 0; i < n; i++)
            seen |= evs[i].data.fd == d && evs[i].events == errhup;
        expect_that("epoll_wait-dup", seen, "returned %d without the duplicate's EPOLLERR|EPOLLHUP", n);
        CALL("dup2", dup2(lfd, 200), 200, 0);
        CALL("accept-dup2", accept(200, NULL, NULL), -1, ENETDOWN);
        CALL("close-dup2", close(200), 0, 0);
        CALL("close-dup", close(d), 0, 0);
    }

    /* shutdown as on a socket without a connection; close. */
    CALL("shutdown-udp", shutdown(ufd, SHUT_RDWR), -1, ENOTCONN);
    CALL("shutdown-listener", shutdown(lfd, SHUT_RDWR), 0, 0);
    CALL("shutdown-bad-how", shutdown(lfd, 7), -1, EINVAL);
    CALL("close-listener", close(lfd), 0, 0);
    CALL("close-udp", close(ufd), 0, 0);
    CALL("accept-closed", accept(lfd, NULL, NULL), -1, EBADF);
    close(ep);
}

static void serve(int lfd, const char *body) {
    int c = accept(lfd, NULL, NULL);
    if (c < 0)
        die("accept");
    char req[1000];
    if (recv(c, req, sizeof req, 0) < 0)
        die("recv");
    char resp[128];
    int n = snprintf(resp, sizeof resp, "HTTP/1.0 200 OK\r\n\r\n%s\n", body);
    if (send(c, resp, (size_t)n, MSG_NOSIGNAL) != n)
        die("send");
    close(c);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: refused_child PORT REQUESTS PEER\n");
        return 2;
    }
    int port = atoi(argv[1]), requests = atoi(argv[2]);
    peer_ip = argv[3];
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0)
        die("socket");
    int one = 1;
    if (setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0)
        die("SO_REUSEADDR");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = INADDR_ANY};
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) < 0)
        die("bind");
    if (listen(lfd, 64) < 0)
        die("listen");
    int ufd = socket(AF_INET, SOCK_DGRAM, 0);
    if (ufd < 0)
        die("socket udp");
    a.sin_port = htons((uint16_t)(port + 1));
    if (bind(ufd, (struct sockaddr *)&a, sizeof a) < 0)
        die("bind udp");
    for (int i = 0; i < requests; i++)
        serve(lfd, "parent");
    /* A connection the workers inherit. */
    int held = accept(lfd, NULL, NULL);
    if (held < 0)
        die("accept the held connection");
    char hold[5];
    size_t got = 0;
    while (got < sizeof hold) {
        ssize_t r = recv(held, hold + got, sizeof hold - got, 0);
        if (r <= 0)
            die("recv on the held connection");
        got += (size_t)r;
    }
    if (memcmp(hold, "hold\n", 5) != 0) {
        errno = 0;
        die("the held connection did not say hold");
    }
    /* The UDP socket used once, so it is on the parent's engine too. */
    char b;
    if (recv(ufd, &b, 1, MSG_DONTWAIT) >= 0 || errno != EAGAIN)
        die("recv udp (want EAGAIN)");
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    if (sigprocmask(SIG_BLOCK, &usr1, NULL) < 0)
        die("sigprocmask");
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        pid_t pid = fork();
        if (pid < 0)
            die("fork");
        if (pid == 0) {
            say("forked %d", (int)getpid());
            int sig;
            if (sigwait(&usr1, &sig) != 0)
                die("sigwait");
            child_checks(lfd, ufd, port);
            connection_checks(held, port);
            say("worker %d done checks=%d failures=%d", (int)getpid(), checks, failures);
            _exit(failures ? 1 : 0);
        }
        kids[k] = pid;
    }
    /* The parent keeps its listener and serves on: the port stays its. */
    say("workers %d %d parent %d", (int)kids[0], (int)kids[1], (int)getpid());
    for (int k = 0; k < 2; k++) {
        int st;
        if (waitpid(kids[k], &st, 0) < 0)
            die("waitpid");
        say("reaped %d status %d", (int)kids[k], WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
    if (send(held, "held ok\n", 8, MSG_NOSIGNAL) != 8)
        die("send on the held connection");
    close(held);
    serve(lfd, "parent after fork");
    say("parent done");
    return 0;
}
