"""`neuron-prof run` under torchrun (issue 22): a real DDP job exits on every rank, with its trace and exit code,
in each documented launch form; a rank blocked in a collective still ends on SIGTERM.

Every job runs in a session of its own under a bounded wait: a hung rank fails the test (and is killed), it
never hangs the suite.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from neuron_prof.model.schema import META_KEY

BIN = Path(sys.executable).parent
NEURON_PROF = BIN / "neuron-prof"
TORCHRUN = BIN / "torchrun"
HANG_S = 240
"""A job that has not ended after this long is hung (a 4-rank job takes ~10 s idle, 40-50 s on 2 loaded cores)."""

pytestmark = pytest.mark.skipif(not (NEURON_PROF.exists() and TORCHRUN.exists()),
                                reason="needs the neuron-prof and torchrun console scripts beside python")

DDP_SCRIPT = """
import sys
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 16), torch.randn(64, 4))
    sampler = DistributedSampler(data)
    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in DataLoader(data, batch_size=16, sampler=sampler):
            opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        loss = torch.ones(1)
        dist.all_reduce(loss)  # the epoch's log: gloo's thread drops it while the rank goes on
        if dist.get_rank() == 0:
            print(f"epoch {epoch} loss {loss.item():.1f}")
    dist.all_reduce(loss, async_op=True)  # a last reduction nobody waits for: gloo's thread still has it
    dist.destroy_process_group()  # the model's Reducer now holds the group, freed when main() returns


if __name__ == "__main__":
    main()
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _descendants(pid: int) -> list[int]:
    """The processes under `pid` (read from /proc), deepest last."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _run_job(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[int | None, str]:
    """Run a launcher; (exit code, output), or (None, output) when it had not ended after HANG_S (then it and
    every process under it are killed)."""
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=HANG_S)
        return p.returncode, out
    except subprocess.TimeoutExpired:
        for pid in [p.pid, *_descendants(p.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        out, _ = p.communicate()
        return None, out


def _torchrun(*args: str, nproc: int = 4) -> list[str]:
    return [str(TORCHRUN), "--nproc-per-node", str(nproc), "--master-addr", "127.0.0.1",
            "--master-port", str(_free_port()), *args]


def _traces(folder: Path) -> dict[int, dict]:
    """rank -> the trace's neuron-prof metadata, read from each rank's JSON."""
    out = {}
    for f in sorted(folder.glob("trace.rank*.json")):
        out[int(f.name.split(".")[1][4:])] = json.loads(f.read_text())[META_KEY]["metadata"]
    return out


@pytest.mark.slow
def test_ddp_job_under_torchrun_ten_times_in_a_row(tmp_path: Path) -> None:
    """GIVEN a 4-rank DDP job (gloo) launched as the README shows, `torchrun --no-python neuron-prof run`,
    THEN every rank exits 0 and writes its trace, ten times in a row. Before the fix a rank hung at exit
    whenever gloo's thread still held a collective when main() returned (3 of 3 attempts, always with the
    unwaited one here)."""
    script = tmp_path / "train_ddp.py"
    script.write_text(DDP_SCRIPT)
    for attempt in range(10):
        out_dir = tmp_path / f"run{attempt}"
        rc, out = _run_job(_torchrun("--no-python", str(NEURON_PROF), "run", "-q", "--no-pftrace",
                                     "-o", str(out_dir / "trace.json"), str(script)), tmp_path)
        assert rc is not None, f"attempt {attempt}: the job hung at exit\n{out[-3000:]}"
        assert rc == 0, f"attempt {attempt}\n{out[-3000:]}"
        assert sorted(p.name for p in out_dir.iterdir()) == [f"trace.rank{r}.json" for r in range(4)], attempt
    traces = _traces(out_dir)
    assert {r: (md["rank"], md["world_size"], md["capture_exit"]) for r, md in traces.items()} == \
        {r: (r, 4, "SystemExit: 0") for r in range(4)}  # the script ends with sys.exit(0)


@pytest.mark.slow
def test_other_launch_forms_and_the_exit_code(tmp_path: Path) -> None:
    """`python -m torch.distributed.run ... neuron-prof run` and a launcher script that calls `neuron-prof run`
    work too; a script's exit code reaches torchrun."""
    script = tmp_path / "train_ddp.py"
    script.write_text(DDP_SCRIPT)
    launcher = tmp_path / "launch.sh"
    launcher.write_text(f'#!/bin/sh\nexec "{NEURON_PROF}" run -q --no-pftrace -o "$OUT/trace.json" "{script}" "$@"\n')
    launcher.chmod(0o755)
    port = str(_free_port())
    module_form = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4", "--master-addr",
                   "127.0.0.1", "--master-port", port, "--no-python", str(NEURON_PROF), "run", "-q", "--no-pftrace",
                   "-o", str(tmp_path / "m" / "trace.json"), str(script)]
    rc, out = _run_job(module_form, tmp_path)
    assert rc == 0, out[-3000:]
    assert sorted(_traces(tmp_path / "m")) == [0, 1, 2, 3]
    # the launcher form, with a script that exits 3: the ranks keep it (torchrun reports the failure)
    rc, out = _run_job(_torchrun("--no-python", str(launcher), "3", nproc=2), tmp_path,
                       env={**os.environ, "OUT": str(tmp_path / "l")})
    assert rc == 1 and "exitcode  : 3" in out, out[-3000:]
    assert sorted(_traces(tmp_path / "l")) == [0, 1]


BLOCKED = """
import os, sys, time
import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[1], rank=int(sys.argv[2]), world_size=2)
t = torch.ones(2)
dist.all_reduce(t)
print("ready", flush=True)
if dist.get_rank() == 1:
    time.sleep(3600)  # the peer that never comes (a dead or stuck rank)
dist.all_reduce(t)  # rank 0 waits here, in C++, with the GIL released
print("never reached", flush=True)
"""


@pytest.mark.slow
def test_sigterm_ends_a_rank_blocked_in_a_collective(tmp_path: Path) -> None:
    """GIVEN a rank under `run` blocked in a collective whose peer never comes (its Python handler cannot run)
    WHEN it gets SIGTERM THEN after the grace period it ends as SIGTERM ends it unprofiled, saying where it was."""
    script = tmp_path / "blocked.py"
    script.write_text(BLOCKED)
    port = str(_free_port())
    env = {**os.environ, "NEURON_PROF_SIGTERM_GRACE": "1"}
    peer = subprocess.Popen([sys.executable, str(script), port, "1"], cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    rank = subprocess.Popen([str(NEURON_PROF), "run", "-q", "--no-pftrace", "-o", str(tmp_path / "t.json"),
                             str(script), port, "0"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert rank.stdout is not None and rank.stdout.readline() == "ready\n"
        time.sleep(1.0)  # let it enter the second all_reduce (the signal must find it blocked there)
        rank.send_signal(signal.SIGTERM)
        try:
            _, err = rank.communicate(timeout=HANG_S)
        except subprocess.TimeoutExpired:
            rank.kill()
            pytest.fail("the blocked rank ignored SIGTERM")
        assert rank.returncode == -signal.SIGTERM, err
        assert "SIGTERM: the main thread did not return to Python within 1 s" in err
        assert "blocked.py" in err  # where the main thread was
    finally:
        for p in (rank, peer):
            if p.poll() is None:
                p.kill()
            p.communicate()
