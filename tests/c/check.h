/*
 * The checks of the C test programs (abi_test.c, fstack_api_test.c):
 * CHECK(cond) counts a condition that holds in `checks` and exits 1
 * naming the file and line of one that does not; FAILS(call, e) checks
 * that a call fails with errno e; sin4() makes an IPv4 address.
 * Included once per program (it defines its counter).
 */
#ifndef USTACK_TEST_CHECK_H
#define USTACK_TEST_CHECK_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks;

#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s: FAIL line %d: %s (errno %d: %s)\n",          \
                    __FILE__, __LINE__, #cond, errno, strerror(errno));       \
            exit(1);                                                          \
        }                                                                     \
        checks++;                                                             \
    } while (0)

/* A call that must fail with errno e. */
#define FAILS(call, e) CHECK((errno = 0, (call) == -1 && errno == (e)))

static struct sockaddr_in sin4(const char *ip, int port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

#endif
