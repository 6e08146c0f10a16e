"""torch.compile with fixed shapes: one graph, compiled once, reused every step.
# CLEAN: fixed shapes, no fallback, no host sync in the loop, no float64
"""
import os

import torch

dev = os.environ.get("DEVICE", "neuron")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(dev)
step_model = torch.compile(model, backend="neuron" if dev == "neuron" else "aot_eager", dynamic=False)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 16, device=dev), torch.randn(16, 4, device=dev)
for step in range(8):
    loss = (step_model(x) - y).pow(2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
print("final loss", loss.item())  # ALSO: sync_point
