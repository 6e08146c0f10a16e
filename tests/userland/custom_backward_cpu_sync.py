"""A straight-through quantizer written as a custom `torch.autograd.Function`: its backward copies the
gradient to the host (`.cpu()`) to count the values it clips, which makes the host wait for the device in
every backward pass.
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F


class STEQuant(torch.autograd.Function):
    stats: list[int] = []

    @staticmethod
    def forward(ctx, x: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.scale = scale
        return torch.round(x * scale) / scale

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor) -> tuple[torch.Tensor, None]:
        (x,) = ctx.saved_tensors
        mask = x.abs() <= 1.0
        clipped = (~mask).sum().cpu()  # EXPECT: sync_point
        STEQuant.stats.append(int(clipped))
        return grad_out * mask, None


class QuantMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(20, 64)
        self.fc2 = nn.Linear(64, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = STEQuant.apply(torch.tanh(self.fc1(x)), 8.0)
        return self.fc2(h)


def main() -> None:
    dev = os.environ.get("DEVICE", "neuron")
    torch.manual_seed(0)
    model = QuantMLP().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(32, 20, device=dev)
    y = torch.randint(0, 5, (32,), device=dev)
    for _ in range(8):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("clipped per step:", STEQuant.stats[-3:])


if __name__ == "__main__":
    main()
