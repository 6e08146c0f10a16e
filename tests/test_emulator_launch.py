"""Launch mode of the emulated device (``NEURON_PROF_EMULATE_HOST_COST=launch``, issue 32 item 2): a warm op costs
the host a launch (C++, no Python), its device time modelled on the asynchronous queue, and everything else the
device does is what the default (Python) mode does: the same values, executions, compiles, cache hits and the
same profile. One script runs in a subprocess per mode (the mode is fixed when the device registers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = textwrap.dedent("""
    import collections, contextlib, json, statistics, sys, time
    import torch, neuron_prof, neuron_prof.emulator as emu
    from neuron_prof.model import TrackKind
    tnx = emu.enable()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    m = torch.nn.Linear(16, 16).to("neuron")
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    x = torch.randn(8, 16).to("neuron")
    profiled = sys.argv[2] == "profile"
    with neuron_prof.profile(sys.argv[1], quiet=True) if profiled else contextlib.nullcontext() as prof:
        for _ in range(4):
            m(x).relu().sum().backward()
            opt.step()
            opt.zero_grad()
            if prof is not None:
                prof.step()
    a, b, c, d = (torch.randn(8).to("neuron") for _ in range(4))

    def tiny():
        for _ in range(100):
            (a * b + c).relu() - d

    tiny()
    torch.neuron.synchronize()
    host, ahead = [], []
    for _ in range(5):
        t0 = time.time_ns()
        tiny()
        t1 = time.time_ns()
        host.append((t1 - t0) / 400 / 1e3)
        torch.neuron.synchronize()
        ahead.append(time.time_ns() - t1)
    gt = emu.ground_truth()
    ex = gt.records("exec")
    tr = neuron_prof.load(sys.argv[1]) if profiled else None
    dev = sum(int((tr.slices.track == t).sum()) for t in tr.track_ids(TrackKind.DEVICE)) if tr is not None else -1
    print(json.dumps({
        "weight": m.weight.detach().cpu().tolist(), "tiny": ((a * b + c).relu() - d).cpu().tolist(),
        "execs": collections.Counter(r["name"] for r in ex), "compiles": len(gt.records("compile")),
        "hits": tnx._C._get_compilation_cache_stats()["in_memory_hits"],
        "device": sorted((r["device_start_ns"], r["device_end_ns"]) for r in ex),
        "host_us_per_op": statistics.median(host), "device_slices": dev,
        "wait_after_ms": statistics.median(ahead) / 1e6,
    }))
""")


def _run(tmp: Path, host_cost: str, blocking: str, profile: bool = True) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NEURON_PROF_CACHE_DIR": str(tmp / "cache"),
           "NEURON_PROF_EMULATE_COMPILE_SCALE": "0", "NEURON_PROF_EMULATE_HOST_COST": host_cost,
           "NEURON_LAUNCH_BLOCKING": blocking}
    p = subprocess.run([sys.executable, str(tmp / "s.py"), str(tmp / f"{host_cost}{blocking}.json"),
                        "profile" if profile else "-"], cwd=tmp,
                       env=env, capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    out: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("launch")
    (tmp / "s.py").write_text(SCRIPT)
    return {"python": _run(tmp, "python", "0"), "launch": _run(tmp, "launch", "0"),
            "launch_blocking": _run(tmp, "launch", "1", profile=False)}


def test_launch_mode_does_what_the_python_mode_does(runs: dict[str, dict[str, Any]]) -> None:
    py, la = runs["python"], runs["launch"]
    assert la["weight"] == py["weight"] and la["tiny"] == py["tiny"]
    assert la["execs"] == py["execs"] and la["execs"]["aten::mul.Tensor"] >= 600
    assert la["compiles"] == py["compiles"] > 0
    assert la["hits"] == py["hits"] > 2000  # each launch looks its NEFF up
    assert la["device_slices"] == py["device_slices"] > 0  # the profiler sees the same device ops


def test_launch_mode_queues_device_time_one_op_after_another(runs: dict[str, dict[str, Any]]) -> None:
    spans = runs["launch"]["device"]
    assert all(e > s for s, e in spans)
    assert all(s >= prev_end for (_, prev_end), (s, _) in zip(spans, spans[1:], strict=False))


def test_a_warm_op_costs_the_host_a_launch_not_the_executor(runs: dict[str, dict[str, Any]]) -> None:
    py, la, bl = runs["python"], runs["launch"], runs["launch_blocking"]
    assert la["host_us_per_op"] * 3 < py["host_us_per_op"], (la["host_us_per_op"], py["host_us_per_op"])
    # asynchronous: the host ran ahead of the device (12 us of modelled launch per op), and waits at the sync
    assert la["host_us_per_op"] < 12 and la["wait_after_ms"] > 0.5
    # NEURON_LAUNCH_BLOCKING=1: each launch waits for its op, so the host pays the device time and the sync none
    assert bl["host_us_per_op"] >= 12 and bl["wait_after_ms"] < 0.5
