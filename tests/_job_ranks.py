"""Ranks of a DDP-like job, built in the trace model: marked steps, one all_reduce (group 0) in each."""

from __future__ import annotations

from neuron_prof.model import Meta, Trace, TraceBuilder, TrackKind

MS = 1_000_000
T0 = 1_700_000_000_000_000_000


def ddp_rank(rank: int, world: int, *, steps: int = 8, step_ms: int = 20, coll_ms: int = 5, late_ms: int = 0,
             stopped: bool = False) -> Trace:
    """Rank `rank` of `world`: per step 12 ms of `aten::mm`, then (on a late rank) `late_ms` of data loading,
    then the all_reduce; `stopped`: the capture ended on SIGTERM (a rank that stopped early)."""
    b = TraceBuilder()
    pid = 1000 + rank
    p = b.process(pid, name="python", rank=rank)
    main_t = b.thread_track(pid, 1, "main")
    coll = b.track(p, "collectives", TrackKind.COLLECTIVE)
    rows = []
    for k in range(steps):
        s = T0 + k * step_ms * MS
        b.add_slice(main_t, s, 12 * MS, "aten::mm", "cpu_op")
        if late_ms:
            b.add_slice(main_t, s + 12 * MS, late_ms * MS, "enumerate(DataLoader)#_SingleProcessDataLoaderIter",
                        "user_annotation")
        b.add_slice(coll, s + (13 + late_ms) * MS, coll_ms * MS, "all_reduce",
                    args={"group": "0", "bytes_in": 4096, "bytes_out": 4096})
        rows.append([k, s, s + step_ms * MS])
    b.metadata[Meta.RANK] = rank
    b.metadata[Meta.WORLD_SIZE] = world
    b.metadata[Meta.STEPS] = rows
    b.metadata[Meta.WALL] = [T0, T0 + steps * step_ms * MS]
    if stopped:
        b.metadata["capture_exit"] = "SIGTERM"
    return b.build()
