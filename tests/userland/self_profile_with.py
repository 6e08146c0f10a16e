"""Metric learning with hard-negative mining, profiled from inside with `with neuron_prof.profile(...)`."""
import os

import torch
import torch.nn.functional as F

import neuron_prof

dev = os.environ.get("DEVICE", "neuron")
torch.manual_seed(0)
embed = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).to(dev)
opt = torch.optim.SGD(embed.parameters(), lr=0.05)
anchors = torch.randn(32, 16, device=dev)
positives = anchors + 0.1 * torch.randn(32, 16, device=dev)
negatives = torch.randn(32, 16, device=dev)

with neuron_prof.profile(os.environ.get("TRACE_OUT", "trace.json"), quiet=True) as prof:
    for step in range(8):
        a, p, n = F.normalize(embed(anchors)), F.normalize(embed(positives)), F.normalize(embed(negatives))
        d_pos = (a - p).pow(2).sum(1)
        d_neg = (a - n).pow(2).sum(1)
        violation = d_pos - d_neg + 0.2
        hard = violation.gt(0).nonzero().squeeze(1)  # EXPECT: sync_point
        hard_losses = torch.masked_select(violation, violation > 0)  # EXPECT: sync_point
        loss = hard_losses.sum() / max(len(hard), 1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step}: {len(hard)} hard triplets, loss {loss}")  # EXPECT: sync_point
        prof.step()
