"""Old vs new .pftrace writer in one process: CPU seconds (time.process_time) per write, alternating old and new,
and whether the files are byte-identical. The old writer is exporters/{perfetto,_pftrace_args,_pftrace_wire}.py at
git revision --old (copied into a temporary package); the new one is the working tree's.

    python -m bench.cmp_pftrace --old 7a9412d --reps 3 synthetic generated-file real
    python -m bench.cmp_pftrace --old HEAD~1 --events 2e5 synthetic

Traces: "synthetic" (bench_export.synthetic, built from columns), "generated-file" (bench_ingest's generated Kineto
JSON with --events JSON events, loaded), "real" (the largest trace in ../shared/traces/kineto tiled to --events).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from bench.bench_export import synthetic, tile

ROOT = Path(__file__).resolve().parents[1]
_FILES = ("_pftrace_wire", "_pftrace_args", "perfetto")


def old_writer(rev: str, folder: Path) -> ModuleType:
    """exporters/perfetto.py and its two helpers at `rev`, importable as `pftrace_old.perfetto`."""
    pkg = folder / "pftrace_old"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name in _FILES:
        src = subprocess.run(["git", "show", f"{rev}:exporters/{name}.py"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout
        for dep in _FILES:
            src = src.replace(f"neuron_prof.exporters.{dep}", f"pftrace_old.{dep}")
        src = src.replace("from neuron_prof.exporters import _pftrace_wire", "from pftrace_old import _pftrace_wire")
        (pkg / f"{name}.py").write_text(src)
    sys.path.insert(0, str(folder))
    return importlib.import_module("pftrace_old.perfetto")


def _trace(which: str, n: int) -> Any:
    import neuron_prof

    if which == "generated-file":
        from bench.bench_ingest import generated

        folder = Path(tempfile.gettempdir()) / "neuron-prof-bench"
        folder.mkdir(exist_ok=True)
        return neuron_prof.load(generated(n, folder))
    if which == "synthetic":
        return synthetic(n)
    from bench.__main__ import _largest_real

    real = _largest_real()
    if real is None:
        raise SystemExit("no real trace in ../shared/traces/kineto")
    return tile(neuron_prof.load(real), n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+", choices=["synthetic", "generated-file", "real"])
    ap.add_argument("--old", default="HEAD", help="git revision of the old writer (default HEAD)")
    ap.add_argument("--events", type=float, default=1e6)
    ap.add_argument("--reps", type=int, default=3)
    ns = ap.parse_args()
    import neuron_prof.exporters.perfetto as new

    with tempfile.TemporaryDirectory() as d:
        old = old_writer(ns.old, Path(d))
        for which in ns.traces:
            tr = _trace(which, int(ns.events))
            n = tr.n_events
            res: dict[str, list[float]] = {"old": [], "new": []}
            for _ in range(ns.reps):
                for name, mod in (("old", old), ("new", new)):
                    gc.collect()
                    c = time.process_time()
                    mod.write_pftrace(tr, Path(d, name))
                    res[name].append(time.process_time() - c)
            a, b = Path(d, "old").read_bytes(), Path(d, "new").read_bytes()
            print(f"{which}: {n:,} events; identical bytes: {a == b} (old {len(a):,} B, new {len(b):,} B)")
            for name, cs in res.items():
                print(f"  {name} ({ns.old if name == 'old' else 'working tree'}): cpu s {' '.join(f'{c:.2f}' for c in cs)}"
                      f"  best {n / min(cs):,.0f} events/s, median {n / sorted(cs)[len(cs) // 2]:,.0f}")


if __name__ == "__main__":
    main()
