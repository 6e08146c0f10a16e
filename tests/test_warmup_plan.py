"""The warm-up plan (issue 36 item 1) proved on the emulated device: run a script whose batch size changes
(every new size compiles every op again, in later steps) -> `neuron-prof plan` -> run it again with the plan
applied in-process before the first step: no compile after the first step, none after warm-up at the user's
lines, and `neuron-prof diff` says so. The plan does not rely on a persistent compile cache (none is set).

The time from process start to the end of the first steady step is printed (pytest -s), not asserted."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from neuron_prof.analysis import Context, compute_totals, report
from neuron_prof.analysis.compare import compiles_after_first_step
from neuron_prof.cli import main
from neuron_prof.loaders import load

EXE = str(Path(sys.executable).with_name("neuron-prof"))
COMPILE_KINDS = ("first_call_compile", "recompile", "shape_churn")

SCRIPT = """\
import os
import sys

import torch

if os.environ.get("WARMUP_DIR"):  # the plan, applied in-process before the first step
    sys.path.insert(0, os.environ["WARMUP_DIR"])
    import warmup

    warmup.run("neuron")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to("neuron")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(12):
    n = (8, 16, 24, 32)[step % 4]  # a batch size that changes: each new size compiles every op again
    x = torch.randn(n, 16, device="neuron")
    y = torch.randint(0, 4, (n,), device="neuron")
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _run(d: Path, out: str, **env: str) -> tuple[Path, int, str]:
    """Run the script under the profiler; (trace, Unix ns when the process was started, stdout)."""
    e = {k: v for k, v in os.environ.items() if k not in ("TORCH_NEURONX_NEFF_CACHE_DIR", "NEURON_PROF_EMULATE_CACHE_DIR")}
    t0 = time.time_ns()
    r = subprocess.run([EXE, "run", "--emulate-neuron", "-q", "--no-pftrace", "-o", out, "train.py"],
                       capture_output=True, text=True, timeout=600, cwd=d, env={**e, **env})
    assert r.returncode == 0, r.stdout + r.stderr
    return d / out, t0, r.stdout


@pytest.fixture(scope="module")
def proof(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    d = tmp_path_factory.mktemp("warmup_plan")
    (d / "train.py").write_text(SCRIPT)
    base, t_base, _ = _run(d, "base.json")
    assert main(["plan", str(base), "-o", str(d / "warmup.py")]) == 0
    new, t_new, out = _run(d, "new.json", WARMUP_DIR=str(d))
    return {"dir": d, "base": base, "new": new, "t_base": t_base, "t_new": t_new, "stdout": out}


def _first_steady_end(path: Path, t0: int) -> tuple[float, float]:
    """Seconds to the end of the first steady step (after the trace's warm-up) from the process start and from
    the profile's start."""
    trace = load(path)
    st = Context(trace).steps
    end = int(st.end_ns[min(st.warmup, len(st) - 1)])
    return (end - t0) / 1e9, (end - int(compute_totals(trace)["start_ns"])) / 1e9


def test_plan_is_python_listing_every_compiled_signature(proof: dict[str, object]) -> None:
    src = (proof["dir"] / "warmup.py").read_text()  # type: ignore[operator]
    tree = ast.parse(src)
    names = {t.id for n in tree.body if isinstance(n, ast.AnnAssign) for t in [n.target] if isinstance(t, ast.Name)}
    assert {"EAGER", "GRAPHS", "BUCKETS"} <= names
    base = load(proof["base"])  # type: ignore[arg-type]
    misses = {(c.name, str(c.args.get("signature")))
              for c in __import__("neuron_prof.analysis", fromlist=["compiles"]).compiles(base, Context(base))
              if c.cache == "miss" and c.kind == "eager"}
    ns: dict[str, object] = {}
    exec(compile(src, "warmup.py", "exec"), ns)  # the plan we just wrote
    assert len(ns["EAGER"]) == len(misses) > 0  # type: ignore[arg-type]
    # the churned batch size gets the shape-churn finding's buckets, and the helper pads to them
    (buckets,) = ns["BUCKETS"].values()  # type: ignore[attr-defined]
    assert set(buckets) <= {8, 16, 24, 32} and ns["bucket"](9, buckets) >= 9  # type: ignore[operator]


def test_plan_removes_compiles_from_the_steps(proof: dict[str, object], capsys: pytest.CaptureFixture[str]) -> None:
    assert "neuron-prof warm-up: compiled" in str(proof["stdout"]) and "skipped" not in str(proof["stdout"])
    base, new = load(proof["base"]), load(proof["new"])  # type: ignore[arg-type]
    assert compiles_after_first_step(base, Context(base))  # the churn compiled in later steps
    assert compiles_after_first_step(new, Context(new)) == 0
    late = [f for f in report(new).findings if f.kind in COMPILE_KINDS and f.after_warmup
            and "train.py" in (f.call_site or "")]
    assert not late, [f.title for f in late]
    assert main(["diff", str(proof["base"]), str(proof["new"])]) == 0
    out = capsys.readouterr().out
    assert "compiles after the first step" in out and "-> 0 (none in the training steps)" in out, out
    a = _first_steady_end(proof["base"], proof["t_base"])  # type: ignore[arg-type]
    b = _first_steady_end(proof["new"], proof["t_new"])  # type: ignore[arg-type]
    with capsys.disabled():
        print(f"\nwarm-up plan: to the end of the first steady step, from process start {a[0]:.2f} s without the "
              f"plan, {b[0]:.2f} s with it; from the profile's start {a[1]:.3f} s, {b[1]:.3f} s")


def test_replay_calls_signatures_and_graph_sizes_and_names_what_it_skips(capsys: pytest.CaptureFixture[str]) -> None:
    from neuron_prof.warmup.replay import run

    seen: list[int] = []
    mm = {"op": "aten::mm", "overload": "", "dims": [[4, 8], [8, 2]], "types": ["float", "float"],
          "concrete": ["", ""]}
    bad = {"op": "aten::mm", "overload": "", "dims": [[4, 8], [3, 2]], "types": ["float", "float"],
           "concrete": ["", ""]}  # shapes that cannot multiply: skipped, named, the rest goes on
    graphs = [{"frame": "0", "graph": "inner", "sizes": [8, 16]}, {"frame": "1", "graph": "other", "sizes": [4]}]
    r = run([mm, bad], graphs, "cpu", compiled={"0": seen.append})
    assert r["compiled"] == 1 and r["graphs"] == 2 and seen == [8, 16]
    assert len(r["failed"]) == 1 and "[3, 2]" in r["failed"][0][0]
    out = capsys.readouterr().out
    assert "compiled 1 of 2 eager signatures and 2 graph calls in" in out and "1 skipped" in out, out


def test_plan_of_an_asynchronous_run_lists_every_compile(proof: dict[str, object]) -> None:
    """NEURON_LAUNCH_BLOCKING=0: compiles run on the runtime's compile thread and the compile track holds only
    the waits they caused; the plan still lists every compile, from the compile thread's work. (Which host op
    each compile is placed on is the capture's matter: in async mode it may pick another call of the same op.)"""
    from neuron_prof.warmup import plan_data

    asynchronous, _, _ = _run(proof["dir"], "async.json", NEURON_LAUNCH_BLOCKING="0")  # type: ignore[arg-type]
    got, want = plan_data(asynchronous)["eager"], plan_data(proof["base"])["eager"]
    assert sum(e["count"] for e in got) == sum(e["count"] for e in want) > 40
    assert {(e["op"], e["overload"]) for e in got} == {(e["op"], e["overload"]) for e in want}
