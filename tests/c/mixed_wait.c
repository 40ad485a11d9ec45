/* mixed_wait: one wait over ustack sockets and kernel fds together.
 *
 * A plain Linux program (the kernel's headers and calls only, nothing of
 * ustack) that tests/interop/cases_preload.py runs under `ustack run`, where
 * its TCP sockets are ustack's and its pipe and eventfd the kernel's, and
 * each of epoll, poll and select must wait on both at once.
 *
 *     mixed_wait [--port P] [--conns K] [--events N] [--period-ms MS]
 *                [--idle-ms MS] [--wakes N] [--phase-timeout S] [PHASE...]
 *
 * It listens on 0.0.0.0:P (TCP) and holds a pipe and an eventfd.  PHASEs
 * (default: every one, in this order):
 *
 *   epoll, poll, select   busy phases: a helper thread writes an 8-byte
 *       timestamp into the pipe and adds 1 to the eventfd every --period-ms;
 *       the main thread waits on the listener, the accepted connections, the
 *       pipe's read end and the eventfd in one epoll set / poll array /
 *       select set, echoes what each connection sends (with backpressure:
 *       a connection with unsent echo is not read) and closes it at EOF once
 *       all is echoed, and counts the pipe records and eventfd increments.
 *       The phase ends when --conns connections were accepted and closed
 *       and at least --events writes were made.  Each pipe record's delay
 *       (read time - write time) says whether the kernel side was starved
 *       while TCP traffic flowed.  The three phases take connections in
 *       three ways: accept4(SOCK_NONBLOCK) with read/write; accept and
 *       fcntl(O_NONBLOCK) with recv/send; accept and ioctl(FIONBIO) with
 *       readv/writev (and FIONREAD).
 *   idle-epoll, idle-poll, idle-select  one wait of --idle-ms on the
 *       listener, pipe and eventfd while nothing happens (the helper thread
 *       is parked): the test reads this process's CPU time from
 *       /proc/PID/stat between the "begin" and "end" lines; the program
 *       also prints its own (CLOCK_PROCESS_CPUTIME_ID).
 *   forever-epoll, forever-poll, forever-select  the same with no timeout
 *       (-1, select's null timeval): the helper thread sleeps --idle-ms
 *       and then writes the eventfd once, which ends the wait.
 *   wake-epoll, wake-poll, wake-select  --wakes times: the main thread
 *       blocks with a 5 s timeout; 20 ms later the helper thread takes the
 *       time and writes to the eventfd (even rounds) or the pipe (odd
 *       rounds); the wake latency is the time from that write to the
 *       wait's return.
 *   signal-epoll, signal-poll, signal-select  the main thread blocks with a
 *       3 s timeout on the listener, pipe and eventfd; 100 ms later a
 *       thread sends it SIGUSR1, whose handler (installed with SA_RESTART,
 *       which a wait ignores) sets a flag: the wait must end with EINTR at
 *       once, as the kernel ends it, busy-polling engine or not.
 *   sigvia-INSTALLER  as signal-epoll, the handler installed through one of
 *       the C library's other installers: signal, bsd_signal, ssignal (BSD:
 *       the handler stays, SA_RESTART, the signal blocked while it runs),
 *       sysv_signal, __sysv_signal (reset to SIG_DFL as it is delivered,
 *       not blocked while it runs), sigset (no SA_RESTART, blocked while it
 *       runs; first, sigset(SIG_HOLD) must hold a raised signal until
 *       sigrelse delivers it).
 *
 * Output, one line each, `key=value` words for the test to parse:
 *   ready port=P pid=PID
 *   phase NAME ready                       (connect now)
 *   phase NAME done conns=.. bytes=.. pipe_written=.. pipe_read=..
 *        efd_written=.. efd_read=.. during_tcp=.. tcp_ms=.. lat_p50_us=..
 *        lat_p99_us=.. lat_max_us=.. waits=..
 *   idle NAME begin timeout_ms=..
 *   idle NAME end n=.. elapsed_ms=.. cpu_us=..
 *   forever NAME begin wake_after_ms=..
 *   forever NAME end n=.. elapsed_ms=.. cpu_us=..
 *   wake NAME fd=eventfd|pipe n=.. p50_us=.. max_us=..
 *   signal NAME rc=.. errno=.. handled=.. ms=..
 *   sigvia NAME rc=.. errno=.. handled=.. ms=.. installed=.. reset=..
 *        restart=.. blocked=.. held=..   (held: -1 when not sigset)
 *   done
 * Any failure: "error ..." on stderr and exit status 1 (2 for a phase that
 * timed out).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 64
#define BUF_SIZE 65536
#define MAX_SAMPLES 100000

static int port = 7;
static int want_conns = 4;
static int min_events = 100;
static int period_ms = 10;
static int idle_ms = 2000;
static int wakes = 20;
static int phase_timeout_s = 60;

static int listen_fd, pipe_rd, pipe_wr, efd;

__attribute__((noreturn, format(printf, 1, 2))) static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("error ", stderr);
    vfprintf(stderr, fmt, ap);
    if (errno)
        fprintf(stderr, ": %s", strerror(errno));
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

/* A failure that is not a call's: no errno to print. */
#define fail(...) (errno = 0, die(__VA_ARGS__))

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

static void out(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

/* ------------------------------------------------------------------------
 * The helper thread: a steady stream of kernel events, or single wakes. */

enum { H_PARK, H_STREAM, H_WAKE, H_LATE, H_EXIT };
static pthread_mutex_t h_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t h_cond = PTHREAD_COND_INITIALIZER;
static atomic_int h_mode = H_PARK;
static atomic_int h_wake_seq = 0;   /* main: the round it is ready for */
static atomic_int h_wake_done = 0;  /* helper: the rounds it wrote */
static atomic_uint_fast64_t h_wake_stamp;
static atomic_long pipe_written, efd_written;

static void set_mode(int mode) {
    pthread_mutex_lock(&h_lock);
    atomic_store(&h_mode, mode);
    pthread_cond_broadcast(&h_cond);
    pthread_mutex_unlock(&h_lock);
}

static void write_pipe_record(uint64_t stamp) {
    ssize_t n = write(pipe_wr, &stamp, sizeof stamp);
    if (n != (ssize_t)sizeof stamp)
        die("helper: write to the pipe gave %zd", n);
}

static void write_eventfd(void) {
    uint64_t one = 1;
    if (write(efd, &one, sizeof one) != (ssize_t)sizeof one)
        die("helper: write to the eventfd");
}

static void *helper(void *arg) {
    (void)arg;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (;;) {
        int mode = atomic_load(&h_mode);
        if (mode == H_EXIT)
            return NULL;
        if (mode == H_PARK) {
            /* Parked on a condition variable: no wake-ups at all, so an
             * idle phase measures the wait alone. */
            pthread_mutex_lock(&h_lock);
            while (atomic_load(&h_mode) == H_PARK)
                pthread_cond_wait(&h_cond, &h_lock);
            pthread_mutex_unlock(&h_lock);
            clock_gettime(CLOCK_MONOTONIC, &next);
            continue;
        }
        if (mode == H_STREAM) {
            write_pipe_record(now_ns());
            atomic_fetch_add(&pipe_written, 1);
            write_eventfd();
            atomic_fetch_add(&efd_written, 1);
            /* A steady pace: absolute deadlines, no drift. */
            next.tv_nsec += (long)period_ms * 1000000L;
            while (next.tv_nsec >= 1000000000L) {
                next.tv_nsec -= 1000000000L;
                next.tv_sec++;
            }
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR) {
            }
            continue;
        }
        if (mode == H_LATE) {
            /* One write, --idle-ms from now, then parked again. */
            sleep_ms(idle_ms);
            write_eventfd();
            int late = H_LATE;
            atomic_compare_exchange_strong(&h_mode, &late, H_PARK);
            continue;
        }
        /* H_WAKE: one write per round, 20 ms after the main thread said it
         * is about to block.  The round is marked done before the write, so
         * that the main thread, woken by it, finds it done. */
        int done = atomic_load(&h_wake_done);
        if (atomic_load(&h_wake_seq) > done) {
            sleep_ms(20);
            uint64_t t = now_ns();
            atomic_store(&h_wake_stamp, t);
            atomic_store(&h_wake_done, done + 1);
            if (done % 2 == 0)
                write_eventfd();
            else
                write_pipe_record(t);
        } else {
            sleep_ms(1);
        }
    }
}

/* ------------------------------------------------------------------------
 * Connections and the kernel fds' events */

enum { IO_RW, IO_SENDRECV, IO_VEC };

struct conn {
    int fd;
    size_t pending, off; /* echo not yet sent: buf[off..off+pending] */
    int eof;
    char buf[BUF_SIZE];
};

struct phase {
    const char *name;
    int io;
    struct conn *conns[MAX_CONNS];
    int nconns, accepted, closed;
    long long bytes;
    long pipe_read, efd_read, during_tcp;
    uint64_t tcp_start, tcp_ns;
    uint32_t *lat; /* pipe record delays, us */
    long nlat;
    char pipe_partial[8];
    size_t pipe_partial_len;
    long waits;
};

static int set_nonblock_fcntl(int fd) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -1;
    return fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void accept_all(struct phase *p) {
    for (;;) {
        struct sockaddr_in peer;
        socklen_t len = sizeof peer;
        int fd;
        if (p->io == IO_RW)
            fd = accept4(listen_fd, (struct sockaddr *)&peer, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        else
            fd = accept(listen_fd, (struct sockaddr *)&peer, &len);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED || errno == EINTR)
                return;
            die("%s: accept", p->name);
        }
        if (p->io == IO_SENDRECV) {
            if (set_nonblock_fcntl(fd) < 0)
                die("%s: fcntl O_NONBLOCK", p->name);
        } else if (p->io == IO_VEC) {
            int on = 1;
            if (ioctl(fd, FIONBIO, &on) < 0)
                die("%s: ioctl FIONBIO", p->name);
        }
        if (len != sizeof peer || peer.sin_family != AF_INET)
            fail("%s: accept gave a peer address of %u bytes, family %d", p->name, (unsigned)len,
                peer.sin_family);
        int one = 1;
        if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0)
            die("%s: TCP_NODELAY", p->name);
        if (p->nconns == MAX_CONNS)
            fail("%s: more than %d connections at once", p->name, MAX_CONNS);
        struct conn *c = calloc(1, sizeof *c);
        if (!c)
            die("calloc");
        c->fd = fd;
        p->conns[p->nconns++] = c;
        if (p->accepted++ == 0)
            p->tcp_start = now_ns();
    }
}

static ssize_t conn_read(struct phase *p, struct conn *c) {
    switch (p->io) {
    case IO_SENDRECV:
        return recv(c->fd, c->buf, BUF_SIZE, 0);
    case IO_VEC: {
        int avail = -1;
        if (ioctl(c->fd, FIONREAD, &avail) < 0 || avail < 0)
            die("%s: ioctl FIONREAD", p->name);
        struct iovec iov[2] = {{c->buf, BUF_SIZE / 2}, {c->buf + BUF_SIZE / 2, BUF_SIZE / 2}};
        ssize_t n = readv(c->fd, iov, 2);
        /* Readiness came from data or from EOF: with data there, FIONREAD
         * must have seen some. */
        if (n > 0 && avail == 0)
            fail("%s: FIONREAD said 0 bytes, then readv read %zd", p->name, n);
        return n;
    }
    default:
        return read(c->fd, c->buf, BUF_SIZE);
    }
}

static ssize_t conn_write(struct phase *p, struct conn *c) {
    char *b = c->buf + c->off;
    switch (p->io) {
    case IO_SENDRECV:
        return send(c->fd, b, c->pending, MSG_NOSIGNAL);
    case IO_VEC: {
        size_t half = c->pending / 2;
        struct iovec iov[2] = {{b, half}, {b + half, c->pending - half}};
        return writev(c->fd, iov, 2);
    }
    default:
        return write(c->fd, b, c->pending);
    }
}

/* Returns 1 when the connection is finished (closed). */
static int conn_service(struct phase *p, struct conn *c, int readable, int writable) {
    if (c->pending && writable) {
        ssize_t n = conn_write(p, c);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            die("%s: write to a connection", p->name);
        if (n > 0) {
            c->off += (size_t)n;
            c->pending -= (size_t)n;
        }
    }
    if (!c->pending && !c->eof && readable) {
        ssize_t n = conn_read(p, c);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            die("%s: read from a connection", p->name);
        if (n == 0)
            c->eof = 1;
        if (n > 0) {
            p->bytes += n;
            c->off = 0;
            c->pending = (size_t)n;
            /* Try at once: most echoes go out without waiting. */
            ssize_t w = conn_write(p, c);
            if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
                die("%s: write to a connection", p->name);
            if (w > 0) {
                c->off += (size_t)w;
                c->pending -= (size_t)w;
            }
        }
    }
    if (c->eof && !c->pending) {
        if (close(c->fd) < 0)
            die("%s: close", p->name);
        return 1;
    }
    return 0;
}

static void drop_conn(struct phase *p, int i) {
    free(p->conns[i]);
    p->conns[i] = p->conns[--p->nconns];
    if (++p->closed == want_conns)
        p->tcp_ns = now_ns() - p->tcp_start;
}

static void drain_pipe(struct phase *p) {
    char buf[4096 + 8];
    for (;;) {
        memcpy(buf, p->pipe_partial, p->pipe_partial_len);
        ssize_t n = read(pipe_rd, buf + p->pipe_partial_len, 4096);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return;
            die("%s: read from the pipe", p->name);
        }
        if (n == 0)
            fail("%s: the pipe was closed", p->name);
        size_t total = p->pipe_partial_len + (size_t)n, i;
        uint64_t t = now_ns();
        for (i = 0; i + 8 <= total; i += 8) {
            uint64_t stamp;
            memcpy(&stamp, buf + i, 8);
            p->pipe_read++;
            if (p->nconns > 0)
                p->during_tcp++;
            if (p->lat && p->nlat < MAX_SAMPLES)
                p->lat[p->nlat++] = (uint32_t)((t - stamp) / 1000);
        }
        p->pipe_partial_len = total - i;
        memcpy(p->pipe_partial, buf + i, p->pipe_partial_len);
    }
}

static void drain_eventfd(struct phase *p) {
    uint64_t v;
    ssize_t n = read(efd, &v, sizeof v);
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR)
            return;
        die("%s: read from the eventfd", p->name);
    }
    if (n != (ssize_t)sizeof v)
        fail("%s: eventfd read gave %zd bytes", p->name, n);
    p->efd_read += (long)v;
}

static int phase_over(struct phase *p) {
    return p->closed >= want_conns && p->nconns == 0 && atomic_load(&pipe_written) >= min_events;
}

/* ------------------------------------------------------------------------
 * The three waits.  Each call waits once and services what it reported;
 * `timeout` in ms.  Returns the number of ready fds. */

static int epfd = -1;

static void ep_ctl(int op, int fd, uint32_t events) {
    struct epoll_event ev = {.events = events, .data.fd = fd};
    if (epoll_ctl(epfd, op, fd, &ev) < 0)
        die("epoll_ctl(%d, fd %d)", op, fd);
}

static struct conn *find_conn(struct phase *p, int fd, int *idx) {
    for (int i = 0; i < p->nconns; i++)
        if (p->conns[i]->fd == fd) {
            *idx = i;
            return p->conns[i];
        }
    return NULL;
}

static uint32_t conn_interest(struct conn *c) { return c->pending ? EPOLLOUT : EPOLLIN | EPOLLRDHUP; }

static int wait_epoll(struct phase *p, int timeout) {
    struct epoll_event evs[MAX_CONNS + 3];
    int n = epoll_wait(epfd, evs, MAX_CONNS + 3, timeout);
    if (n < 0) {
        if (errno == EINTR)
            return 0;
        die("epoll_wait");
    }
    p->waits++;
    for (int k = 0; k < n; k++) {
        int fd = evs[k].data.fd;
        uint32_t e = evs[k].events;
        if (fd == pipe_rd) {
            drain_pipe(p);
        } else if (fd == efd) {
            drain_eventfd(p);
        } else if (fd == listen_fd) {
            int before = p->nconns;
            accept_all(p);
            for (int i = before; i < p->nconns; i++)
                ep_ctl(EPOLL_CTL_ADD, p->conns[i]->fd, EPOLLIN | EPOLLRDHUP);
        } else {
            int i;
            struct conn *c = find_conn(p, fd, &i);
            if (!c)
                fail("epoll reported fd %d, which is not ours", fd);
            uint32_t was = conn_interest(c);
            int fd_ = c->fd;
            int rd = (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
            int wr = (e & (EPOLLOUT | EPOLLHUP | EPOLLERR)) != 0;
            /* Closing an fd takes it out of the epoll set (it is not dup'ed). */
            if (conn_service(p, c, rd, wr))
                drop_conn(p, i);
            else if (conn_interest(c) != was)
                ep_ctl(EPOLL_CTL_MOD, fd_, conn_interest(c));
        }
    }
    return n;
}

static int wait_poll(struct phase *p, int timeout) {
    struct pollfd pfd[MAX_CONNS + 3];
    int nfds = 0;
    pfd[nfds++] = (struct pollfd){.fd = listen_fd, .events = POLLIN};
    pfd[nfds++] = (struct pollfd){.fd = pipe_rd, .events = POLLIN};
    pfd[nfds++] = (struct pollfd){.fd = efd, .events = POLLIN};
    for (int i = 0; i < p->nconns; i++)
        pfd[nfds++] = (struct pollfd){.fd = p->conns[i]->fd,
                                      .events = (short)(p->conns[i]->pending ? POLLOUT : POLLIN | POLLRDHUP)};
    int n = poll(pfd, (nfds_t)nfds, timeout);
    if (n < 0) {
        if (errno == EINTR)
            return 0;
        die("poll");
    }
    p->waits++;
    if (n == 0)
        return 0;
    if (pfd[1].revents & (POLLIN | POLLERR | POLLHUP))
        drain_pipe(p);
    if (pfd[2].revents & (POLLIN | POLLERR))
        drain_eventfd(p);
    if (pfd[0].revents & POLLNVAL)
        fail("poll: the listener is POLLNVAL");
    /* Connections first (indexes stay valid), then the listener. */
    for (int k = nfds - 1; k >= 3; k--) {
        short r = pfd[k].revents;
        if (!r)
            continue;
        if (r & POLLNVAL)
            fail("poll: connection fd %d is POLLNVAL", pfd[k].fd);
        int i;
        struct conn *c = find_conn(p, pfd[k].fd, &i);
        if (!c)
            fail("poll: fd %d is not ours", pfd[k].fd);
        if (conn_service(p, c, (r & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) != 0,
                         (r & (POLLOUT | POLLHUP | POLLERR)) != 0))
            drop_conn(p, i);
    }
    if (pfd[0].revents & POLLIN)
        accept_all(p);
    return n;
}

static int wait_select(struct phase *p, int timeout) {
    fd_set rd, wr;
    FD_ZERO(&rd);
    FD_ZERO(&wr);
    int maxfd = listen_fd;
    FD_SET(listen_fd, &rd);
    FD_SET(pipe_rd, &rd);
    FD_SET(efd, &rd);
    if (pipe_rd > maxfd)
        maxfd = pipe_rd;
    if (efd > maxfd)
        maxfd = efd;
    for (int i = 0; i < p->nconns; i++) {
        int fd = p->conns[i]->fd;
        if (fd >= FD_SETSIZE)
            fail("select: fd %d past FD_SETSIZE", fd);
        FD_SET(fd, p->conns[i]->pending ? &wr : &rd);
        if (fd > maxfd)
            maxfd = fd;
    }
    struct timeval tv = {timeout / 1000, (timeout % 1000) * 1000};
    int n = select(maxfd + 1, &rd, &wr, NULL, timeout < 0 ? NULL : &tv);
    if (n < 0) {
        if (errno == EINTR)
            return 0;
        die("select");
    }
    p->waits++;
    if (n == 0)
        return 0;
    if (FD_ISSET(pipe_rd, &rd))
        drain_pipe(p);
    if (FD_ISSET(efd, &rd))
        drain_eventfd(p);
    for (int i = p->nconns - 1; i >= 0; i--) {
        struct conn *c = p->conns[i];
        int r = FD_ISSET(c->fd, &rd), w = FD_ISSET(c->fd, &wr);
        if ((r || w) && conn_service(p, c, r, w))
            drop_conn(p, i);
    }
    if (FD_ISSET(listen_fd, &rd))
        accept_all(p);
    return n;
}

static int kind_of(const char *name) {
    if (!strcmp(name, "epoll"))
        return 0;
    if (!strcmp(name, "poll"))
        return 1;
    if (!strcmp(name, "select"))
        return 2;
    return -1;
}

static int wait_once(int kind, struct phase *p, int timeout) {
    if (kind == 0)
        return wait_epoll(p, timeout);
    if (kind == 1)
        return wait_poll(p, timeout);
    return wait_select(p, timeout);
}

static void epoll_setup(void) {
    if (epfd >= 0)
        close(epfd);
    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0)
        die("epoll_create1");
    ep_ctl(EPOLL_CTL_ADD, listen_fd, EPOLLIN);
    ep_ctl(EPOLL_CTL_ADD, pipe_rd, EPOLLIN);
    ep_ctl(EPOLL_CTL_ADD, efd, EPOLLIN);
}

/* Nothing left over from an earlier phase. */
static void drain_all(void) {
    struct phase scratch = {.name = "drain"};
    drain_pipe(&scratch);
    drain_eventfd(&scratch);
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static uint32_t pct(uint32_t *v, long n, int q) {
    if (n == 0)
        return 0;
    long i = (n * q) / 100;
    if (i >= n)
        i = n - 1;
    return v[i];
}

/* ------------------------------------------------------------------------
 * Phases */

static void busy_phase(const char *name) {
    int kind = kind_of(name);
    struct phase p = {.name = name, .io = kind == 0 ? IO_RW : kind == 1 ? IO_SENDRECV : IO_VEC};
    p.lat = calloc(MAX_SAMPLES, sizeof *p.lat);
    if (!p.lat)
        die("calloc");
    if (kind == 0)
        epoll_setup();
    drain_all();
    atomic_store(&pipe_written, 0);
    atomic_store(&efd_written, 0);
    set_mode(H_STREAM);
    out("phase %s ready\n", name);
    uint64_t deadline = now_ns() + (uint64_t)phase_timeout_s * 1000000000u;
    while (!phase_over(&p)) {
        wait_once(kind, &p, 100);
        if (now_ns() > deadline) {
            fprintf(stderr, "error phase %s timed out: %d of %d connections accepted, %d closed, %d open\n",
                    name, p.accepted, want_conns, p.closed, p.nconns);
            exit(2);
        }
    }
    set_mode(H_PARK);
    /* The helper may be inside one last write: give it time, then take
     * what is left, with the same wait (not a plain read). */
    sleep_ms(period_ms + 20);
    uint64_t until = now_ns() + 500000000u;
    while ((p.pipe_read < atomic_load(&pipe_written) || p.efd_read < atomic_load(&efd_written)) &&
           now_ns() < until)
        wait_once(kind, &p, 50);
    qsort(p.lat, (size_t)p.nlat, sizeof *p.lat, cmp_u32);
    out("phase %s done conns=%d bytes=%lld pipe_written=%ld pipe_read=%ld efd_written=%ld efd_read=%ld "
        "during_tcp=%ld tcp_ms=%llu lat_p50_us=%u lat_p99_us=%u lat_max_us=%u waits=%ld\n",
        name, p.accepted, p.bytes, atomic_load(&pipe_written), p.pipe_read, atomic_load(&efd_written), p.efd_read,
        p.during_tcp, (unsigned long long)(p.tcp_ns / 1000000u), pct(p.lat, p.nlat, 50), pct(p.lat, p.nlat, 99),
        p.nlat ? p.lat[p.nlat - 1] : 0, p.waits);
    free(p.lat);
}

static void idle_phase(const char *name) {
    int kind = kind_of(name);
    struct phase p = {.name = name};
    if (kind == 0)
        epoll_setup();
    drain_all();
    /* Let the runner settle, so the wait is all the test measures. */
    sleep_ms(200);
    out("idle %s begin timeout_ms=%d\n", name, idle_ms);
    uint64_t c0 = cpu_ns(), t0 = now_ns();
    int n = wait_once(kind, &p, idle_ms);
    uint64_t t1 = now_ns(), c1 = cpu_ns();
    out("idle %s end n=%d elapsed_ms=%llu cpu_us=%llu\n", name, n, (unsigned long long)((t1 - t0) / 1000000u),
        (unsigned long long)((c1 - c0) / 1000u));
}

static void forever_phase(const char *name) {
    int kind = kind_of(name);
    struct phase p = {.name = name};
    if (kind == 0)
        epoll_setup();
    drain_all();
    sleep_ms(200);
    out("forever %s begin wake_after_ms=%d\n", name, idle_ms);
    uint64_t c0 = cpu_ns(), t0 = now_ns();
    set_mode(H_LATE);
    int n = wait_once(kind, &p, -1);
    uint64_t t1 = now_ns(), c1 = cpu_ns();
    out("forever %s end n=%d elapsed_ms=%llu cpu_us=%llu\n", name, n, (unsigned long long)((t1 - t0) / 1000000u),
        (unsigned long long)((c1 - c0) / 1000u));
    set_mode(H_PARK);
}

static void wake_phase(const char *name) {
    int kind = kind_of(name);
    struct phase p = {.name = name};
    uint32_t lat[2][1000];
    int nl[2] = {0, 0};
    if (kind == 0)
        epoll_setup();
    drain_all();
    atomic_store(&h_wake_seq, 0);
    atomic_store(&h_wake_done, 0);
    set_mode(H_WAKE);
    for (int r = 0; r < wakes && r < 2000; r++) {
        atomic_store(&h_wake_seq, r + 1);
        int n = wait_once(kind, &p, 5000);
        uint64_t t = now_ns();
        if (n <= 0 || atomic_load(&h_wake_done) != r + 1)
            fail("%s: round %d: the wait returned %d, %d writes made", name, r, n, atomic_load(&h_wake_done));
        lat[r % 2][nl[r % 2]++] = (uint32_t)((t - atomic_load(&h_wake_stamp)) / 1000);
    }
    set_mode(H_PARK);
    const char *fdname[2] = {"eventfd", "pipe"};
    for (int k = 0; k < 2; k++) {
        qsort(lat[k], (size_t)nl[k], sizeof lat[k][0], cmp_u32);
        out("wake %s fd=%s n=%d p50_us=%u max_us=%u\n", name, fdname[k], nl[k], pct(lat[k], nl[k], 50),
            nl[k] ? lat[k][nl[k] - 1] : 0);
    }
}

static volatile sig_atomic_t got_signal;

static void on_usr1(int sig) {
    (void)sig;
    got_signal = 1;
}

static pthread_t main_thread;

static void *send_usr1(void *arg) {
    (void)arg;
    sleep_ms(100);
    pthread_kill(main_thread, SIGUSR1);
    return NULL;
}

static void signal_phase(const char *name) {
    int kind = kind_of(name);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGUSR1, &sa, NULL) < 0)
        die("sigaction");
    if (kind == 0)
        epoll_setup();
    drain_all();
    got_signal = 0;
    main_thread = pthread_self();
    pthread_t th;
    if (pthread_create(&th, NULL, send_usr1, NULL) != 0)
        die("pthread_create");
    uint64_t t0 = now_ns();
    int rc;
    if (kind == 0) {
        struct epoll_event ev[8];
        rc = epoll_wait(epfd, ev, 8, 3000);
    } else if (kind == 1) {
        struct pollfd pf[3] = {{listen_fd, POLLIN, 0}, {pipe_rd, POLLIN, 0}, {efd, POLLIN, 0}};
        rc = poll(pf, 3, 3000);
    } else {
        fd_set rd;
        FD_ZERO(&rd);
        FD_SET(listen_fd, &rd);
        FD_SET(pipe_rd, &rd);
        FD_SET(efd, &rd);
        int nfds = listen_fd > pipe_rd ? listen_fd : pipe_rd;
        nfds = (efd > nfds ? efd : nfds) + 1;
        struct timeval tv = {.tv_sec = 3, .tv_usec = 0};
        rc = select(nfds, &rd, NULL, NULL, &tv);
    }
    int err = rc < 0 ? errno : 0;
    uint64_t ms = (now_ns() - t0) / 1000000;
    pthread_join(th, NULL);
    out("signal %s rc=%d errno=%d handled=%d ms=%d\n", name, rc, err, (int)got_signal, (int)ms);
}

/* The other installers (glibc exports them; sigset is deprecated). */
extern sighandler_t bsd_signal(int sig, sighandler_t handler);
extern sighandler_t __sysv_signal(int sig, sighandler_t handler);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static sighandler_t install_via(const char *how, sighandler_t h) {
    if (!strcmp(how, "signal"))
        return signal(SIGUSR1, h);
    if (!strcmp(how, "bsd_signal"))
        return bsd_signal(SIGUSR1, h);
    if (!strcmp(how, "ssignal"))
        return ssignal(SIGUSR1, h);
    if (!strcmp(how, "sysv_signal"))
        return sysv_signal(SIGUSR1, h);
    if (!strcmp(how, "__sysv_signal"))
        return __sysv_signal(SIGUSR1, h);
    if (!strcmp(how, "sigset"))
        return sigset(SIGUSR1, h);
    fail("unknown installer %s", how);
}

static volatile sig_atomic_t blocked_in_handler;

static void on_usr1_note_mask(int sig) {
    sigset_t now;
    sigprocmask(SIG_BLOCK, NULL, &now);
    blocked_in_handler = sigismember(&now, sig);
    got_signal++;
}

/* sigset(SIG_HOLD) holds a raised signal; sigrelse delivers it. */
static int hold_then_release(void) {
    got_signal = 0;
    if (sigset(SIGUSR1, SIG_HOLD) != on_usr1_note_mask)
        return 0;
    raise(SIGUSR1);
    int held = got_signal == 0;
    if (sigrelse(SIGUSR1) < 0)
        die("sigrelse");
    return held && got_signal == 1;
}
#pragma GCC diagnostic pop

static int installer_ok(const char *how) {
    return !strcmp(how, "signal") || !strcmp(how, "bsd_signal") || !strcmp(how, "ssignal") ||
           !strcmp(how, "sysv_signal") || !strcmp(how, "__sysv_signal") || !strcmp(how, "sigset");
}

static void sigvia_phase(const char *how) {
    /* From a known state: the default. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    if (sigaction(SIGUSR1, &dfl, NULL) < 0)
        die("sigaction");
    sighandler_t prev = install_via(how, on_usr1_note_mask);
    int installed = prev == SIG_DFL;
    int held = -1;
    if (!strcmp(how, "sigset"))
        held = hold_then_release();
    epoll_setup();
    drain_all();
    got_signal = 0;
    blocked_in_handler = -1;
    main_thread = pthread_self();
    pthread_t th;
    if (pthread_create(&th, NULL, send_usr1, NULL) != 0)
        die("pthread_create");
    uint64_t t0 = now_ns();
    struct epoll_event ev[8];
    int rc = epoll_wait(epfd, ev, 8, 3000);
    int err = rc < 0 ? errno : 0;
    uint64_t ms = (now_ns() - t0) / 1000000;
    pthread_join(th, NULL);
    struct sigaction now;
    if (sigaction(SIGUSR1, NULL, &now) < 0)
        die("sigaction");
    int reset = now.sa_handler == SIG_DFL;
    installed = installed && (reset || now.sa_handler == on_usr1_note_mask);
    out("sigvia %s rc=%d errno=%d handled=%d ms=%d installed=%d reset=%d restart=%d blocked=%d held=%d\n", how, rc,
        err, (int)got_signal, (int)ms, installed, reset, (now.sa_flags & SA_RESTART) != 0, (int)blocked_in_handler,
        held);
    /* Back to the relay-free default before the next phase. */
    if (sigaction(SIGUSR1, &dfl, NULL) < 0)
        die("sigaction");
}

static int arg_int(int argc, char **argv, int *i) {
    if (*i + 1 >= argc)
        fail("%s needs a value", argv[*i]);
    return atoi(argv[++*i]);
}

int main(int argc, char **argv) {
    const char *phases[32];
    int nphases = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--port"))
            port = arg_int(argc, argv, &i);
        else if (!strcmp(argv[i], "--conns"))
            want_conns = arg_int(argc, argv, &i);
        else if (!strcmp(argv[i], "--events"))
            min_events = arg_int(argc, argv, &i);
        else if (!strcmp(argv[i], "--period-ms"))
            period_ms = arg_int(argc, argv, &i);
        else if (!strcmp(argv[i], "--idle-ms"))
            idle_ms = arg_int(argc, argv, &i);
        else if (!strcmp(argv[i], "--wakes"))
            wakes = arg_int(argc, argv, &i);
        else if (!strcmp(argv[i], "--phase-timeout"))
            phase_timeout_s = arg_int(argc, argv, &i);
        else if (argv[i][0] == '-')
            fail("unknown option %s", argv[i]);
        else if (nphases < 32)
            phases[nphases++] = argv[i];
    }
    if (want_conns > MAX_CONNS || want_conns < 0 || period_ms < 1 || wakes > 2000)
        fail("bad arguments");
    if (nphases == 0) {
        static const char *all[] = {"epoll", "poll", "select", "idle-epoll", "idle-poll", "idle-select",
                                    "forever-epoll", "forever-poll", "forever-select",
                                    "wake-epoll", "wake-poll", "wake-select", "signal-epoll",
                                    "signal-poll", "signal-select", "sigvia-signal", "sigvia-bsd_signal",
                                    "sigvia-ssignal", "sigvia-sysv_signal", "sigvia-__sysv_signal",
                                    "sigvia-sigset"};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            phases[nphases++] = all[i];
    }
    for (int i = 0; i < nphases; i++) {
        const char *k = phases[i];
        if (!strncmp(k, "idle-", 5))
            k += 5;
        else if (!strncmp(k, "forever-", 8))
            k += 8;
        else if (!strncmp(k, "wake-", 5))
            k += 5;
        else if (!strncmp(k, "signal-", 7))
            k += 7;
        else if (!strncmp(k, "sigvia-", 7)) {
            if (!installer_ok(k + 7))
                fail("unknown phase %s", phases[i]);
            continue;
        }
        if (kind_of(k) < 0)
            fail("unknown phase %s", phases[i]);
    }

    listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listen_fd < 0)
        die("socket");
    int one = 1;
    if (setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0)
        die("SO_REUSEADDR");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = INADDR_ANY};
    if (bind(listen_fd, (struct sockaddr *)&a, sizeof a) < 0)
        die("bind 0.0.0.0:%d", port);
    if (listen(listen_fd, 128) < 0)
        die("listen");
    socklen_t alen = sizeof a;
    if (getsockname(listen_fd, (struct sockaddr *)&a, &alen) < 0)
        die("getsockname");
    int fds[2];
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) < 0)
        die("pipe2");
    pipe_rd = fds[0];
    pipe_wr = fds[1];
    /* The writer blocks: only the reader must never. */
    int fl = fcntl(pipe_wr, F_GETFL);
    if (fl < 0 || fcntl(pipe_wr, F_SETFL, fl & ~O_NONBLOCK) < 0)
        die("fcntl on the pipe");
    efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (efd < 0)
        die("eventfd");
    pthread_t th;
    if (pthread_create(&th, NULL, helper, NULL) != 0)
        die("pthread_create");
    out("ready port=%d pid=%d\n", ntohs(a.sin_port), (int)getpid());

    for (int i = 0; i < nphases; i++) {
        const char *k = phases[i];
        if (!strncmp(k, "idle-", 5))
            idle_phase(k + 5);
        else if (!strncmp(k, "forever-", 8))
            forever_phase(k + 8);
        else if (!strncmp(k, "wake-", 5))
            wake_phase(k + 5);
        else if (!strncmp(k, "signal-", 7))
            signal_phase(k + 7);
        else if (!strncmp(k, "sigvia-", 7))
            sigvia_phase(k + 7);
        else
            busy_phase(k);
    }
    set_mode(H_EXIT);
    pthread_join(th, NULL);
    close(listen_fd);
    out("done\n");
    return 0;
}
