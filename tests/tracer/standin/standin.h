/*
 * A stand-in libcupti for tests without a GPU (libcupti.so.13 by name and SONAME). It implements
 * the CUPTI functions the tracer calls, with CUPTI 13's own headers and record structs, and plays a
 * scripted "program": activity records delivered through the registered buffer callbacks (from as
 * many threads as asked, concurrently), host calls driven through the callback API (ENTER, a
 * virtual wait, EXIT), contexts created and destroyed, dropped records, a failing subscribe, fork.
 *
 * The clock (cuptiGetTimestamp) is virtual: it moves only when the script says, so every duration
 * a test checks is exact. The two entry points below are the test-only interface: the real CUPTI
 * has no such symbols, and the tracer never looks for them.
 *
 * Script, one directive per line ('#' starts a comment; numbers are decimal; times in ns):
 *   fail subscribe                    cuptiSubscribe returns MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
 *   clock T                           set the virtual clock
 *   advance NS                        move it forward
 *   context_create ID | context_destroy ID    resource callbacks
 *   device id= name= cc_major= cc_minor= sms= mem=
 *   context id= device= nullstream=
 *   stream ctx= id= prio=
 *   kernel name= start= end= dev= ctx= stream= corr= grid=X,Y,Z block=X,Y,Z graph=
 *   memcpy copy= src= dst= bytes= start= end= dev= ctx= stream= corr= async=0|1
 *   memset bytes= value= mem= start= end= dev= ctx= stream= corr= async=0|1
 *   sync type= start= end= ctx= stream= corr= event=
 *   api domain=rt|drv cbid= start= end= tid= corr= ret=
 *   marker flags= ts= id= name= domain= tid=
 *   call domain=rt|drv cbid= wait= ret= ctx= corr= site= inner=CBID (a driver call nested inside)
 *   poll domain=rt|drv cbid= count= step= site= ctx= corr=   count-1 NOT_READY results, then one success
 *   drop N                            CUPTI loses N records
 *   flush                             every buffer is complete: the next cuptiActivityFlushAll(0)
 *                                     returns it (a forced flush returns even incomplete ones)
 *   wait_flush                        wait until the tracer has called cuptiActivityFlushAll twice
 *   repeat N ... end                  the lines between, N times
 *   threads N ... end                 the lines between, on N threads at once
 *   fork                              fork; the child makes a host call and exits
 *   fork_exit                         fork; parent and child both _exit(0) at once
 *   xN@D LINE                         LINE N times, start/end/ts + i*D and corr + i
 *   report                            print what the tracer has enabled: "standin: report kinds=K,..
 *                                     callbacks=N api_records=M" (activity kinds, API callbacks,
 *                                     RUNTIME/DRIVER records of chosen APIs)
 *   touch PATH | wait_file PATH       create a file | wait until one exists (a test's handshake)
 *   wait_kind KIND 0|1                wait until activity kind KIND is disabled | enabled
 * The wait_* directives give up after 20 s, and the script fails.
 * Every activity record is produced only if its kind (or API id) is enabled, as CUPTI would.
 *
 * Calls into CUPTI from a forked child are appended to $SYNCTOP_STANDIN_CHILD_LOG ("pid function").
 * At the end of standin_play a summary line goes to stdout.
 */
#ifndef SYNCTOP_STANDIN_H
#define SYNCTOP_STANDIN_H

/* A function of the test program through which a host call is made, so that the call has a call
 * site in the program: it must call inner(arg). */
typedef void (*standin_site_fn)(void (*inner)(void *), void *arg);

/* Reads the script (applying `fail` directives at once, before the tracer subscribes). 0 or -1. */
int standin_load(const char *path);
/* The test program's call sites: `site=N` (1-based) calls through fns[N-1]. */
void standin_set_sites(const standin_site_fn *fns, int n);
/* Plays the script on the calling thread. 0, or -1 when it could not be parsed. */
int standin_play(void);
/* Plays one directive (no blocks) on the calling thread, now: how a program that is not the
 * harness (a Python script, through ctypes) makes its host calls from its own call sites. 0, or -1
 * when the line is not a directive. */
int standin_run_line(const char *line);

#endif
