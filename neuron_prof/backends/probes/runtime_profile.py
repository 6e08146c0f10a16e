"""The Neuron runtime's own capture during a session: the system profile always, the device profile in a window;
the run directory processed once by ``neuron-explorer`` after the block, its tables added to the session's trace.

Sources (docs/trainium.md, "Capture"): torch-neuronx-facts "Profiler" (``NeuronConfig(modes, max_events_per_nc,
profile_output_dir, neff_cache_dir)`` as ``experimental_config``; ``NeuronProfiler(cfg).export_trace`` as
``on_trace_ready``; DEVICE mode reserves about 5 GB of HBM on Trn2; the ring buffer keeps the newest 1,000,000
events per NeuronCore), neuron-explorer-facts "Capture"/"Processing" (``<dir>/<instance-id>_pid_<pid>/<timestamp>/``;
``neuron-explorer view -d <dir> --output-format parquet``), issue 21 (RUNTIME mode = the system profile: runtime
and hardware execution events and host/device copies, designed for < 2% overhead, no HBM reserve; the docs
process the whole run directory; eager mode wants ``neff_cache_dir``), issue 33 (``neff_cache_dir`` = the cache
the job compiles into, its NEFFs copied into the profile on stop; warm up 3 or more iterations before the device
profile, ``NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP``; only ``NEURON_RT_INSPECT_ENABLE=1`` conflicts with
torch.profiler's capture).

Cycles: the device profile's window is a profiler cycle of its own (`boundaries`: the session's schedule saves
a cycle there), started with ``modes=[DEVICE, RUNTIME]``; the cycles around it run ``modes=[RUNTIME]``. Each
cycle's torch.profiler rebuilds its Kineto profiler from ``prof.experimental_config``, which `export_cycle` sets
for the next cycle after exporting this one.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuron_prof.backends import _compat
from neuron_prof.backends.probes.probe import Probe
from neuron_prof.loaders.explorer.reader import find_profile, is_explorer_folder  # at import, not in stop()

if TYPE_CHECKING:
    from neuron_prof.backends.base import CaptureContext
    from neuron_prof.backends.probes.view import HostView
    from neuron_prof.model import TraceBuilder

EXPLORER = "neuron-explorer"
PROCESS_TIMEOUT_S = 3600
"""A device profile of many NEFF executions can take neuron-explorer minutes to process."""
META_KEY = "runtime_profile"
PROCESSED = "parquet"
"""``RUN_DIR/parquet``: where neuron-explorer is asked to write the run directory's tables."""
DEFAULT_WARMUP_STEPS = 3
"""``device_profile=True``: the window opens after this many steps (first-call compiles, optimizer state): the
profiling how-to and its troubleshooting page say to warm up 3 or more iterations first."""
NUM_WARMUP_ENV = "NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP"
"""SDK 2.33: the runtime's device-profile warm-up count; when set, ``device_profile=True`` waits that many steps."""
HOST_USAGE_MODES = ("CPU_UTIL", "HOST_MEMORY")
"""``NeuronConfig`` modes for host CPU utilisation (``cpu_util.pb`` → ``CpuUsage``) and host memory (``host_mem.pb``
→ ``HostMemUsage``): torch-neuronx-facts "Profiler", neuron-explorer-facts "Capture"; issue 33."""
INSPECT_PREFIX = "NEURON_RT_INSPECT_"
INSPECT_ENABLE = INSPECT_PREFIX + "ENABLE"
_DROPPED = re.compile(r"(\d[\d,]*) trace events were dropped[^\n]*")


IGNORE_DEVICE = "--ignore-device-profile"
"""Explorer's documented "skip device profiles (faster, system-only view)" (how-to-profile-workload.rst,
"Processing-time filtering"; get-started.rst, "Useful flags"): asked when the session asked for no device profile.
``--ignore-system-profile`` is never asked: every session captures the system profile."""


def explorer_command(run_dir: Path, exe: str = EXPLORER, device: bool = True) -> list[str]:
    """The one neuron-explorer call for a session's run directory (every process folder in it): Parquet only
    (the programmatic output; 2.34 no longer maintains the JSON one), and `IGNORE_DEVICE` when `device` is False
    (no device profile was asked for)."""
    return [exe, "view", "-d", str(run_dir), "--output-format", "parquet", "--output-file", str(run_dir / PROCESSED),
            *(() if device else (IGNORE_DEVICE,))]


def inspect_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ``NEURON_RT_INSPECT_*`` variables the user set when ``NEURON_RT_INSPECT_ENABLE=1`` (the runtime's
    env-var capture is on: no second capture); {} otherwise, as the other variables have no effect without it."""
    env = os.environ if environ is None else environ
    if env.get(INSPECT_ENABLE, "").strip() != "1":
        return {}
    return {k: v for k, v in env.items() if k.startswith(INSPECT_PREFIX) and v.strip()}


def warmup_steps(environ: Mapping[str, str] | None = None) -> int:
    """Steps before ``device_profile=True``'s window: `NUM_WARMUP_ENV` when it is a whole number >= 0, else
    `DEFAULT_WARMUP_STEPS`."""
    env = os.environ if environ is None else environ
    v = env.get(NUM_WARMUP_ENV, "").strip()
    return int(v) if v.isdigit() else DEFAULT_WARMUP_STEPS


def window_of(device_profile: Any) -> tuple[int, int | None] | None:
    """``device_profile`` as a step window [start, stop): False/None -> None; True -> after the warm-up
    (`warmup_steps`); N -> after N steps; (a, b) -> steps a..b-1 (b None: to the end)."""
    if device_profile is None or device_profile is False:
        return None
    if device_profile is True:
        return warmup_steps(), None
    if isinstance(device_profile, int):
        return max(0, device_profile), None
    a, b = device_profile
    a = max(0, int(a))
    return (a, int(b) if b is not None else None) if b is None or int(b) > a else None


class RuntimeProfileProbe(Probe):
    """Configures, exports, processes and adds the runtime's capture of one session."""

    name = "runtime_profile"

    def __init__(self, run_dir: Path, module: Any = None, window: tuple[int, int | None] | None = None,
                 kept: bool = True, host_usage: bool = False) -> None:
        super().__init__()
        self.run_dir = run_dir
        self.host_usage = host_usage
        """Every cycle also asks for `HOST_USAGE_MODES` (host CPU and memory, sampled by the runtime)."""
        self.module = module
        self.window = window
        """The device profile's steps [start, stop) (stop None: to the end); None: the system profile only."""
        self.kept = kept
        """The run directory is the user's (kept as is); False: neuron-prof's cache folder (bounded)."""
        self.shape: str | None = None
        """The torch_neuronx profiling API found: "docs" or None (`_compat.profiling_api`)."""
        self.neff_cache_dir: str | None = None
        """The ``neff_cache_dir`` given: the job's own NEFF cache (`_compat.neff_cache_dir`)."""
        self.captures: list[Path] = []
        """Cycle folders the capture wrote, in order."""
        self.pending: list[str] = []
        """The neuron-explorer command still to run by hand (missing or failed)."""
        self.notes: list[str] = []
        """Load warnings: why something was not captured, events neuron-explorer says were dropped."""
        self.processed = False
        self.cycle = 0
        self._configs: list[Any] = []
        self._modes: list[list[str]] = []
        self._d2h: list[tuple[Any, int]] | None = None
        self._tried = False
        self._ctx: CaptureContext | None = None
        self.conflict: dict[str, str] = {}
        """The user's ``NEURON_RT_INSPECT_*`` settings: the runtime captures on its own, no second capture."""

    @property
    def configured(self) -> bool:
        return bool(self._configs) and not self.conflict

    # ---- before the profiler starts ----------------------------------------------------------------------
    def boundaries(self) -> list[int]:
        """Steps after which the session's schedule saves a cycle: the window's edges."""
        if self.window is None or self.shape != "docs":
            return []
        a, b = self.window
        return [s for s in (a, b) if s is not None and s > 0]

    def experimental_config(self) -> Any | None:
        """The first cycle's config (None: no capture; why is in `notes`)."""
        self.shape = _compat.profiling_api(self.module)
        if self.shape is None:
            self.notes.append("this torch_neuronx has no profiling API (NeuronConfig / NeuronProfiler): no runtime "
                              "capture")
            return None
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.neff_cache_dir = neff = _compat.neff_cache_dir()
        modes = self._cycle_modes()
        self._configs = [_compat.neuron_config(self.module, str(self.run_dir), m, neff_cache_dir=neff) for m in modes]
        self._modes = [list(m) for m in modes]
        if any(c is None for c in self._configs):
            self.notes.append("torch_neuronx.profiling.NeuronConfig could not be built: no runtime capture")
            return None
        return self._configs[0]

    def _cycle_modes(self) -> list[tuple[str, ...]]:
        """Modes of each cycle: RUNTIME, with DEVICE inside the window; `HOST_USAGE_MODES` in each when asked."""
        more = HOST_USAGE_MODES if self.host_usage else ()
        if self.window is None:
            return [("RUNTIME", *more)]
        a, b = self.window
        out = [] if a == 0 else [("RUNTIME", *more)]
        out.append(("DEVICE", "RUNTIME", *more))
        if b is not None:
            out.append(("RUNTIME", *more))
        return out

    # ---- each cycle ---------------------------------------------------------------------------------------
    def export_cycle(self, prof: Any) -> Path | None:
        """Export one finished cycle (``NeuronProfiler(cfg).export_trace``), then set the next cycle's config on
        `prof`. Returns the framework trace written (the session reads it: Kineto saves a result once)."""
        i = min(self.cycle, len(self._configs) - 1)
        self.cycle += 1
        nxt = self._configs[min(self.cycle, len(self._configs) - 1)]
        try:
            return self._export_docs(prof, self._configs[i])
        finally:
            if nxt is not None and hasattr(prof, "experimental_config"):
                prof.experimental_config = nxt

    def _export_docs(self, prof: Any, cfg: Any) -> Path | None:
        export = _compat.neuron_profiler_export(self.module, cfg)
        if export is None:
            return None
        t0 = time.time() - 1.0  # file systems keep mtimes to the second or coarser
        export(prof)
        found = [p for p in self.run_dir.glob(f"*_pid_{os.getpid()}/*/trace.json") if p.stat().st_mtime >= t0]
        if not found:
            return None
        newest = max(found, key=lambda p: p.stat().st_mtime)
        if newest.parent not in self.captures:
            self.captures.append(newest.parent)
        return newest

    # ---- after the block ----------------------------------------------------------------------------------
    def stop(self, ctx: CaptureContext) -> None:
        """Nothing here: processing runs once, after the region and outside the probes' accounted time, when the
        tables are first needed (`process`: contribute, or the fallback probe's copy evidence)."""
        self._ctx = ctx

    def process(self) -> None:
        """Run neuron-explorer once over the run directory (or say what to run)."""
        if self._tried or not self.captures:
            return
        self._tried = True
        exe = shutil.which(EXPLORER)
        device = self.window is not None
        cmd = " ".join(explorer_command(self.run_dir, device=device))
        if exe is None:
            self.pending.append(cmd)
            self._tell("neuron-explorer is not on PATH")
            return
        p = subprocess.run(explorer_command(self.run_dir, exe, device), capture_output=True, text=True,
                           timeout=PROCESS_TIMEOUT_S, check=False)
        out = f"{p.stdout}\n{p.stderr}"
        for m in _DROPPED.finditer(out):
            self.notes.append(f"Neuron runtime capture: {m.group(0).strip()} (the runtime's ring buffer, "
                              "max_events_per_nc / NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC, was full)")
        if p.returncode != 0 or not is_explorer_folder(self.run_dir / PROCESSED):
            last = (p.stderr.strip() or p.stdout.strip()).splitlines()[-1:] or [f"exit {p.returncode}"]
            self.pending.append(cmd)
            if self._ctx is not None:
                self._ctx.errors.append({"probe": self.name, "phase": "stop",
                                         "error": f"neuron-explorer failed on {self.run_dir}: {last[0]}"})
            self._tell("neuron-explorer failed")
            return
        self.processed = True

    def _tell(self, why: str) -> None:
        print(f"neuron-prof: the Neuron runtime's capture is in {self.run_dir} but was not processed ({why}). "
              f"Run:\n  {self.pending[-1]}\nthen load it with the host trace: neuron-prof summary "
              f"{self.captures[0].parent}", file=sys.stderr, flush=True)

    def _drop_framework_traces(self) -> bool:
        """Delete the captures' torch.profiler JSON once processed (the cached run keeps the runtime's files and
        the tables); True when something was deleted."""
        gone = False
        for cap in self.captures:
            for f in _framework_traces(cap):
                try:
                    f.unlink()
                    gone = True
                except OSError:
                    pass
        return gone

    @property
    def d2h_hosts(self) -> list[tuple[Any, int]]:
        """(thread id, start ns) of the framework ops whose work copied device memory to the host, read from the
        processed tables on first use (after the capture: its cost is no part of the profiled time)."""
        if self._d2h is None:
            self._d2h = []
            self.process()
            if self.processed:
                try:
                    from neuron_prof.loaders.explorer.copies import copy_hosts

                    self._d2h = copy_hosts(self.run_dir / PROCESSED, "device_to_host")
                except Exception as e:  # noqa: BLE001  (evidence only: a bad table is reported when loaded)
                    self.notes.append(f"runtime profile {self.run_dir}: copies not read ({type(e).__name__}: {e})")
        return self._d2h

    def contribute(self, builder: TraceBuilder, ctx: CaptureContext, view: HostView) -> None:
        from neuron_prof.loaders.explorer.capture import add_capture_tables
        from neuron_prof.model import Meta

        self.process()
        warnings: list[str] = list(self.notes)
        removed = False
        if self.processed:
            profile = find_profile(self.run_dir / PROCESSED)
            warnings += add_capture_tables(builder, profile, self.captures[0])[0]
            if not self.kept:  # neuron-prof's cache: the session's trace holds these host ops (often most bytes)
                removed = self._drop_framework_traces()
        builder.metadata[META_KEY] = {
            "run_dir": str(self.run_dir), "NEURON_RT_INSPECT": dict(self.conflict) or None,
            "NEURON_LAUNCH_BLOCKING": _compat.launch_blocking_env(), "api": self.shape, "cycle_modes": self._modes,
            "neff_cache_dir": self.neff_cache_dir,
            "device_profile_steps": list(self.window) if self.window is not None else None,
            "captures": [str(c) for c in self.captures], "processed": self.processed, "to_run": self.pending,
            "kept_in_cache": not self.kept, "framework_trace_removed": removed}
        if warnings:
            builder.metadata.setdefault(Meta.WARNINGS, []).extend(warnings)


def _framework_traces(folder: Path) -> list[Path]:
    return [p for n in ("trace.json", "pytorch_trace.json") for p in [folder / n] if p.is_file()]
