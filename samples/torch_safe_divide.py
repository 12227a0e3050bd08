# A metric whose safe divide checks the denominator on the CPU: `den != 0` is a CUDA tensor, and
# the conditional expression reads it on the host, every step.
# EXPECT-PY: 40 x blocking at @safe
import torch


def safe_divide(num, den):
    return num / den if den != 0 else torch.zeros_like(num)  # @safe


a = torch.randn(2048, 2048, device="cuda")
total = torch.zeros((), device="cuda")
for step in range(40):
    b = a @ a
    total += safe_divide((b > 0).sum(), torch.tensor(b.numel(), device="cuda"))
print(total.item())
