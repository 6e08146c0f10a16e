"""The generator's traces in other tools' formats: converted to .pftrace they pass the Perfetto checks
(/work/shared/tools/pftrace_check.py, the checks the Perfetto UI's importer relies on), and Holistic Trace
Analysis parses the JSON (in its own venv, bench.hta_venv).

    python -m bench.check_formats --events 100000

Exit status 1 when a check fails, so `python -m bench` lists it as failed. (bench_ingest's HTA row parses
the full 1.2M-event trace too; this is the quick check at a size that runs in seconds.)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import hta_venv

CHECKER = Path(__file__).resolve().parents[1] / "tests" / "pftrace_check.py"
"""The .pftrace checker vendored from ../shared/tools (every clone has it)."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.check_formats", description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=float, default=1e5)
    ap.add_argument("--no-hta", action="store_true", help="only the Perfetto checks (no HTA venv needed)")
    a = ap.parse_args(argv)
    import neuron_prof
    from bench.gen_trace import write
    from neuron_prof.exporters import write_trace

    n = int(a.events)
    bad = 0
    with tempfile.TemporaryDirectory(prefix="bench-formats-") as d:
        (Path(d) / "hta").mkdir()  # HTA reads every trace in a folder: this one holds only the JSON
        js = write(n, Path(d) / "hta" / "gen.json")
        t0 = time.perf_counter()
        trace = neuron_prof.load(js)
        pf = write_trace(trace, Path(d) / "gen.pftrace")
        print(
            f"generated {n:,} events -> {js.stat().st_size / 1e6:.1f} MB JSON -> model "
            f"{trace.n_events:,} events "
            f"-> {pf.stat().st_size / 1e6:.1f} MB .pftrace in {time.perf_counter() - t0:.1f} s"
        )
        r = subprocess.run([sys.executable, str(CHECKER), str(pf)], capture_output=True, text=True, check=False)
        keep = ("packets", "slices", "flows", "errors", "warnings")
        said = "; ".join(ln for ln in r.stdout.splitlines() if ln.split(":")[0] in keep)
        print(f"pftrace_check: {'ok' if r.returncode == 0 else 'FAILED'} ({said or r.stderr.strip()[-500:]})")
        bad += r.returncode != 0
        if a.no_hta:
            return 1 if bad else 0
        py = hta_venv.ensure()
        code = (
            "import sys; from hta.trace_analysis import TraceAnalysis; "
            "a = TraceAnalysis(trace_dir=sys.argv[1]); "
            "df = a.t.get_trace(0); print(len(df), 'rows in HTA rank 0,', df['stream'].nunique(), 'streams')"
        )
        r = subprocess.run([str(py), "-c", code, str(js.parent)], capture_output=True, text=True, check=False)
        out = (r.stdout.strip() or r.stderr.strip()).splitlines()
        print(f"HTA TraceAnalysis: {'ok' if r.returncode == 0 else 'FAILED'} {out[-1] if out else ''}")
        bad += r.returncode != 0
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
