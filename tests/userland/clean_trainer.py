"""A Trainer class with fit/train_step that keeps metrics on the device until the end.
# CLEAN: fixed shapes, no fallback, no host sync in the loop, no float64
"""
import os

import torch
import torch.nn as nn


class Trainer:
    def __init__(self, model: nn.Module, device: str) -> None:
        self.device = device
        self.model = model.to(device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)
        self.loss_sum = torch.zeros((), device=device)

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        loss = nn.functional.cross_entropy(self.model(x), y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self.loss_sum += loss.detach()

    def fit(self, x: torch.Tensor, y: torch.Tensor, steps: int) -> float:
        for _ in range(steps):
            self.train_step(x, y)
        return (self.loss_sum / steps).item()  # ALSO: sync_point


if __name__ == "__main__":
    dev = os.environ.get("DEVICE", "neuron")
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 3))
    x, y = torch.randn(16, 12, device=dev), torch.randint(0, 3, (16,), device=dev)
    print("mean loss", Trainer(net, dev).fit(x, y, steps=10))
