"""The TUI on real files: every Kineto trace in ../shared/traces/kineto and the `neuron-prof demo` trace."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_prof.analysis.fmt import fmt_ns
from neuron_prof.tui.app import NeuronProfApp
from neuron_prof.tui.screens.ops import OPS
from tests._tui_pilot import SIZE, ready, screen_text

VIEWS = "12345678"


async def _visit_all_views(app: NeuronProfApp, pilot) -> dict[str, str]:  # type: ignore[no-untyped-def]
    shown = {}
    for key in VIEWS:
        await pilot.press(key)
        await pilot.pause()
        shown[app.current_mode] = screen_text(app)
    return shown


async def test_opens_every_kineto_trace(kineto_trace: Path) -> None:
    from neuron_prof.loaders import load

    wall = load(kineto_trace).wall_ns
    app = NeuronProfApp([kineto_trace])
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        text = screen_text(app)
        assert kineto_trace.name in text
        assert f"wall {fmt_ns(wall)}" in text
        shown = await _visit_all_views(app, pilot)
        assert set(shown) == {
            "overview",
            "compile",
            "fallback",
            "ops",
            "timeline",
            "memory",
            "collectives",
            "ranks",
        }
        # a foreign trace has host ops: the ops view lists some, the timeline has lanes
        assert len(OPS.of(app.data)["name"]) > 0
        assert any("  cursor " in line for line in shown["timeline"].splitlines())
        await pilot.press("q")
    assert app.return_code == 0


async def test_two_real_ranks_side_by_side() -> None:
    from neuron_prof.loaders import load
    from tests.conftest import KINETO_DIR

    paths = [KINETO_DIR / f"trace_filter_sampled_rank-{r}.json.gz" for r in (1, 0)]
    if not all(p.exists() for p in paths):
        pytest.skip("../shared/traces absent")
    traces = sorted((load(p) for p in paths), key=lambda t: t.rank if t.rank is not None else 0)
    app = NeuronProfApp(paths)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await pilot.press("8")
        await pilot.pause()
        t = app.screen.table  # type: ignore[attr-defined]
        assert t.visible_text("rank") == [str(tr.rank) for tr in traces]
        assert t.visible_text("wall_ns") == [fmt_ns(tr.wall_ns) for tr in traces]
        # every rank's collectives in one table
        await pilot.press("7")
        await pilot.pause()
        ranks = sorted(set(app.screen.table.visible_text("rank")))  # type: ignore[attr-defined]
        assert ranks == sorted(str(tr.rank) for tr in traces)


@pytest.fixture(scope="module")
def demo_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`neuron-prof demo`'s trace, made by the real command in its own process (the emulated device
    registers itself process-wide), forked from one that imported torch already (the suite's time)."""
    from tests.userland import _fork as forked

    out = tmp_path_factory.mktemp("demo") / "trace.json"
    res = forked.run([forked.CLI, "demo", "-o", str(out), "--steps", "6", "-q"], cwd=out.parent, timeout=300)
    assert res.returncode == 0 and out.exists(), res.stdout[-2000:] + res.stderr[-2000:]
    return out


@pytest.mark.slow
async def test_demo_trace_overview_puts_compile_stall_and_fallback_on_top(demo_trace: Path) -> None:
    from neuron_prof.analysis import analyze
    from neuron_prof.loaders import load

    found = analyze(load(demo_trace))
    compile_top = next(f for f in found if f.kind == "first_call_compile")
    fallback_top = next(f for f in found if f.kind == "cpu_fallback")
    app = NeuronProfApp([demo_trace])
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        lines = screen_text(app).splitlines()
        # the headline lines under the totals, above the findings table
        table_at = next(i for i, line in enumerate(lines) if line.startswith("sev "))
        head = "\n".join(lines[:table_at])
        assert f"top compile stall  {compile_top.title[:60]}" in head
        assert f"top CPU fallback   {fallback_top.title[:60]}" in head
        shown = await _visit_all_views(app, pilot)
        # the fallback view lists the demo's fallback op
        assert fallback_top.evidence["op"] in shown["fallback"]
