"""Captures that stay small (issue 35, item 3): Python work that launched no op is folded into one slice at its
line (`neuron_prof/capture/_prune.py`), and `max_events` keeps a capture under a size (`capture/_cap.py`).

Real captures of a program that imports a heavy pure-Python module inside the profiled block (~50k Python
calls, none an op), then trains a few steps; the same program captured with every Python call kept is the
reference for the lines.
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections import Counter
from collections.abc import Iterator

import pytest

import neuron_prof
from neuron_prof.analysis import Context, sites_of
from neuron_prof.capture._cap import cap_events
from neuron_prof.cli import main
from neuron_prof.model import KinetoCat, Meta, Trace, TrackKind

HEAVY = textwrap.dedent("""\
    def _leaf(i):
        return str(i).startswith("1")

    TABLE = [_leaf(i) for i in range(25000)]  # ~50k Python calls: a function and a builtin each
    """)

PROGRAM = textwrap.dedent("""\
    import sys
    import time
    import torch

    def words(n):
        return [w.upper() for w in ("a b c " * n).split()]

    def run(prof, steps):
        import capsize_heavy  # LINE: import
        lin = torch.nn.Linear(8, 8)
        opt = torch.optim.SGD(lin.parameters(), lr=0.1)
        x = torch.randn(4, 8)
        for _ in range(100):
            words(1)  # LINE: loop
        for i in range(steps):
            y = torch.relu(lin(x))  # LINE: forward
            w = words(50)  # LINE: words
            n = len(w)  # LINE: builtin
            time.sleep(0.002)  # LINE: sleep
            y.sum().backward()  # LINE: backward
            opt.step()  # LINE: step
            opt.zero_grad()
            prof.step()
    """)
STEPS = 6
CAP = 500


def tagged(src: str) -> dict[str, int]:
    return {ln.split("# LINE:")[1].strip(): i for i, ln in enumerate(src.splitlines(), 1) if "# LINE:" in ln}


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Trace]]:
    d = tmp_path_factory.mktemp("capsize")
    (d / "capsize_heavy.py").write_text(HEAVY)
    (d / "capsize_prog.py").write_text(PROGRAM)
    sys.path.insert(0, str(d))
    try:
        import capsize_prog  # type: ignore[import-not-found]

        out: dict[str, Trace] = {}
        for mode, kw in (("full", {"full_python_trace": True}), ("default", {}),
                         ("capped", {"max_events": CAP, "output": d / "capped.json"})):
            if mode != "capped":  # imported inside the capture (the capped one needs no 50k calls to load)
                sys.modules.pop("capsize_heavy", None)
            kw = {"output": None, **kw}
            with neuron_prof.profile(kw.pop("output"), quiet=True, pftrace=False, **kw) as prof:
                capsize_prog.run(prof, STEPS)
            assert prof.trace is not None
            out[mode] = prof.trace
        out["capped_path"] = d / "capped.json"  # type: ignore[assignment]
        yield out
    finally:
        sys.path.remove(str(d))
        for m in ("capsize_heavy", "capsize_prog"):
            sys.modules.pop(m, None)


def _python_rows(t: Trace) -> list[int]:
    return [int(r) for r in t.slices_on(TrackKind.THREAD) if t.strings[int(t.slices.cat[r])] == KinetoCat.PYTHON]


def _at(t: Trace, r: int, line: int) -> bool:
    """Whether Python slice `r` was called from that line of the program (its path as torch names the file:
    relative to a sys.path entry or absolute)."""
    return os.path.basename(str(t.slice_args(r).get("call_site", ""))) == f"capsize_prog.py:{line}"


def _op_sites(t: Trace) -> Counter[tuple[str, str]]:
    """(op, call site) -> how many such cpu_ops the capture holds."""
    sites = sites_of(Context(t))
    return Counter((t.slice_name(int(r)), sites.of_row(int(r)).call_site)
                   for r in t.slices_on(TrackKind.THREAD) if t.strings[int(t.slices.cat[r])] == KinetoCat.CPU_OP)


def test_the_import_is_one_slice_at_its_line_and_the_trace_far_smaller(captures: dict[str, Trace]) -> None:
    full, pruned = captures["full"], captures["default"]
    lines = tagged(PROGRAM)
    assert len(_python_rows(full)) > 40_000
    assert pruned.n_events * 20 < full.n_events
    heavy = [r for r in _python_rows(pruned) if "capsize_heavy" in pruned.slice_name(r)]
    assert not heavy  # nothing that ran inside the import
    imports = [r for r in _python_rows(pruned) if _at(pruned, r, lines["import"])]
    assert len(imports) == 1
    (imp,) = imports
    assert "_find_and_load" in pruned.slice_name(imp) and pruned.slices.dur_ns[imp] > 0
    assert not [r for r in _python_rows(pruned) if pruned.slice_name(r).startswith("<built-in method upper")]
    # a builtin that launched no op is not kept, even called from the user's line
    assert not [r for r in _python_rows(pruned) if _at(pruned, r, lines["builtin"])]
    assert [r for r in _python_rows(full) if _at(full, r, lines["builtin"])]
    # unless it took long enough for a finding to name it (a sleep: a straggler's cause, a gap's)
    slept = [r for r in _python_rows(pruned) if _at(pruned, r, lines["sleep"])]
    assert len(slept) == STEPS and all(pruned.slices.dur_ns[r] >= 2_000_000 for r in slept)
    info = pruned.metadata[Meta.CAPTURE_REDUCED]["python"]
    assert info["dropped"] > 40_000 and info["python_slices"] >= info["dropped"] + len(_python_rows(pruned))
    assert Meta.CAPTURE_REDUCED not in full.metadata


def test_every_op_keeps_its_exact_line(captures: dict[str, Trace]) -> None:
    full, pruned = _op_sites(captures["full"]), _op_sites(captures["default"])
    lines = tagged(PROGRAM)
    assert full == pruned  # the same ops, each at the same line
    assert {f"capsize_prog.py:{lines[k]}" for k in ("forward", "backward", "step")} <= {os.path.basename(s)
                                                                                       for _, s in pruned}


def test_op_free_calls_between_ops_are_one_slice_each_and_a_loop_of_them_one_slice(captures: dict[str, Trace]) -> None:
    t = captures["default"]
    lines = tagged(PROGRAM)
    calls = [r for r in _python_rows(t) if _at(t, r, lines["words"])]
    assert len(calls) == STEPS and all(t.slice_name(r).endswith(": words") for r in calls)
    # a loop of them with no op between: one slice over the loop, saying how many calls it stands for
    (run,) = [r for r in _python_rows(t) if _at(t, r, lines["loop"])]
    assert t.slice_args(run)["python_calls"] == 100 and t.slice_name(run).endswith(": words")


def test_max_events_keeps_the_capture_under_it_and_summary_says_what_went(
        captures: dict[str, Trace], capsys: pytest.CaptureFixture[str]) -> None:
    capped = captures["capped"]
    assert capped.n_events <= CAP
    info = capped.metadata[Meta.CAPTURE_REDUCED]
    assert info["max_events"] == CAP and info["events_before"] > CAP
    assert info["python_frames_dropped"] > 0 and info["steps_sampled"]["steps_dropped"] > 0
    assert 0 in info["steps_sampled"]["kept"]
    assert main(["summary", str(captures["capped_path"])]) == 0  # type: ignore[arg-type]
    out = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    line = out[out.index("Capture kept small"):].split(" Findings:")[0]
    assert f"--max-events {CAP}" in line and "Python frames deeper than" in line and "1 step in" in line


def test_max_events_drops_the_deepest_python_frames_first(captures: dict[str, Trace]) -> None:
    t = captures["default"]
    ops = _op_sites(t)
    capped, info = cap_events(t, t.n_events - 3)
    assert capped.n_events <= t.n_events - 3
    assert "steps_sampled" not in info and info["python_frames_dropped"] >= 3
    assert _op_sites(capped) == ops  # no op went
    assert cap_events(t, t.n_events) == (t, {})
