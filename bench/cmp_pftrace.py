"""Old vs new .pftrace writer in one process: CPU seconds (time.process_time) per write, alternating, and whether
the files are byte-identical. The old writer is a copy of the committed one in a package named `pfold` on
PYTHONPATH (made by hand: `git show <rev>:exporters/perfetto.py` etc. with imports renamed).

    PYTHONPATH=/tmp/oldpf python -m bench.cmp_pftrace --reps 3 generated-file synthetic real
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from pathlib import Path

from bench.bench_export import synthetic, tile


def _trace(which: str, n: int):  # type: ignore[no-untyped-def]
    import neuron_prof

    if which == "generated-file":
        from bench.bench_ingest import generated

        folder = Path("/tmp/neuron-prof-bench")
        folder.mkdir(exist_ok=True)
        return neuron_prof.load(generated(n, folder))
    if which == "synthetic":
        return synthetic(n)
    return tile(neuron_prof.load("/work/shared/traces/kineto/nccl_parser_config_nccl_data.json.gz"), n)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ns = ap.parse_args()
    import pfold.perfetto as old

    import neuron_prof.exporters.perfetto as new

    for which in ns.traces:
        tr = _trace(which, ns.events)
        n = tr.n_events
        res: dict[str, list[float]] = {"old": [], "new": []}
        with tempfile.TemporaryDirectory() as d:
            for _ in range(ns.reps):
                for name, mod in (("old", old), ("new", new)):
                    gc.collect()
                    c = time.process_time()
                    mod.write_pftrace(tr, Path(d, name))
                    res[name].append(time.process_time() - c)
            a, b = Path(d, "old").read_bytes(), Path(d, "new").read_bytes()
        print(f"{which}: {n:,} events; identical bytes: {a == b} (old {len(a):,} B, new {len(b):,} B)")
        for name, cs in res.items():
            print(f"  {name}: cpu s {' '.join(f'{c:.2f}' for c in cs)}  best {n / min(cs):,.0f} events/s, "
                  f"median {n / sorted(cs)[len(cs) // 2]:,.0f}")


if __name__ == "__main__":
    main()
