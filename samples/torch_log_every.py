# A training loop that logs its loss every 10th step: the .item() stalls only those steps, so the
# step time is not linear in the logging frequency. Each step is an NVTX range named "step":
# `synctop report --step step` names the period.
# EXPECT-PY: 6 x blocking at @log
import torch

model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(512, 4096, device="cuda")
y = torch.randn(512, 1, device="cuda")
for step in range(60):
    with torch.cuda.nvtx.range("step"):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")  # @log
