"""A plain MLP regression loop at module level, written to run well on the device.
# CLEAN: fixed shapes, no fallback, no host sync in the loop, no float64
"""
import os

import torch

dev = os.environ.get("DEVICE", "neuron")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(32, 16, device=dev)
y = x[:, :1] * 2.0
for step in range(10):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
print("final loss", loss.item())  # ALSO: sync_point
