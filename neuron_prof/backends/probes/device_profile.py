"""Device-profile capture on Trainium (``profile(device_profile=...)``): the runtime's own capture,
processed by ``neuron-explorer`` after the block and added to the session's trace.

Sources: shared/design/torch-neuronx-facts.md ("Profiler") and neuron-explorer-facts.md ("Capture",
"Processing"). torch.profiler runs with ``experimental_config=NeuronConfig(profile_output_dir=DIR)`` (built by
the adapter through `_compat`); each profiler cycle is exported by ``NeuronProfiler(cfg).export_trace``, which
writes ``DIR/<instance-id>_pid_<pid>/<timestamp>/`` (trace.json, the framework mapping, the runtime's files).
neuron-prof reads that trace.json for its own trace (Kineto saves a result once: there is no second export).
After the block, each such folder is processed with

    neuron-explorer view -d <ts> --output-format parquet --output-file <ts>/parquet

when ``neuron-explorer`` is on PATH, and its tables are joined to the host ops exactly as loading the folder
later would (`loaders.explorer_capture.add_capture_tables`). Without it, the command and how to load the
folder afterwards are printed. Dropped events (the runtime's ring buffer, reported by neuron-explorer as
"N trace events were dropped") become load warnings. A capture whose ``<timestamp>/parquet`` already holds
the tables is not processed again: the emulated device writes them itself, standing in for neuron-explorer
(absent where there is no Trainium), so its device timeline comes through this same path.

`d2h_hosts`: where host ops read device memory back (hardware copies named as the emulated device names
them, `D2H_NAME`: the docs name no copy events), as evidence for the fallback probe.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuron_prof.backends.probes._probe import Probe
from neuron_prof.loaders.explorer import is_explorer_folder  # at import, not in stop(): inside the region
from neuron_prof.loaders.explorer_capture import PROCESSED_DIR

if TYPE_CHECKING:
    from neuron_prof.backends.base import CaptureContext
    from neuron_prof.backends.probes._view import HostView
    from neuron_prof.model import TraceBuilder

EXPLORER = "neuron-explorer"
PROCESS_TIMEOUT_S = 3600
"""A device profile of many NEFF executions can take neuron-explorer minutes to process."""
META_KEY = "device_profile"
_DROPPED = re.compile(r"(\d[\d,]*) trace events were dropped[^\n]*")


def explorer_command(capture: Path, exe: str = EXPLORER) -> list[str]:
    """The neuron-explorer call that writes a capture folder's Parquet tables inside it (``<ts>/parquet``:
    the pid folder then holds one timestamp folder, one rank for the job summary)."""
    return [exe, "view", "-d", str(capture), "--output-format", "parquet", "--output-file",
            str(capture / PROCESSED_DIR)]


class DeviceProfileProbe(Probe):
    """Exports each cycle through NeuronProfiler, processes the capture folders, adds their tables."""

    name = "device_profile"

    def __init__(self, output_dir: Path, export: Callable[[Any], Any] | None = None) -> None:
        super().__init__()
        self.output_dir = output_dir
        self.export = export
        """``NeuronProfiler(cfg).export_trace`` (set by the adapter once the config is built)."""
        self.captures: list[Path] = []
        """Capture folders (``<instance>_pid_<pid>/<timestamp>/``) NeuronProfiler wrote, in order."""
        self.processed: list[Path] = []
        self.notes: list[str] = []
        """Load warnings: events neuron-explorer says were dropped."""
        self.pending: list[str] = []
        """Commands still to run by hand (neuron-explorer missing or failed)."""
        self._d2h: list[tuple[Any, int]] | None = None

    def export_cycle(self, prof: Any) -> Path | None:
        """Export one profiler cycle through NeuronProfiler; the trace.json it wrote (None: it wrote none)."""
        if self.export is None:
            return None
        t0 = time.time() - 1.0  # file systems keep mtimes to the second or coarser
        self.export(prof)
        found = [p for p in self.output_dir.glob("*_pid_*/*/trace.json") if p.stat().st_mtime >= t0]
        ours = [p for p in found if p.parent.parent.name.endswith(f"_pid_{os.getpid()}")]
        found = ours or (found if len(found) == 1 else [])  # other ranks may write beside us: only our pid's
        if not found:
            return None
        newest = max(found, key=lambda p: p.stat().st_mtime)
        if newest.parent not in self.captures:
            self.captures.append(newest.parent)
        return newest

    def stop(self, ctx: CaptureContext) -> None:
        exe = shutil.which(EXPLORER)
        for cap in self.captures:
            if is_explorer_folder(cap / PROCESSED_DIR):  # processed already (the emulated device writes them)
                self.processed.append(cap)
                continue
            cmd = explorer_command(cap, exe or EXPLORER)
            if exe is None:
                self.pending.append(" ".join(explorer_command(cap)))
                continue
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=PROCESS_TIMEOUT_S, check=False)
            out = f"{p.stdout}\n{p.stderr}"
            for m in _DROPPED.finditer(out):
                self.notes.append(f"Neuron runtime capture {cap.name}: {m.group(0).strip()} (the runtime's "
                                  f"ring buffer, NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC, was full)")
            if p.returncode != 0:
                last = (p.stderr.strip() or p.stdout.strip()).splitlines()[-1:] or [f"exit {p.returncode}"]
                self.pending.append(" ".join(explorer_command(cap)))
                ctx.errors.append({"probe": self.name, "phase": "stop",
                                   "error": f"neuron-explorer failed on {cap}: {last[0]}"})
                continue
            self.processed.append(cap)
        if self.pending:
            self._tell(exe is None)

    @property
    def d2h_hosts(self) -> list[tuple[Any, int]]:
        """(thread id, start ns) of the framework ops whose work copied device memory to the host, read from
        the processed tables on first use (after the capture: its cost is no part of the profiled time)."""
        if self._d2h is None:
            self._d2h = []
            for cap in self.processed:
                try:
                    self._d2h += d2h_hosts(cap / PROCESSED_DIR)
                except Exception as e:  # noqa: BLE001  (evidence only: a bad table is reported when loaded)
                    self.notes.append(f"device profile {cap}: copies not read ({type(e).__name__}: {e})")
        return self._d2h

    def _tell(self, missing: bool) -> None:
        why = "neuron-explorer is not on PATH" if missing else "neuron-explorer failed"
        lines = [f"neuron-prof: the device profile was captured but not processed ({why}). Run:"]
        lines += [f"  {c}" for c in self.pending]
        lines.append("then load host and device together: "
                     + " ".join(f"neuron-prof summary {c.parent}" for c in self.captures[:1])
                     + " (or neuron_prof.load of that folder)")
        print("\n".join(lines), file=sys.stderr, flush=True)

    def contribute(self, builder: TraceBuilder, ctx: CaptureContext, view: HostView) -> None:
        from neuron_prof.loaders.explorer import find_profile
        from neuron_prof.loaders.explorer_capture import add_capture_tables
        from neuron_prof.model import Meta

        warnings: list[str] = list(self.notes)
        for cap in self.processed:
            profile = find_profile(cap / PROCESSED_DIR)
            warnings += add_capture_tables(builder, profile, cap)[0]
        builder.metadata[META_KEY] = {"output_dir": str(self.output_dir),
                                      "captures": [str(c) for c in self.captures],
                                      "processed": [str(c) for c in self.processed], "to_run": self.pending}
        if warnings:
            builder.metadata.setdefault(Meta.WARNINGS, []).extend(warnings)


D2H_NAME, D2H_SUFFIX = "copy_d2h", "(copy to host)"
"""Hardware copies from device to host: the emulated device's names (``copy_d2h``, ``<op> (copy to host)`` for
a fallback's); Neuron Explorer documents none."""


def d2h_hosts(profile: Path) -> list[tuple[int, int]]:
    """(thread id, start ns) of each framework event sharing a flow id with a hardware ``copy_d2h``."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    cols = ["name", "trace_event_source", "thread_id", "start_ts", "flow_id"]
    parts = sorted(profile.glob("SystemProfileEvents*.parquet"))
    if not parts:
        return []
    t = pa.concat_tables([pq.read_table(f, columns=cols) for f in parts])
    src = t.column("trace_event_source")
    name = t.column("name")
    d2h = pc.or_(pc.equal(name, D2H_NAME), pc.ends_with(name, D2H_SUFFIX))
    hw = t.filter(pc.and_(pc.equal(src, "neuron_hw"), pc.fill_null(d2h, False)))
    ids = set(pc.list_flatten(hw.column("flow_id")).drop_null().to_pylist())
    if not ids:
        return []
    out = []
    fw = t.filter(pc.equal(src, "framework")).to_pylist()
    for r in fw:
        if ids.intersection(r["flow_id"] or ()):
            out.append((int(r["thread_id"]), int(r["start_ts"])))
    return out
