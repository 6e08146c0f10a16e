"""A CNN whose activation is a custom `torch.autograd.Function` with a hand-written backward.

The backward the user wrote calls `torch.histc` (no device kernel: it falls back to the host) and reads a
value with `.item()` (the host waits for the device): both are charged to their lines inside `backward()`,
with the `.apply()` line as their forward. The backward autograd derives for the convolution stays at the
convolution's forward line.
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F


class SoftClip(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, limit: float) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.limit = limit
        return x.clamp(-limit, limit)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (x,) = ctx.saved_tensors
        hist = torch.histc(grad, bins=16)  # EXPECT: cpu_fallback
        peak = hist.max().item()  # EXPECT: sync_point
        inside = (x.abs() <= ctx.limit).to(grad.dtype)
        return grad * inside / (1.0 + peak / grad.numel()), None


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = SoftClip.apply(self.conv(x), 2.0)
        return self.head(h.mean(dim=(2, 3)))


def main() -> None:
    dev = os.environ.get("DEVICE", "neuron")
    torch.manual_seed(0)
    model = Net().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(16, 3, 12, 12, device=dev)
    y = torch.randint(0, 4, (16,), device=dev)
    losses = []
    for step in range(6):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    print("mean loss", torch.stack(losses).mean().item())  # ALSO: sync_point


if __name__ == "__main__":
    main()
