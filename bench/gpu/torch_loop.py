# PyTorch training loop for the tracer's overhead benchmark (bench/gpu/overhead.sh): a small MLP,
# the usual loop, loss.item() every 10 steps. Prints the wall time of the timed steps in ms.
#
# usage: python3 torch_loop.py [plain|profiler|counts] [STEPS (default 300)]
#   plain:    as is (run it with and without synctop's tracer injected)
#   profiler: the same loop inside torch.profiler (CPU + CUDA activities), for comparison
#   counts:   the whole program (set-up, warm-up and loop) inside torch.profiler (CUDA activity);
#             prints "kernels=K memcpy=M memset=S", counted in the trace it exports, to hold
#             against what synctop's tracer recorded of a plain run
import json
import os
import sys
import tempfile
import time

import torch

mode = sys.argv[1] if len(sys.argv) > 1 else "plain"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 300


def program():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(2048, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
        torch.nn.Linear(2048, 10)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(256, 2048, device="cuda")
    y = torch.randint(0, 10, (256,), device="cuda")

    def step(i):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i % 10 == 0:
            loss.item()

    for i in range(20):  # warm-up: kernels loaded, allocator filled
        step(i)
    torch.cuda.synchronize()

    def timed():
        t0 = time.perf_counter()
        for i in range(steps):
            step(i)
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1000.0

    if mode == "profiler":
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
            return timed()
    return timed()


if mode == "counts":
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        program()
    path = os.path.join(tempfile.mkdtemp(), "counts.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    cats = [str(e.get("cat", "")).lower() for e in events if e.get("ph") == "X"]
    print(f"kernels={cats.count('kernel')} memcpy={cats.count('gpu_memcpy')} memset={cats.count('gpu_memset')}")
else:
    print(f"{program():.3f}")
