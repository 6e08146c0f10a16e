"""Multi-head model whose logging uses a lambda and comprehensions: the problems are inside them."""
import os

import torch

dev = os.environ.get("DEVICE", "neuron")
torch.manual_seed(0)
heads = torch.nn.ModuleList([torch.nn.Linear(16, 4) for _ in range(3)]).to(dev)
trunk = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.SiLU()).to(dev)
params = list(trunk.parameters()) + list(heads.parameters())
opt = torch.optim.Adam(params, lr=3e-3)
to_float = lambda t: t.detach().item()  # EXPECT: sync_point  # noqa: E731
x = torch.randn(24, 12, device=dev)
targets = [torch.randn(24, 4, device=dev) for _ in heads]

history = []
for step in range(6):
    h = trunk(x)
    outs = [head(h) for head in heads]
    errors = [(o - t).abs() for o, t in zip(outs, targets)]
    medians = [e.median() for e in errors]  # EXPECT: cpu_fallback
    loss = sum(e.mean() for e in errors)
    opt.zero_grad()
    loss.backward()
    opt.step()
    per_head = {f"head{i}": m.cpu() for i, m in enumerate(medians)}  # EXPECT: sync_point
    history.append((to_float(loss), per_head))
print("last loss", history[-1][0])
