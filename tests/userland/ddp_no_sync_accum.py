"""DDP with gradient accumulation: `model.no_sync()` skips the all-reduce on the first micro-batches of each
step; the last micro-batch's backward all-reduces the summed gradients. The loop logs every micro-batch's
loss with `.item()`, which makes the host wait for the device four times per step.
# RANKS: 2
# BENCH-ONLY: a new shape of an already-guarded finding; bench accuracy scores it, the suite keeps its time
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

ACCUM = 4


def main() -> None:
    dev = os.environ.get("DEVICE", "neuron")
    dist.init_process_group("gloo" if dev == "cpu" else "neuron")
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(32, 128), nn.GELU(), nn.Linear(128, 10)).to(dev)
    model = DDP(net)  # ALSO[neuron,cpu]: collective  # ALSO: sync_point
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    torch.manual_seed(100 + rank)
    data = [(torch.randn(16, 32, device=dev), torch.randint(0, 10, (16,), device=dev)) for _ in range(ACCUM)]
    for step in range(8):
        running = 0.0
        for i, (x, y) in enumerate(data):
            if i < ACCUM - 1:
                with model.no_sync():
                    loss = F.cross_entropy(model(x), y) / ACCUM  # ALSO[neuron,cpu]: collective  # ALSO: sync_point
                    loss.backward()
            else:
                loss = F.cross_entropy(model(x), y) / ACCUM  # ALSO[neuron,cpu]: collective
                loss.backward()  # ALSO[neuron,cpu]: collective
            running += loss.item()  # EXPECT: sync_point
        opt.step()
        opt.zero_grad(set_to_none=True)
        if rank == 0 and step % 4 == 0:
            print(f"step {step} loss {running:.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
