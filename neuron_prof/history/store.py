"""The run history's SQLite file: one row per run, in the user's data folder (`userdirs.data_dir`).

`history.sqlite` holds the rows; `traces/` holds a hard link (or, across file systems, a copy of a trace up to
`KEEP_COPY_MAX` bytes) of each run's trace, so a later run overwriting the same path leaves the baseline
readable. The kept traces are bounded by `NEURON_PROF_HISTORY_MAX_BYTES` (oldest removed first).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from neuron_prof.userdirs import budget, data_dir

DB_NAME = "history.sqlite"
BUDGET_ENV = "NEURON_PROF_HISTORY_MAX_BYTES"
BUDGET_DEFAULT = 2 << 30
KEEP_COPY_MAX = 256 << 20
"""A trace on another file system than the data folder is copied only up to this size (else pointed at)."""

COLUMNS: tuple[tuple[str, str], ...] = (
    ("recorded_ns", "INTEGER"), ("start_ns", "INTEGER"), ("source", "TEXT"), ("trace_path", "TEXT"),
    ("trace_size", "INTEGER"), ("trace_mtime_ns", "INTEGER"), ("kept_path", "TEXT"), ("script", "TEXT"),
    ("args", "TEXT"), ("cwd", "TEXT"), ("git_commit", "TEXT"), ("git_branch", "TEXT"), ("wall_ns", "INTEGER"),
    ("step_count", "INTEGER"), ("warmup_steps", "INTEGER"), ("steady_step_ns", "INTEGER"),
    ("compile_ns", "INTEGER"), ("compile_miss_count", "INTEGER"), ("fallback_ns", "INTEGER"),
    ("fallback_count", "INTEGER"), ("sync_ns", "INTEGER"), ("sync_count", "INTEGER"),
    ("memory_peak_bytes", "INTEGER"), ("findings_by_kind", "TEXT"),
)
"""Every column but `id`; `args` and `findings_by_kind` hold JSON."""
_JSON = ("args", "findings_by_kind")


def db_path() -> Path | None:
    """Where the history is kept (None when no data folder is known)."""
    d = data_dir()
    return d / DB_NAME if d is not None else None


@contextmanager
def connect(path: Path | None = None, *, create: bool = True) -> Iterator[sqlite3.Connection]:
    """An open connection to the history (its table created when `create`); committed on leaving."""
    path = path or db_path()
    if path is None:
        raise OSError("no data folder for the run history (set NEURON_PROF_DATA_DIR)")
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    elif not path.exists():
        raise FileNotFoundError(str(path))
    with closing(sqlite3.connect(path, timeout=10)) as con:
        con.row_factory = sqlite3.Row
        if create:
            cols = ", ".join(f"{n} {t}" for n, t in COLUMNS)
            con.execute(f"CREATE TABLE IF NOT EXISTS runs (id INTEGER PRIMARY KEY AUTOINCREMENT, {cols}, "
                        "UNIQUE (trace_path, start_ns))")
        with con:
            yield con


def insert(row: dict[str, Any], path: Path | None = None) -> int | None:
    """Add `row` (keys from COLUMNS); the id, or None when this trace (path, start) is recorded already."""
    vals = [json.dumps(row.get(n)) if n in _JSON else row.get(n) for n, _ in COLUMNS]
    with connect(path) as con:
        cur = con.execute(f"INSERT OR IGNORE INTO runs ({', '.join(n for n, _ in COLUMNS)}) "
                          f"VALUES ({', '.join('?' * len(COLUMNS))})", vals)
        return cur.lastrowid if cur.rowcount else None


def set_kept(row_id: int, kept: str | None, path: Path | None = None) -> None:
    with connect(path) as con:
        con.execute("UPDATE runs SET kept_path = ? WHERE id = ?", (kept, row_id))


def _decode(r: sqlite3.Row) -> dict[str, Any]:
    d = dict(r)
    for k in _JSON:
        try:
            d[k] = json.loads(d[k]) if d.get(k) else None
        except ValueError:
            d[k] = None
    return d


def rows(where: str = "", params: tuple[Any, ...] = (), *, limit: int | None = None,
         path: Path | None = None) -> list[dict[str, Any]]:
    """Rows matching the SQL `where` (newest first); empty when there is no history yet."""
    sql = "SELECT * FROM runs" + (f" WHERE {where}" if where else "") + " ORDER BY id DESC"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    try:
        with connect(path, create=False) as con:
            return [_decode(r) for r in con.execute(sql, params)]
    except FileNotFoundError:
        return []
    except sqlite3.OperationalError as e:  # an empty file (no table yet)
        if "no such table" in str(e):
            return []
        raise


def keep_trace(row_id: int, trace: Path) -> str | None:
    """Link (else copy, when small enough) `trace` into the history's traces folder; where it went, or None.
    Evicts the oldest kept traces beyond the budget."""
    d = data_dir()
    if d is None or not trace.is_file():
        return None
    folder = d / "traces"
    folder.mkdir(parents=True, exist_ok=True)
    dest = folder / f"{row_id:08d}-{trace.name}"
    try:
        os.link(trace, dest)
    except OSError:
        if trace.stat().st_size > KEEP_COPY_MAX:
            return None
        shutil.copyfile(trace, dest)
    _evict(folder, budget(BUDGET_ENV, BUDGET_DEFAULT), keep=dest)
    return str(dest)


def _evict(folder: Path, limit: int, keep: Path) -> None:
    """Remove the oldest kept traces (by name: the row id) until the folder holds at most `limit` bytes."""
    files = sorted(p for p in folder.iterdir() if p.is_file())
    total = sum(p.stat().st_size for p in files)
    for p in files:
        if total <= limit:
            break
        if p != keep:
            total -= p.stat().st_size
            p.unlink(missing_ok=True)
