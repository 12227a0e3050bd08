# Timing asynchronous GPU work with a host clock: without a synchronize time.time() measures only
# the launch; with torch.cuda.synchronize() it waits for the whole device every iteration. CUDA
# events measure the same without stalling the host.
# EXPECT-PY: 30 x blocking at @sync
import time

import torch

a = torch.randn(4096, 4096, device="cuda")
launch_only, waited = 0.0, 0.0
for step in range(30):
    t0 = time.time()
    b = a @ a
    launch_only += time.time() - t0  # measures the launch, not the work
    torch.cuda.synchronize()  # @sync
    waited += time.time() - t0
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
start.record()
for step in range(30):
    b = a @ a
end.record()
end.synchronize()
print(f"launch {launch_only:.4f} s, waited {waited:.4f} s, events {start.elapsed_time(end) / 1000:.4f} s")
