/*
 * pingpong: ustack-bench's ping-pong and short-connection programs in C,
 * one source for every way in:
 *
 *   cc pingpong.c                      Linux sockets and epoll: the kernel's
 *                                      side, and `ustack run` (preload)
 *   cc -DUSE_USTACK pingpong.c -lustack  ustack's C ABI with epoll
 *                                      (ustack.h: ustack_socket,
 *                                      ustack_epoll_wait, ustack_run)
 *   cc -DUSE_FF pingpong.c -lustack    F-Stack's ff_* layer with kqueue
 *                                      (ff_api.h: ff_socket, ff_kevent,
 *                                      ff_run); Linux has no kqueue, so its
 *                                      kernel counterpart is the epoll build
 *
 *   pingpong server --port P [--conf FILE]
 *   pingpong client --port P --server IP --workload pingpong:N|short:N
 *                   --warmup-ms MS --window-ms MS [--conf FILE]
 *
 * The server echoes on TCP P and answers one 64-byte request then closes
 * on TCP P+2 (the server closes first, as an HTTP/1.0 server does); it
 * prints "ready" once it listens and stops on SIGTERM or SIGINT, saying
 * "served units=R" (64-byte requests echoed plus one-shots answered: the
 * count callgrind's cost per request divides by).  The
 * client keeps N connections each with one 64-byte request in flight
 * (pingpong:N), or N short connections at once, each connect, one
 * request and reply, the server's close, close (short:N); after the
 * warm-up it counts round trips (or connections) over the window and
 * prints "result units=U elapsed_us=T errors=E", the line ustack-bench's
 * own client prints (crates/bench/src/logic.rs is the same logic in
 * Rust).  Level-triggered epoll, non-blocking sockets, TCP_NODELAY; the
 * clock read once per loop turn.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#if defined(USE_USTACK)
#include "ustack.h"
#define S(call) ustack_##call
#define SA(a) ((struct sockaddr *)(a))
#elif defined(USE_FF)
#include "ff_api.h"
#define S(call) ff_##call
#define SA(a) ((struct linux_sockaddr *)(a))
#else
#define S(call) call
#define SA(a) ((struct sockaddr *)(a))
#endif

#define MSG 64
#define MAX_FDS 65536
#define MAX_EVENTS 512
#define ECHO 0
#define ONESHOT 2

enum role { LISTEN_ECHO = 1, LISTEN_ONESHOT, ECHO_CONN, ONESHOT_CONN, CLIENT_CONN };

struct conn {
    unsigned char role;
    unsigned char connecting;
    unsigned char awaiting_eof;
    unsigned short got;
};

static struct conn conns[MAX_FDS];
static int epfd;
static volatile sig_atomic_t stopping;
static char buf[65536];
static const char req[MSG] = "ustack-bench pingpong request, sixty-four bytes long, padded....";

/* The client's state. */
static int is_short;
static long want;            /* connections (pingpong) or at once (short) */
static long open_now, to_open;
static int first_reply;
static struct sockaddr_in server_addr;
static uint64_t count, errors, mark_count;
/* The server's: bytes echoed, one-shot requests answered. */
static uint64_t echoed_bytes, answered;
static uint64_t start_us, mark_us, warmup_us, window_us;
static int done;

static uint64_t now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static void die(const char *what)
{
    fprintf(stderr, "pingpong: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
#if defined(USE_USTACK)
    ustack_stop();
#elif defined(USE_FF)
    ff_stop_run();
#endif
}

#ifdef USE_FF
/* kqueue in epoll's terms: EPOLLIN is EVFILT_READ, EPOLLOUT EVFILT_WRITE;
 * a change (only ever EPOLLOUT to EPOLLIN here) deletes the write filter
 * and adds the read one.  Level-triggered, as epoll's default. */
static void watch(int fd, uint32_t events, int op)
{
    struct kevent ch[2];
    int n = 0;
    if (op == EPOLL_CTL_MOD)
        EV_SET(&ch[n++], (uintptr_t)fd, EVFILT_WRITE, EV_DELETE, 0, 0, NULL);
    if (events & EPOLLIN)
        EV_SET(&ch[n++], (uintptr_t)fd, EVFILT_READ, EV_ADD, 0, 0, NULL);
    if (events & EPOLLOUT)
        EV_SET(&ch[n++], (uintptr_t)fd, EVFILT_WRITE, EV_ADD, 0, 0, NULL);
    if (ff_kevent(epfd, ch, n, NULL, 0, NULL) < 0)
        die("kevent");
}
#else
static void watch(int fd, uint32_t events, int op)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.events = events;
    ev.data.fd = fd;
    if (S(epoll_ctl)(epfd, op, fd, &ev) != 0)
        die("epoll_ctl");
}

#endif

static void nodelay(int fd)
{
    int on = 1;
    if (S(setsockopt)(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on)) != 0)
        die("TCP_NODELAY");
}

static void drop(int fd)
{
    conns[fd].role = 0;
    S(close)(fd);
}

static int listen_on(uint16_t port, enum role role)
{
    struct sockaddr_in a;
    int on = 1;
    int fd = S(socket)(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0 || fd >= MAX_FDS)
        die("socket");
    if (S(setsockopt)(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0)
        die("SO_REUSEADDR");
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    if (S(bind)(fd, SA(&a), sizeof(a)) != 0)
        die("bind");
    if (S(listen)(fd, 4096) != 0)
        die("listen");
    conns[fd].role = (unsigned char)role;
    watch(fd, EPOLLIN, EPOLL_CTL_ADD);
    return fd;
}

static void accept_all(int l)
{
    for (;;) {
        int fd = S(accept4)(l, NULL, NULL, SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno != EAGAIN)
                errors++;
            return;
        }
        if (fd >= MAX_FDS) {
            S(close)(fd);
            errors++;
            continue;
        }
        nodelay(fd);
        memset(&conns[fd], 0, sizeof(conns[fd]));
        conns[fd].role = conns[l].role == LISTEN_ECHO ? ECHO_CONN : ONESHOT_CONN;
        watch(fd, EPOLLIN, EPOLL_CTL_ADD);
    }
}

static void echo(int fd)
{
    for (;;) {
        ssize_t n = S(read)(fd, buf, sizeof(buf));
        if (n == 0 || (n < 0 && errno != EAGAIN)) {
            drop(fd);
            return;
        }
        if (n < 0)
            return;
        if (S(write)(fd, buf, (size_t)n) != n) {
            errors++;
            drop(fd);
            return;
        }
        echoed_bytes += (uint64_t)n;
        if ((size_t)n < sizeof(buf))
            return;
    }
}

static void oneshot(int fd)
{
    struct conn *c = &conns[fd];
    for (;;) {
        ssize_t n = S(read)(fd, buf, sizeof(buf));
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            drop(fd);
            return;
        }
        c->got = (unsigned short)(c->got + n);
        if (c->got >= MSG) {
            if (S(write)(fd, req, MSG) != MSG)
                errors++;
            else
                answered++;
            drop(fd);
            return;
        }
    }
}

/* ---- the client ---- */

static void open_one(void)
{
    uint16_t port = ntohs(server_addr.sin_port);
    struct sockaddr_in a = server_addr;
    a.sin_port = htons((uint16_t)(port + (is_short ? ONESHOT : ECHO)));
    int fd = S(socket)(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0 || fd >= MAX_FDS) {
        errors++;
        if (fd >= 0)
            S(close)(fd);
        return;
    }
    nodelay(fd);
    if (S(connect)(fd, SA(&a), sizeof(a)) != 0 && errno != EINPROGRESS) {
        errors++;
        S(close)(fd);
        return;
    }
    memset(&conns[fd], 0, sizeof(conns[fd]));
    conns[fd].role = CLIENT_CONN;
    conns[fd].connecting = 1;
    to_open--;
    open_now++;
    watch(fd, EPOLLOUT, EPOLL_CTL_ADD);
}

static void open_more(void)
{
    /* One connection until the first reply: the neighbour is resolved
     * and the server answers before hundreds of SYNs wait on ARP. */
    while (to_open > 0 && (first_reply || open_now == 0)) {
        long before = to_open;
        open_one();
        if (to_open == before)
            return;
    }
}

static void client_fail(int fd)
{
    errors++;
    drop(fd);
    open_now--;
    to_open++;
}

static void client_event(int fd, uint32_t events)
{
    struct conn *c = &conns[fd];
    if (c->connecting) {
        int err = 0;
        socklen_t len = sizeof(err);
        if (S(getsockopt)(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
            client_fail(fd);
            return;
        }
        c->connecting = 0;
        if (S(write)(fd, req, MSG) != MSG) {
            client_fail(fd);
            return;
        }
        watch(fd, EPOLLIN, EPOLL_CTL_MOD);
        return;
    }
    if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
        return;
    for (;;) {
        ssize_t n = S(read)(fd, buf, sizeof(buf));
        if (n < 0 && errno == EAGAIN)
            return;
        if (n == 0 && c->awaiting_eof) {
            drop(fd);
            open_now--;
            count++;
            to_open++;
            open_more();
            return;
        }
        if (n <= 0) {
            client_fail(fd);
            return;
        }
        first_reply = 1;
        c->got = (unsigned short)(c->got + n);
        if (c->got < MSG)
            continue;
        if (c->got > MSG || c->awaiting_eof) {
            client_fail(fd);
            return;
        }
        c->got = 0;
        if (is_short) {
            /* The server's FIN may have come with the reply: read on. */
            c->awaiting_eof = 1;
            continue;
        }
        count++;
        if (S(write)(fd, req, MSG) != MSG) {
            client_fail(fd);
            return;
        }
        return;
    }
}

static void check_clock(void)
{
    uint64_t t = now_us();
    if (mark_us == 0) {
        if (t - start_us >= warmup_us) {
            mark_us = t;
            mark_count = count;
        }
    } else if (t - mark_us >= window_us) {
        printf("result units=%llu elapsed_us=%llu errors=%llu\n",
               (unsigned long long)(count - mark_count), (unsigned long long)(t - mark_us),
               (unsigned long long)errors);
        fflush(stdout);
        done = 1;
    }
}

/* One turn: whatever epoll has ready, served; then the clock.  Returns
 * nonzero when the program is done. */
static int turn(void *arg)
{
    int client = arg != NULL;
    if (stopping)
        return 1;
#ifdef USE_FF
    static struct kevent events[MAX_EVENTS];
    struct timespec zero = { 0, 0 };
    int n = ff_kevent(epfd, NULL, 0, events, MAX_EVENTS, &zero);
    for (int i = 0; i < n; i++) {
        int fd = (int)events[i].ident;
        uint32_t ev = events[i].filter == EVFILT_READ ? EPOLLIN : EPOLLOUT;
        if (events[i].flags & (EV_EOF | EV_ERROR))
            ev |= EPOLLHUP;
#else
    struct epoll_event events[MAX_EVENTS];
    int n = S(epoll_wait)(epfd, events, MAX_EVENTS, 0);
    for (int i = 0; i < n; i++) {
        int fd = events[i].data.fd;
        uint32_t ev = events[i].events;
#endif
        if (fd < 0 || fd >= MAX_FDS)
            continue;
        switch (conns[fd].role) {
        case LISTEN_ECHO:
        case LISTEN_ONESHOT:
            accept_all(fd);
            break;
        case ECHO_CONN:
            echo(fd);
            break;
        case ONESHOT_CONN:
            oneshot(fd);
            break;
        case CLIENT_CONN:
            client_event(fd, ev);
            break;
        default:
            break;
        }
    }
    if (client) {
        if (to_open > 0)
            open_more();
        check_clock();
        return done;
    }
    return 0;
}

#ifdef USE_FF
/* ff_run's loop goes on until ff_stop_run. */
static int ff_turn(void *arg)
{
    if (turn(arg))
        ff_stop_run();
    return 0;
}
#endif

static const char *arg(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 2; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return argv[i + 1];
    return def;
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "server") != 0 && strcmp(argv[1], "client") != 0)) {
        fprintf(stderr, "usage: pingpong server|client --port P [options] (see the source)\n");
        return 2;
    }
    int client = strcmp(argv[1], "client") == 0;
    uint16_t port = (uint16_t)atoi(arg(argc, argv, "--port", "20000"));
#if defined(USE_USTACK)
    if (ustack_init(argc, argv) != 0)
        return 1;
#elif defined(USE_FF)
    if (ff_init(argc, argv) != 0)
        return 1;
#endif
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);
#ifdef USE_FF
    epfd = ff_kqueue();
#else
    epfd = S(epoll_create1)(0);
#endif
    if (epfd < 0)
        die("epoll_create1 or kqueue");
    if (client) {
        const char *w = arg(argc, argv, "--workload", "pingpong:1");
        const char *colon = strchr(w, ':');
        want = colon ? atol(colon + 1) : 1;
        is_short = strncmp(w, "short", 5) == 0;
        if (want <= 0 || want > MAX_FDS / 2 || (!is_short && strncmp(w, "pingpong", 8) != 0)) {
            fprintf(stderr, "pingpong: bad workload %s (pingpong:N or short:N)\n", w);
            return 2;
        }
        to_open = want;
        memset(&server_addr, 0, sizeof(server_addr));
        server_addr.sin_family = AF_INET;
        server_addr.sin_port = htons(port);
        if (inet_pton(AF_INET, arg(argc, argv, "--server", "127.0.0.1"), &server_addr.sin_addr) != 1) {
            fprintf(stderr, "pingpong: bad --server\n");
            return 2;
        }
        warmup_us = 1000u * (uint64_t)atol(arg(argc, argv, "--warmup-ms", "1000"));
        window_us = 1000u * (uint64_t)atol(arg(argc, argv, "--window-ms", "2000"));
        start_us = now_us();
    } else {
        listen_on(port, LISTEN_ECHO);
        listen_on((uint16_t)(port + ONESHOT), LISTEN_ONESHOT);
        printf("ready\n");
        fflush(stdout);
    }
    void *state = client ? (void *)&server_addr : NULL;
#if defined(USE_USTACK)
    int r = ustack_run(turn, state);
    if (r < 0)
        die("ustack_run");
    ustack_fini();
#elif defined(USE_FF)
    ff_run(ff_turn, state);
#else
    while (!turn(state))
        ;
#endif
    if (!client) {
        printf("served units=%llu errors=%llu\n",
               (unsigned long long)(echoed_bytes / MSG + answered), (unsigned long long)errors);
        fflush(stdout);
    }
    return client && !done ? 1 : 0;
}
