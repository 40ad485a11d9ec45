/*
 * helloworld: an HTTP server in the shape of F-Stack's example programs
 * (example/main.c of F-Stack 1.24/1.25: a kqueue per thread, the log of
 * ff_log.h redirected to a file of the application's), written for ustack
 * (F-Stack's own is not copied here) with the same headers and calls, so
 * that a program of that shape builds against include/fstack unchanged.
 *
 *     helloworld --conf config.ini [--log FILE]
 *
 * Answers every request on port 80 with a fixed page; the log (default
 * ./helloworld.log) gets a line per thread start and per accept error.
 * Built with -DINET6, it also listens on [::]:80, as F-Stack's example
 * does: an IPv4 and an IPv6 listener on one port.
 */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <errno.h>
#include <assert.h>
#include <sys/ioctl.h>

#include "ff_config.h"
#include "ff_api.h"
#include "ff_log.h"

#define MAX_EVENTS 512

/* One kqueue and listener per thread, as F-Stack's thread mode keeps. */
static __thread struct kevent change;
static __thread struct kevent events[MAX_EVENTS];
static __thread int kq = -1;
static __thread int listener = -1;
#ifdef INET6
static __thread int listener6 = -1;
#endif

static const char page[] =
    "HTTP/1.1 200 OK\r\n"
    "Server: ustack\r\n"
    "Content-Type: text/html\r\n"
    "Content-Length: 54\r\n"
    "Connection: keep-alive\r\n"
    "\r\n"
    "<html><body><h1>Hello from ff_*</h1></body></html>\r\n\r\n";

static void fail(const char *what)
{
    ff_log(FF_LOG_ERR, FF_LOGTYPE_FSTACK_APP, "%s failed: %d, %s\n", what, errno, strerror(errno));
    exit(1);
}

static void start_thread(void)
{
    if (kq >= 0)
        return;
    kq = ff_kqueue();
    if (kq < 0)
        fail("ff_kqueue");
    listener = ff_socket(AF_INET, SOCK_STREAM, 0);
    if (listener < 0)
        fail("ff_socket");
    int on = 1;
    ff_ioctl(listener, FIONBIO, &on);
    ff_setsockopt(listener, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on));

    struct sockaddr_in addr;
    bzero(&addr, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons(80);
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    if (ff_bind(listener, (struct linux_sockaddr *)&addr, sizeof(addr)) < 0)
        fail("ff_bind");
    if (ff_listen(listener, MAX_EVENTS) < 0)
        fail("ff_listen");

    EV_SET(&change, listener, EVFILT_READ, EV_ADD, 0, MAX_EVENTS, NULL);
    if (ff_kevent(kq, &change, 1, NULL, 0, NULL) < 0)
        fail("ff_kevent");
#ifdef INET6
    listener6 = ff_socket(AF_INET6, SOCK_STREAM, 0);
    if (listener6 < 0)
        fail("ff_socket(AF_INET6)");
    ff_ioctl(listener6, FIONBIO, &on);
    struct sockaddr_in6 addr6;
    bzero(&addr6, sizeof(addr6));
    addr6.sin6_family = AF_INET6;
    addr6.sin6_port = htons(80);
    addr6.sin6_addr = in6addr_any;
    if (ff_bind(listener6, (struct linux_sockaddr *)&addr6, sizeof(addr6)) < 0)
        fail("ff_bind(AF_INET6)");
    if (ff_listen(listener6, MAX_EVENTS) < 0)
        fail("ff_listen(AF_INET6)");
    EV_SET(&change, listener6, EVFILT_READ, EV_ADD, 0, MAX_EVENTS, NULL);
    if (ff_kevent(kq, &change, 1, NULL, 0, NULL) < 0)
        fail("ff_kevent");
    ff_log(FF_LOG_INFO, FF_LOGTYPE_FSTACK_APP, "listening on [::]:80 too\n");
#endif
    ff_log(FF_LOG_INFO, FF_LOGTYPE_FSTACK_APP, "listening on port 80, kqueue %d\n", kq);
}

static int is_listener(int fd)
{
#ifdef INET6
    if (fd == listener6)
        return 1;
#endif
    return fd == listener;
}

static int loop(void *arg)
{
    (void)arg;
    start_thread();

    int n = ff_kevent(kq, NULL, 0, events, MAX_EVENTS, NULL);
    if (n < 0) {
        ff_log(FF_LOG_ERR, FF_LOGTYPE_FSTACK_APP, "ff_kevent failed: %d, %s\n", errno, strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        struct kevent ev = events[i];
        int fd = (int)ev.ident;
        if (ev.flags & EV_EOF) {
            ff_close(fd);
        } else if (is_listener(fd)) {
            int pending = (int)ev.data;
            do {
                int c = ff_accept(fd, NULL, NULL);
                if (c < 0) {
                    ff_log(FF_LOG_ERR, FF_LOGTYPE_FSTACK_APP, "ff_accept failed: %d, %s\n", errno,
                           strerror(errno));
                    break;
                }
                EV_SET(&change, c, EVFILT_READ, EV_ADD, 0, 0, NULL);
                if (ff_kevent(kq, &change, 1, NULL, 0, NULL) < 0) {
                    ff_log(FF_LOG_ERR, FF_LOGTYPE_FSTACK_APP, "ff_kevent failed: %d, %s\n", errno,
                           strerror(errno));
                    return -1;
                }
            } while (--pending > 0);
        } else if (ev.filter == EVFILT_READ) {
            char buf[256];
            ssize_t got = ff_read(fd, buf, sizeof(buf));
            if (got > 0 && ff_write(fd, page, sizeof(page) - 1) < 0) {
                ff_log(FF_LOG_ERR, FF_LOGTYPE_FSTACK_APP, "ff_write failed: %d, %s\n", errno, strerror(errno));
                ff_close(fd);
            }
        } else {
            ff_log(FF_LOG_WARNING, FF_LOGTYPE_FSTACK_APP, "unexpected event: %8.8X\n", ev.flags);
        }
    }
    return 0;
}

int main(int argc, char *argv[])
{
    const char *log_path = "./helloworld.log";
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--log") == 0)
            log_path = argv[i + 1];

    ff_init(argc, argv);

    /* The application's log file instead of F-Stack's. */
    FILE *log_file = fopen(log_path, "a+");
    if (log_file == NULL) {
        ff_log(FF_LOG_ERR, FF_LOGTYPE_FSTACK_APP, "cannot open %s: %d, %s\n", log_path, errno, strerror(errno));
        exit(1);
    }
    ff_log_reset_stream((void *)log_file);
    ff_log_close();
    ff_log_set_global_level(FF_LOG_INFO);
    ff_log_set_level(FF_LOGTYPE_FSTACK_APP, FF_LOG_INFO);

    ff_run(loop, NULL);

    fclose(log_file);
    return 0;
}
