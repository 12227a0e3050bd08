# A training loop that logs loss.item() every step: each .item() copies one scalar to the host
# and waits for the whole step (cudaMemcpyAsync into pageable memory, then a stream sync).
# EXPECT-PY: 50 x blocking at @item
import torch

model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(512, 4096, device="cuda")
y = torch.randn(512, 1, device="cuda")
for step in range(50):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")  # @item
