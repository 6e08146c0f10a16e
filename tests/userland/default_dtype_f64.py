"""Scientific-computing habits in a training script: float64 by default and a QR re-orthogonalisation.

A backward pass through float64 ops runs on the emulated device since it is a C++ extension (the subclass
device aborted in torch's Python device guard: tests/userland/README.md).
"""
import os

import torch

torch.set_default_dtype(torch.float64)
dev = os.environ.get("DEVICE", "neuron")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 8, bias=False), torch.nn.Tanh(), torch.nn.Linear(8, 2))
model = model.to(dev)  # EXPECT: dtype_demotion
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(32, 8, device=dev)  # EXPECT: dtype_demotion
y = torch.randn(32, 2, device=dev)  # EXPECT: dtype_demotion
for step in range(6):
    loss = (model(x) - y).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        q, _ = torch.linalg.qr(model[0].weight)  # EXPECT: cpu_fallback
        model[0].weight.copy_(q)
print("final loss", loss.item())  # ALSO: sync_point
