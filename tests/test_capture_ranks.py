"""Per-rank outputs: a real 2-process gloo job writes trace.rank{R}.json/.pftrace with rank metadata."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import neuron_prof
from neuron_prof.capture._outputs import planned_paths, rank_path
from tests._builders import json_complete_count, pftrace_slice_count, slice_names
from tests.userland import _fork as forked

REPO = Path(__file__).resolve().parents[1]


def test_rank_path_names() -> None:
    assert rank_path(Path("run/trace.json"), 3, 8) == Path("run/trace.rank3.json")
    assert rank_path(Path("run/t.json.gz"), 0, 2) == Path("run/t.rank0.json.gz")
    assert rank_path(Path("run/t.pftrace"), 1, 2) == Path("run/t.rank1.pftrace")
    assert rank_path(Path("run/trace.json"), 0, 1) == Path("run/trace.json")
    assert rank_path(Path("run/trace.json"), None, None) == Path("run/trace.json")
    assert planned_paths("run/trace.json", 1, 4, True) == [Path("run/trace.rank1.json"), Path("run/trace.rank1.pftrace")]
    assert planned_paths("run/trace.pftrace", 1, 4, True) == [Path("run/trace.rank1.pftrace")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_two_rank_gloo_job_writes_one_trace_per_rank(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        import torch, torch.distributed as dist, neuron_prof
        dist.init_process_group("gloo")
        t = torch.ones(16) * (dist.get_rank() + 1)
        with neuron_prof.profile("run/trace.json", quiet=True) as prof:
            for _ in range(2):
                dist.all_reduce(t)
                prof.step()
        dist.barrier()  # nobody tears the group down while the other rank still talks to it
        dist.destroy_process_group()
    """))
    port = _free_port()
    # each rank a process forked from one that imported torch already (the suite's time)
    procs = forked.run_many([([str(script)], {**os.environ, "PYTHONPATH": str(REPO), "MASTER_ADDR": "127.0.0.1",
                                             "MASTER_PORT": str(port), "RANK": str(rank), "WORLD_SIZE": "2",
                                             "LOCAL_RANK": str(rank)}) for rank in range(2)],
                            cwd=tmp_path, timeout=240)
    for p in procs:
        assert p.returncode == 0, p.stderr
    run = tmp_path / "run"
    assert sorted(p.name for p in run.iterdir()) == ["trace.rank0.json", "trace.rank0.pftrace",
                                                     "trace.rank1.json", "trace.rank1.pftrace"]
    for rank in range(2):
        j = run / f"trace.rank{rank}.json"
        trace = neuron_prof.load(j)
        md = trace.metadata
        assert md["rank"] == rank and md["world_size"] == 2
        pg = md["process_group"]
        assert pg["backend"] == "gloo" and pg["group_ranks"] == [0, 1] and pg["local_rank"] == str(rank)
        assert "c10d::allreduce_" in slice_names(trace)
        assert json_complete_count(j) == pftrace_slice_count(run / f"trace.rank{rank}.pftrace")


def test_rank_from_torchrun_environment_before_the_group_is_up(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """RANK/WORLD_SIZE (torchrun's environment) name the files when no process group is initialised yet;
    an incomplete or malformed environment is a single-process run."""
    from tests._builders import tiny_model, train_step

    model, opt = tiny_model()
    for env, name, rank in (({"RANK": "1", "WORLD_SIZE": "2"}, "trace.rank1.json", 1),
                            ({"RANK": "1"}, "trace.json", None),
                            ({"RANK": "one", "WORLD_SIZE": "2"}, "trace.json", None)):
        monkeypatch.delenv("WORLD_SIZE", raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        out = tmp_path / str(len(list(tmp_path.iterdir()))) / "trace.json"
        with neuron_prof.profile(out, quiet=True, with_stack=False, pftrace=False) as prof:
            train_step(model, opt, 0)
            prof.step()
        assert [p.name for p in out.parent.iterdir()] == [name]
        assert neuron_prof.load(out.parent / name).metadata["rank"] == rank


def test_process_group_facts_in_process(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """With a process group up (gloo, one rank), the trace records its backend, name and ranks and torchrun's
    local facts."""
    import torch.distributed as dist

    from tests._builders import tiny_model, train_step

    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("MASTER_PORT", "29999")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        model, opt = tiny_model()
        with neuron_prof.profile(tmp_path / "trace.json", quiet=True, with_stack=False, pftrace=False) as prof:
            train_step(model, opt, 0)
            prof.step()
    finally:
        dist.destroy_process_group()
    assert not list(tmp_path.glob("trace.rank*"))  # a world of one keeps the plain name
    md = neuron_prof.load(tmp_path / "trace.json").metadata
    assert (md["rank"], md["world_size"]) == (0, 1)
    pg = md["process_group"]
    assert pg["backend"] == "gloo" and pg["group_ranks"] == [0] and pg["local_rank"] == "0"
    assert pg["master_port"] == "29999"


DDP_JOBS = """
    import os, sys
    import torch, torch.distributed as dist, torch.nn as nn, torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    import neuron_prof


    def job(port):
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=int(os.environ["RANK"]),
                                world_size=2)
        model = DDP(nn.Sequential(nn.Linear(32, 128), nn.GELU(), nn.Linear(128, 10)))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x, y = torch.randn(16, 32), torch.randint(0, 10, (16,))
        for _ in range(3):
            with model.no_sync():
                F.cross_entropy(model(x), y).backward()
            F.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad()
        dist.destroy_process_group()  # then `model` goes, and its Reducer holds the group


    with neuron_prof.profile("trace.json", quiet=True, pftrace=False):
        for port in sys.argv[1:]:
            job(int(port))
            print("job done", flush=True)
"""


def test_ddp_models_freed_after_their_group_do_not_hang_the_job(tmp_path: Path) -> None:
    """A DDP model that outlives `destroy_process_group()` (freed when its function returns) destroys gloo's
    group from its C++ Reducer under the GIL, while gloo's thread drops a collective that needs the GIL: under
    the profiler each such job hung in most tries. The session keeps the destroyed groups and drops them
    from Python at its end (issue 34): four such jobs in a row end."""
    script = tmp_path / "jobs.py"
    script.write_text(textwrap.dedent(DDP_JOBS))
    ports = [str(_free_port()) for _ in range(4)]
    procs = []
    for rank in range(2):
        env = {**os.environ, "PYTHONPATH": str(REPO), "RANK": str(rank), "WORLD_SIZE": "2", "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, str(script), *ports], cwd=tmp_path, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                      start_new_session=True))
    try:
        outs = [p.communicate(timeout=90)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
    for p, out in zip(procs, outs):
        assert p.returncode == 0 and out.count("job done") == 4, out
    assert sorted(p.name for p in tmp_path.glob("trace*")) == ["trace.rank0.json", "trace.rank1.json"]
