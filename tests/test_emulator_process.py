"""Emulator behaviours that need fresh processes: the warm on-disk NEFF cache, enable() refusals, DDP."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _run(code: str, env: dict[str, str] | None = None, timeout: float = 120) -> str:
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=REPO,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


WORKLOAD = """
import json, time, torch
from neuron_prof import emulator
tnx = emulator.enable_from_env()
assert tnx is not None and torch.neuron.device_count() == 1
torch.manual_seed(0)
t0 = time.perf_counter()
x = torch.randn(16, 32, device="neuron")
lin = torch.nn.Linear(32, 8).to("neuron")
y = torch.relu(lin(x)).sum()
y.backward()
torch.neuron.synchronize()
wall = time.perf_counter() - t0
stats = tnx._C._get_compilation_cache_stats()
entries = tnx._C._get_compilation_cache_entries()
gt = emulator.ground_truth().records("compile")
stall = sum(r["host_end_ns"] - r["host_start_ns"] for r in gt) / 1e9
print(json.dumps({"wall": wall, "stall": stall, "stats": stats, "entries": entries,
                  "sources": [r["detail"]["source"] for r in gt],
                  "modelled": [r["detail"]["modelled_ns"] for r in gt], "value": y.item()}))
"""


def test_warm_disk_cache_removes_first_call_compiles(tmp_path: Path) -> None:
    env = {"NEURON_PROF_EMULATE": "1", "NEURON_PROF_EMULATE_CACHE_DIR": str(tmp_path / "neff")}
    cold = json.loads(_run(WORKLOAD, env).splitlines()[-1])
    warm = json.loads(_run(WORKLOAD, env).splitlines()[-1])

    n = cold["stats"]["total_compilations"]
    assert n >= 5 and set(cold["sources"]) == {"compile"}
    assert cold["stats"]["persistent_misses"] == n and cold["stats"]["persistent_hits"] == 0
    assert all(e["compilation_time_ms"] >= 12 for e in cold["entries"])  # default base cost is 12 ms
    assert warm["stats"]["total_compilations"] == 0
    assert warm["stats"]["persistent_hits"] == n and set(warm["sources"]) == {"disk"}
    assert all(
        e["compilation_time_ms"] == 0 for e in warm["entries"]
    )  # loaded from disk: 0 ms, as in the real cache
    assert sorted(e["cache_key"] for e in warm["entries"]) == sorted(e["cache_key"] for e in cold["entries"])
    # what the emulator models: 12 ms (and more) per compile when cold, a 0.2 ms disk load per NEFF when warm
    assert len(cold["modelled"]) == len(warm["modelled"]) == n
    assert all(ns >= 12_000_000 for ns in cold["modelled"]) and warm["modelled"] == [200_000] * n
    # and the host really blocked for it (a lower bound: a loaded machine only makes a sleep longer)
    assert cold["stall"] >= sum(cold["modelled"]) / 1e9 and warm["stall"] >= sum(warm["modelled"]) / 1e9
    assert cold["wall"] >= cold["stall"]
    assert warm["value"] == cold["value"]


def test_enable_refuses_beside_real_torch_neuronx_and_is_idempotent() -> None:
    out = _run(
        """
        import sys, types
        from neuron_prof import emulator
        from neuron_prof.errors import EmulatorError
        assert emulator.enable_from_env() is None  # NEURON_PROF_EMULATE unset
        sys.modules["torch_neuronx"] = types.ModuleType("torch_neuronx")  # the real one, loaded
        try:
            emulator.enable()
        except EmulatorError as e:
            print("refused:", e)
        del sys.modules["torch_neuronx"]
        m1 = emulator.enable(emulator.EmulatorConfig.fast())
        m2 = emulator.enable()
        import torch, torch_neuronx
        assert m1 is m2 is torch_neuronx and emulator.is_enabled()
        assert torch.device("neuron:0").type == "neuron" and torch.ones(2, device="neuron").is_neuron
        print("ok")
    """,
        {"NEURON_PROF_EMULATE": ""},
    )
    assert "refused: the real torch_neuronx is loaded" in out and out.strip().endswith("ok")


def test_a_built_extension_is_imported_without_cpp_extension() -> None:
    """enable() imports the library of a build that ended well directly (torch.utils.cpp_extension imports
    setuptools and runs ninja: 0.3-0.4 s of every process); a build folder holds one torch's build."""
    out = json.loads(_run(
        """
        import json, os, sys
        import torch
        from neuron_prof import emulator
        from neuron_prof.emulator import _ext_build
        d = _ext_build.build_dir()
        marked = (d / "built").is_file()  # by make's install step or an earlier process
        emulator.enable(emulator.EmulatorConfig.fast())
        torch.ones(2, device="neuron")
        print(json.dumps({"marked": marked, "impl": emulator.device_impl(), "dir": str(d),
                          "cpp_extension": "torch.utils.cpp_extension" in sys.modules,
                          "direct": _ext_build._import_built(d) is not None}))
    """,
        {"NEURON_PROF_EMULATE_DEVICE": "extension"},
    ).strip().splitlines()[-1])
    assert out["impl"] == "extension" and out["direct"], out
    if out["marked"]:
        assert not out["cpp_extension"], out
    import torch

    assert Path(out["dir"]).name.startswith(torch.__version__.replace("+", "_") + "-")


DDP_WORKER = """
import json, os, sys, torch, torch.distributed as dist
from neuron_prof import emulator
emulator.enable(emulator.EmulatorConfig.fast())
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("neuron", rank=rank, world_size=world)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
x, y = torch.randn(8, 6), torch.randn(8, 2)
ddp = torch.nn.parallel.DistributedDataParallel(model.to("neuron"))
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
xs, ys = x.chunk(world)[rank].to("neuron"), y.chunk(world)[rank].to("neuron")
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for _ in range(2):
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(xs), ys).backward()
        opt.step()
names = {e.name for e in prof.events()}
t = torch.tensor([float(rank + 1)], device="neuron")
dist.all_reduce(t)
gathered = [torch.zeros(2, device="neuron") for _ in range(world)]
dist.all_gather(gathered, torch.full((2,), float(rank), device="neuron"))
flat = torch.zeros(2 * world, device="neuron")
dist.all_gather_into_tensor(flat, torch.full((2,), float(rank), device="neuron"))
rs = torch.zeros(2, device="neuron")
dist.reduce_scatter_tensor(rs, torch.arange(4.0, device="neuron"))
b = torch.full((3,), float(rank + 10), device="neuron")
dist.broadcast(b, src=1)
dist.barrier()
colls = [r["name"] for r in emulator.ground_truth().records("collective")]
out = {"params": [p.detach().cpu().flatten().tolist() for p in ddp.module.parameters()],
       "record_param_comms": "record_param_comms" in names, "allreduce_sum": t.item(),
       "device": str(next(ddp.module.parameters()).device), "backend": dist.get_backend(),
       "gathered": [g.cpu().tolist() for g in gathered], "flat": flat.cpu().tolist(),
       "bcast": b.cpu().tolist(), "rs": rs.cpu().tolist(), "collectives": colls}
dist.barrier()  # nobody tears the group down while the other rank still talks to it
dist.destroy_process_group()
print(json.dumps(out))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_ddp_two_processes_on_backend_neuron() -> None:
    import torch

    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "WORLD_SIZE": "2"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", DDP_WORKER],
            env={**env, "RANK": str(r)},
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(2)
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.splitlines()[-1]))

    # Reference, computed here on CPU: full-batch SGD equals DDP's average of the two half-batch gradients.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    x, y = torch.randn(8, 6), torch.randn(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    expected = [p.detach().flatten().tolist() for p in model.parameters()]
    for rank, res in enumerate(results):
        assert res["device"] == "neuron:0" and res["backend"] == "neuron"
        assert res["rs"] == [[0.0, 2.0], [4.0, 6.0]][rank]  # rank r gets chunk r of 2 * arange(4)
        assert res["allreduce_sum"] == 3.0
        assert res["gathered"] == [[0.0, 0.0], [1.0, 1.0]] and res["flat"] == [0.0, 0.0, 1.0, 1.0]
        assert res["bcast"] == [11.0] * 3
        assert {"allreduce", "allgather", "_allgather_base", "broadcast"} <= set(res["collectives"])
        assert not res["record_param_comms"]
        for got, want in zip(res["params"], expected, strict=True):
            assert got == pytest.approx(want, rel=1e-5, abs=1e-6)
