/*
 * fstack_multiproc: one process of F-Stack's multi-process mode, written
 * against F-Stack's API only (ff_api.h, ff_epoll.h).  Several copies run
 * from one configuration (lcore_mask of several cores), each with its own
 * --proc-id:
 *
 *     fstack_multiproc --conf config.ini --proc-type primary|secondary --proc-id N \
 *         [--connect A.B.C.D:PORT --count K]
 *
 * It serves TCP port 80: each connection is answered "proc N\n" and
 * closed.  With --connect it also opens K connections to an echo server,
 * sends a line on each and checks the echo; it prints
 * "outgoing: K of K echoed" once all have ended (or failed).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "ff_config.h"
#include "ff_api.h"
#include "ff_epoll.h"

#define MAX_EVENTS 256
#define MAX_OUT 1024

static int epfd, listener, proc_id;

struct outgoing {
    int fd;
    char line[64];
    size_t len, got;
    char echo[64];
    int done;
};

static struct outgoing out[MAX_OUT];
static int out_count, out_ok, out_done, reported;
static struct sockaddr_in target;

static void ctl(int op, int fd, unsigned events)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.events = events;
    ev.data.fd = fd;
    if (ff_epoll_ctl(epfd, op, fd, &ev) != 0 && op != EPOLL_CTL_DEL)
        fprintf(stderr, "ff_epoll_ctl(%d, %d) failed: %s\n", op, fd, strerror(errno));
}

static struct outgoing *find_out(int fd)
{
    for (int i = 0; i < out_count; i++)
        if (out[i].fd == fd && !out[i].done)
            return &out[i];
    return NULL;
}

static void finish(struct outgoing *o, int ok)
{
    ctl(EPOLL_CTL_DEL, o->fd, 0);
    ff_close(o->fd);
    o->done = 1;
    out_done++;
    out_ok += ok;
}

static void start_outgoing(int i)
{
    struct outgoing *o = &out[i];
    int on = 1;
    o->fd = ff_socket(AF_INET, SOCK_STREAM, 0);
    if (o->fd < 0) {
        fprintf(stderr, "ff_socket: %s\n", strerror(errno));
        o->done = 1;
        out_done++;
        return;
    }
    ff_ioctl(o->fd, FIONBIO, &on);
    o->len = (size_t)snprintf(o->line, sizeof(o->line), "proc %d conn %d\n", proc_id, i);
    if (ff_connect(o->fd, (struct linux_sockaddr *)&target, sizeof(target)) < 0 && errno != EINPROGRESS) {
        fprintf(stderr, "ff_connect: %s\n", strerror(errno));
        ff_close(o->fd);
        o->done = 1;
        out_done++;
        return;
    }
    ctl(EPOLL_CTL_ADD, o->fd, EPOLLOUT | EPOLLIN);
}

static void outgoing_event(struct outgoing *o, unsigned events)
{
    if (events & (EPOLLERR | EPOLLHUP)) {
        int err = 0;
        socklen_t len = sizeof(err);
        ff_getsockopt(o->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        fprintf(stderr, "outgoing %d: %s\n", (int)(o - out), strerror(err));
        finish(o, 0);
        return;
    }
    if ((events & EPOLLOUT) && o->len > 0) {
        ssize_t n = ff_write(o->fd, o->line, o->len);
        if (n == (ssize_t)o->len) {
            o->len = 0;
            ctl(EPOLL_CTL_MOD, o->fd, EPOLLIN);
        } else if (n >= 0 || errno != EAGAIN) {
            finish(o, 0);
            return;
        }
    }
    if (events & EPOLLIN) {
        ssize_t n = ff_read(o->fd, o->echo + o->got, sizeof(o->echo) - 1 - o->got);
        if (n > 0) {
            o->got += (size_t)n;
            size_t want = strlen(o->line);
            if (o->got >= want)
                finish(o, o->got == want && memcmp(o->echo, o->line, want) == 0);
        } else if (n == 0 || errno != EAGAIN) {
            finish(o, 0);
        }
    }
}

static int loop(void *arg)
{
    static struct epoll_event events[MAX_EVENTS];
    (void)arg;
    int n = ff_epoll_wait(epfd, events, MAX_EVENTS, 0);
    for (int i = 0; i < n; i++) {
        int fd = events[i].data.fd;
        if (fd == listener) {
            for (;;) {
                int c = ff_accept(listener, NULL, NULL);
                if (c < 0)
                    break;
                char reply[32];
                int len = snprintf(reply, sizeof(reply), "proc %d\n", proc_id);
                if (ff_write(c, reply, (size_t)len) != len)
                    fprintf(stderr, "reply: %s\n", strerror(errno));
                ff_close(c);
            }
            continue;
        }
        struct outgoing *o = find_out(fd);
        if (o)
            outgoing_event(o, events[i].events);
    }
    if (out_count > 0 && out_done == out_count && !reported) {
        printf("outgoing: %d of %d echoed\n", out_ok, out_count);
        fflush(stdout);
        reported = 1;
    }
    return 0;
}

int main(int argc, char *argv[])
{
    struct sockaddr_in addr;
    int on = 1;
    const char *connect_to = NULL;

    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--proc-id") == 0)
            proc_id = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--connect") == 0)
            connect_to = argv[i + 1];
        else if (strcmp(argv[i], "--count") == 0)
            out_count = atoi(argv[i + 1]);
    }
    if (out_count < 0 || out_count > MAX_OUT) {
        fprintf(stderr, "--count: 0 to %d\n", MAX_OUT);
        return 2;
    }
    if (ff_init(argc, argv) < 0) {
        fprintf(stderr, "ff_init failed\n");
        return 1;
    }
    listener = ff_socket(AF_INET, SOCK_STREAM, 0);
    if (listener < 0) {
        fprintf(stderr, "ff_socket failed: %s\n", strerror(errno));
        return 1;
    }
    ff_ioctl(listener, FIONBIO, &on);
    bzero(&addr, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons(80);
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    if (ff_bind(listener, (struct linux_sockaddr *)&addr, sizeof(addr)) < 0 || ff_listen(listener, 128) < 0) {
        fprintf(stderr, "ff_bind/ff_listen failed: %s\n", strerror(errno));
        return 1;
    }
    epfd = ff_epoll_create(0);
    if (epfd < 0) {
        fprintf(stderr, "ff_epoll_create failed\n");
        return 1;
    }
    ctl(EPOLL_CTL_ADD, listener, EPOLLIN);
    if (connect_to) {
        char host[64];
        const char *colon = strrchr(connect_to, ':');
        if (!colon || (size_t)(colon - connect_to) >= sizeof(host)) {
            fprintf(stderr, "--connect A.B.C.D:PORT\n");
            return 2;
        }
        memcpy(host, connect_to, (size_t)(colon - connect_to));
        host[colon - connect_to] = 0;
        bzero(&target, sizeof(target));
        target.sin_family = AF_INET;
        target.sin_port = htons((unsigned short)atoi(colon + 1));
        if (inet_pton(AF_INET, host, &target.sin_addr) != 1) {
            fprintf(stderr, "--connect %s: not an IPv4 address\n", connect_to);
            return 2;
        }
        for (int i = 0; i < out_count; i++)
            start_outgoing(i);
    } else {
        out_count = 0;
    }
    fprintf(stderr, "fstack_multiproc %d: serving port 80\n", proc_id);
    ff_run(loop, NULL);
    return 0;
}
