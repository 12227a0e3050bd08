# A metric computed on the GPU and checked on the CPU: the `if` needs the value on the host, so
# every step waits for the GPU.
# EXPECT-PY: 50 x blocking at @check
import torch

a = torch.randn(4096, 4096, device="cuda")
hits = 0
for step in range(50):
    b = a @ a
    ratio = (b > 0).float().sum() / b.numel()
    if ratio > 0.5:  # @check
        hits += 1
print(hits)
