/*
 * echo_fstack: a TCP echo server on port 7 written against F-Stack's
 * documented API only (ff_api.h, kqueue), as F-Stack's helloworld is; it
 * builds with `pkg-config --cflags --libs ustack-fstack`.
 *
 *     echo_fstack --conf config.ini [--proc-type primary] [--proc-id 0]
 *
 * A connection whose peer has finished sending is closed once everything
 * it sent has been echoed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "ff_config.h"
#include "ff_api.h"

#define MAX_EVENTS 512
#define MAX_FDS 65536
#define BUF_SIZE 65536

struct conn {
    char buf[BUF_SIZE];
    size_t len, off;
    int eof;
};

static struct conn *conns[MAX_FDS];
static struct kevent events[MAX_EVENTS];
static int kq, sockfd;

static void set_filter(int fd, short filter, unsigned short flags)
{
    struct kevent kev;
    EV_SET(&kev, fd, filter, flags, 0, 0, NULL);
    if (ff_kevent(kq, &kev, 1, NULL, 0, NULL) < 0)
        printf("ff_kevent failed: %d, %s\n", errno, strerror(errno));
}

static void close_conn(int fd)
{
    ff_close(fd);
    free(conns[fd]);
    conns[fd] = NULL;
}

/* Writes what is pending; 1: some is left (the write filter is on). */
static int flush(int fd, struct conn *c)
{
    while (c->off < c->len) {
        ssize_t n = ff_write(fd, c->buf + c->off, c->len - c->off);
        if (n < 0) {
            if (errno == EAGAIN)
                return 1;
            return -1;
        }
        c->off += (size_t)n;
    }
    c->off = c->len = 0;
    return 0;
}

static void serve(int fd)
{
    struct conn *c = conns[fd];
    int r;
    if (c == NULL)
        return;
    r = flush(fd, c);
    while (r == 0 && !c->eof) {
        ssize_t n = ff_read(fd, c->buf, sizeof(c->buf));
        if (n < 0 && errno == EAGAIN)
            break;
        if (n <= 0) {
            c->eof = 1;
            break;
        }
        c->len = (size_t)n;
        c->off = 0;
        r = flush(fd, c);
    }
    if (r < 0 || (r == 0 && c->eof)) {
        close_conn(fd);
        return;
    }
    if (r == 1) {
        /* Wait for room: stop reading meanwhile. */
        set_filter(fd, EVFILT_READ, EV_DISABLE);
        set_filter(fd, EVFILT_WRITE, EV_ADD | EV_ENABLE);
    } else {
        set_filter(fd, EVFILT_WRITE, EV_DISABLE);
        set_filter(fd, EVFILT_READ, EV_ENABLE);
    }
}

static int loop(void *arg)
{
    int nevents = ff_kevent(kq, NULL, 0, events, MAX_EVENTS, NULL);
    int i;
    (void)arg;
    if (nevents < 0) {
        printf("ff_kevent failed: %d, %s\n", errno, strerror(errno));
        return -1;
    }
    for (i = 0; i < nevents; ++i) {
        int fd = (int)events[i].ident;
        if (fd == sockfd) {
            int available = (int)events[i].data;
            while (available-- > 0) {
                int nfd = ff_accept(sockfd, NULL, NULL);
                if (nfd < 0)
                    break;
                if (nfd >= MAX_FDS || (conns[nfd] = calloc(1, sizeof(struct conn))) == NULL) {
                    ff_close(nfd);
                    continue;
                }
                /* The listener is non-blocking, so is nfd (F-Stack's rule). */
                set_filter(nfd, EVFILT_READ, EV_ADD);
            }
        } else {
            serve(fd);
        }
    }
    return 0;
}

int main(int argc, char *argv[])
{
    struct sockaddr_in my_addr;
    struct kevent kev;
    int on = 1;

    ff_init(argc, argv);

    sockfd = ff_socket(AF_INET, SOCK_STREAM, 0);
    if (sockfd < 0) {
        printf("ff_socket failed\n");
        exit(1);
    }
    ff_ioctl(sockfd, FIONBIO, &on);
    ff_setsockopt(sockfd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));

    bzero(&my_addr, sizeof(my_addr));
    my_addr.sin_family = AF_INET;
    my_addr.sin_port = htons(7);
    my_addr.sin_addr.s_addr = htonl(INADDR_ANY);
    if (ff_bind(sockfd, (struct linux_sockaddr *)&my_addr, sizeof(my_addr)) < 0) {
        printf("ff_bind failed: %d, %s\n", errno, strerror(errno));
        exit(1);
    }
    if (ff_listen(sockfd, MAX_EVENTS) < 0) {
        printf("ff_listen failed: %d, %s\n", errno, strerror(errno));
        exit(1);
    }

    kq = ff_kqueue();
    if (kq < 0) {
        printf("ff_kqueue failed: %d, %s\n", errno, strerror(errno));
        exit(1);
    }
    EV_SET(&kev, sockfd, EVFILT_READ, EV_ADD, 0, MAX_EVENTS, NULL);
    ff_kevent(kq, &kev, 1, NULL, 0, NULL);
    fprintf(stderr, "echo_fstack: serving TCP echo on port 7\n");

    ff_run(loop, NULL);
    return 0;
}
