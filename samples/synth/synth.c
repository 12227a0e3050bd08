/* The synthetic event generator (synth.h). */
#include "synth.h"

#include <string.h>

static uint64_t rnd(synth *s) {
    /* splitmix64 */
    uint64_t z = (s->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static const char *const kernel_names[16] = {
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
    "ampere_sgemm_128x64_tn",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)",
    "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(cudnnTensorStruct, float const*, cudnnTensorStruct, float*, float const*, float const*, float, float, float*, float*, float*, float*, float, float)",
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::BUnaryFunctor<float, float, float, at::native::MulFunctor<float> > >(at::TensorIteratorBase&, at::native::BUnaryFunctor<float, float, float, at::native::MulFunctor<float> > const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl<at::native::BUnaryFunctor<float, float, float, at::native::MulFunctor<float> > >(at::TensorIteratorBase&, at::native::BUnaryFunctor<float, float, float, at::native::MulFunctor<float> > const&)::{lambda(int)#1})",
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)0, false>, bool>(...)",
    "flash_fwd_kernel", "flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel", "nccl_AllReduce_Sum_bf16_RING_LL",
    "void at::native::index_elementwise_kernel<128, 4>(long, ...)", "relu_kernel", "embedding_backward_kernel",
    "layer_norm_fwd", "cross_entropy_loss_kernel",
};
static const char *const api_names[8] = {
    "cudaLaunchKernel", "cudaMemcpyAsync", "cudaStreamSynchronize", "cudaMemsetAsync",
    "cuLaunchKernel",   "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy",
};

void synth_init(synth *s, uint64_t seed) {
    memset(s, 0, sizeof *s);
    s->rng = seed;
    s->now = 1700000000000000000ull + (seed % 1000) * 1000000ull;
    s->corr = 1;
}

void synth_meta(synth *s, tp_enc *enc) {
    for (int i = 0; i < 16; i++)
        s->names[i] = tp_enc_intern_cstr(enc, kernel_names[i]);
    for (int i = 0; i < 8; i++)
        s->api_names[i] = tp_enc_intern_cstr(enc, api_names[i]);
    tp_process p = {.kind = TP_K_PROCESS, .device = TP_NO_DEVICE, .pid = 4242,
                    .host = tp_enc_intern_cstr(enc, s->host != NULL ? s->host : "gpu-node-07"),
                    .cmdline = tp_enc_intern_cstr(enc, "python train.py --epochs 3"),
                    .rank = s->rank, .world = s->rank > 0 ? s->rank + 1 : 1, .start_realtime_ns = s->now};
    tp_enc_add(enc, &p);
    tp_device d = {.kind = TP_K_DEVICE, .device = 0,
                   .name = tp_enc_intern_cstr(enc, "NVIDIA H100 80GB HBM3"), .cc_major = 9,
                   .cc_minor = 0, .sm_count = 132, .memory_bytes = 85520809984ull};
    tp_enc_add(enc, &d);
    for (uint32_t st = 7; st <= 8; st++) {
        tp_stream sr = {.kind = TP_K_STREAM, .flags = st == 7 ? TP_F_NULL_STREAM : 0, .device = 0,
                        .stream = st, .context = 1, .priority = st == 7 ? 0 : -1};
        tp_enc_add(enc, &sr);
    }
    tp_thread t = {.kind = TP_K_THREAD, .device = TP_NO_DEVICE, .tid = 4242,
                   .name = tp_enc_intern_cstr(enc, "python"), .pid = 4242};
    tp_enc_add(enc, &t);
    tp_module mod = {.kind = TP_K_MODULE, .device = TP_NO_DEVICE,
                     .path = tp_enc_intern_cstr(enc, "libtorch_cuda.so"), .build_id_len = 20};
    for (int i = 0; i < 20; i++)
        mod.build_id[i] = (uint8_t)(0x5a ^ (i * 37));
    tp_enc_add(enc, &mod);
    for (uint32_t c = 0; c < 2; c++) {
        tp_callsite cs = {.kind = TP_K_CALLSITE, .device = TP_NO_DEVICE, .id = c + 1, .n_frames = 2};
        tp_enc_add(enc, &cs);
        tp_frame f0 = {.kind = TP_K_FRAME, .flags = TP_FRAME_PYTHON, .index = 0, .callsite = c + 1,
                       .line = c ? 88 : 42, .file = tp_enc_intern_cstr(enc, "train.py"),
                       .func = tp_enc_intern_cstr(enc, c ? "log_metrics" : "train_step"),
                       .module = 0, .pc = 120 + c};
        tp_frame f1 = {.kind = TP_K_FRAME, .flags = TP_FRAME_NATIVE, .index = 1, .callsite = c + 1,
                       .line = 0, .file = 0, .func = tp_enc_intern_cstr(enc, "at::native::_local_scalar_dense_cuda"),
                       .module = tp_enc_intern_cstr(enc, "libtorch_cuda.so"), .pc = 0x1a2b3c};
        tp_enc_add(enc, &f0);
        tp_enc_add(enc, &f1);
        s->callsites[c] = c + 1;
    }
    s->meta_done = 1;
}

/* One step: HtoD input copy, 24 launches (API + kernel), a memset, a DtoH scalar copy with
 * its blocking sync, and an NVTX step range; about 55 events. */
void synth_next(synth *s, tp_enc *enc, tp_record *r) {
    (void)enc;
    memset(r, 0, sizeof *r);
    uint64_t x = rnd(s);
    unsigned pos = s->in_step++;
    s->now += 2000 + (x & 4095);
    if (pos == 0) {
        tp_nvtx *n = &r->nvtx;
        n->kind = TP_K_NVTX;
        n->flags = TP_NVTX_RANGE;
        n->device = TP_NO_DEVICE;
        n->tid = 4242;
        n->start = s->now;
        n->end = s->now + 400000;
        n->id = s->step;
        n->name = s->names[12];
    } else if (pos == 1) {
        tp_memcpy *m = &r->memcpy;
        m->kind = TP_K_MEMCPY;
        m->flags = TP_F_ASYNC;
        m->stream = 7;
        m->start = s->now;
        m->end = s->now + 150000;
        m->correlation = s->corr++;
        m->context = 1;
        m->bytes = 4u << 20;
        m->copy_kind = TP_COPY_HTOD;
        m->src_kind = (x >> 20) & 1 ? TP_MEM_PINNED : TP_MEM_PAGEABLE;
        m->dst_kind = TP_MEM_DEVICE;
        m->src_device = m->dst_device = TP_NO_DEVICE;
    } else if (pos == 2) {
        tp_memset *m = &r->memset;
        m->kind = TP_K_MEMSET;
        m->flags = TP_F_ASYNC;
        m->stream = 7;
        m->start = s->now;
        m->end = s->now + 3000;
        m->correlation = s->corr++;
        m->context = 1;
        m->bytes = 65536;
        m->mem_kind = TP_MEM_DEVICE;
    } else if (pos < 51) {
        if (pos & 1) {
            tp_api *a = &r->api;
            a->kind = TP_K_API;
            a->flags = TP_F_LAUNCH;
            a->device = 0;
            a->tid = 4242;
            a->start = s->now;
            a->end = s->now + 3000 + (x & 1023);
            a->correlation = s->corr;
            a->cbid = 211;
            a->name = s->api_names[0];
        } else {
            tp_kernel *k = &r->kernel;
            k->kind = TP_K_KERNEL;
            k->stream = (x >> 40) & 3 ? 7 : 8;
            k->start = s->now + 5000;
            k->end = k->start + 5000 + (x & 0xFFFF);
            k->correlation = s->corr++;
            k->name = s->names[(x >> 8) % 16];
            k->context = 1;
            k->grid[0] = 1 + ((x >> 16) & 1023);
            k->grid[1] = k->grid[2] = 1;
            k->block[0] = 256;
            k->block[1] = k->block[2] = 1;
        }
    } else if (pos == 51) {
        tp_memcpy *m = &r->memcpy;
        m->kind = TP_K_MEMCPY;
        m->stream = 7;
        m->start = s->now;
        m->end = s->now + 2000;
        m->correlation = s->corr;
        m->context = 1;
        m->bytes = 4;
        m->copy_kind = TP_COPY_DTOH;
        m->src_kind = TP_MEM_DEVICE;
        m->dst_kind = TP_MEM_PAGEABLE;
        m->src_device = m->dst_device = TP_NO_DEVICE;
    } else if (pos == 52) {
        tp_api *a = &r->api;
        a->kind = TP_K_API;
        a->flags = TP_F_BLOCKING;
        a->tid = 4242;
        a->start = s->now - 250000;
        a->end = s->now + 1000;
        a->correlation = s->corr++;
        a->cbid = 131;
        a->name = s->api_names[2];
        a->callsite = s->callsites[s->step & 1];
    } else {
        tp_sync *y = &r->sync;
        y->kind = TP_K_SYNC;
        y->stream = 7;
        y->start = s->now - 240000;
        y->end = s->now;
        y->correlation = s->corr - 1;
        y->context = 1;
        y->event = TP_NO_ID;
        y->sync_type = TP_SYNC_STREAM;
        s->in_step = 0;
        s->step++;
    }
    s->events++;
}

void synth_fill(synth *s, tp_enc *enc, size_t n) {
    if (!s->meta_done)
        synth_meta(s, enc);
    tp_record r;
    for (size_t i = 0; i < n; i++) {
        synth_next(s, enc, &r);
        tp_enc_add(enc, &r);
    }
}
