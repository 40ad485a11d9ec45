/*
 * http_fstack: an HTTP server on port 80 written against F-Stack's
 * documented API only (ff_api.h, ff_epoll.h), as F-Stack's epoll
 * helloworld is; it builds with `pkg-config --cflags --libs ustack-fstack`.
 *
 *     http_fstack --conf config.ini [--proc-type primary] [--proc-id 0]
 *
 * Each read of a request is answered with the same page (the helloworld's
 * way: one read, one response); the connection stays open.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "ff_config.h"
#include "ff_api.h"
#include "ff_epoll.h"

#define MAX_EVENTS 512

static struct epoll_event ev;
static struct epoll_event events[MAX_EVENTS];
static int epfd;
static int sockfd;

static const char html[] =
    "HTTP/1.1 200 OK\r\n"
    "Server: F-Stack-compatible\r\n"
    "Content-Type: text/html\r\n"
    "Content-Length: 66\r\n"
    "Connection: keep-alive\r\n"
    "\r\n"
    "<!DOCTYPE html>\n<html><body><h1>Hello, ff_* API</h1></body></html>";

static void close_fd(int fd)
{
    ff_epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
    ff_close(fd);
}

static int loop(void *arg)
{
    int nevents = ff_epoll_wait(epfd, events, MAX_EVENTS, 0);
    int i;
    (void)arg;
    for (i = 0; i < nevents; ++i) {
        int fd = events[i].data.fd;
        if (fd == sockfd) {
            for (;;) {
                int nclientfd = ff_accept(sockfd, NULL, NULL);
                if (nclientfd < 0)
                    break;
                ev.data.fd = nclientfd;
                ev.events = EPOLLIN;
                if (ff_epoll_ctl(epfd, EPOLL_CTL_ADD, nclientfd, &ev) != 0) {
                    printf("ff_epoll_ctl failed: %d, %s\n", errno, strerror(errno));
                    break;
                }
            }
        } else if (events[i].events & EPOLLERR) {
            close_fd(fd);
        } else if (events[i].events & EPOLLIN) {
            char buf[4096];
            ssize_t readlen = ff_read(fd, buf, sizeof(buf));
            if (readlen > 0) {
                if (ff_write(fd, html, sizeof(html) - 1) < 0)
                    close_fd(fd);
            } else if (readlen == 0 || errno != EAGAIN) {
                close_fd(fd);
            }
        }
    }
    return 0;
}

int main(int argc, char *argv[])
{
    struct sockaddr_in my_addr;
    int on = 1;

    ff_init(argc, argv);

    sockfd = ff_socket(AF_INET, SOCK_STREAM, 0);
    if (sockfd < 0) {
        printf("ff_socket failed\n");
        exit(1);
    }
    ff_ioctl(sockfd, FIONBIO, &on);

    bzero(&my_addr, sizeof(my_addr));
    my_addr.sin_family = AF_INET;
    my_addr.sin_port = htons(80);
    my_addr.sin_addr.s_addr = htonl(INADDR_ANY);
    if (ff_bind(sockfd, (struct linux_sockaddr *)&my_addr, sizeof(my_addr)) < 0) {
        printf("ff_bind failed\n");
        exit(1);
    }
    if (ff_listen(sockfd, MAX_EVENTS) < 0) {
        printf("ff_listen failed\n");
        exit(1);
    }

    epfd = ff_epoll_create(0);
    assert(epfd > 0);
    ev.data.fd = sockfd;
    ev.events = EPOLLIN;
    ff_epoll_ctl(epfd, EPOLL_CTL_ADD, sockfd, &ev);
    fprintf(stderr, "http_fstack: serving HTTP on port 80\n");
    ff_run(loop, NULL);
    return 0;
}
