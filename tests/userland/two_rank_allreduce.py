"""Data-parallel training by hand on two ranks, launched like torchrun (RANK, WORLD_SIZE, MASTER_ADDR/PORT).
# RANKS: 2
"""
import os

import torch
import torch.distributed as dist


def main() -> None:
    dev = os.environ.get("DEVICE", "neuron")
    dist.init_process_group("gloo" if dev == "cpu" else "neuron")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.ReLU(), torch.nn.Linear(24, 1)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    torch.manual_seed(1 + rank)
    x = torch.randn(16, 12, device=dev)
    y = x.sum(dim=1, keepdim=True)
    for step in range(6):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)  # EXPECT[neuron,cpu]: collective
            p.grad /= world
        opt.step()
        if rank == 0:
            print(f"step {step} loss {loss.item():.4f}")  # EXPECT: sync_point
    dist.barrier()  # ALSO[neuron,cpu]: collective
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
