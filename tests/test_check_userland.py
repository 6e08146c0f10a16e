"""`check`'s default gate on user programs run for real on the emulated device (issue 22 item 4): a clean
program passes; a program with a CPU fallback and float64 sent to the device in every step fails, naming both
lines; what happens only in warm-up (the cold compile cache) is noted, not counted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from neuron_prof.cli import main
from tests.userland import _fork as forked
from tests.userland import _harness as h

USERLAND = Path(__file__).parent / "userland"
EXE = str(Path(sys.executable).with_name("neuron-prof"))

# The dirty script: a fallback, float64 to the device and a .nonzero() sync in every step.
DIRTY = """\
import os
import torch

dev = os.environ.get("DEVICE", "neuron")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(32, 16, device=dev)
y = torch.randint(0, 4, (32,), device=dev)
for step in range(12):
    scale = torch.tensor([1.5], dtype=torch.float64).to(dev)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    med = torch.median(x, dim=0).values
    idx = (x[:, 0] > 0).nonzero()
    opt.zero_grad()
    (loss * scale.float() + med.sum() * 0).backward()
    opt.step()
print("done")
"""


def _run(script: Path, out: Path) -> Path:
    # `neuron-prof run` through main() in a process forked from one that imported torch already (the suite's time)
    r = forked.run([forked.CLI, "run", "--emulate-neuron", "-q", "-o", str(out), str(script)], cwd=out.parent,
                   timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("check_userland")
    (d / "dirty.py").write_text(DIRTY)
    return {
        "clean_mlp_loop": _run(USERLAND / "clean_mlp_loop.py", d / "clean_mlp_loop.json"),
        "clean_main": _run(USERLAND / "clean_main.py", d / "clean_main.json"),
        "dirty": _run(d / "dirty.py", d / "dirty.json"),
    }


# Findings measured in time the machine's load decides (the harness's LOAD_DEPENDENT): those alone may fail a
# clean program's check, and only here.
TIMING_KINDS = tuple(f"[{k}]" for k in h.LOAD_DEPENDENT)


@pytest.mark.parametrize("name", ["clean_mlp_loop", "clean_main"])
def test_clean_program_passes(runs: dict[str, Path], name: str) -> None:
    p = subprocess.run([EXE, "check", str(runs[name])], capture_output=True, text=True, timeout=300)
    fails = [ln for ln in p.stdout.splitlines() if ln.strip().startswith("FAIL")]
    assert p.returncode == (1 if fails else 0), p.stdout + p.stderr
    assert not [f for f in fails if not any(k in f for k in TIMING_KINDS)], p.stdout
    assert fails or "all limits hold" in p.stdout
    # its cold compile cache costs most of a short run (a warning by its cost) but only in warm-up
    assert "only in warm-up, not counted" in p.stdout, p.stdout


def test_dirty_program_fails_on_each_problem(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["check", str(runs["dirty"])])
    out = capsys.readouterr().out
    fails = [ln.strip() for ln in out.splitlines() if ln.strip().startswith("FAIL")]
    assert rc == 1, out
    assert any("[cpu_fallback]" in f and "aten::median" in f and f.endswith("dirty.py:13") for f in fails), out
    assert any("[dtype_demotion]" in f and "float64" in f and f.endswith("dirty.py:11") for f in fails), out
    assert not any("[first_call_compile]" in f for f in fails), out
    p = subprocess.run([EXE, "check", str(runs["dirty"])], capture_output=True, text=True, timeout=300)
    assert p.returncode == 1 and p.stdout == out, p.stdout + p.stderr
    # the old default (critical only) lets it pass: the point of the new one
    assert main(["check", str(runs["dirty"]), "--fail-on", "critical"]) == 0
    capsys.readouterr()


def test_ops_view_of_a_real_run_is_topped_by_ops(runs: dict[str, Path]) -> None:
    """Issue 23: on the emulated device `threading.py(982): run` (a background thread, the whole run as self
    time), `torch/_compile.py(42): inner` and `<built-in method run_backward ...>` topped the ops view: they
    hold ops and lines, so they rank after them (and have no self time of their own to sort by)."""
    from neuron_prof.analysis import op_table
    from neuron_prof.loaders import load

    t = op_table(load(runs["dirty"]))
    names = [str(n) for n in t.name]
    wrapped = [i for i, n in enumerate(names) if n.startswith(("threading.py", "torch/_compile.py", "<built-in method run_backward"))]
    assert wrapped, names[:20]
    assert all(t.is_wrapper[i] and t.self_ns[i] == 0 for i in wrapped)
    first_wrapper = min(np.flatnonzero(t.is_wrapper))
    assert all(not t.is_wrapper[i] for i in range(first_wrapper)) and t.is_op[:first_wrapper].any()
    by_self = np.argsort(-t.self_ns, kind="stable")[:10]
    assert not any(t.is_wrapper[i] for i in by_self), [names[i] for i in by_self]
