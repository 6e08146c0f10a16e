"""Trains on mini-batches of 16 rows, then scores the whole validation set of 96 rows in one forward pass."""
import os

import torch
import torch.nn as nn

dev = os.environ.get("DEVICE", "neuron")


def train(model: nn.Module, data: torch.Tensor, target: torch.Tensor, epochs: int = 2) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for _ in range(epochs):
        for i in range(0, len(data), 16):
            pred = model(data[i:i + 16])
            loss = nn.functional.mse_loss(pred, target[i:i + 16])
            opt.zero_grad()
            loss.backward()
            opt.step()


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 64), nn.SiLU(), nn.Linear(64, 1)).to(dev)
    data, target = torch.randn(64, 8, device=dev), torch.randn(64, 1, device=dev)
    val_data, val_target = torch.randn(96, 8, device=dev), torch.randn(96, 1, device=dev)
    train(model, data, target)
    model.eval()
    with torch.no_grad():
        val_pred = model(val_data)  # EXPECT: first_call_compile
        val_loss = nn.functional.mse_loss(val_pred, val_target)  # ALSO: first_call_compile
    print("validation mse", val_loss.item())  # ALSO: sync_point


if __name__ == "__main__":
    main()
