/*
 * ff_epoll.h: F-Stack's epoll calls over ustack.  The events and flags are
 * Linux's (<sys/epoll.h>), with Linux's exact semantics.  Inside ff_run's
 * loop ff_epoll_wait never blocks (its timeout is ignored, as in F-Stack);
 * ff_epoll_create takes any size.
 */
#ifndef USTACK_FF_EPOLL_H
#define USTACK_FF_EPOLL_H

#include <sys/epoll.h>

#ifdef __cplusplus
extern "C" {
#endif

int ff_epoll_create(int size);
int ff_epoll_ctl(int epfd, int op, int fd, struct epoll_event *event);
int ff_epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout);

#ifdef __cplusplus
}
#endif

#endif /* USTACK_FF_EPOLL_H */
