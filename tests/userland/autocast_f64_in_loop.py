"""Mixed precision with `torch.autocast` (bfloat16) and per-class loss weights recomputed each step with numpy,
the way many imbalanced-data scripts do: `torch.from_numpy` of a numpy float64 array keeps float64, and sending
it to the device brings float64 there (no float64 on the device: it is demoted or emulated)."""
# BENCH-ONLY: no product fix of its own to guard (the suite's time budget)
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

dev = os.environ.get("DEVICE", "neuron")


def class_weights(labels: np.ndarray, n_classes: int) -> np.ndarray:
    counts = np.bincount(labels, minlength=n_classes) + 1.0
    return counts.sum() / (n_classes * counts)


def main() -> None:
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Linear(48, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 5))
    model = model.to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(10):
        labels = rng.choice(5, size=32, p=[0.6, 0.2, 0.1, 0.05, 0.05])
        x = torch.randn(32, 48, device=dev)
        y = torch.from_numpy(labels).to(dev)  # ALSO: dtype_demotion
        w = torch.from_numpy(class_weights(labels, 5)).to(dev)  # EXPECT: dtype_demotion
        with torch.autocast(device_type=dev, dtype=torch.bfloat16):
            logits = model(x)
        per_example = F.cross_entropy(logits.float(), y, reduction="none")
        loss = (per_example * w[y]).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    print("last loss", loss.item())  # ALSO: sync_point


if __name__ == "__main__":
    main()
