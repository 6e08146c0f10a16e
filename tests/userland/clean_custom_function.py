"""A clean custom `torch.autograd.Function`: a memory-saving Swish whose backward recomputes the sigmoid
from the saved input, all on the device (no host read, no fallback, fixed shapes).
# CLEAN
# BENCH-ONLY: a new shape of an already-guarded finding; bench accuracy scores it, the suite keeps its time
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F


class Swish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad * (s * (1 + x * (1 - s)))


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc(Swish.apply(self.norm(x)))


def main() -> None:
    dev = os.environ.get("DEVICE", "neuron")
    torch.manual_seed(0)
    model = nn.Sequential(Block(32), Block(32), nn.Linear(32, 3)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.02)
    x = torch.randn(24, 32, device=dev)
    y = torch.randint(0, 3, (24,), device=dev)
    losses = []
    for _ in range(10):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    print("final loss", torch.stack(losses)[-1].item())


if __name__ == "__main__":
    main()
