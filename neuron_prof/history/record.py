"""Recording a run in the history: the row from a trace's totals and findings, the git commit and branch.

`record(trace, path, source)` is what `run`, `profile()` and `summary` call; it never raises: a failure is
returned as one line for the caller to report (a profiler problem never fails the user's job).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from neuron_prof.analysis.kinds import Kind
from neuron_prof.history import store

ENABLE_ENV = "NEURON_PROF_HISTORY"
"""Set to 0 to record nothing."""
ARGV_KEY = "argv"
"""Trace metadata key (`capture._env.host_metadata`): the captured process's command line."""
_BRANCH_ENVS = ("GITHUB_HEAD_REF", "GITHUB_REF_NAME", "CI_COMMIT_REF_NAME", "BUILDKITE_BRANCH", "BRANCH_NAME")
"""Where CI says the branch when its checkout is a detached HEAD."""


def enabled() -> bool:
    return os.environ.get(ENABLE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def _git(cwd: str, *args: str) -> str | None:
    try:
        r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() or None if r.returncode == 0 else None


def git_info(cwd: str) -> tuple[str | None, str | None]:
    """(commit, branch) of the git checkout at `cwd`; (None, None) outside one. A detached HEAD (CI) takes the
    branch CI names in its environment."""
    commit = _git(cwd, "rev-parse", "HEAD")
    if commit is None:
        return None, None
    branch = _git(cwd, "rev-parse", "--abbrev-ref", "HEAD")
    if branch in (None, "HEAD"):
        branch = next((os.environ[e] for e in _BRANCH_ENVS if os.environ.get(e)), branch)
    return commit, branch


def _script(argv: list[str] | None) -> tuple[str | None, list[str]]:
    if not argv:
        return None, []
    first = str(argv[0])
    p = Path(first)
    return (str(p.resolve()) if p.suffix == ".py" and p.exists() else first), [str(a) for a in argv[1:]]


def build_row(trace: Any, totals: dict[str, Any], findings: list[Any], trace_path: Path, source: str,
              argv: list[str] | None) -> dict[str, Any]:
    """The history row of one run (columns in `store.COLUMNS`)."""
    steps = totals.get("steps") or {}
    kinds = Counter(getattr(f, "kind", None) or f.get("kind") for f in findings)
    peaks = [int((getattr(f, "evidence", None) or f.get("evidence") or {}).get("peak_bytes") or 0)
             for f in findings if (getattr(f, "kind", None) or f.get("kind")) == Kind.MEMORY_PEAK]
    script, args = _script(argv)
    cwd = os.getcwd()
    commit, branch = git_info(str(Path(script).parent) if script and os.path.isabs(script) else cwd)
    st = trace_path.stat() if trace_path.exists() else None
    return {
        "recorded_ns": time.time_ns(), "start_ns": int(totals.get("start_ns") or 0), "source": source,
        "trace_path": str(trace_path.resolve()), "trace_size": st.st_size if st else None,
        "trace_mtime_ns": st.st_mtime_ns if st else None, "script": script, "args": args, "cwd": cwd,
        "git_commit": commit, "git_branch": branch, "wall_ns": totals.get("wall_ns"),
        "step_count": steps.get("count"), "warmup_steps": steps.get("warmup"),
        "steady_step_ns": steps.get("steady_step_ns"), "compile_ns": totals.get("compile_ns"),
        "compile_miss_count": totals.get("compile_miss_count"), "fallback_ns": totals.get("fallback_ns"),
        "fallback_count": totals.get("fallback_count"), "sync_ns": totals.get("sync_ns"),
        "sync_count": totals.get("sync_count"), "memory_peak_bytes": max(peaks) if peaks else None,
        "findings_by_kind": dict(sorted((k, n) for k, n in kinds.items() if k)),
    }


def record(trace: Any, trace_path: Path, source: str, *, totals: dict[str, Any] | None = None,
           findings: list[Any] | None = None) -> str | None:
    """Add one run to the history (trace written at `trace_path`). Never raises: returns None when recorded (or
    recorded already, or history is off), else one line saying why not."""
    if not enabled():
        return None
    try:
        if totals is None:
            from neuron_prof.analysis import compute_totals

            totals = compute_totals(trace)
        if findings is None:
            findings = list(trace.findings)
        argv = trace.metadata.get(ARGV_KEY) or (None if source == "summary" else sys.argv)
        row = build_row(trace, totals, findings, trace_path, source, argv)
        row_id = store.insert(row)
        if row_id is not None:
            kept = store.keep_trace(row_id, trace_path)
            if kept:
                store.set_kept(row_id, kept)
        return None
    except Exception as e:  # noqa: BLE001  (the history must never fail the user's job)
        return f"run history ({store.db_path()}): {type(e).__name__}: {e}"
