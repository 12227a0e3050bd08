/*
 * Kineto (PyTorch profiler) trace import: reads the Chrome-trace JSON that torch.profiler writes
 * (.json, or .json.gz detected by its magic) and turns it into synctop records, handed out as
 * encoded batches (codec.h) so that `synctop import` can write them to a trace file and the viewer
 * can import in memory.
 *
 * One trace file is one producer (one rank). What is imported:
 *   - metadata: TP_K_PROCESS (host pid, rank and world size from distributedInfo, the file's name as
 *     command line), TP_K_DEVICE for every GPU the events use (properties from deviceProperties),
 *     TP_K_STREAM per (device, stream) and TP_K_THREAD per host thread (named by thread_name rows);
 *   - GPU work: kernel, gpu_memcpy, gpu_memset (legacy Kernel, Memcpy, Memset), and cuda_sync rows
 *     as TP_K_SYNC (stream -1 or 4294967295: device-wide, TP_NO_ID). Holistic Trace Analysis reads
 *     the two spellings differently (-1 as host rows, 4294967295 as a GPU stream), so a device with
 *     device-wide syncs gets a TP_K_STREAM record for stream TP_NO_ID whose flags hold the
 *     spellings seen, TP_F_SYNC_ID_NEG | TP_F_SYNC_ID_U32: the store keeps them as that lane's
 *     st_lane_info.stream_flags;
 *   - host calls: cuda_runtime, cuda_driver (legacy Runtime, Driver) as TP_K_API, with
 *     TP_F_BLOCKING for calls that wait for the device as far as the trace tells (see kineto.c),
 *     TP_F_LAUNCH for launches and TP_F_DRIVER for driver calls; the device is that of the GPU
 *     operation with the same correlation id, TP_NO_DEVICE when there is none;
 *   - user_annotation rows (ProfilerStep#N included) as TP_NVTX_RANGE on their host thread, and
 *     gpu_user_annotation rows as TP_NVTX_RANGE with device = the GPU, tid = the stream and the
 *     domain "gpu_user_annotation";
 *   - call sites: the cpu_op (legacy Operator) and python_function rows of the same thread that hold
 *     a blocking call in time become its call site (TP_K_CALLSITE + TP_K_FRAME, innermost first:
 *     TP_FRAME_OP for an operator, TP_FRAME_PYTHON for "file.py(123): function"); calls with the
 *     same API and frames share one. One sweep per thread over the rows sorted by start, a stack of
 *     the open ones: no search per call.
 * Everything else (flows, the profiler's own spans, ...) is counted by category in import_stats.
 *
 * Legacy traces (PyTorch 1.8/1.9) are read too: categories Runtime, Driver, Operator, Kernel,
 * Memcpy, Memset; a host pid or tid written as a string of digits ("25738"); a GPU tid written
 * "stream 7" (the stream then comes from args.stream); ProfilerStep#N written as an Operator (read
 * as the step annotation it is); an operator's Python stack in args."Call stack" ("file.py(611): f;
 * file.py(54): <module>", innermost first), which ends its call site's frames. ROCm traces name
 * HIP calls (hipMemcpyAsync, hipDeviceSynchronize): store/api.h classifies them as their CUDA twins.
 *
 * Timestamps are parsed from the numbers' text into integer nanoseconds, exactly
 * ("1695835535123456.789" us -> 1695835535123456789 ns; digits beyond ns round half away from zero),
 * and offset by baseTimeNanoseconds when the file has it (wherever the key is). Because that key, the
 * thread names and the correlated copies that decide whether a cudaMemcpyAsync blocked may come at
 * the end of the file, the whole trace is read before anything is emitted: metadata first, then the
 * events in time order (ties in file order), import_opts.batch_records records a batch, the first
 * batch a keyframe, the last one TP_BF_END. Memory is bounded: at most max_events event records
 * (64 bytes each), the encoder's bound on string bytes and a few MiB of input buffers. Large inputs
 * use a second thread (to read and inflate the input, to sort the events), ended when the call
 * returns.
 *
 * The input is untrusted: malformed or cut JSON, a cut or corrupt gzip stream, absurd nesting or
 * sizes fail with a message naming the file and, for JSON, the line, column and byte; events whose
 * fields are unusable (a kernel without ts or device) are skipped and counted as invalid.
 */
#ifndef SYNCTOP_KINETO_H
#define SYNCTOP_KINETO_H

#include <stddef.h>
#include <stdint.h>

#include "import.h"

/* Imports the trace at path ("-" reads standard input). opts and st may be NULL. Returns 0 or a
 * negative ERR_* code with a message in err that names the file. */
int kineto_import(const char *path, const import_opts *opts, import_emit_fn emit, void *ctx, import_stats *st,
                  err_msg *err);

/* The same from an open descriptor (a pipe, say), after prefix_len bytes already read from it
 * (at most 256 KiB: what a caller that cannot seek back read to tell the format). name is for
 * messages. */
int kineto_import_fd(int fd, const void *prefix, size_t prefix_len, const char *name, const import_opts *opts,
                     import_emit_fn emit, void *ctx, import_stats *st, err_msg *err);
/* The same from memory (plain JSON or gzip); name is used in messages and as the command line. */
int kineto_import_mem(const void *data, size_t len, const char *name, const import_opts *opts,
                      import_emit_fn emit, void *ctx, import_stats *st, err_msg *err);

#endif
