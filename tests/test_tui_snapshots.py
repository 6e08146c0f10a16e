"""TUI layer 4: SVG screenshots of the overview, compile and ops views at 80x24, compared with tests/snapshots/tui.

pytest-textual-snapshot needs pytest<9 (textual-facts.md), so the comparison is done here: the SVG of
`App.export_screenshot()` must equal the stored one byte for byte (Textual is pinned in constraints.txt).
On a difference the test fails with a diff of the screen's text and writes the new SVG to the temporary
folder it names; look at both, then accept it with ``NEURON_PROF_UPDATE_SNAPSHOTS=1``.
"""

from __future__ import annotations

import difflib
import os
import re
import tempfile
from html import unescape
from pathlib import Path

import pytest

from neuron_prof.tui.app import NeuronProfApp
from tests._demo_trace import LONG, demo_like_trace
from tests._tui_pilot import ready
from tests.conftest import KINETO_DIR

SNAPSHOTS = Path(__file__).with_name("snapshots") / "tui"
VIEWS = ("overview", "compile", "ops")
GPU = "critical_path_alexnet_trace.json.gz"


def svg_text(svg: str) -> list[str]:
    """The text lines an SVG screenshot draws (for a readable failure)."""
    lines: dict[str, str] = {}
    for m in re.finditer(r'<text class="[^"]*" x="[\d.]+" y="([\d.]+)"[^>]*>([^<]*)</text>', svg):
        lines[m.group(1)] = lines.get(m.group(1), "") + unescape(m.group(2)).replace("\xa0", " ")
    return [ln.rstrip() for _, ln in sorted(lines.items(), key=lambda kv: float(kv[0]))]


def compare(name: str, svg: str) -> None:
    path = SNAPSHOTS / f"{name}.svg"
    if os.environ.get("NEURON_PROF_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOTS.mkdir(parents=True, exist_ok=True)
        path.write_text(svg, encoding="utf-8")
        return
    assert path.is_file(), f"no snapshot {path}: run with NEURON_PROF_UPDATE_SNAPSHOTS=1 and look at it"
    old = path.read_text(encoding="utf-8")
    if svg != old:
        new = Path(tempfile.mkdtemp(prefix="neuron-prof-snapshot-")) / path.name
        new.write_text(svg, encoding="utf-8")
        diff = "\n".join(difflib.unified_diff(svg_text(old), svg_text(svg), "stored", "now", lineterm=""))
        pytest.fail(f"{name} differs from {path} (new: {new}):\n{diff or 'styles only'}")


async def _shoot(app: NeuronProfApp, prefix: str) -> None:
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app)
        for view in VIEWS:
            app.show_view(view)
            await pilot.pause()
            compare(f"{prefix}-{view}", app.export_screenshot(title="neuron-prof"))


async def test_demo_views_look_as_stored() -> None:
    await _shoot(NeuronProfApp([demo_like_trace(site_dir=LONG)]), "demo")


async def test_gpu_trace_views_look_as_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    if not (KINETO_DIR / GPU).is_file():
        pytest.skip("../shared/traces absent")
    # a relative path: the overview shows the source as given, and checkouts differ in where ../shared is
    monkeypatch.chdir(KINETO_DIR)
    await _shoot(NeuronProfApp([GPU]), "gpu")
