/*
 * http_native: an HTTP/1.1 server on port 80 over ustack's native API
 * (ustack.h), with kqueue.
 *
 *     http_native --conf config.ini [--stats FILE]
 *
 * Every request (any method, any path) gets the same small page; requests
 * may be pipelined; the connection stays open until the client closes it
 * or sends "Connection: close".  SIGINT/SIGTERM stop it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <sys/ioctl.h>

#include "ustack.h"

#define MAX_FDS 65536
#define REQ_MAX 8192
#define MAX_EVENTS 256

static const char body[] =
    "<!DOCTYPE html>\n<html><head><title>ustack</title></head>\n"
    "<body><h1>Hello from ustack's C API</h1></body></html>\n";

struct conn {
    char req[REQ_MAX];
    size_t len;
    char out[16384];
    size_t out_len, out_off;
    int closing;
};

static struct conn *conns[MAX_FDS];
static int kq, listener;

static void on_signal(int sig)
{
    (void)sig;
    ustack_stop();
}

static void die(const char *what)
{
    fprintf(stderr, "http_native: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void change(int fd, int filter, int flags)
{
    struct ustack_kevent kev;
    USTACK_EV_SET(&kev, (uintptr_t)fd, filter, flags, 0, 0, NULL);
    ustack_kevent(kq, &kev, 1, NULL, 0, NULL);
}

static void drop(int fd)
{
    ustack_close(fd); /* its knotes go with it */
    free(conns[fd]);
    conns[fd] = NULL;
}

/* Appends the response to one request; returns 0 if it did not fit. */
static int respond(struct conn *c, int close_after)
{
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 200 OK\r\nServer: ustack-c\r\nContent-Type: text/html\r\n"
                     "Content-Length: %zu\r\n%s\r\n",
                     sizeof(body) - 1, close_after ? "Connection: close\r\n" : "");
    size_t need = (size_t)n + sizeof(body) - 1;
    if (c->out_len + need > sizeof(c->out))
        return 0;
    memcpy(c->out + c->out_len, head, (size_t)n);
    memcpy(c->out + c->out_len + n, body, sizeof(body) - 1);
    c->out_len += need;
    return 1;
}

/* Answers every complete request in the buffer. */
static void parse(struct conn *c)
{
    for (;;) {
        char *end = NULL;
        for (size_t i = 0; i + 3 < c->len; i++)
            if (memcmp(c->req + i, "\r\n\r\n", 4) == 0) {
                end = c->req + i + 4;
                break;
            }
        if (end == NULL || c->closing)
            return;
        size_t n = (size_t)(end - c->req);
        int close_after = 0;
        for (size_t i = 0; i + 17 <= n; i++)
            if (strncasecmp(c->req + i, "connection: close", 17) == 0)
                close_after = 1;
        if (!respond(c, close_after))
            return; /* output full: parsed again once it drains */
        c->closing = close_after;
        memmove(c->req, end, c->len - n);
        c->len -= n;
    }
}

static void serve(int fd)
{
    struct conn *c = conns[fd];
    if (c == NULL)
        return;
    for (;;) {
        while (c->out_off < c->out_len) {
            ssize_t n = ustack_write(fd, c->out + c->out_off, c->out_len - c->out_off);
            if (n < 0 && errno == EAGAIN) {
                change(fd, USTACK_EVFILT_WRITE, USTACK_EV_ADD | USTACK_EV_ONESHOT);
                return;
            }
            if (n < 0) {
                drop(fd);
                return;
            }
            c->out_off += (size_t)n;
        }
        c->out_off = c->out_len = 0;
        if (c->closing) {
            drop(fd);
            return;
        }
        parse(c);
        if (c->out_len > 0)
            continue;
        if (c->len == sizeof(c->req)) { /* a request larger than we take */
            drop(fd);
            return;
        }
        ssize_t n = ustack_read(fd, c->req + c->len, sizeof(c->req) - c->len);
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            drop(fd);
            return;
        }
        c->len += (size_t)n;
        parse(c);
        if (c->out_len == 0)
            continue;
    }
}

static int loop(void *arg)
{
    struct ustack_kevent events[MAX_EVENTS];
    struct timespec zero = { 0, 0 };
    (void)arg;
    int n = ustack_kevent(kq, NULL, 0, events, MAX_EVENTS, &zero);
    for (int i = 0; i < n; i++) {
        int fd = (int)events[i].ident;
        if (fd == listener) {
            for (intptr_t k = 0; k < events[i].data; k++) {
                int c = ustack_accept4(listener, NULL, NULL, SOCK_NONBLOCK);
                if (c < 0)
                    break;
                if (c >= MAX_FDS || (conns[c] = calloc(1, sizeof(struct conn))) == NULL) {
                    ustack_close(c);
                    continue;
                }
                change(c, USTACK_EVFILT_READ, USTACK_EV_ADD);
            }
        } else {
            serve(fd);
        }
    }
    return 0;
}

int main(int argc, char *argv[])
{
    if (ustack_init(argc, argv) != 0)
        return 1;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);

    listener = ustack_socket(AF_INET, SOCK_STREAM, 0);
    if (listener < 0)
        die("socket");
    int fl = ustack_fcntl(listener, F_GETFL, 0);
    if (fl < 0 || ustack_fcntl(listener, F_SETFL, fl | O_NONBLOCK) != 0)
        die("fcntl O_NONBLOCK");
    int on = 1;
    ustack_setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons(80);
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    if (ustack_bind(listener, (struct sockaddr *)&addr, sizeof(addr)) != 0)
        die("bind");
    if (ustack_listen(listener, 512) != 0)
        die("listen");
    kq = ustack_kqueue();
    if (kq < 0)
        die("kqueue");
    change(listener, USTACK_EVFILT_READ, USTACK_EV_ADD);
    fprintf(stderr, "http_native: serving HTTP on port 80\n");

    int r = ustack_run(loop, NULL);
    return ustack_fini() == 0 && r == 0 ? 0 : 1;
}
