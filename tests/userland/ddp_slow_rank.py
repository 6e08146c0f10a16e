"""DDP training on two ranks where rank 1 reads its batches from a slow source: each batch costs it 40 ms of
waiting (a network filesystem, say) before the step, so rank 0 waits for it at every gradient all-reduce.
The all-reduce's arrival spread (`collective_spread`) is that wait, and each device idles while its host waits:
rank 1's in `load_batch`, rank 0's in the all-reduce inside `loss.backward()` (`device_idle`, emulated device).
# RANKS: 2
# BENCH-ONLY: a new shape of an already-guarded finding; bench accuracy scores it, the suite keeps its time
"""
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def load_batch(rank: int, dev: str) -> tuple[torch.Tensor, torch.Tensor]:
    if rank == 1:
        time.sleep(0.04)  # EXPECT[neuron,cpu]: straggler  # ALSO[neuron,cpu]: collective_spread  # ALSO: device_idle
    x = torch.randn(64, 48)
    y = torch.randint(0, 6, (64,))
    return x.to(dev), y.to(dev)


def main() -> None:
    dev = os.environ.get("DEVICE", "neuron")
    dist.init_process_group("gloo" if dev == "cpu" else "neuron")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(48, 96), nn.ReLU(), nn.Linear(96, 6)).to(dev))  # ALSO[neuron,cpu]: collective
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    torch.manual_seed(1 + rank)
    for step in range(12):
        x, y = load_batch(rank, dev)  # ALSO: device_idle
        loss = F.cross_entropy(model(x), y)  # ALSO[neuron,cpu]: collective
        opt.zero_grad()
        loss.backward()  # ALSO[neuron,cpu]: collective  # ALSO: device_idle
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
