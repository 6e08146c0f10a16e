"""A DataLoader loop done right: equal batches (drop_last=True), metrics accumulated on the device.
# CLEAN: fixed shapes, no fallback, no host sync in the loop, no float64
"""
import os

import torch
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    dev = os.environ.get("DEVICE", "neuron")
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(96, 10), torch.randint(0, 4, (96,)))
    loader = DataLoader(data, batch_size=16, shuffle=True, drop_last=True, num_workers=0)
    model = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    correct = torch.zeros((), dtype=torch.int32, device=dev)
    for epoch in range(2):
        for xb, yb in loader:
            xb, yb = xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True)
            logits = model(xb)
            loss = torch.nn.functional.cross_entropy(logits, yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            correct += (logits.argmax(1) == yb).sum().int()
    print("train accuracy", correct.item() / (2 * 96))  # ALSO: sync_point


if __name__ == "__main__":
    main()
