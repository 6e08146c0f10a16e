"""CollectivesProbe on a real 2-process gloo group on 127.0.0.1."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import orjson
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from neuron_prof.backends import CaptureContext, get_backend
from neuron_prof.backends.probes.collectives import norm_op
from neuron_prof.model import Arg, TraceBuilder, TrackKind

WORLD = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(rank: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        _joined(rank, out)
        ctx = CaptureContext(host_pid=os.getpid(), rank=rank, world_size=WORLD, start_ns=time.time_ns())
        backend = get_backend("cpu")
        backend.start(ctx)
        x = torch.ones(1000, dtype=torch.float32)
        dist.all_reduce(x)                                   # 4000 B in and out
        parts = [torch.empty(10, dtype=torch.float64) for _ in range(WORLD)]
        dist.all_gather(parts, torch.full((10,), float(rank), dtype=torch.float64))  # 80 in, 160 out
        y = torch.zeros(7, dtype=torch.int64)
        dist.broadcast(y, src=0)                             # 56
        out_t = torch.empty(WORLD * 3, dtype=torch.float32)
        dist.all_gather_into_tensor(out_t, torch.ones(3))    # 12 in, 24 out
        dist.barrier()
        work = dist.all_reduce(torch.ones(5), async_op=True)  # 20, launched async
        work.wait()
        backend.stop(ctx)
        b = TraceBuilder()
        backend.contribute(b, ctx)
        trace = b.build()
        rows = trace.slices_on(TrackKind.COLLECTIVE)
        ev = [{"name": trace.slice_name(int(r)), "ts": int(trace.slices.ts_ns[r]), "dur": int(trace.slices.dur_ns[r]),
               **trace.slice_args(int(r))} for r in rows]
        Path(out, f"rank{rank}.json").write_bytes(orjson.dumps({"events": ev, "errors": ctx.errors,
                                                                "ok": float(x[0]) == WORLD}))
        dist.barrier()  # nobody tears the group down while the other rank still talks to it
    finally:
        dist.destroy_process_group()


def _joined(rank: int, out: str) -> None:
    """Under a real torch.profiler: each collective links to Kineto's c10d:: op and gloo: work span."""
    from tests.fakes.kineto import profile_with

    def work() -> None:
        for n in (100, 2000):
            dist.all_reduce(torch.ones(n))
        dist.broadcast(torch.zeros(3), src=0)

    b, ctx = profile_with(get_backend("cpu"), work, with_stack=False)
    trace = b.build()
    rows = trace.slices_on(TrackKind.COLLECTIVE)
    links = []
    for r in rows:
        dst = trace.flows.dst[trace.flows.src == r]
        links.append(sorted(trace.slice_name(int(d)) for d in dst))
    ev = [trace.slice_args(int(r)) for r in rows]
    Path(out, f"joined{rank}.json").write_bytes(orjson.dumps({"links": links, "errors": ctx.errors, "ev": ev}))


@pytest.fixture(scope="module")
def gloo_events(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    out = tmp_path_factory.mktemp("gloo")
    mp.spawn(_worker, args=(_free_port(), str(out)), nprocs=WORLD, join=True)
    return [{**orjson.loads(Path(out, f"rank{r}.json").read_bytes()),
             "joined": orjson.loads(Path(out, f"joined{r}.json").read_bytes())} for r in range(WORLD)]


def test_collective_events_have_correct_bytes(gloo_events: list[dict]) -> None:
    expected = [("all_reduce", 4000, 4000, "float32"), ("all_gather", 80, 160, "float64"),
                ("broadcast", 56, 56, "int64"), ("all_gather_into_tensor", 12, 24, "float32"),
                ("barrier", 0, 0, None), ("all_reduce", 20, 20, "float32")]
    for res in gloo_events:
        assert res["ok"] and res["errors"] == []
        ev = res["events"]
        assert [(e["name"], e[Arg.BYTES_IN], e[Arg.BYTES_OUT], e.get(Arg.DTYPE)) for e in ev] == expected
        assert all(e[Arg.RANKS] == [0, 1] and e[Arg.WORLD_SIZE] == 2 for e in ev)
        assert [e[Arg.SEQ] for e in ev] == list(range(6))
        assert all(e[Arg.CALL_SITE].startswith("test_probe_collectives.py:") or
                   e[Arg.CALL_SITE].endswith(tuple(f"test_probe_collectives.py:{n}" for n in range(1, 200)))
                   for e in ev)
        # host spans are ordered and positive; bandwidth = bytes / duration
        ts = [e["ts"] for e in ev]
        assert ts == sorted(ts) and all(e["dur"] > 0 for e in ev)
        ar = ev[0]
        assert ar[Arg.ALGBW] == pytest.approx(4000 / ar["dur"], rel=1e-3)
        assert ar[Arg.BUSBW] == pytest.approx(ar[Arg.ALGBW] * 2 * (2 - 1) / 2, rel=1e-3)
        assert ev[-1]["async_op"] is True
    # the same group names on both ranks, so ranks can be matched
    assert {e[Arg.GROUP] for e in gloo_events[0]["events"]} == {e[Arg.GROUP] for e in gloo_events[1]["events"]}


def test_joined_with_kineto_c10d_and_gloo_events(gloo_events: list[dict]) -> None:
    for res in gloo_events:
        j = res["joined"]
        assert j["errors"] == []
        assert j["links"] == [["c10d::allreduce_", "gloo:all_reduce"], ["c10d::allreduce_", "gloo:all_reduce"],
                              ["c10d::broadcast_", "gloo:broadcast"]]
        assert [e[Arg.BYTES_IN] for e in j["ev"]] == [400, 8000, 12]
        assert all(0 < e["work_dur_ns"] for e in j["ev"])


def test_wrappers_are_removed_after_stop() -> None:
    orig = dist.all_reduce
    ctx = CaptureContext(host_pid=os.getpid())
    b = get_backend("cpu")
    b.start(ctx)
    assert dist.all_reduce is not orig
    b.stop(ctx)
    assert dist.all_reduce is orig


def test_norm_op_matches_kineto_names() -> None:
    assert norm_op("all_reduce") == norm_op("c10d::allreduce_") == norm_op("gloo:all_reduce")
    assert norm_op("_allgather_base_") == norm_op("all_gather_into_tensor")
