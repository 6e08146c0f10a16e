"""Orthogonalised features: `torch.linalg.qr` in a module's forward, trained with autograd.

The forward's `linalg_qr` falls back to the host, and so does its backward (`LinalgQrBackward0` runs
`linalg_solve_triangular`, which has no device kernel either): both are the forward line's cost, since that is
the line the user can change; `loss.backward()` only runs them.
"""
import os

import torch
import torch.nn.functional as F


class OrthoHead(torch.nn.Module):
    def __init__(self, d_in: int, d_hidden: int, n_out: int) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(d_in, d_hidden)
        self.out = torch.nn.Linear(d_hidden, n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.proj(x))
        q, _ = torch.linalg.qr(h)  # EXPECT: cpu_fallback
        return self.out(q)


def main() -> None:
    dev = os.environ.get("DEVICE", "neuron")
    torch.manual_seed(0)
    model = OrthoHead(16, 8, 3).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    x = torch.randn(32, 16, device=dev)
    y = torch.randint(0, 3, (32,), device=dev)
    losses = []
    for step in range(6):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    print("mean loss", torch.stack(losses).mean().item())  # ALSO: sync_point


if __name__ == "__main__":
    main()
