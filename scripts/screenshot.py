"""Regenerate the TUI overview screenshot that README.md and docs/tui.md show (an SVG saved by Textual).

    python scripts/screenshot.py                       # runs `neuron-prof demo` in a temp dir
    python scripts/screenshot.py --trace trace.json    # shoot an existing trace
    python scripts/screenshot.py --view compile -o docs/tui-compile.svg

The app runs headless at --size (default 140x40); the picture is what a terminal of that size shows.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VIEWS = ("overview", "compile", "fallback", "ops", "timeline", "memory", "collectives", "ranks")


async def shoot(trace: Path, out: Path, view: str, size: tuple[int, int]) -> None:
    from neuron_prof.tui.app import NeuronProfApp

    app = NeuronProfApp([trace], start_view=view)
    async with app.run_test(size=size) as pilot:
        while app.is_running and not (app.ready and app.current_mode == view):
            await asyncio.sleep(0.05)
        if not app.ready:
            raise SystemExit(f"could not open {trace}: {app.error}")
        await pilot.pause()
        svg = app.export_screenshot(title=f"neuron-prof tui {trace.name}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(svg, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", type=Path, help="trace to open (default: a fresh `neuron-prof demo` trace)")
    ap.add_argument("-o", "--output", type=Path, default=REPO / "docs" / "tui-overview.svg")
    ap.add_argument("--view", choices=VIEWS, default="overview")
    ap.add_argument("--size", default="140x40", help="terminal COLSxROWS")
    ap.add_argument("--steps", type=int, default=12, help="demo steps when no --trace is given")
    a = ap.parse_args(argv)
    cols, rows = (int(x) for x in a.size.lower().split("x"))
    a.output = a.output.resolve()
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        trace = a.trace
        if trace is None:
            from neuron_prof.demo import run_demo

            out = Path(tmp) / "trace.json"
            run_demo(str(out), steps=a.steps, quiet=True)
            trace = next((p for p in (out, out.with_suffix(".pftrace")) if p.exists()), None)
            if trace is None:
                raise SystemExit("the demo wrote no trace")
            # shown as the file name a user would type, not a temp path
            os.chdir(tmp)
            trace = Path(trace.name)
        try:
            asyncio.run(shoot(trace, a.output, a.view, (cols, rows)))
        finally:
            os.chdir(cwd)
    print(a.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
