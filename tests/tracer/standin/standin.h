/*
 * A stand-in libcupti for tests without a GPU (libcupti.so.13 by name and SONAME). It implements
 * the CUPTI functions the tracer calls, with CUPTI 13's own headers and record structs, and plays a
 * scripted "program": activity records delivered through the registered buffer callbacks (from as
 * many threads as asked, concurrently), host calls driven through the callback API (ENTER, a
 * virtual wait, EXIT), contexts created and destroyed, dropped records, a failing subscribe, fork.
 *
 * The clock (cuptiGetTimestamp) is virtual: it moves only when the script says, so every duration
 * a test checks is exact. The entry points below are the test-only interface: the real CUPTI has
 * no such symbols, and the tracer never looks for them.
 *
 * What it does as the real CUPTI 13 does, because a tracer must expect it:
 * - thread ids in records are pthread_self()'s (truncated) unless cuptiSetThreadIdType(SYSTEM) was
 *   called, then gettid()'s, which the callbacks' threads are;
 * - a record of work still running (`running=1`) has times 0 and keeps its buffer incomplete: only
 *   a forced flush hands it out, as it is;
 * - every cudaStreamQuery/cudaEventQuery (and cuStreamQuery/cuEventQuery) makes a SYNCHRONIZATION
 *   record with what it returned, unless cuptiActivityEnableAllSyncRecords(0), then only those that
 *   returned success;
 * - the correlationData slot is not cleared before API_ENTER;
 * - context creation passes a CUcontext that cuptiGetContextId/cuptiGetDeviceId answer for;
 * - markers exist only once NVTX handed itself over (InitializeInjectionNvtx2, exported like the
 *   real library's);
 * - buffer callbacks are CUPTI-wide: the last registered gets every buffer completed from then on,
 *   whoever asked for it; `profiler_start`/`profiler_stop` play torch.profiler (Kineto): its own
 *   callbacks and kinds, then its kinds off, a forced flush into its callbacks, and
 *   CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER cleared;
 * - its own teardown runs as an exit handler registered at the first subscription (so after the
 *   exit handlers its clients register later); a stateful call after it is said on stderr, and
 *   $SYNCTOP_STANDIN_TEARDOWN_MS makes it last a while;
 * - every host call made through the callback API has its RUNTIME/DRIVER activity record too when
 *   that kind (or that API) is enabled, whoever enabled it: the twin of what the callbacks saw,
 *   with the same correlation id;
 * - cuptiActivityGetNextRecord steps over a record by the size the library knows for its kind
 *   (EXTERNAL_CORRELATION and OVERHEAD as CUPTI 13 lays them out, and a kind newer than the
 *   headers, NEWER_KIND in standin.c), and refuses a kind it does not know (0), as the real one
 *   does; $SYNCTOP_STANDIN_KERNEL_SIZE lays kernel records out in that many bytes, as a CUPTI
 *   with another version of the record would (CUPTI 11's Kernel8: 200);
 * - $SYNCTOP_STANDIN_CUPTI=12 plays CUPTI 12.6: cuptiGetVersion says 24 (the numbering before
 *   13), and the records its headers name newest are written field by field with the structs of
 *   cupti_activity_deprecated.h where they differ from CUPTI 13's: Kernel9, Memcpy5,
 *   Synchronization (no returnValue, so a query that found work pending makes none);
 *   $SYNCTOP_STANDIN_CUPTI=13.N (N from 1 to 5) plays CUPTI 13.N: version 130N00, and the later
 *   versions of the records that release writes (cupti_newer.h: Kernel11 from 13.1, Kernel12
 *   from 13.3, Kernel13 from 13.4, Context4 from 13.1, Device6 from 13.2, Memcpy7 and Memset5
 *   from 13.4), their fields after 13.0's filled in; from 13.2, cuptiGetVersion aborts where no
 *   libcuda.so.1 can be loaded, as the real one dies there (its stack overflows);
 *   $SYNCTOP_STANDIN_VERSION=N says N instead;
 * - built as libcupti.so.12 with STANDIN_CUPTI_12_4 (cupti12_4/ in the build), it plays CUPTI
 *   12.4: version 22, CUPTI 12's records with Context2 for CONTEXT, and no
 *   cuptiActivityEnableRuntimeApi/DriverApi (12.5) nor cuptiActivityEnableAllSyncRecords (12.8);
 * - $SYNCTOP_STANDIN_ENABLE_MS=N makes every cuptiActivityEnable take N ms, as the real one's
 *   first ones can (it loads its own modules then);
 * - with `worker on`, device records (kernels, copies, memsets) are collected by a worker thread
 *   of the stand-in's own, at `collect` or at its teardown at exit, and handed over from that
 *   thread: after the host calls that waited for them, on no thread of the program's.
 *
 * Script, one directive per line ('#' starts a comment; numbers are decimal; times in ns):
 *   fail subscribe                    cuptiSubscribe returns MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
 *   clock T                           set the virtual clock
 *   advance NS                        move it forward
 *   context_create ID [device=D] | context_destroy ID    resource callbacks
 *   device id= name= cc_major= cc_minor= sms= mem=
 *   context id= device= nullstream=
 *   green_context id= device= parent=  a GREEN_CONTEXT record (played as CUPTI 13.2 on)
 *   stream ctx= id= prio=
 *   kernel name= start= end= dev= ctx= stream= corr= grid=X,Y,Z block=X,Y,Z graph= running=0|1
 *   memcpy copy= src= dst= bytes= start= end= dev= ctx= stream= corr= async=0|1
 *   memset bytes= value= mem= start= end= dev= ctx= stream= corr= async=0|1
 *   sync type= start= end= ctx= stream= corr= event=
 *   api domain=rt|drv cbid= start= end= corr= ret=       (on the thread that plays it)
 *   marker flags= ts= id= name= domain=                     (on the thread that plays it)
 *   call domain=rt|drv cbid= wait= ret= ctx= corr= site= stream= inner=CBID (a driver call nested
 *        inside) hold_kind=K (between ENTER and EXIT, wait until activity kind K is enabled)
 *   poll domain=rt|drv cbid= count= step= site= ctx= corr= stream=   count-1 NOT_READY results,
 *        then one success
 *   unwind off | unwind on            callbacks run through a frame without unwind information
 *                                     (as code backtrace() cannot step through), or not
 *   profiler_start [subscribe] | profiler_stop    another CUPTI client, as above (subscribe: it
 *                                     calls cuptiSubscribe first, and goes on when refused)
 *   other_enable K | other_disable K  another client enables (disables) activity kind K
 *   other kind=K corr= id= start= end=   a record of kind K (EXTERNAL_CORRELATION 39, OVERHEAD 17,
 *                                     or a newer CUPTI's kind), if K is enabled
 *   junk                              a record of a kind no CUPTI knows: the walk stops there
 *   worker on | collect               device records go to CUPTI's worker thread | it collects
 *                                     them and hands its buffer over (the line waits for that)
 *   drop N                            CUPTI loses N records
 *   flush                             every buffer is complete: the next cuptiActivityFlushAll(0)
 *                                     returns it (a forced flush returns even incomplete ones)
 *   wait_flush [N]                    wait until cuptiActivityFlushAll was called N (2) times more
 *   repeat N ... end                  the lines between, N times
 *   threads N ... end                 the lines between, on N threads at once
 *   fork                              fork; the child makes a host call and exits
 *   fork_exit                         fork; parent and child both _exit(0) at once
 *   xN@D LINE                         LINE N times, start/end/ts + i*D and corr + i
 *   report                            print what the tracer has enabled: "standin: report kinds=K,..
 *                                     callbacks=N api_records=M forced=F all_sync=A" (activity
 *                                     kinds, API callbacks, RUNTIME/DRIVER records of chosen APIs,
 *                                     forced flushes so far, records of pending queries on)
 *   touch PATH | wait_file PATH       create a file | wait until one exists (a test's handshake)
 *   wait_kind KIND 0|1                wait until activity kind KIND is disabled | enabled
 * The wait_* directives give up after 20 s, and the script fails.
 * Every activity record is produced only if its kind (or API id) is enabled, as CUPTI would.
 *
 * Calls into CUPTI from a forked child are appended to $SYNCTOP_STANDIN_CHILD_LOG ("pid function").
 * At the end of standin_play a summary line goes to stdout; a teardown that handed buffers over
 * from the worker says how many ("standin: teardown handed over N buffers").
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

/* The devices the script described (`device` lines), for the stand-in driver (driver.c): their
 * number, and the record of ordinal i (NULL when there is none). */
#include <cupti.h>
int standin_device_count(void);
const CUpti_ActivityDevice5 *standin_device(int i);

#endif
