"""A small Trainer class, the way libraries and research code organise a training loop."""
import os

import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, d_in: int = 32, hidden: int = 64, n_cls: int = 5) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, n_cls)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class Trainer:
    def __init__(self, model: nn.Module, device: str, lr: float = 1e-3) -> None:
        self.device = device
        self.model = model.to(device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=lr)
        self.history: list[float] = []

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = self.model(x)
        loss = nn.functional.cross_entropy(logits, y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        w = self.model.head.weight.detach()
        sigma = torch.linalg.svdvals(w)[0]  # EXPECT: cpu_fallback
        cond = sigma.double() / w.norm().double()  # EXPECT: dtype_demotion
        return torch.stack([loss.detach(), cond.float()])

    def fit(self, batches: list[tuple[torch.Tensor, torch.Tensor]], epochs: int = 2) -> None:
        for epoch in range(epochs):
            for x, y in batches:
                stats = self.train_step(x.to(self.device), y.to(self.device))  # ALSO: dtype_demotion
                self.history.extend(stats.tolist())  # EXPECT: sync_point
            print(f"epoch {epoch}: last loss {self.history[-2]:.3f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    data = [(torch.randn(16, 32), torch.randint(0, 5, (16,))) for _ in range(4)]
    Trainer(Net(), os.environ.get("DEVICE", "neuron")).fit(data)
