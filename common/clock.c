/*
 * The monotonic clock (clock.h).
 */
#include "clock.h"

#include <time.h>

double cm_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
