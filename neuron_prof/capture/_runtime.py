"""Where a session's Neuron runtime capture goes, and saying what it left there (issue 22 item 6).

By default a folder of its own under neuron-prof's cache (`neuron_prof.userdirs`): ``neuron-runs/<time>_<pid>_<n>/``
holding the runtime's files, the NEFFs (``neff_cache_dir``) and neuron-explorer's tables (the captures'
torch.profiler JSON is deleted once processed: the session's own trace holds those host ops); after each session the
oldest such folders are deleted until they hold at most ``NEURON_PROF_RUNS_MAX_BYTES`` (2 GiB), as the column
cache is bounded. A folder the user gave (``profile_dir``) is theirs: kept as it is. Either way the session says
where it is and how big, since it is more than the trace.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import time
from pathlib import Path

from neuron_prof import userdirs

RUNS_DIR = "neuron-runs"
RUNS_BUDGET_ENV = "NEURON_PROF_RUNS_MAX_BYTES"
RUNS_BUDGET = 2 * 1024**3
_SEQ = itertools.count()


class RuntimeDir:
    """A session's run directory: given, or made in the cache."""

    def __init__(self, given: Path | None) -> None:
        self.kept = given is not None
        if given is not None:
            self.path = given
            return
        base = userdirs.cache_dir()
        name = f"{time.strftime('%Y%m%d_%H%M%S')}_{os.getpid()}_{next(_SEQ)}"
        try:
            if base is None:
                raise OSError("no cache folder")
            self.path = base / RUNS_DIR / name
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError:
            self.path = Path(tempfile.mkdtemp(prefix=f"neuron-prof-run-{name}-"))

    def finish(self) -> str | None:
        """Bound the cache (never this run) and say what this run left and where; None when it wrote nothing."""
        size = userdirs.tree_bytes(self.path)
        if not size:
            if not self.kept:
                try:
                    self.path.rmdir()
                except OSError:
                    pass
            return None
        where = f"neuron-prof: the Neuron runtime's capture and its tables: {self.path} ({size / 1e6:.1f} MB"
        if self.kept:
            return where + ")"
        budget = userdirs.budget(RUNS_BUDGET_ENV, RUNS_BUDGET)
        gone = userdirs.evict_dirs(self.path.parent, budget, keep=self.path)
        more = f"; {len(gone)} older run(s) removed" if gone else ""
        return where + f", in neuron-prof's cache: the oldest are removed beyond {budget / 2**30:.1f} GiB, " \
                       f"{RUNS_BUDGET_ENV}{more})"
