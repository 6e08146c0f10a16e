"""A real 4-rank DDP job (gloo) under `torchrun --no-python neuron-prof run`: fixture module of
tests/test_run_torchrun.py and scripts/torchrun_repeat.py (the same job, run N times in a row).

Every job runs in a session of its own under a bounded wait: a hung rank fails the attempt (and is killed),
it never hangs the caller.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from neuron_prof.model.schema import META_KEY

BIN = Path(sys.executable).parent
NEURON_PROF = BIN / "neuron-prof"
TORCHRUN = BIN / "torchrun"
HANG_S = 240
"""A job that has not ended after this long is hung (a 4-rank job takes ~10 s idle, 40-50 s on 2 loaded cores)."""

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


def free_port() -> int:
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


def run_job(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[int | None, str]:
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


def torchrun(*args: str, nproc: int = 4) -> list[str]:
    return [str(TORCHRUN), "--nproc-per-node", str(nproc), "--master-addr", "127.0.0.1",
            "--master-port", str(free_port()), *args]


def traces(folder: Path) -> dict[int, dict]:
    """rank -> the trace's neuron-prof metadata, read from each rank's JSON."""
    out = {}
    for f in sorted(folder.glob("trace.rank*.json")):
        out[int(f.name.split(".")[1][4:])] = json.loads(f.read_text())[META_KEY]["metadata"]
    return out


def ddp_job_fails(folder: Path, attempt: int) -> str:
    """Run the 4-rank DDP job as docs/run.md shows, `torchrun --no-python neuron-prof run`, in `folder`
    (the script there, its traces in run`attempt`/): "" when every rank exited 0 with its trace, the
    script's sys.exit(0) recorded in each; else why not, with the end of the job's output."""
    script = folder / "train_ddp.py"
    if not script.is_file():
        script.write_text(DDP_SCRIPT)
    out_dir = folder / f"run{attempt}"
    rc, out = run_job(torchrun("--no-python", str(NEURON_PROF), "run", "-q", "--no-pftrace",
                               "-o", str(out_dir / "trace.json"), str(script)), folder)
    if rc is None:
        return f"attempt {attempt}: the job hung at exit\n{out[-3000:]}"
    if rc != 0:
        return f"attempt {attempt}: exit {rc}\n{out[-3000:]}"
    names = sorted(p.name for p in out_dir.iterdir())
    if names != [f"trace.rank{r}.json" for r in range(4)]:
        return f"attempt {attempt}: wrote {names}"
    got = {r: (md["rank"], md["world_size"], md["capture_exit"]) for r, md in traces(out_dir).items()}
    want = {r: (r, 4, "SystemExit: 0") for r in range(4)}  # the script ends with sys.exit(0)
    if got != want:
        return f"attempt {attempt}: traces' (rank, world_size, capture_exit) {got}, expected {want}"
    return ""
