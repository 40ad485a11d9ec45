/*
 * echo_native: TCP and UDP echo on port 7 over ustack's native API
 * (ustack.h), with epoll.
 *
 *     echo_native --conf config.ini [--stats FILE] [--answer-port N]
 *
 * TCP: every connection gets back what it sends; a connection whose peer
 * has finished sending is closed once everything is echoed.  UDP: each
 * datagram goes back to its sender, from the address it was sent to
 * (IP_PKTINFO).  With --answer-port N, a packet dispatcher answers UDP
 * datagrams to port N itself, in the received buffer, before the stack
 * sees them (addresses and ports swapped).  SIGINT/SIGTERM stop it; it
 * then prints its counters.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "ustack.h"

#define MAX_FDS 65536
#define BUF_SIZE 65536
#define MAX_EVENTS 256

struct conn {
    char buf[BUF_SIZE];
    size_t len, off; /* pending echo: buf[off..len) */
    int peer_done;
};

static struct conn *conns[MAX_FDS];
static int epfd, tcp_listener, udp_sock;
static uint16_t answer_port;

static void on_signal(int sig)
{
    (void)sig;
    ustack_stop();
}

static void die(const char *what)
{
    fprintf(stderr, "echo_native: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void watch(int fd, uint32_t events, int op)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.events = events;
    ev.data.fd = fd;
    if (ustack_epoll_ctl(epfd, op, fd, &ev) != 0)
        die("epoll_ctl");
}

static void drop(int fd)
{
    ustack_close(fd);
    free(conns[fd]);
    conns[fd] = NULL;
}

/* Echoes what is pending; returns 0 when all of it went out. */
static int flush(int fd, struct conn *c)
{
    while (c->off < c->len) {
        ssize_t n = ustack_write(fd, c->buf + c->off, c->len - c->off);
        if (n < 0)
            return errno == EAGAIN ? 1 : -1;
        c->off += (size_t)n;
    }
    c->off = c->len = 0;
    return 0;
}

static void serve(int fd, uint32_t events)
{
    struct conn *c = conns[fd];
    if (c == NULL)
        return;
    int r = flush(fd, c);
    if (r < 0) {
        drop(fd);
        return;
    }
    while (r == 0 && !c->peer_done && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
        ssize_t n = ustack_read(fd, c->buf, sizeof(c->buf));
        if (n < 0 && errno == EAGAIN)
            break;
        if (n < 0) {
            drop(fd);
            return;
        }
        if (n == 0) {
            c->peer_done = 1;
            break;
        }
        c->len = (size_t)n;
        c->off = 0;
        r = flush(fd, c);
        if (r < 0) {
            drop(fd);
            return;
        }
    }
    if (r == 0 && c->peer_done) {
        drop(fd);
        return;
    }
    /* Pending data: wait for room, not for more to read. */
    watch(fd, r ? EPOLLOUT : EPOLLIN | EPOLLRDHUP, EPOLL_CTL_MOD);
}

static void accept_all(void)
{
    for (;;) {
        struct sockaddr_in peer;
        socklen_t len = sizeof(peer);
        int fd = ustack_accept4(tcp_listener, (struct sockaddr *)&peer, &len, SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno != EAGAIN)
                fprintf(stderr, "echo_native: accept: %s\n", strerror(errno));
            return;
        }
        if (fd >= MAX_FDS || (conns[fd] = calloc(1, sizeof(struct conn))) == NULL) {
            ustack_close(fd);
            continue;
        }
        watch(fd, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_ADD);
    }
}

static void udp_echo(void)
{
    static char buf[65536];
    for (;;) {
        struct sockaddr_in from;
        char control[256];
        struct iovec iov = { buf, sizeof(buf) };
        struct msghdr msg;
        memset(&msg, 0, sizeof(msg));
        msg.msg_name = &from;
        msg.msg_namelen = sizeof(from);
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof(control);
        ssize_t n = ustack_recvmsg(udp_sock, &msg, 0);
        if (n < 0)
            return;
        /* The reply leaves from the address the datagram was sent to:
         * the IP_PKTINFO cmsg goes back as it came. */
        iov.iov_len = (size_t)n;
        msg.msg_flags = 0;
        if (ustack_sendmsg(udp_sock, &msg, 0) < 0)
            fprintf(stderr, "echo_native: udp send: %s\n", strerror(errno));
    }
}

static int loop(void *arg)
{
    struct epoll_event events[MAX_EVENTS];
    (void)arg;
    int n = ustack_epoll_wait(epfd, events, MAX_EVENTS, 0);
    for (int i = 0; i < n; i++) {
        int fd = events[i].data.fd;
        if (fd == tcp_listener)
            accept_all();
        else if (fd == udp_sock)
            udp_echo();
        else
            serve(fd, events[i].events);
    }
    return 0;
}

/* The dispatcher: a UDP datagram to answer_port goes straight back. */
static int answer(void *frame, uint16_t *len, uint16_t room, uint16_t port, void *arg)
{
    uint8_t *f = frame;
    uint8_t tmp[6];
    (void)room;
    (void)port;
    (void)arg;
    if (*len < 42 || f[12] != 0x08 || f[13] != 0x00 || (f[14] & 0x0f) != 5 || f[23] != 17)
        return USTACK_DISPATCH_PASS;
    uint8_t *udp = f + 34;
    if (((udp[2] << 8) | udp[3]) != answer_port)
        return USTACK_DISPATCH_PASS;
    memcpy(tmp, f, 6);              /* Ethernet addresses */
    memcpy(f, f + 6, 6);
    memcpy(f + 6, tmp, 6);
    memcpy(tmp, f + 26, 4);         /* IP addresses: header sum unchanged */
    memcpy(f + 26, f + 30, 4);
    memcpy(f + 30, tmp, 4);
    memcpy(tmp, udp, 2);            /* ports */
    memcpy(udp, udp + 2, 2);
    memcpy(udp + 2, tmp, 2);
    udp[6] = udp[7] = 0;            /* no UDP checksum (the sender's may be partial) */
    return USTACK_DISPATCH_ANSWER;
}

int main(int argc, char *argv[])
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--answer-port") == 0)
            answer_port = (uint16_t)atoi(argv[i + 1]);
    if (ustack_init(argc, argv) != 0)
        return 1;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    if (answer_port && ustack_regist_packet_dispatcher(answer, NULL) != 0)
        die("dispatcher");

    struct sockaddr_in addr;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons(7);
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    int on = 1;

    tcp_listener = ustack_socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (tcp_listener < 0)
        die("socket");
    if (ustack_setsockopt(tcp_listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0)
        die("SO_REUSEADDR");
    if (ustack_bind(tcp_listener, (struct sockaddr *)&addr, sizeof(addr)) != 0)
        die("bind tcp");
    if (ustack_listen(tcp_listener, 128) != 0)
        die("listen");

    udp_sock = ustack_socket(AF_INET, SOCK_DGRAM, 0);
    if (udp_sock < 0)
        die("socket udp");
    if (ustack_ioctl(udp_sock, FIONBIO, &on) != 0)
        die("FIONBIO");
    if (ustack_setsockopt(udp_sock, IPPROTO_IP, IP_PKTINFO, &on, sizeof(on)) != 0)
        die("IP_PKTINFO");
    if (ustack_bind(udp_sock, (struct sockaddr *)&addr, sizeof(addr)) != 0)
        die("bind udp");

    epfd = ustack_epoll_create1(0);
    if (epfd < 0)
        die("epoll_create1");
    watch(tcp_listener, EPOLLIN, EPOLL_CTL_ADD);
    watch(udp_sock, EPOLLIN, EPOLL_CTL_ADD);
    fprintf(stderr, "echo_native: serving TCP and UDP echo on port 7\n");

    int r = ustack_run(loop, NULL);
    if (r != 0)
        fprintf(stderr, "echo_native: ustack_run: %d\n", r);
    uint64_t answered = 0;
    ustack_stat("hook_answered", &answered);
    fprintf(stderr, "echo_native: dispatcher answered %llu datagrams\n", (unsigned long long)answered);
    return ustack_fini() == 0 && r == 0 ? 0 : 1;
}
