/*
 * A libcuda.so.1 that is only there: a CUDA driver installed on the machine that nothing has
 * started yet. The tracer checks that one can be loaded before it loads CUPTI for NVTX used
 * before CUDA starts (tracer.c); the tests put this one on the harness's library path, and take
 * it off to play a machine without a driver. Nothing calls into it.
 */
__attribute__((visibility("default"))) int standin_installed_driver(void);
__attribute__((visibility("default"))) int standin_installed_driver(void) { return 1; }
