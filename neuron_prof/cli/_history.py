"""`neuron-prof history`: the recorded runs (newest first) and each script's step-time trend."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float]) -> str:
    """One bar per value, scaled between their minimum and maximum."""
    if not values:
        return ""
    lo, hi = min(values), max(values)
    span = hi - lo
    return "".join(_BARS[int((v - lo) / span * (len(_BARS) - 1)) if span else 0] for v in values)


def _row_line(r: dict[str, Any]) -> str:
    from neuron_prof.analysis import fmt_ns

    when = time.strftime("%Y-%m-%d %H:%M", time.localtime((r.get("recorded_ns") or 0) / 1e9))
    git = f"{r.get('git_branch') or '-'}@{(r.get('git_commit') or '-')[:8]}"
    script = Path(r["script"]).name if r.get("script") else "?"
    args = " ".join(r.get("args") or [])
    step = fmt_ns(r["steady_step_ns"]) if r.get("steady_step_ns") else "-"
    comp = fmt_ns(r["compile_ns"]) if r.get("compile_ns") else "0"
    kinds = r.get("findings_by_kind") or {}
    found = ", ".join(f"{k} {n}" for k, n in kinds.items()) or "none"
    return (f"{r['id']:>5}  {when}  {git:<24}  {(script + ' ' + args).strip()[:32]:<32}  step {step:>9}  "
            f"compile {comp:>9}  fallbacks {r.get('fallback_count') or 0:>4}  {found}")


def trend_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Per script: its steady step over the recorded runs (oldest to newest) and the change."""
    from neuron_prof.analysis import fmt_ns

    out = []
    by_script: dict[str, list[dict[str, Any]]] = {}
    for r in reversed(rows):
        if r.get("steady_step_ns") and r.get("script"):
            by_script.setdefault(r["script"], []).append(r)
    for script, rs in by_script.items():
        steps = [float(r["steady_step_ns"]) for r in rs]
        change = f", {steps[-1] / steps[0] - 1:+.1%} from the first" if len(steps) > 1 and steps[0] else ""
        out.append(f"  {script}: {len(rs)} run{'s' if len(rs) != 1 else ''}, steady step {sparkline(steps)} "
                   f"{fmt_ns(int(steps[0]))} -> {fmt_ns(int(steps[-1]))}{change}")
    return out


@click.command()
@click.option("--script", default=None, metavar="PATH", help="Only the runs of this script.")
@click.option("--branch", default=None, help="Only the runs recorded on this git branch.")
@click.option("-n", "--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Runs to list.")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
def command(script: str | None, branch: str | None, limit: int, as_json: bool) -> int:
    """List the recorded runs, newest first, and each script's steady-step trend. `run`, `profile()` and
    `summary` record one row per run (time, git commit and branch, script and arguments, totals, findings by
    kind) in the user's data folder ($NEURON_PROF_DATA_DIR, else $XDG_DATA_HOME/neuron-prof, else
    ~/.local/share/neuron-prof); NEURON_PROF_HISTORY=0 records nothing. `check --baseline last|main` reads it.

    \b
    neuron-prof history
    neuron-prof history --script train.py --json | jq '.[0].steady_step_ns'
    """
    import orjson

    from neuron_prof.history import db_path, runs

    if script is not None and Path(script).exists():
        script = str(Path(script).resolve())
    rows = runs(script=script, branch=branch, limit=limit)
    if as_json:
        click.echo(orjson.dumps(rows, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE), nl=False)
        return 0
    if not rows:
        click.echo(f"neuron-prof history: no runs recorded ({db_path()})")
        return 0
    click.echo(f"neuron-prof history: {len(rows)} run{'s' if len(rows) != 1 else ''} ({db_path()})")
    for r in rows:
        click.echo(_row_line(r))
    lines = trend_lines(rows)
    if lines:
        click.echo("Trend")
        for ln in lines:
            click.echo(ln)
    return 0
