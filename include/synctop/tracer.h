/*
 * The entry points of libsynctop-tracer.so, besides the two the CUDA driver and NVTX call
 * (InitializeInjection, InitializeInjectionNvtx2). `synctop attach` calls them inside a running
 * process, on one of its threads that it holds stopped (inject/inject.h); so each returns at once,
 * takes no lock the program's threads may hold, and leaves the work to a thread of the tracer's.
 */
#ifndef SYNCTOP_TRACER_H
#define SYNCTOP_TRACER_H

/* Starts tracing in a process that runs CUDA already: a thread of the tracer's ("synctop-start")
 * loads CUPTI, subscribes, enables activity for the contexts that exist (CUPTI dumps their records),
 * publishes on the process's endpoint and ends. settings: SYNCTOP_* settings as NAME=VALUE lines
 * ('\n' between them, 4095 bytes at most, NULL: none), over the process's environment. 0: started
 * (or starting), 1: tracing already, 2: a start is under way, -1: no thread could be made. Whether
 * it worked: the endpoint appears, else synctop_tracer_status says why. Also starts a tracer that
 * synctop_tracer_stop stopped. */
int synctop_tracer_start(const char *settings);

/* Stops tracing: within one flush period (SYNCTOP_FLUSH_MS) the flush thread turns collection and
 * the activity kinds off, hands CUPTI's buffers over, ships the last batch to the subscribers and
 * the trace file, unsubscribes from CUPTI, closes its socket and ends, and the memory it used is
 * freed. What stays: the library and the CUPTI it loaded (neither can be unloaded safely), and its
 * exit and fork handlers, which do nothing then. 0: stopping, 1: not tracing. Lock-free. */
int synctop_tracer_stop(void);

/* Why tracing did not start, or stopped by itself ("" when it did not): the line a tracer that
 * steps aside says. The text stays valid for the life of the process. */
const char *synctop_tracer_status(void);

#endif
