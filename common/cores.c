/* How many threads a command may use (cores.h). */
#include "cores.h"

#include <sched.h>
#include <stdlib.h>

int cm_cores(void) {
    cpu_set_t set;
    return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}

int cm_threads(int asked) {
    long n = asked;
    if (n <= 0) {
        const char *env = getenv("SYNCTOP_THREADS");
        char *end;
        if (env && *env)
            n = strtol(env, &end, 10);
        if (!env || !*env || *end != '\0' || n < 1)
            n = cm_cores();
    }
    return n < 1 ? 1 : n > CM_MAX_THREADS ? CM_MAX_THREADS : (int)n;
}
