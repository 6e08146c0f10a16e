"""Per-step bars in the TUI (issue 23, item 7): `b` on the overview lists every profiled step as a stacked bar of
its exclusive parts, like the report's "Per step" plot, at 80x24 and 160x48. Expected values come from the
analysis' step breakdown (`summary --json` step_breakdown), the numbers the bars draw."""

from __future__ import annotations

import pytest
from rich.segment import Segment

from neuron_prof.analysis import Context, step_breakdown
from neuron_prof.analysis.efficiency.critical_path import critical_path, path_parts
from neuron_prof.analysis.fmt import fmt_ns
from neuron_prof.tui.app import NeuronProfApp
from neuron_prof.tui.screens.steps import StepsScreen
from tests._demo_trace import demo_like_trace
from tests._tui_pilot import ready, screen_text, table

COLOUR = {"compile": "red", "fallback": "#e6a04e", "sync": "yellow", "collective": "cyan", "host": "blue",
          "device": "green", "idle": "grey50"}


def _bar_runs(app: NeuronProfApp, label: str) -> list[tuple[str, int]]:
    """(colour, cells) of the block runs the steps table draws on the line of step `label` (its own strip:
    the screen's compositor maps colour names to the theme's)."""
    t = table(app)
    pos = [str(t.data["label"][r]) for r in t.order].index(label)
    segs: list[Segment] = list(t.render_line(pos - t.scroll_offset.y + 1))
    return [(s.style.color.name, len(s.text)) for s in segs
            if s.text and set(s.text) == {"█"} and s.style is not None and s.style.color is not None]


def _assert_bar(app: NeuronProfApp, label: str, parts: dict[str, int], cells: int) -> None:
    """Step `label`'s bar is `cells` cells, each part in its colour, in proportion (within a cell)."""
    runs = _bar_runs(app, label)
    assert sum(c for _, c in runs) == cells, (label, runs)
    for part, ns in parts.items():
        got = sum(c for colour, c in runs if colour == COLOUR[part])
        assert abs(got - ns / sum(parts.values()) * cells) <= 1, (label, part, runs)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_b_shows_every_step_as_a_bar_of_its_parts(size: tuple[int, int]) -> None:
    trace = demo_like_trace()
    steps = step_breakdown(trace)
    longest = max(s["dur_ns"] for s in steps)
    assert len(steps) == 10 and longest > 2 * min(s["dur_ns"] for s in steps)  # bars of different lengths
    app = NeuronProfApp([trace])
    async with app.run_test(size=size) as pilot:
        await ready(pilot, app)
        # the key is named after the step sparkline; the key bar keeps "? Help" at 80 columns
        assert "b: steps" in next(ln for ln in screen_text(app).splitlines() if ln.startswith(" steps ")) and "?  Help" in screen_text(app).splitlines()[-1]
        await pilot.press("b")
        await pilot.pause()
        assert isinstance(app.screen, StepsScreen)
        lines = screen_text(app).splitlines()
        assert all(len(ln) <= size[0] for ln in lines)
        assert "10 steps" in lines[0]
        width = dict((c.key, w) for c, w in table(app).shown_columns())["parts"]
        assert width >= 20
        # GIVEN each step's parts, THEN one line per step (first 10 fit at 80x24: 24 rows less 5), its time
        # and a bar to one scale (the longest fills the column), each part in its colour, in proportion
        for s in steps[: size[1] - 5]:
            label = ("w" if s["warmup"] else "") + str(s["step"])
            line = next(ln for ln in lines if ln.split()[:1] == [label])
            assert fmt_ns(s["dur_ns"]) in line
            _assert_bar(app, label, s["parts"], max(round(s["dur_ns"] / longest * width), 1))
        # WHEN m, THEN each bar is its step's parts as shares of the whole column
        await pilot.press("m")
        await pilot.pause()
        assert "parts, shares" in screen_text(app)
        for s in steps[: size[1] - 5]:
            _assert_bar(app, ("w" if s["warmup"] else "") + str(s["step"]), s["parts"], width)
        # enter shows the step on the timeline
        await pilot.press("down", "enter")
        await pilot.pause()
        assert app.current_mode == "timeline"


async def test_b_without_steps_says_so() -> None:
    from neuron_prof.model import TraceBuilder

    b = TraceBuilder()
    b.process(1, name="host")
    b.add_slice(b.thread_track(1, 1, "MainThread"), 0, 5_000, "aten::mm", "cpu_op")
    app = NeuronProfApp([b.build()])
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await ready(pilot, app)
        await pilot.press("b")
        await pilot.pause()
        assert not isinstance(app.screen, StepsScreen)
        assert any("No steps in this trace" in str(n.message) for n in app._notifications)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_steps_view_shows_the_highlighted_steps_critical_path(size: tuple[int, int]) -> None:
    trace = demo_like_trace()
    paths = {p.step: p for p in critical_path(Context(trace))}
    app = NeuronProfApp([trace])
    async with app.run_test(size=size) as pilot:
        await ready(pilot, app)
        await pilot.press("b")
        await pilot.pause()
        # the warm-up step has no path worked out: the panel says which steps have one
        lines = screen_text(app).splitlines()
        assert f"critical path: worked out for steps {min(paths)}-{max(paths)}" in lines[2]
        await pilot.press("down")  # step 1: its path's length, the step's, the shares, the heaviest slice
        await pilot.pause()
        lines = screen_text(app).splitlines()
        assert all(len(ln) <= size[0] for ln in lines)
        p = paths[1]
        d = p.to_dict(Context(trace), 3)
        assert lines[2].strip() == (f"critical path {fmt_ns(p.length_ns)} of {fmt_ns(p.end_ns - p.start_ns)}: "
                                    + path_parts(d))
        top = d["top"][0]
        assert lines[3].strip().startswith(f"heaviest: {top['name']} host {100 * top['share']:.0f}%")
        assert "10 steps" in lines[0] and any(ln.split()[:1] == ["9"] for ln in lines)  # every step still fits
