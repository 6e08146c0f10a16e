"""Exact call sites: the mechanisms behind them (see neuron_prof/capture/_sites.py, _operators.py, _device_ops.py).

Each test runs a real capture and checks the line of the statement, read from the script itself (`# LINE:`
tags), never a function's first line, the `with` line or 0.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import torch

import neuron_prof
from neuron_prof.analysis import Context, analyze, sites_of
from neuron_prof.model import KinetoCat, TrackKind
from tests.userland import _fork as forked

NEURON_PROF = str(Path(sys.executable).with_name("neuron-prof"))


def tagged(src: str) -> dict[str, int]:
    """tag -> line number of the lines marked `# LINE: tag` in `src`."""
    return {ln.split("# LINE:")[1].strip(): i for i, ln in enumerate(src.splitlines(), 1) if "# LINE:" in ln}


def run_script(tmp_path: Path, src: str, *opts: str, fork: bool = True) -> neuron_prof.Trace:
    """`neuron-prof run` of `src` in a process of its own: forked from one that imported torch already (the
    suite's time), or, `fork=False`, a child of this one from scratch (its memory in RUSAGE_CHILDREN)."""
    script = tmp_path / "job.py"
    script.write_text(src)
    out = tmp_path / "t.json"
    args = ["run", "-q", "-o", str(out), *opts, str(script)]
    r = (forked.run([forked.CLI, *args], cwd=tmp_path, timeout=300) if fork else
         subprocess.run([NEURON_PROF, *args], capture_output=True, text=True, timeout=300, cwd=tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    return neuron_prof.load(out)


OPERATORS = textwrap.dedent("""\
    import torch

    def helper(a, b):
        return (a @ b).relu()  # LINE: matmul

    class Net:
        def step(self, x):
            y = x[1:] * 2  # LINE: index
            return [t + 1 for t in y]  # LINE: comprehension

    x = torch.randn(4, 4)
    for i in range(2):
        h = helper(x, x)  # LINE: helper-call
        outs = Net().step(h)  # LINE: method-call
        f = (lambda t: t.sum() - 1)(h)  # LINE: lambda
    """)


def test_operator_statements_get_their_line_in_functions_methods_lambdas_comprehensions(tmp_path: Path) -> None:
    lines = tagged(OPERATORS)
    t = run_script(tmp_path, OPERATORS, "--operator-lines")
    sites = sites_of(Context(t))
    by_op: dict[str, set[str]] = {}
    stacks: dict[str, set[tuple[str, ...]]] = {}
    for r in t.slices_on(TrackKind.THREAD):
        if t.strings[int(t.slices.cat[r])] != KinetoCat.CPU_OP:
            continue
        s = sites.of_row(int(r))
        by_op.setdefault(t.slice_name(int(r)), set()).add(s.call_site)
        stacks.setdefault(t.slice_name(int(r)), set()).add(s.stack)
    assert by_op["aten::matmul"] == {f"job.py:{lines['matmul']}"}
    assert by_op["aten::relu"] == {f"job.py:{lines['matmul']}"}
    assert by_op["aten::slice"] == {f"job.py:{lines['index']}"}
    assert by_op["aten::mul"] == {f"job.py:{lines['index']}"}
    assert by_op["aten::add"] == {f"job.py:{lines['comprehension']}"}
    assert f"job.py:{lines['lambda']}" in by_op["aten::sub"]
    # the user's stack, outermost first: the module-level call, then the helper
    assert stacks["aten::matmul"] == {(f"job.py:{lines['helper-call']} <module>", f"job.py:{lines['matmul']} helper")}
    assert (f"job.py:{lines['method-call']} <module>", f"job.py:{lines['comprehension']} step",
            f"job.py:{lines['comprehension']} <listcomp>") in stacks["aten::add"]
    # never a def line or 0, and no frame of neuron_prof, runpy or click on any stack
    for site_set in by_op.values():
        assert not any(s.endswith(":0") for s in site_set)
    assert t.metadata["stack_lines"] == "exact" and t.metadata["user_files"] == ["job.py"]


def test_no_library_python_frames_in_the_trace(tmp_path: Path) -> None:
    t = run_script(tmp_path, OPERATORS, "--operator-lines")  # the forwarders' frames are neuron_prof's too
    py = [t.slice_name(int(r)) for r in t.slices_on(TrackKind.THREAD)
          if t.strings[int(t.slices.cat[r])] == KinetoCat.PYTHON]
    assert py and not [n for n in py if "neuron_prof" in n or "runpy" in n or "click/" in n or n.startswith("neuron-prof")]
    stacks = [t.slice_args(r).get("Call stack", "") for r in range(len(t.slices))]
    assert not [s for s in stacks if "neuron_prof" in s or "runpy" in s]


def test_operator_recorder_keeps_warnings_at_the_users_line_and_restores_torch() -> None:
    before = {n: torch.Tensor.__dict__.get(n) for n in ("__add__", "__float__", "__getitem__", "T", "__matmul__")}
    x = torch.ones(2, requires_grad=True)
    always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)  # torch warns about this once per process: another test may have had it
    try:
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            with neuron_prof.profile(None, quiet=True, operator_lines=True):
                v = float(x.sum())  # LINE: float-warning
    finally:
        torch.set_warn_always(always)
    line = tagged(Path(__file__).read_text())["float-warning"]
    scalar = [w for w in got if "to a scalar" in str(w.message)]
    assert v == 2.0 and scalar and scalar[0].filename == __file__ and scalar[0].lineno == line
    assert {n: torch.Tensor.__dict__.get(n) for n in before} == before


def test_torch_compile_under_the_operator_recorder_adds_no_graph_break() -> None:
    import torch._dynamo

    def f(a: torch.Tensor) -> torch.Tensor:
        return (a @ a.T + 1)[0] * 2

    torch._dynamo.reset()
    cf = torch.compile(f, backend="eager", dynamic=False)
    with neuron_prof.profile(None, quiet=True, operator_lines=True):
        out = cf(torch.ones(3, 3))
    from torch._dynamo.utils import counters

    assert torch.equal(out, f(torch.ones(3, 3)))
    assert sum(counters["graph_break"].values()) == 0, dict(counters["graph_break"])
    torch._dynamo.reset()


DEVICE_FORMS = textwrap.dedent("""\
    import torch
    dev = "neuron"
    x = torch.randn(4, 3).to(dev)
    for i in range(2):
        a = x.sum().item()  # LINE: item
        b = float(x.sum())  # LINE: float
        c = int(x.argmax())  # LINE: int
        if (x > 0).any():  # LINE: if
            pass
        l = x.tolist()  # LINE: tolist
        h = x.cpu()  # LINE: cpu
        n = x.cpu().numpy()  # LINE: numpy
        print(x[0])  # LINE: print
        nz = torch.nonzero(x > 0)  # LINE: nonzero
        ms = torch.masked_select(x, x > 0)  # LINE: masked_select
        u = torch.unique(x.round())  # LINE: unique
        host = torch.empty(4, 3)
        host.copy_(x)  # LINE: copy
        torch.neuron.synchronize()  # LINE: synchronize
    acc = torch.zeros(2, dtype=torch.float64, device=dev)  # LINE: f64-factory
    w = torch.ones(3, 5, dtype=torch.float64).to(dev)  # LINE: f64-to
    d = x.double()  # LINE: f64-double
    for i in range(3):
        acc += 1  # uses of a float64 tensor already on the device: not new demotions
    torch.set_default_dtype(torch.float64)
    z = torch.zeros(7, device=dev)  # LINE: f64-default
    torch.set_default_dtype(torch.float32)
    """)


def test_every_sync_form_and_float64_arrival_at_its_line_on_the_emulated_device(tmp_path: Path) -> None:
    lines = tagged(DEVICE_FORMS)
    t = run_script(tmp_path, DEVICE_FORMS, "--emulate-neuron")
    found = analyze(t)
    syncs = {f.call_site: f for f in found if f.kind == "sync_point"}
    for tag in ("item", "float", "int", "if", "tolist", "cpu", "numpy", "print", "nonzero", "masked_select",
                "copy", "synchronize"):
        site = f"job.py:{lines[tag]}"
        assert site in syncs, (tag, sorted(syncs))
        assert syncs[site].count == 2, (tag, syncs[site].count)  # once per loop iteration, one per statement
    # unique has no device kernel on TorchNeuron: it is a CPU fallback (its wait is the fallback's cost)
    fallbacks = {f.call_site: f for f in found if f.kind == "cpu_fallback"}
    assert f"job.py:{lines['unique']}" in fallbacks and f"job.py:{lines['unique']}" not in syncs
    dtypes = {f.call_site: f for f in found if f.kind == "dtype_demotion" and "float64" in f.title}
    assert set(dtypes) == {f"job.py:{lines[k]}" for k in ("f64-factory", "f64-to", "f64-double", "f64-default")}
    assert all(f.count == 1 for f in dtypes.values())
    assert dtypes[f"job.py:{lines['f64-to']}"].evidence["shapes"] == ["[3, 5]"]
    assert dtypes[f"job.py:{lines['f64-default']}"].evidence["shapes"] == ["[7]"]


TINY = textwrap.dedent("""\
    import torch
    dev = "neuron"
    m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).to(dev)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    for i in range(10):
        x = torch.randn(16, 32).to(dev)
        y = torch.randint(0, 10, (16,)).to(dev)
        loss = torch.nn.functional.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(loss.item())
    """)


def test_a_tiny_model_on_the_emulated_device_writes_a_small_trace(tmp_path: Path) -> None:
    """Issue 14: library frames made a 10-step tiny model write GBs; now under 20 MB and 2 GB of RAM."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = run_script(tmp_path, TINY, "--emulate-neuron", fork=False)
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    size = os.path.getsize(tmp_path / "t.json") + os.path.getsize(tmp_path / "t.pftrace")
    assert size < 20e6, size
    assert max(peak_kb, before) < 2 * 1024 * 1024, peak_kb
    assert t.metadata["stack_lines"] == "exact"


DEFAULTS = textwrap.dedent("""\
    import torch

    x = torch.randn(4, 4)
    for i in range(2):
        y = x * 2 + 1  # LINE: operator
        v = float(y.sum())  # LINE: float
        s = torch.sigmoid(y)  # LINE: call
    """)


def test_by_default_operators_cost_no_call_and_conversions_keep_their_line(tmp_path: Path) -> None:
    """Without `operator_lines` an operator statement's op has no line (no Python call per operator, issue 32);
    a conversion (`float(t)`: a host read, a sync point on a device) and a call keep theirs."""
    lines = tagged(DEFAULTS)
    t = run_script(tmp_path, DEFAULTS)
    sites = sites_of(Context(t))
    by_op: dict[str, set[str]] = {}
    for r in t.slices_on(TrackKind.THREAD):
        if t.strings[int(t.slices.cat[r])] == KinetoCat.CPU_OP:
            by_op.setdefault(t.slice_name(int(r)), set()).add(sites.of_row(int(r)).call_site)
    assert by_op["aten::sigmoid"] == {f"job.py:{lines['call']}"}
    assert by_op["aten::_local_scalar_dense"] == {f"job.py:{lines['float']}"}
    assert f"job.py:{lines['operator']}" not in by_op["aten::mul"] | by_op["aten::add"]


def test_default_capture_runs_no_python_per_operator() -> None:
    """Only the conversions get a forwarder by default; every operator keeps torch's C slot, and no dispatch
    or function mode is pushed (nothing of neuron-prof runs per op in Python)."""
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    from neuron_prof.capture._operators import CONVERSIONS, OPERATORS

    before = {n: torch.Tensor.__dict__.get(n) for n in OPERATORS + CONVERSIONS}
    with neuron_prof.profile(None, quiet=True):
        during = {n: torch.Tensor.__dict__.get(n) for n in before}
        modes = list(_get_current_dispatch_mode_stack()) + list(_get_current_function_mode_stack())
    assert {n for n in OPERATORS if during[n] is not before[n]} == set()
    assert {n for n in CONVERSIONS if during[n] is not before[n]} == set(CONVERSIONS)
    assert modes == []
    with neuron_prof.profile(None, quiet=True, operator_lines=True):
        assert torch.Tensor.__dict__.get("__mul__") is not before["__mul__"]
    assert {n: torch.Tensor.__dict__.get(n) for n in before} == before
