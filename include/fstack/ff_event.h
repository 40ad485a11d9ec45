/*
 * ff_event.h: kqueue's types and constants as F-Stack's API has them
 * (FreeBSD's values), for ustack's F-Stack compatibility layer.
 * ustack implements EVFILT_READ and EVFILT_WRITE on sockets.
 */
#ifndef USTACK_FF_EVENT_H
#define USTACK_FF_EVENT_H

#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EVFILT_READ     (-1)
#define EVFILT_WRITE    (-2)
#define EVFILT_AIO      (-3)
#define EVFILT_VNODE    (-4)
#define EVFILT_PROC     (-5)
#define EVFILT_SIGNAL   (-6)
#define EVFILT_TIMER    (-7)
#define EVFILT_FS       (-9)
#define EVFILT_LIO      (-10)
#define EVFILT_USER     (-11)
#define EVFILT_SYSCOUNT 11

/* The same layout as struct ustack_kevent of ustack.h. */
struct kevent {
    uintptr_t ident;     /* the fd */
    short filter;        /* EVFILT_* */
    unsigned short flags; /* EV_* */
    unsigned int fflags;
    intptr_t data;       /* bytes readable / send space / connections */
    void *udata;         /* the application's, handed back */
};

#define EV_SET(kevp_, a, b, c, d, e, f) do {  \
        struct kevent *ff_kev_ = (kevp_);     \
        ff_kev_->ident = (a);                 \
        ff_kev_->filter = (b);                \
        ff_kev_->flags = (c);                 \
        ff_kev_->fflags = (d);                \
        ff_kev_->data = (e);                  \
        ff_kev_->udata = (f);                 \
    } while (0)

/* actions */
#define EV_ADD      0x0001
#define EV_DELETE   0x0002
#define EV_ENABLE   0x0004
#define EV_DISABLE  0x0008
/* flags */
#define EV_ONESHOT  0x0010
#define EV_CLEAR    0x0020
#define EV_RECEIPT  0x0040
#define EV_DISPATCH 0x0080
#define EV_SYSFLAGS 0xF000
#define EV_DROP     0x1000
#define EV_FLAG1    0x2000
/* Returned by EVFILT_READ while an urgent byte waits for recv(MSG_OOB):
 * Darwin's (FreeBSD's kqueue does not report urgent data). */
#define EV_OOBAND   EV_FLAG1
/* returned */
#define EV_EOF      0x8000
#define EV_ERROR    0x4000

#define NOTE_LOWAT  0x0001

#ifdef __cplusplus
}
#endif

#endif /* USTACK_FF_EVENT_H */
