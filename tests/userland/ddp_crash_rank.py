"""DDP training on two ranks where rank 1 hits a bad batch at step 8 and raises: the job stops there.

Launched like torchrun (RANK, WORLD_SIZE, MASTER_ADDR/PORT). Rank 1 dies with a ValueError; rank 0 is
left waiting in its next gradient all-reduce (DDP's, inside `loss.backward()`), which fails when the peer
goes away. Both ranks' traces are written whole; the job's findings name rank 1 as stopped, at its `raise`.
# RANKS: 2
# FAILS: bad batch at step 8
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def check_batch(x: torch.Tensor, step: int, rank: int) -> None:
    if rank == 1 and step == 8:
        raise ValueError(f"bad batch at step {step} on rank {rank}")  # EXPECT[neuron,cpu]: stopped_rank


def main() -> None:
    dev = os.environ.get("DEVICE", "neuron")
    dist.init_process_group("gloo" if dev == "cpu" else "neuron")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 8)).to(dev))  # ALSO[neuron,cpu]: collective
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    torch.manual_seed(1 + rank)
    x = torch.randn(128, 64, device=dev)
    y = torch.randint(0, 8, (128,), device=dev)
    for step in range(12):
        check_batch(x, step, rank)
        loss = nn.functional.cross_entropy(model(x), y)  # ALSO[neuron,cpu]: collective
        opt.zero_grad()
        loss.backward()  # ALSO[neuron,cpu]: collective
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
