/*
 * The monotonic clock, for timeouts, rates and progress; the wall clock, for when something was
 * measured.
 */
#ifndef SYNCTOP_CLOCK_H
#define SYNCTOP_CLOCK_H

/* Seconds on CLOCK_MONOTONIC. */
double cm_now_s(void);
/* Nanoseconds on CLOCK_REALTIME. */
unsigned long long cm_realtime_ns(void);

#endif
