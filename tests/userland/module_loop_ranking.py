"""Learning to rank, written top to bottom in a script: no functions, the loop at module level."""
import os

import torch

dev = os.environ.get("DEVICE", "neuron")
torch.manual_seed(1)
enc = torch.nn.Sequential(torch.nn.Linear(24, 48), torch.nn.GELU(), torch.nn.Linear(48, 1)).to(dev)
opt = torch.optim.Adam(enc.parameters(), lr=1e-3)
running = torch.zeros(1, dtype=torch.float64, device=dev)  # EXPECT: dtype_demotion

for it, n in enumerate([20, 28, 36, 20, 44, 28, 52, 36]):
    items = torch.randn(n, 24, device=dev)  # EXPECT: shape_churn
    scores = enc(items).squeeze(-1)  # EXPECT: first_call_compile
    order = torch.sort(scores, descending=True).indices  # EXPECT: cpu_fallback
    target = torch.linspace(1.0, 0.0, n, device=dev)
    loss = (scores[order] - target).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    running += loss.detach()
    top = scores.detach().max().cpu().numpy()  # EXPECT: sync_point
print("mean loss", float(running.cpu()) / 8)  # ALSO: sync_point
