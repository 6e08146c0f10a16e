"""One rank of a real distributed job on 127.0.0.1, profiled with neuron_prof (run by tests/test_merge_multiproc.py).

usage: python tests/_dist_worker.py OUT_JSON PORT DELAYED_RANK STEPS   (RANK, WORLD_SIZE in the environment)

DIST_BACKEND=gloo (default): CPU tensors; the delayed rank spends 30 ms in a "load_batch" region before every
all_reduce: a data-loading straggler.
DIST_BACKEND=neuron: the emulated neuron device and its c10d backend "neuron"; the delayed rank multiplies a
matrix of a new shape every step, so it stalls on a first-call compile (~40 ms) before every all_reduce.
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
    backend = os.environ.get("DIST_BACKEND", "gloo")
    device = "cpu"
    if backend == "neuron":
        from neuron_prof import emulator

        emulator.enable(emulator.EmulatorConfig(eager_compile_base_ms=40.0))
        device = "neuron"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    grad = torch.ones(1024, device=device)  # 4 KiB per all_reduce
    w = torch.randn(64, 64, device=device)
    torch.mm(w, w)  # every rank's own first-call compile happens before the profiled steps
    dist.barrier()
    # stacks on the neuron job: the compile stall's call site then names this file
    with neuron_prof.profile(out, quiet=True, with_stack=backend == "neuron", profile_memory=False) as prof:
        for step in range(steps):
            y = torch.mm(w, w).sum()
            time.sleep(0.05)  # the step's "compute": spaces collectives ~80 ms apart, as in real training
            if rank == delayed and backend == "neuron":
                torch.mm(w[: 8 + step], w)  # a new shape: compiled on its first call
            elif rank == delayed:
                with torch.profiler.record_function("load_batch"):
                    time.sleep(0.03)
            dist.all_reduce(grad)
            grad.fill_(float(y) * 0 + 1)
            prof.step()
    dist.barrier()  # nobody tears the group down while another rank still talks to it
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
