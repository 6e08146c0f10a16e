"""Fixed-shape training that evaluates every 3 steps on a held-out batch of another size.

The first evaluation compiles every op of the forward pass for the new batch size in the middle of the run.
"""
import os

import torch
import torch.nn.functional as F

dev = os.environ.get("DEVICE", "neuron")


def evaluate(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        logits = model(x)  # EXPECT: first_call_compile
        return (logits.argmax(dim=1) == y).float().mean()  # ALSO: first_call_compile


def main() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(64, 32, device=dev), torch.randint(0, 10, (64,), device=dev)
    val_x, val_y = torch.randn(200, 32, device=dev), torch.randint(0, 10, (200,), device=dev)
    for step in range(9):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 3 == 2:
            acc = evaluate(model, val_x, val_y)
            print(f"step {step}: val accuracy {acc}")  # EXPECT: sync_point


if __name__ == "__main__":
    main()
