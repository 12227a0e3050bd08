# A helper written for a float that is handed a CUDA tensor: its `if value:` reads the tensor on
# the host, so every call waits for the GPU (the display_if_exist case).
# EXPECT-PY: 40 x blocking at @display
import torch


def display_if_exist(name, value):
    if value:  # @display
        return f"{name}={float(value) if isinstance(value, float) else '...'}"
    return ""


a = torch.randn(2048, 2048, device="cuda")
lines = []
for step in range(40):
    b = a @ a
    lines.append(display_if_exist("norm", b.norm()))
print(len(lines))
