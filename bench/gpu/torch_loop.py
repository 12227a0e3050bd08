# PyTorch training loop for the tracer's overhead benchmark (bench/gpu/overhead.sh): a small MLP,
# the usual loop, loss.item() every 10 steps. Prints the wall time of the timed steps in ms.
#
# usage: python3 torch_loop.py [plain|profiler] [STEPS (default 300)]
#   plain:    as is (run it with and without synctop's tracer injected)
#   profiler: the same loop inside torch.profiler (CPU + CUDA activities), for comparison
import sys
import time

import torch

mode = sys.argv[1] if len(sys.argv) > 1 else "plain"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 300
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
        ms = timed()
else:
    ms = timed()
print(f"{ms:.3f}")
