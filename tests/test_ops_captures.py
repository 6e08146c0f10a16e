"""One set of numbers on real captures: an op's calls, self and total time agree in `summary --json`,
`diff --json`, the HTML report, the TUI ops view and its drill-in, and match the script and the raw slices.

Two captures, each in a subprocess (the emulator's device registration cannot be undone in this process):
`neuron-prof run --emulate-neuron` (defaults: Python stacks on, so the CPU fallback of aten::sort is
aten::sort > emulator frames > aten::sort > aten::sort) and a plain torch.profiler CPU capture (where
aten::sort holds the aten::sort of its stable overload). Expected values come from the scripts (N_MM, N_SORT)
and from `_oracle`, which reads the raw slices without the code under test.
"""

from __future__ import annotations

import html
import os
import re
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

import neuron_prof
from neuron_prof.analysis import op_table
from neuron_prof.analysis.fmt import fmt_count, fmt_ns
from neuron_prof.analysis.sites.nesting import TRANSPARENT_SPANS
from neuron_prof.cli import main
from neuron_prof.model import Trace, TrackKind
from neuron_prof.tui.app import NeuronProfApp
from tests._tui_pilot import SIZE, ready, screen_text
from tests.conftest import REPO
from tests.userland import _fork as forked

N_MM, N_SORT = 7, 5

EMULATED = f"""
    import torch
    a = torch.randn(16, 16, device="neuron")
    b = torch.randn(16, 16, device="neuron")
    for _ in range({N_MM}):
        c = torch.mm(a, b)
    for _ in range({N_SORT}):
        torch.sort(c, dim=1)  # no device kernel: a CPU fallback
"""

CPU = f"""
    import sys, torch
    from torch.profiler import ProfilerActivity, profile
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    with profile(activities=[ProfilerActivity.CPU]) as p:
        for _ in range({N_MM}):
            torch.mm(a, b)
        for _ in range({N_SORT}):
            torch.sort(a, dim=1)
    p.export_chrome_trace(sys.argv[1])
"""


def _capture(script: Path, body: str, argv: list[str]) -> None:
    """Write `body` to `script`, then run `argv` (which names it: the script, or forked.CLI's command) in a process
    of its own, forked from one that imported torch already (the suite's time)."""
    script.write_text(textwrap.dedent(body))
    env = {**os.environ, "PYTHONPATH": str(REPO), "NEURON_PROF_EMULATE_COMPILE_SCALE": "0"}
    res = forked.run(argv, env=env, timeout=300, cwd=script.parent)
    assert res.returncode == 0, res.stderr[-3000:]


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("ops")
    out = {"emulated": tmp / "emulated.json", "cpu": tmp / "cpu.json"}
    emu, cpu = tmp / "emulated.py", tmp / "cpu.py"
    _capture(emu, EMULATED, [forked.CLI, "run", "-q", "--emulate-neuron", "-o", str(out["emulated"]), str(emu)])
    _capture(cpu, CPU, [str(cpu), str(out["cpu"])])
    return out


def _oracle(trace: Trace, name: str) -> tuple[int, int, int]:
    """(calls, self, total) of host op `name` from raw slices: a call is a span of that name with no span
    of that name around it on its thread; self time is the time whose innermost slice (bookkeeping spans
    aside) is a span of that name."""
    sl = trace.slices
    host = np.isin(sl.track, trace.track_ids(TrackKind.THREAD)) & (sl.dur_ns > 0)
    host &= ~np.isin(sl.name, trace.name_ids(*TRANSPARENT_SPANS))
    mine = host & (sl.name == trace.strings.get(name))
    ts, end, track = sl.ts_ns, sl.ts_ns + sl.dur_ns, sl.track
    calls, self_ns, total = 0, 0, 0
    for r in np.flatnonzero(mine):
        around = mine & (track == track[r]) & (ts <= ts[r]) & (end >= end[r])
        if around.sum() > 1:  # inside another span of the same name
            continue
        calls += 1
        total += int(sl.dur_ns[r])
        inside = np.flatnonzero(host & (track == track[r]) & (ts >= ts[r]) & (end <= end[r]))
        edges = np.unique(np.r_[ts[inside], end[inside]])
        for lo, hi in zip(edges[:-1], edges[1:], strict=True):
            cover = inside[(ts[inside] <= lo) & (end[inside] >= hi)]
            # the innermost: latest start, then shortest
            inner = cover[np.lexsort((cover, -sl.dur_ns[cover], ts[cover]))[-1]]
            self_ns += int(hi - lo) if mine[inner] else 0
    return calls, self_ns, total


def _summary(path: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["summary", str(path), "--json"]) == 0
    return orjson.loads(capsys.readouterr().out)["totals"]


@pytest.mark.parametrize("which", ["emulated", "cpu"])
def test_analysis_numbers_are_the_scripts(captures: dict[str, Path], which: str) -> None:
    trace = neuron_prof.load(captures[which])
    tab = op_table(trace)
    for name, n in (("aten::mm", N_MM), ("aten::sort", N_SORT)):
        i = tab.find(name)
        got = (int(tab.calls[i]), int(tab.self_ns[i]), int(tab.total_ns[i]))
        assert got == _oracle(trace, name), name
        assert got[0] == n, f"{name}: {got[0]} calls, the script makes {n}"
        # the re-dispatched copies are there in the trace, and are no calls of their own
        if name == "aten::sort":
            assert int((trace.slices.name == trace.strings.get(name)).sum()) > n
    if which == "emulated":
        d = tab.find("aten::mm", "device")
        assert tab.calls[d] == N_MM and tab.self_ns[d] <= tab.total_ns[d]


@pytest.mark.parametrize("which", ["emulated", "cpu"])
def test_summary_diff_and_report_show_the_same_numbers(
    captures: dict[str, Path], which: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = captures[which]
    trace = neuron_prof.load(path)
    tab = op_table(trace)
    totals = _summary(path, capsys)
    assert main(["diff", str(path), str(path), "--json", "--top", "1000"]) == 0
    d = orjson.loads(capsys.readouterr().out)
    steps = totals["steps"]["count"] or 0
    assert main(["report", str(path), "-o", str(tmp_path / "r.html")]) == 0
    page = html.unescape((tmp_path / "r.html").read_text())
    for name in ("aten::mm", "aten::sort"):
        i = tab.find(name)
        calls, self_ns, total = int(tab.calls[i]), int(tab.self_ns[i]), int(tab.total_ns[i])
        top = next(o for o in totals["top_ops"] if o["name"] == name)
        assert (top["count"], top["self_ns"], top["total_ns"]) == (calls, self_ns, total)
        op = next(o for o in d["ops"] if o["name"] == name and o["where"] == "host")
        per = self_ns // steps if d["ops_unit"] == "ns per step" else self_ns
        assert (op["base_count"], op["new_count"], op["base_ns"], op["new_ns"]) == (calls, calls, per, per)
        row = f"<tr><td>{name}</td><td class=\"num\">{calls:,}</td>" \
              f"<td class=\"num\">{self_ns / 1e6:,.3f}</td><td class=\"num\">{total / 1e6:,.3f}</td></tr>"
        assert row in page, re.findall(rf"<tr><td>{name}</td>.*?</tr>", page)
    if which == "emulated":
        i = tab.find("aten::mm", "device")
        dev = next(o for o in totals["top_device_ops"] if o["name"] == "aten::mm")
        assert (dev["count"], dev["total_ns"]) == (int(tab.calls[i]), int(tab.total_ns[i]))
        op = next(o for o in d["ops"] if o["name"] == "aten::mm" and o["where"] == "device")
        assert op["base_count"] == N_MM


async def _tui_row(app: NeuronProfApp, pilot: Any, name: str, where: str) -> dict[str, Any]:
    """Filter the ops view to `name`, highlight its `where` row, press enter: what the ops view row and the
    list of calls show."""
    await pilot.press("4", "slash", *name, "enter")
    await pilot.pause()
    t = app.screen.table  # type: ignore[attr-defined]
    pos = [k for k, r in enumerate(t.order) if t.data["name"][r] == name and t.data["where"][r] == where]
    assert len(pos) == 1, t.visible_text("name")
    t.move_to(pos[0])
    await pilot.pause()
    row = next(line for line in screen_text(app).splitlines() if f" {name} " in f" {line} " and where in line)
    values = {k: t.value(k) for k in ("count", "self_ns", "total_ns")}
    await pilot.press("enter")
    await pilot.pause()
    calls = app.screen.table  # type: ignore[attr-defined]
    got = {"row": row, "view": values, "n": len(calls.order), "title": screen_text(app).splitlines()[0],
           "self": int(calls.data["self_ns"].sum()), "dur": int(calls.data["dur_ns"].sum()),
           "rows": calls.data["row"].tolist()}
    await pilot.press("escape")
    await pilot.pause()
    await pilot.press("escape")  # clear the filter
    await pilot.pause()
    return got


@pytest.mark.parametrize("which", ["emulated", "cpu"])
async def test_tui_ops_view_and_drill_in_show_the_same_numbers(
    captures: dict[str, Path], which: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = captures[which]
    totals = _summary(path, capsys)
    top = {(o["name"], "host"): o for o in totals["top_ops"]}
    top |= {(o["name"], "device"): o for o in totals["top_device_ops"]}
    trace = neuron_prof.load(path)
    tab = op_table(trace)
    names = [("aten::mm", "host"), ("aten::sort", "host")]
    if which == "emulated":
        names.append(("aten::mm", "device"))
    app = NeuronProfApp([trace])
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        for name, where in names:
            got = await _tui_row(app, pilot, name, where)
            i = tab.find(name, where)
            calls, self_ns, total = int(tab.calls[i]), int(tab.self_ns[i]), int(tab.total_ns[i])
            summary = top[(name, where)]
            shown = (summary["count"], summary.get("self_ns", self_ns), summary["total_ns"])
            assert shown == (calls, self_ns, total)
            # the ops view row: its values and what is drawn
            assert got["view"] == {"count": calls, "self_ns": self_ns, "total_ns": total}
            drawn = " ".join(got["row"].split())
            assert f" {fmt_count(calls)} " in f" {drawn} ", drawn
            assert fmt_ns(total) in drawn and fmt_ns(self_ns) in drawn, drawn
            # the drill-in: one row per call, their times sum to the op's
            assert got["n"] == calls == (N_MM if name == "aten::mm" else N_SORT)
            assert f"({calls:,})" in got["title"]
            assert (got["self"], got["dur"]) == (self_ns, total)
            nm = trace.slices.name[got["rows"]]
            if where == "device":  # NEFF executions (Neuron Explorer's nc_exec_running) launched by the op
                assert set(nm.tolist()) == {trace.strings.get("nc_exec_running")}
                launched = {int(s) for s, d in zip(trace.flows.src, trace.flows.dst) if int(d) in set(got["rows"])}
                assert {trace.slice_name(r) for r in launched} == {name}
            else:
                assert set(nm.tolist()) == {trace.strings.get(name)}
        await pilot.press("q")
