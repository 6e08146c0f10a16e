"""Robust regression with a loop inside main(), run as a script."""
import os

import numpy as np
import torch
import torch.nn.functional as F


def make_data(n: int = 64) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 8))
    y = x @ rng.normal(size=(8, 1)) + 0.1 * rng.standard_cauchy(size=(n, 1))
    return x, y


def main() -> None:
    dev = os.environ.get("DEVICE", "neuron")
    torch.manual_seed(0)
    x_np, y_np = make_data()
    x = torch.from_numpy(x_np).float().to(dev)
    y = torch.from_numpy(y_np).to(dev)  # EXPECT: dtype_demotion
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(8):
        pred = model(x)
        resid = pred - y.float()
        scale = resid.detach().abs().median() + 1e-3  # EXPECT: cpu_fallback
        loss = F.huber_loss(resid / scale, torch.zeros_like(resid))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 2 == 0:
            print(f"step {step}: loss {float(loss):.4f}")  # EXPECT: sync_point


if __name__ == "__main__":
    main()
