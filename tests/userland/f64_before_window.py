"""Keeps the running loss in float64 "for precision", created on the device once before the profiled part, and
profiles only the training loop with neuron_prof.profile(). The device computes float64 as float32.
The float64 tensor's first use is an operator statement (`+=`): its line needs operator_lines=True.
# OPERATOR-LINES
"""
import os

import torch
import torch.nn.functional as F

import neuron_prof

dev = os.environ.get("DEVICE", "neuron")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(64, 16, device=dev)
y = torch.randint(0, 4, (64,), device=dev)  # ALSO: dtype_demotion
loss_sum = torch.zeros((), dtype=torch.float64, device=dev)  # ALSO: dtype_demotion

with neuron_prof.profile(os.environ.get("TRACE_OUT", "trace.json"), operator_lines=True):
    for step in range(6):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss_sum += loss.detach()  # EXPECT: dtype_demotion
print("mean loss", (loss_sum / 6).item())  # ALSO: sync_point
