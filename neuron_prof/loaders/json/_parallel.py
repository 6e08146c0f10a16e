"""Parse a large plain `.json` trace in several processes: each reads and converts one byte range of
`traceEvents`, the parent merges the parts in file order into the same Trace the sequential path makes.

Parsing dominates ingest on the Python path (orjson plus turning dicts into columns, about 5 µs per event on
one core), and it splits cleanly at event boundaries. With the compiled scanner (_json_scan) this path is off
unless NEURON_PROF_JSON_WORKERS asks for it: its threads scan pieces in parallel without a second process. Workers are fresh interpreters started with `python -m` (never fork:
the caller may have threads, e.g. the TUI's loader worker; and never multiprocessing's spawn, which
re-imports the user's `__main__`). Anything unexpected (a worker fails or is slow, a range holds damaged
JSON, a cut landed inside a string) returns None and the caller parses sequentially, so the parallel path
can only ever be faster, never different.

    parts = parse_parallel(path, size)   # None -> use the sequential path
"""

from __future__ import annotations

import gc
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from neuron_prof.loaders.json._events import EventColumns
from neuron_prof.loaders.json._read import JsonEventReader
from neuron_prof.loaders.json._scan import scan_enabled
from neuron_prof.loaders.json._values import norm_id
from neuron_prof.model import StringTable

MIN_BYTES = 48 << 20
"""Below this a second process costs more than it saves (interpreter + numpy start: ~0.3 s)."""
PART_BYTES = 24 << 20
"""At least this much JSON per part."""
PARENT_SHARE = 0.9
"""The parent's range, as a fraction of an even share (it merges and finishes besides)."""
_SEP = re.compile(rb"\}\s*,\s*\{")
HEAD_BYTES = 8 << 20
"""traceEvents must open within this many bytes for the parallel path (Kineto: within a few kB)."""


def workers_wanted(size: int) -> int:
    """Processes to use for a plain JSON file of `size` bytes (1 means: do not bother)."""
    env = os.environ.get("NEURON_PROF_JSON_WORKERS")
    if env is not None:
        try:
            return max(1, int(env))
        except ValueError:
            return 1
    if size < MIN_BYTES or scan_enabled():
        return 1  # the compiled scanner parses in threads of this process: faster than worker processes
    return max(1, min(os.cpu_count() or 1, 4, size // PART_BYTES))


class _Part:
    """What one range produces: the event columns plus the order in which tracks came into being."""

    def __init__(self) -> None:
        self.log: list[tuple[Any, ...]] = []
        self.threads: dict[tuple[Any, Any], int] = {}
        self.counters: dict[tuple[Any, str], int] = {}
        self.metas: list[dict[str, Any]] = []
        self.events = EventColumns(StringTable(), self._thread, self._counter, self._meta)

    def _thread(self, pid: Any, tid: Any) -> int:
        k = (pid, tid)
        i = self.threads.get(k)
        if i is None:
            i = self.threads[k] = len(self.threads)
            self.log.append(("t", pid, tid))
        return i

    def _counter(self, pid: Any, name: str) -> int:
        k = (pid, name)
        i = self.counters.get(k)
        if i is None:
            i = self.counters[k] = len(self.counters)
            self.log.append(("c", pid, name))
        return i

    def _meta(self, e: dict[str, Any]) -> None:
        # the sequential path creates the process or thread a metadata event names right away
        self.events.n_meta += 1
        self.metas.append(e)
        args, name = e.get("args"), e.get("name")
        if not isinstance(args, dict):
            return
        pid = norm_id(e.get("pid", 0))
        sort_ok = type(args.get("sort_index")) is int
        if name == "thread_name" or (name == "thread_sort_index" and sort_ok):
            self._thread(pid, norm_id(e.get("tid", 0)))
        elif name in ("process_name", "process_labels") or (name == "process_sort_index" and sort_ok):
            self.log.append(("p", pid))


def parse_range(doc: bytes | bytearray, path: Path) -> dict[str, Any]:
    """Parse `doc` (a JSON array of events, possibly followed by the rest of the document) into a part."""
    was = gc.isenabled()
    gc.disable()
    try:
        reader = JsonEventReader(doc, path, typed=True)
        del doc  # the reader lets go of the bytes once parsed
        part = _Part()
        for chunk in reader.chunks():
            part.events.add(chunk)
        st = part.events.state()
        st.update(log=part.log, metas=part.metas, warnings=reader.warnings, suffix=reader.suffix)
        return st
    finally:
        if was:
            gc.enable()


def parse_parallel(path: Path, size: int, n: int, start: int) -> list[dict[str, Any]] | None:
    """Parts of traceEvents (which opens at byte `start`) parsed by `n` processes, in file order, or None."""
    cuts = _cuts(path, size, start, n)
    if cuts is None:
        return None
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for lo, hi in cuts[:-1]:
            procs.append(subprocess.Popen([sys.executable, "-m", __name__, str(path), str(lo), str(hi)],
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL))
        lo, _ = cuts[-1]
        mine = parse_range(_read_range(path, lo, size, close=False), path)  # ends the array and the document
        parts = []
        timeout = 60 + size / 5e6  # generous: a worker is never slower than 5 MB/s
        for p in procs:
            out, _ = p.communicate(timeout=timeout)
            if p.returncode != 0:
                return None
            parts.append(pickle.loads(out))
        parts.append(mine)
    except (OSError, subprocess.TimeoutExpired, pickle.UnpicklingError, EOFError, ValueError):
        return None
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if any(pt["warnings"] for pt in parts[:-1]) or mine["warnings"]:
        return None  # damage, or a cut inside a string: the sequential path says it properly
    return parts


def _cuts(path: Path, size: int, start: int, n: int) -> list[tuple[int, int]] | None:
    """n byte ranges of traceEvents, cut between two events (each range: '{' ... '}')."""
    bounds = [start]
    ends = []
    # The parent also merges the parts and finishes the trace: it takes a smaller range.
    share = (1 - PARENT_SHARE / n) / (n - 1)
    with open(path, "rb") as f:
        for k in range(1, n):
            off = start + int((size - start) * share * k)
            f.seek(off)
            window = f.read(1 << 20)
            m = _SEP.search(window)
            if m is None:
                return None
            ends.append(off + m.start() + 1)
            bounds.append(off + m.end() - 1)
    if any(b <= a for a, b in zip(bounds, bounds[1:])):
        return None
    return list(zip(bounds, ends + [size]))


def _read_range(path: Path, lo: int, hi: int, close: bool) -> bytearray:
    """`[` + bytes lo..hi of the file (+ `]`), read in place: no second copy of a range of 100s of MB."""
    buf = bytearray(hi - lo + 1 + close)
    buf[0] = ord("[")
    if close:
        buf[-1] = ord("]")
    with open(path, "rb") as f:
        f.seek(lo)
        got = f.readinto(memoryview(buf)[1:1 + hi - lo])
    if got != hi - lo:
        raise OSError(f"{path}: changed while being read")
    return buf


def _worker(argv: list[str]) -> int:
    path, lo, hi = Path(argv[0]), int(argv[1]), int(argv[2])
    st = parse_range(_read_range(path, lo, hi, close=True), path)
    pickle.dump(st, sys.stdout.buffer, protocol=pickle.HIGHEST_PROTOCOL)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(_worker(sys.argv[1:]))
