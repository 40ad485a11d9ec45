/*
 * ff_log.h: F-Stack's log over ustack (libustack; pkg-config
 * ustack-fstack), with F-Stack's log types and levels (DPDK's rte_log
 * values).
 *
 * ff_log(level, type, format, ...) writes the message, formatted as
 * printf does and nothing added, when level is at most both the global
 * level (ff_log_set_global_level, default FF_LOG_DEBUG) and the type's
 * (ff_log_set_level, default FF_LOG_INFO); it returns the bytes written,
 * 0 when the levels leave the message out, -1 on an error (errno EINVAL:
 * format NULL).  Messages go to the stream of ff_log_reset_stream (a
 * FILE * the application opened and closes), else to stderr, each one
 * flushed.
 *
 * Where ustack differs: it has no log file of its own, so
 * ff_log_open_set opens nothing (the [dpdk] keys fstack_log_level and
 * fstack_log_file_prefix are not read) and ff_log_close closes nothing
 * (an application's stream stays set).  ff_log_set_level takes the
 * static types (below FF_LOGTYPE_FIRST_EXT_ID) and returns -EINVAL for
 * another type or a level above FF_LOG_MAX, 0 otherwise.
 */
#ifndef USTACK_FF_LOG_H
#define USTACK_FF_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Log types. */
#define FF_LOGTYPE_EAL        0
#define FF_LOGTYPE_MALLOC     1
#define FF_LOGTYPE_RING       2
#define FF_LOGTYPE_MEMPOOL    3
#define FF_LOGTYPE_TIMER      4
#define FF_LOGTYPE_PMD        5
#define FF_LOGTYPE_HASH       6
#define FF_LOGTYPE_LPM        7
#ifndef RTE_LOGTYPE_KNI
#define RTE_LOGTYPE_KNI       8
#endif
#define FF_LOGTYPE_ACL        9
#define FF_LOGTYPE_POWER     10
#define FF_LOGTYPE_METER     11
#define FF_LOGTYPE_SCHED     12
#define FF_LOGTYPE_PORT      13
#define FF_LOGTYPE_TABLE     14
#define FF_LOGTYPE_PIPELINE  15
#define FF_LOGTYPE_MBUF      16
#define FF_LOGTYPE_CRYPTODEV 17
#define FF_LOGTYPE_EFD       18
#define FF_LOGTYPE_EVENTDEV  19
#define FF_LOGTYPE_GSO       20

/* The application's types. */
#define FF_LOGTYPE_USER1     24
#define FF_LOGTYPE_USER2     25
#define FF_LOGTYPE_USER3     26
#define FF_LOGTYPE_USER4     27
#define FF_LOGTYPE_USER5     28
#define FF_LOGTYPE_USER6     29
/* The library's (F-Stack's own and its FreeBSD code's). */
#define FF_LOGTYPE_USER7     30
#define FF_LOGTYPE_USER8     31

#define FF_LOGTYPE_FIRST_EXT_ID 32

#define FF_LOGTYPE_FSTACK_APP     FF_LOGTYPE_USER1
#define FF_LOGTYPE_FSTACK_LIB     FF_LOGTYPE_USER7
#define FF_LOGTYPE_FSTACK_FREEBSD FF_LOGTYPE_USER8

/* Levels: lower is more severe. */
#define FF_LOG_DISABLE  0U
#define FF_LOG_EMERG    1U
#define FF_LOG_ALERT    2U
#define FF_LOG_CRIT     3U
#define FF_LOG_ERR      4U
#define FF_LOG_WARNING  5U
#define FF_LOG_NOTICE   6U
#define FF_LOG_INFO     7U
#define FF_LOG_DEBUG    8U
#define FF_LOG_MAX      FF_LOG_DEBUG

int ff_log_open_set(void);
void ff_log_close(void);
/* f: a FILE *, or NULL for stderr again. */
int ff_log_reset_stream(void *f);
/* The older name of ff_log_reset_stream. */
int ff_openlog_stream(FILE *f);
void ff_log_set_global_level(uint32_t level);
int ff_log_set_level(uint32_t logtype, uint32_t level);
/* No format attribute, as in F-Stack: a program that builds with
 * F-Stack's header builds with this one. */
int ff_log(uint32_t level, uint32_t logtype, const char *format, ...);
int ff_vlog(uint32_t level, uint32_t logtype, const char *format, va_list ap);

#ifdef __cplusplus
}
#endif

#endif /* USTACK_FF_LOG_H */
