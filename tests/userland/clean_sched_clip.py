"""A clean training loop with the usual extras: a warm-up + cosine learning-rate schedule (LambdaLR),
gradient clipping with `clip_grad_norm_`, AdamW with weight decay. Nothing reads a device value inside the
loop: the clipped norm stays a device tensor, the schedule is host arithmetic.
# CLEAN
# BENCH-ONLY: a new shape of an already-guarded finding; bench accuracy scores it, the suite keeps its time
"""
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

STEPS = 12
WARMUP = 3


def lr_lambda(step: int) -> float:
    if step < WARMUP:
        return (step + 1) / WARMUP
    return 0.5 * (1 + math.cos(math.pi * (step - WARMUP) / (STEPS - WARMUP)))


def main() -> None:
    dev = os.environ.get("DEVICE", "neuron")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(40, 80), nn.ReLU(), nn.Dropout(0.1), nn.Linear(80, 4)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    x = torch.randn(32, 40, device=dev)
    y = torch.randint(0, 4, (32,), device=dev)
    norms = []
    model.train()
    for _ in range(STEPS):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norms.append(nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0))
        opt.step()
        sched.step()
    print("last lr", sched.get_last_lr()[0], "max grad norm", torch.stack(norms).max().item())


if __name__ == "__main__":
    main()
