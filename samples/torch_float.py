# A CUDA tensor passed where a Python float is expected: float() syncs, silently, every step.
# EXPECT-PY: 50 x blocking at @float
import math
import torch

w = torch.randn(2048, 2048, device="cuda")
total = 0.0
for step in range(50):
    w = torch.tanh(w @ w.T / 2048)
    total += math.fabs(float(w.mean()))  # @float
print(total)
