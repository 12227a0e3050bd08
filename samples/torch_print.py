# Printing a CUDA tensor in a loop: print() formats it on the host, so it waits for the GPU.
# EXPECT-PY: 20 x blocking at @print
import torch

a = torch.randn(1024, 1024, device="cuda")
for step in range(20):
    a = torch.tanh(a @ a)
    print(a[0, :4])  # @print
