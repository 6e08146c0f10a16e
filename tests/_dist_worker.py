"""One rank of a real gloo job on 127.0.0.1, profiled with neuron_prof (run by tests/test_merge_multiproc.py).

usage: python tests/_dist_worker.py OUT_JSON PORT DELAYED_RANK STEPS   (RANK, WORLD_SIZE in the environment)
The delayed rank spends 30 ms in a "load_batch" region before every all_reduce: a data-loading straggler.
"""

from __future__ import annotations

import os
import sys
import time

import torch
import torch.distributed as dist

import neuron_prof


def main() -> None:
    out, port, delayed, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    grad = torch.ones(1024)  # 4 KiB per all_reduce
    w = torch.randn(64, 64)
    dist.barrier()
    with neuron_prof.profile(out, quiet=True, with_stack=False, profile_memory=False) as prof:
        for _ in range(steps):
            y = torch.mm(w, w).sum()
            time.sleep(0.05)  # the step's "compute": spaces collectives ~80 ms apart, as in real training
            if rank == delayed:
                with torch.profiler.record_function("load_batch"):
                    time.sleep(0.03)
            dist.all_reduce(grad)
            grad.fill_(float(y) * 0 + 1)
            prof.step()
    dist.barrier()  # nobody tears the group down while another rank still talks to it
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
