"""Keeps a projection orthonormal by re-orthogonalising it with QR after every update (a "retraction", as in
orthogonal RNNs and some whitening layers). torch.linalg.qr has no device kernel: it runs on the host, and the
backend does not list it in get_fallback_ops()."""
import os

import torch
import torch.nn as nn

dev = os.environ.get("DEVICE", "neuron")


class OrthoEncoder(nn.Module):
    def __init__(self, d_in: int = 24, d_hid: int = 24, n_cls: int = 5) -> None:
        super().__init__()
        self.rot = nn.Parameter(torch.eye(d_hid, d_in))
        self.head = nn.Linear(d_hid, n_cls)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(x @ self.rot.T))

    @torch.no_grad()
    def retract(self) -> None:
        q, r = torch.linalg.qr(self.rot)  # EXPECT: cpu_fallback
        self.rot.copy_(q * torch.sign(torch.diagonal(r)))


torch.manual_seed(0)
model = OrthoEncoder().to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(32, 24, device=dev)
y = torch.randint(0, 5, (32,), device=dev)
losses = []
for it in range(8):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    model.retract()
    losses.append(loss.detach())
print("final loss", torch.stack(losses)[-1].item())  # ALSO: sync_point
