# A PyTorch training loop started without synctop, for tests/gpu/attach.sh to attach to, detach
# from and attach to again while it runs. Every step logs loss.item() (a wait for the GPU at the
# tagged line). It runs until STOPFILE exists, then prints one line: the steps it made, the median
# step time, and the longest step with when it began (CLOCK_MONOTONIC ns: the pause the program saw
# is that step minus the median, when it falls at an attach or detach).
#
# usage: python3 attach_loop.py STOPFILE
import os
import sys
import time

import torch

stop = sys.argv[1]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(256, 2048, device="cuda")
y = torch.randint(0, 10, (256,), device="cuda")
times = []
longest, longest_at = 0, 0
print("ready", flush=True)
while not os.path.exists(stop):
    t0 = time.monotonic_ns()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    value = loss.item()  # @item
    dt = time.monotonic_ns() - t0
    times.append(dt)
    if dt > longest:
        longest, longest_at = dt, t0
times.sort()
print(f"steps={len(times)} median_us={times[len(times) // 2] // 1000} longest_us={longest // 1000} "
      f"longest_at={longest_at} loss={value:.4f}", flush=True)
