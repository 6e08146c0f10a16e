"""A classifier trained with a DataLoader of 16 (one batch per epoch), scored each epoch by an evaluation loop
over a validation DataLoader of 50 rows per batch, under `model.eval()` and `torch.no_grad()`.

The first evaluation compiles the model's ops for the new batch size in the middle of the run: its cause is the
evaluation loop's call of the model (the validation loader's batch size), not a line inside the model. It runs
in the second step's window: the step is not warm-up for it (warm-up is chosen from training time).
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

dev = os.environ.get("DEVICE", "neuron")


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(12, 32)
        self.body = nn.Sequential(nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.head = nn.Linear(32, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        h = self.body(h) + h
        return self.head(h)


def evaluate(model: nn.Module, loader: DataLoader) -> float:
    model.eval()
    correct = 0
    with torch.no_grad():
        for xb, yb in loader:
            xb, yb = xb.to(dev), yb.to(dev)
            logits = model(xb)  # EXPECT: first_call_compile
            correct += (logits.argmax(dim=1) == yb).sum()
    model.train()
    return float(correct) / len(loader.dataset)  # EXPECT: sync_point


def main() -> None:
    torch.manual_seed(0)
    train_ds = TensorDataset(torch.randn(16, 12), torch.randint(0, 3, (16,)))
    val_ds = TensorDataset(torch.randn(100, 12), torch.randint(0, 3, (100,)))
    train_loader = DataLoader(train_ds, batch_size=16, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=50)
    model = Classifier().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(4):
        for xb, yb in train_loader:
            xb, yb = xb.to(dev), yb.to(dev)
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch}: accuracy {evaluate(model, val_loader):.2f}")


if __name__ == "__main__":
    main()
