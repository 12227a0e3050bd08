/*
 * A stand-in libcuda.so.1 (by file name and SONAME) beside the stand-in libcupti: the device
 * queries of the CUDA driver API, answered from the devices the stand-in's script described
 * (`device` lines), as the real driver answers for the GPUs of the machine. A program that has
 * "CUDA" loaded maps it, as a CUDA program maps libcuda; the tracer asks it for the names of the
 * GPUs when it starts in a running process, after CUPTI's device records were made.
 */
#include <cuda.h>
#include <cupti.h>
#include <string.h>

#include "standin.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT CUresult cuDeviceGetCount(int *count) {
    if (count == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *count = standin_device_count();
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    if (device == NULL || ordinal < 0 || ordinal >= standin_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    const CUpti_ActivityDevice5 *d = standin_device(dev);
    if (d == NULL || name == NULL || len <= 0)
        return d == NULL ? CUDA_ERROR_INVALID_DEVICE : CUDA_ERROR_INVALID_VALUE;
    const char *n = d->name ? d->name : "";
    size_t k = strlen(n) < (size_t)len - 1 ? strlen(n) : (size_t)len - 1;
    memcpy(name, n, k);
    name[k] = '\0';
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attr, CUdevice dev) {
    const CUpti_ActivityDevice5 *d = standin_device(dev);
    if (d == NULL)
        return CUDA_ERROR_INVALID_DEVICE;
    switch (attr) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        *value = (int)d->computeCapabilityMajor;
        return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
        *value = (int)d->computeCapabilityMinor;
        return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        *value = (int)d->numMultiprocessors;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    const CUpti_ActivityDevice5 *d = standin_device(dev);
    if (d == NULL)
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = (size_t)d->globalMemorySize;
    return CUDA_SUCCESS;
}
