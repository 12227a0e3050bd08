/*
 * The monotonic clock, for timeouts, rates and progress.
 */
#ifndef SYNCTOP_CLOCK_H
#define SYNCTOP_CLOCK_H

/* Seconds on CLOCK_MONOTONIC. */
double cm_now_s(void);

#endif
