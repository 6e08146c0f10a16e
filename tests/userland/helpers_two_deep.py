"""A loop that calls helpers, which call helpers: the problems sit two calls below the loop."""
import os

import torch
import torch.nn.functional as F

dev = os.environ.get("DEVICE", "neuron")


def _confidence_histogram(probs: torch.Tensor) -> torch.Tensor:
    return torch.histc(probs.max(dim=1).values, bins=10, min=0.0, max=1.0)  # EXPECT: cpu_fallback


def _n_correct(logits: torch.Tensor, y: torch.Tensor) -> int:
    return int((logits.argmax(dim=1) == y).sum())  # EXPECT: sync_point


def log_metrics(step: int, logits: torch.Tensor, y: torch.Tensor) -> dict:
    probs = logits.detach().softmax(dim=1)
    hist = _confidence_histogram(probs)
    correct = _n_correct(logits.detach(), y)
    return {"step": step, "acc": correct / y.numel(), "hist": hist}


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor):
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return logits


def main() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(20, 40), torch.nn.ReLU(), torch.nn.Linear(40, 6)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(32, 20, device=dev)
    y = torch.randint(0, 6, (32,), device=dev)
    logs = []
    for step in range(8):
        logits = train_step(model, opt, x, y)
        logs.append(log_metrics(step, logits, y))
    print("final accuracy", logs[-1]["acc"])


if __name__ == "__main__":
    main()
