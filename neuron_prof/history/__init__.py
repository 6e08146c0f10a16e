"""Run history: one row per run (time, git commit and branch, script and arguments, totals, findings by kind)
in an SQLite file in the user's data folder, written by `run`, `profile()` and `summary`; `neuron-prof history`
lists it, `check --baseline last|main` picks a baseline from it, the HTML report plots its step-time trend.

    record(trace, Path("trace.json"), "profile")   # None, or one line saying why it was not recorded
    runs(script="/abs/train.py")                     # rows, newest first
    resolve_baseline("last", Path("trace.json"))     # the trace of the previous run of the same script
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from neuron_prof.errors import UsageError
from neuron_prof.history.record import ENABLE_ENV, build_row, enabled, git_info, record
from neuron_prof.history.store import BUDGET_ENV, db_path, rows

__all__ = ["BUDGET_ENV", "ENABLE_ENV", "build_row", "db_path", "enabled", "git_info", "record", "resolve_baseline",
           "row_of", "runs", "trace_of", "trend", "trend_of", "trend_series"]

BASELINE_NAMES = ("last", "main")


def runs(*, script: str | None = None, branch: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """Recorded runs, newest first, of one script and/or branch when given."""
    where, params = [], []
    if script is not None:
        where.append("script = ?")
        params.append(script)
    if branch is not None:
        where.append("git_branch = ?")
        params.append(branch)
    return rows(" AND ".join(where), tuple(params), limit=limit)


def row_of(trace_path: Path) -> dict[str, Any] | None:
    """The latest row recorded for the trace at `trace_path`."""
    found = rows("trace_path = ?", (str(trace_path.resolve()),), limit=1)
    return found[0] if found else None


def trace_of(row: dict[str, Any]) -> Path | None:
    """A readable trace of `row`: the history's kept link or copy, else the file it was written to when that is
    still the same file (same size and time); None when it is gone or overwritten."""
    kept = row.get("kept_path")
    if kept and Path(kept).is_file():
        return Path(kept)
    p = Path(row["trace_path"])
    try:
        st = p.stat()
    except OSError:
        return None
    return p if (st.st_size, st.st_mtime_ns) == (row.get("trace_size"), row.get("trace_mtime_ns")) else None


def trend(script: str | None, limit: int = 20) -> list[dict[str, Any]]:
    """The last `limit` runs of `script` with a steady step time, oldest first (what the trend plots)."""
    if script is None:
        return []
    return [r for r in reversed(runs(script=script, limit=limit * 4)) if r.get("steady_step_ns")][-limit:]


def trend_of(trace_path: Path, limit: int = 20) -> list[dict[str, Any]]:
    """`trend` of the script the trace at `trace_path` ran: what the report and the TUI plot. Empty without a
    history, when the trace is not in it, or when the history cannot be read (a plot is never worth an error)."""
    try:
        row = row_of(trace_path)
        return trend(row.get("script") if row else None, limit)
    except Exception:  # noqa: BLE001  (an unreadable history: the report and the TUI go without their trend)
        return []


def trend_series(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """The trend's columns, one item per run (oldest first): "run" ("#12"), "steady_ns", "findings" (how many
    findings the run had, of every kind), "where" ("branch@commit8")."""
    return {
        "run": [f"#{r['id']}" for r in rows],
        "steady_ns": [int(r["steady_step_ns"] or 0) for r in rows],
        "findings": [sum((r.get("findings_by_kind") or {}).values()) for r in rows],
        "where": [f"{r.get('git_branch') or '-'}@{(r.get('git_commit') or '-')[:8]}" for r in rows],
    }


def resolve_baseline(spec: str, trace_path: Path) -> Path:
    """The baseline trace for `check --baseline spec`: a path as given; "last": the run of the same script
    before the run of `trace_path`; "main": the latest run recorded on branch main (not this trace)."""
    if spec not in BASELINE_NAMES:
        return Path(spec)
    this = row_of(trace_path)
    here = str(trace_path.resolve())
    if spec == "main":
        cands = [r for r in runs(branch="main") if r["trace_path"] != here or (this and r["id"] < this["id"])]
        what = "no run recorded on branch main"
    else:
        if this is None or not this.get("script"):
            raise UsageError(f"--baseline last: {trace_path} is not in the run history ({db_path()}); record it "
                             "with `neuron-prof run` or `neuron-prof summary`, or give the baseline's path")
        cands = [r for r in runs(script=this["script"]) if r["id"] < this["id"]]
        what = f"no earlier run of {this['script']}"
    for r in cands:
        p = trace_of(r)
        if p is not None:
            return p
    if cands:
        raise UsageError(f"--baseline {spec}: the trace of run {cands[0]['id']} ({cands[0]['trace_path']}) is gone "
                         "or was overwritten; give the baseline's path")
    raise UsageError(f"--baseline {spec}: {what} in the run history ({db_path()})")
