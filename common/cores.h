/*
 * How many threads a command may use: SYNCTOP_THREADS when it is set, else the cores the process
 * may run on (its CPU affinity), at most CM_MAX_THREADS.
 */
#ifndef SYNCTOP_CORES_H
#define SYNCTOP_CORES_H

#define CM_MAX_THREADS 32

/* The cores the process may run on (1 when that cannot be read). */
int cm_cores(void);

/* The threads to use when asked for this many: asked when above 0, else SYNCTOP_THREADS (a whole
 * number, 1 or more), else cm_cores(); from 1 to CM_MAX_THREADS. */
int cm_threads(int asked);

#endif
