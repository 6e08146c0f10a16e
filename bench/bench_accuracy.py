"""Accuracy of the findings on user programs (issue 14): recall at the exact line, precision, exact-line rate.

    python -m bench accuracy                                  # every program in tests/userland, all four ways
    python -m bench accuracy --programs 'clean_*' --ways run-neuron,profile-neuron --jobs 2
    python -m bench accuracy --programs 'clean_*' --load 3   # with 3 busy-loop processes competing for the CPUs

Runs every program of tests/userland through `neuron-prof run` and `neuron_prof.profile()`, on the emulated
neuron device and on the CPU (each run a subprocess, then `neuron-prof summary --json`), and compares the
findings with the programs' tags using the harness the tests use (tests/userland/_harness.py; the rules are
in tests/userland/README.md). Prints one table: per way and overall, expected findings, found at the exact
line (recall), warning/critical findings, unexplained ones (precision = explained / all), exact-line rate and
CLEAN programs with alarms; then the same per finding kind; then one line per program and way with what was
missed and the lines view's top line of the program (`summary --json` lines: where the time goes, backward
charged to its forward line).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.userland import _harness as h  # noqa: E402  (the one copy of the matching rules)


def _pct(num: int, den: int) -> str:
    return f"{100 * num / den:.0f}% ({num}/{den})" if den else "-"


def _per_kind(progs: list[h.Program], ways: list[str], outcomes: dict[tuple[str, str], h.Outcome]
              ) -> dict[str, dict[str, int]]:
    """Recall, precision and exact-line counts per finding kind over every run that could run."""
    out: dict[str, dict[str, int]] = {}

    def row(kind: str) -> dict[str, int]:
        return out.setdefault(kind, dict(expected=0, found=0, alarms=0, unexplained=0, in_file=0, exact=0))

    for p in progs:
        for w in ways:
            o = outcomes[(p.name, w)]
            if h.known_failure(p, o):
                continue
            s = h.score(p, o)
            for kind, _line, ok in s.expected:
                row(kind)["expected"] += 1
                row(kind)["found"] += ok
            for kind, c in s.kinds.items():
                for key in ("alarms", "unexplained", "in_file", "exact"):
                    row(kind)[key] += c[key]
    return out


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


@contextlib.contextmanager
def _busy(n: int) -> Iterator[None]:
    """`n` processes that spin on a CPU (other work on the machine) while the programs run; ended by their handles."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
             for _ in range(max(n, 0))]
    try:
        yield
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", default="*.py", help="glob over tests/userland file names (default: all)")
    ap.add_argument("--ways", default=",".join(h.WAYS), help=f"comma list of {', '.join(h.WAYS)}")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once (default 2)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per run")
    ap.add_argument("--keep", default=None, help="folder to keep the traces in (default: a temporary one)")
    ap.add_argument("--load", type=int, default=0, metavar="N",
                    help="start N busy-loop processes that compete for the CPUs while the programs run (default 0)")
    a = ap.parse_args(argv)
    ways = [w.strip() for w in a.ways.split(",") if w.strip()]
    bad = [w for w in ways if w not in h.WAYS]
    if bad:
        ap.error(f"unknown way(s) {', '.join(bad)}; ways: {', '.join(h.WAYS)}")
    progs = h.programs(a.programs)
    if not progs:
        ap.error(f"no program in {h.PROGRAMS_DIR} matches {a.programs!r}")

    from rich.console import Console
    from rich.table import Table

    con = Console(width=max(Console().width, 160))  # the table stays whole when the output is piped
    con.print(f"{len(progs)} programs x {len(ways)} ways, {a.jobs} at a time "
              f"({', '.join(p.stem for p in progs)})"
              + (f"; {a.load} busy-loop processes on {os.cpu_count()} CPUs, load average {_loadavg()}"
                 if a.load else ""))
    t0 = time.perf_counter()
    tmp = tempfile.TemporaryDirectory(prefix="bench-accuracy-") if a.keep is None else None
    work = a.keep or tmp.name  # type: ignore[union-attr]
    with _busy(a.load), ThreadPoolExecutor(max_workers=max(a.jobs, 1)) as pool:
        order = h.longest_first((p, w) for p in progs for w in ways)
        futs = {(p.name, w): pool.submit(h.run_program, p, w, work, timeout=a.timeout) for p, w in order}
        outcomes = {k: f.result() for k, f in futs.items()}
        load_end = _loadavg()
    wall = time.perf_counter() - t0
    if a.load:
        con.print(f"load average at the end, before the busy processes stopped: {load_end}")

    rows: dict[str, dict[str, int]] = {}
    lines: list[str] = []
    clean_alarmed: set[str] = set()
    for w in [*ways, "all"]:
        rows[w] = dict(runs=0, failed=0, known=0, expected=0, found=0, alarms=0, unexplained=0, in_file=0,
                       exact=0, clean=0, clean_alarms=0, secs=0)
    for p in progs:
        for w in ways:
            out = outcomes[(p.name, w)]
            s = h.score(p, out)
            known = h.known_failure(p, out)
            for key in (w, "all"):
                r = rows[key]
                r["runs"] += 1
                r["failed"] += not out.ok and not known
                r["known"] += bool(known)
                r["secs"] += int(out.seconds)
                if known:  # the program cannot run there (XFAIL tag): not counted against the profiler
                    continue
                r["expected"] += len(s.expected)
                r["found"] += s.found
                r["alarms"] += s.alarms
                r["unexplained"] += len(s.unexplained)
                r["in_file"] += s.in_file
                r["exact"] += s.exact
                r["clean"] += p.clean
                r["clean_alarms"] += bool(s.clean_alarms)
                if key == "all" and s.clean_alarms:
                    clean_alarmed.add(p.name)
            if known:
                lines.append(f"{p.stem:24} {w:15} XFAIL: {known}")
                continue
            miss = ", ".join(f"{k}:{ln}" for k, ln in s.misses)
            extra = f"; false alarms: {', '.join(s.unexplained)}" if s.unexplained else ""
            extra += f"; off the tagged lines: {', '.join(s.off_line)}" if s.off_line else ""
            clean = f"; CLEAN but raised {', '.join(s.clean_alarms)}" if s.clean_alarms else ""
            failed = ""
            if not out.ok:
                why = out.error.splitlines()[0].split(": ", 1)[-1] if out.error else "failed"
                failed = f"RUN FAILED ({out.seconds:.0f} s: {why}); "
            lines.append(f"{p.stem:24} {w:15} {failed}{s.found}/{len(s.expected)} at the exact line"
                         + (f"; missed {miss}" if miss else "") + extra + clean
                         + (f"; top line {h.top_line(p, out)}" if out.ok else ""))

    n_clean = sum(p.clean for p in progs)
    by_kind = _per_kind(progs, ways, outcomes)

    def clean_cell(w: str, r: dict[str, int]) -> str:
        if w == "all":  # programs, not runs: a CLEAN program that raised an alarm in any way
            return f"{len(clean_alarmed)}/{n_clean} programs"
        return f"{r['clean_alarms']}/{r['clean']}"

    t = Table(title=f"Findings against the tags of {len(progs)} user programs (tests/userland), "
                    f"{wall:.0f} s wall", title_justify="left")
    for c in ("way", "runs", "run failed", "expected", "recall (exact line)", "warn+crit", "unexplained",
              "precision", "exact-line rate", "CLEAN w/ alarms", "run s"):
        t.add_column(c, justify="left" if c == "way" else "right")
    for w, r in rows.items():
        t.add_row(w, str(r["runs"]), f"{r['failed']}" + (f" (+{r['known']} XFAIL)" if r["known"] else ""),
                  str(r["expected"]), _pct(r["found"], r["expected"]), str(r["alarms"]),
                  str(r["unexplained"]),
                  _pct(r["alarms"] - r["unexplained"], r["alarms"]), _pct(r["exact"], r["in_file"]),
                  clean_cell(w, r), str(r["secs"]), end_section=w == ways[-1])
    con.print(t)
    k = Table(title="Per finding kind (every way together)", title_justify="left")
    for c in ("kind", "expected", "recall (exact line)", "warn+crit", "unexplained", "precision",
              "exact-line rate"):
        k.add_column(c, justify="left" if c == "kind" else "right")
    for kind, r in sorted(by_kind.items()):
        k.add_row(kind, str(r["expected"]), _pct(r["found"], r["expected"]), str(r["alarms"]),
                  str(r["unexplained"]), _pct(r["alarms"] - r["unexplained"], r["alarms"]),
                  _pct(r["exact"], r["in_file"]))
    con.print(k)
    con.print("per program and way:", highlight=False)
    for ln in lines:
        con.print("  " + ln, highlight=False, markup=False, soft_wrap=True)
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
