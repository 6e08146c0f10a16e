"""Classification in main(): losses stay on the device and are read once, after the loop.
# CLEAN: fixed shapes, no fallback, no host sync in the loop, no float64
"""
import os

import torch
import torch.nn.functional as F


def main() -> None:
    dev = os.environ.get("DEVICE", "neuron")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(20, 48), torch.nn.GELU(), torch.nn.Linear(48, 5)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    batches = [(torch.randn(24, 20, device=dev), torch.randint(0, 5, (24,), device=dev)) for _ in range(3)]
    losses = []
    for epoch in range(3):
        for x, y in batches:
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
    print("mean loss", torch.stack(losses).mean().item())  # ALSO: sync_point


if __name__ == "__main__":
    main()
