"""A Lightning-style module written without Lightning: `training_step`, `validation_step`,
`configure_optimizers` and a small `fit()` loop that calls them, validating after each training epoch.

The validation loader serves 64 rows per batch where training uses 32: the first validation pass compiles the
model's ops for the new batch size in the middle of the run, at the validation step's call of the model.
"""
# BENCH-ONLY: no product fix of its own to guard (the suite's time budget)
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class LitRegressor(nn.Module):
    def __init__(self, n_features: int = 20, hidden: int = 64, lr: float = 1e-3) -> None:
        super().__init__()
        self.lr = lr
        self.net = nn.Sequential(nn.Linear(n_features, hidden), nn.GELU(), nn.LayerNorm(hidden),
                                 nn.Linear(hidden, 1))
        self.val_outputs: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        return F.mse_loss(self(x), y)

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        pred = self(x)  # EXPECT: first_call_compile
        self.val_outputs.append(F.l1_loss(pred, y, reduction="sum"))

    def on_validation_epoch_end(self) -> float:
        mae = torch.stack(self.val_outputs).sum()
        self.val_outputs.clear()
        return float(mae)  # EXPECT: sync_point

    def configure_optimizers(self) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
        opt = torch.optim.Adam(self.parameters(), lr=self.lr)
        return opt, torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)


def to_device(batch: list[torch.Tensor], device: str) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = batch
    return x.to(device), y.to(device)


def fit(module: LitRegressor, train_loader: DataLoader, val_loader: DataLoader, max_epochs: int,
        device: str) -> None:
    module.to(device)
    opt, sched = module.configure_optimizers()
    for epoch in range(max_epochs):
        module.train()
        for batch_idx, batch in enumerate(train_loader):
            loss = module.training_step(to_device(batch, device), batch_idx)
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()
        module.eval()
        with torch.no_grad():
            for batch_idx, batch in enumerate(val_loader):
                module.validation_step(to_device(batch, device), batch_idx)
            val_mae = module.on_validation_epoch_end()
        print(f"epoch {epoch}: val_mae {val_mae / len(val_loader.dataset):.3f}")


def main() -> None:
    torch.manual_seed(0)
    w = torch.randn(20)
    x_train, x_val = torch.randn(128, 20), torch.randn(128, 20)
    train = TensorDataset(x_train, x_train @ w)
    val = TensorDataset(x_val, x_val @ w)
    fit(LitRegressor(), DataLoader(train, batch_size=32, shuffle=True), DataLoader(val, batch_size=64),
        max_epochs=3, device=os.environ.get("DEVICE", "neuron"))


if __name__ == "__main__":
    main()
