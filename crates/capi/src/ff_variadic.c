/*
 * F-Stack's variadic calls, which stable Rust cannot define: ff_ioctl and
 * ff_fcntl (over ustack_ioctl and ustack_fcntl, fstack.rs and sockets.rs),
 * and the log of ff_log.h (ff_log, ff_vlog, their levels and stream).
 * build.rs compiles this file against include/fstack, so the definitions
 * must match the declarations programs see, and exports its symbols from
 * libustack.so beside Rust's.
 *
 * The log: a message is written when its level is at most both the global
 * level (ff_log_set_global_level, default FF_LOG_DEBUG) and its type's
 * (ff_log_set_level, default FF_LOG_INFO), as DPDK's rte_log decides,
 * to the stream of ff_log_reset_stream, else to stderr, as formatted (no
 * prefix), then flushed.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "ff_api.h"
#include "ff_log.h"

/* ustack.h's, which ff_api.h does not include. */
int ustack_ioctl(int fd, unsigned long request, void *argp);
int ustack_fcntl(int fd, int cmd, int arg);

int ff_ioctl(int fd, unsigned long request, ...)
{
    va_list ap;
    void *argp;

    /* Every request ustack serves takes a pointer (FIONBIO, FIONREAD,
     * SIOCATMARK);
     * for the others the argument is not looked at. */
    va_start(ap, request);
    argp = va_arg(ap, void *);
    va_end(ap);
    return ustack_ioctl(fd, request, argp);
}

int ff_fcntl(int fd, int cmd, ...)
{
    va_list ap;
    long arg;

    /* Every command ustack serves takes an int or nothing (F_GETFL,
     * F_GETFD: then the value read is not looked at). */
    va_start(ap, cmd);
    arg = va_arg(ap, long);
    va_end(ap);
    return ustack_fcntl(fd, cmd, (int)arg);
}

/* The static types, FF_LOGTYPE_EAL .. FF_LOGTYPE_USER8. */
#define LOG_TYPES FF_LOGTYPE_FIRST_EXT_ID
#define DEFAULT_TYPE_LEVEL FF_LOG_INFO

static _Atomic uint32_t global_level = FF_LOG_DEBUG;
/* A type's level plus one; 0: not set, DEFAULT_TYPE_LEVEL. */
static _Atomic uint32_t type_level[LOG_TYPES];
/* NULL: stderr. */
static FILE *_Atomic log_stream;

void ff_log_set_global_level(uint32_t level)
{
    global_level = level;
}

int ff_log_set_level(uint32_t logtype, uint32_t level)
{
    if (logtype >= LOG_TYPES || level > FF_LOG_MAX)
        return -EINVAL;
    type_level[logtype] = level + 1;
    return 0;
}

int ff_log_reset_stream(void *f)
{
    log_stream = (FILE *)f;
    return 0;
}

int ff_openlog_stream(FILE *f)
{
    return ff_log_reset_stream(f);
}

int ff_log_open_set(void)
{
    /* ustack opens no log file of its own ([dpdk] fstack_log_level and
     * fstack_log_file_prefix are not read): the log goes to stderr, or
     * to the application's stream. */
    return 0;
}

void ff_log_close(void)
{
    /* Nothing of ustack's to close; an application's stream stays set. */
}

static int logged(uint32_t level, uint32_t logtype)
{
    uint32_t t = logtype < LOG_TYPES ? type_level[logtype] : 0;
    uint32_t limit = t ? t - 1 : DEFAULT_TYPE_LEVEL;
    return level <= global_level && level <= limit;
}

int ff_vlog(uint32_t level, uint32_t logtype, const char *format, va_list ap)
{
    FILE *f;
    int n;

    if (format == NULL) {
        errno = EINVAL;
        return -1;
    }
    if (!logged(level, logtype))
        return 0;
    f = log_stream;
    if (f == NULL)
        f = stderr;
    n = vfprintf(f, format, ap);
    fflush(f);
    return n;
}

int ff_log(uint32_t level, uint32_t logtype, const char *format, ...)
{
    va_list ap;
    int n;

    va_start(ap, format);
    n = ff_vlog(level, logtype, format, ap);
    va_end(ap);
    return n;
}
