"""The stress loop of issue 22: the 4-rank DDP job under `torchrun --no-python neuron-prof run`, N times in
a row (default 10); each attempt must end on every rank with exit 0 and its trace, within a bounded wait.

    python scripts/torchrun_repeat.py              # ten attempts, stops at the first failure (exit 1)
    python scripts/torchrun_repeat.py --times 30

`make test` runs the job once (tests/test_run_torchrun.py, with the same checks: tests/_torchrun_job.py);
before the fix a rank hung at exit in 3 of 3 attempts, and this loop is how a developer shows a change to
the exit path leaves no rarer hang (~15 s an attempt on 2 cores, more under load).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--times", type=int, default=10, help="attempts in a row (default 10)")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from tests._torchrun_job import NEURON_PROF, TORCHRUN, ddp_job_fails

    if not (NEURON_PROF.exists() and TORCHRUN.exists()):
        print("needs the neuron-prof and torchrun console scripts beside python", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="torchrun-repeat-") as d:
        for attempt in range(args.times):
            t0 = time.perf_counter()
            fail = ddp_job_fails(Path(d), attempt)
            if fail:
                print(f"FAILED {fail}", file=sys.stderr)
                return 1
            print(f"attempt {attempt}: every rank exited 0 with its trace ({time.perf_counter() - t0:.1f} s)",
                  flush=True)
    print(f"{args.times} of {args.times} attempts passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
