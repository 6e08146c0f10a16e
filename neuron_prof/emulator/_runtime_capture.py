"""The emulated Neuron runtime's own capture: the raw files it writes while torch.profiler runs with a Neuron
profiling config. Only the stand-in ``neuron-explorer`` (`neuron_explorer`) reads them, as on Trainium only
``neuron-explorer`` reads the runtime's .ntff / .pb files (no public parser).

Sources (docs/trainium.md, "The emulated device"): torch-neuronx-facts "Profiler" (the Kineto plugin
starts the runtime's capture; ``NeuronConfig(modes, max_events_per_nc, profile_output_dir, neff_cache_dir)``;
the ring buffer keeps the newest events per NeuronCore), neuron-explorer-facts "Capture" (RUNTIME mode writes
``ntrace.pb`` + ``trace_info.pb``, DEVICE mode ``.neff`` + ``profile_nc_<N>_session_<S>.ntff``, CPU_UTIL
``cpu_util.pb`` and HOST_MEMORY ``host_mem.pb`` (`profiling.host_usage`); one
``<instance-id>_pid_<pid>/<timestamp>/`` folder per process), issue 33 (``neff_cache_dir``: "Path to the NEFF
cache directory. When set, cached NEFFs are copied into the profile artifact directory on stop").

The plugin: a Python backend gets no PrivateUse1 Kineto activity from torch's CPU build, so `install` wraps the
start and stop of each torch.autograd profiler cycle, and a capture runs for a cycle whose
``experimental_config`` is a Neuron one (`config_of`), as the real plugin reads it from Kineto's config. The
files' contents are the emulator's own (NumPy .npz and JSON under the real names): host-clock runtime events,
device-clock hardware events with two clock sync points (start and stop), and device-clock executions.
"""

from __future__ import annotations

import io
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from neuron_prof.emulator import _state
from neuron_prof.emulator._config import DEFAULT_NEFF_CACHE_DIR
from neuron_prof.emulator._timing import KIND_NAMES
from neuron_prof.emulator.profiling.host_usage import HostSampler

INSTANCE_ID = "i-0emulated"
INSTANCE_TYPE = "trn2.48xlarge"
RUNTIME_MODE, DEVICE_MODE = "RUNTIME", "DEVICE"
SYSTEM_FILE, INFO_FILE = "ntrace.pb", "trace_info.pb"
DEFAULT_MAX_EVENTS = 1_000_000
SYNC_EVERY_NS = 100_000_000
"""The runtime's host/device clock sync points: one per 100 ms of capture (drift between them stays in µs)."""
_lock = threading.Lock()


@dataclass
class CaptureConfig:
    """What the plugin read from a cycle's experimental_config."""

    output_dir: Path
    modes: frozenset[str]
    max_events_per_nc: int = DEFAULT_MAX_EVENTS
    neff_cache_dir: Path | None = None


def config_of(exp: Any) -> CaptureConfig | None:
    """The Neuron capture a cycle's experimental_config asks for (None: not a ``NeuronConfig``)."""
    modes = getattr(exp, "modes", None)
    if modes is None or not hasattr(exp, "profile_output_dir"):
        return None
    names = frozenset(str(getattr(m, "name", m)).upper() for m in modes)
    neff = getattr(exp, "neff_cache_dir", None)
    return CaptureConfig(Path(exp.profile_output_dir), names, int(exp.max_events_per_nc or DEFAULT_MAX_EVENTS),
                         Path(neff) if neff else None)


@dataclass
class Capture:
    """One capture: from a profiler cycle's start to its stop."""

    cfg: CaptureConfig
    session: int
    host_start: int = field(default_factory=time.time_ns)
    first_seq: int = 0
    last_seq: int = 0
    folder: Path | None = None
    host: HostSampler | None = None
    """CPU_UTIL / HOST_MEMORY sampling, when the config asks for either."""

    def start(self, rt: _state.Runtime) -> None:
        with rt.activity.lock:
            self.first_seq = rt.activity.next_seq
        self.host_start = time.time_ns()
        self.host = HostSampler(self.cfg.modes)
        self.host.start()

    def stop(self, rt: _state.Runtime) -> Path:
        host_stop = time.time_ns()
        act = rt.activity.snapshot()
        with rt.activity.lock:
            self.last_seq = rt.activity.next_seq
        seq = act["nrt_sequence_id"]
        keep = np.flatnonzero(seq >= self.first_seq)
        lost = int(seq[keep[0]] - self.first_seq) if len(keep) else 0  # the emulator's own buffer dropped them
        if len(keep) > self.cfg.max_events_per_nc:  # the runtime's ring buffer keeps the newest
            lost += len(keep) - self.cfg.max_events_per_nc
            keep = keep[-self.cfg.max_events_per_nc:]
        base = self.cfg.output_dir / f"{INSTANCE_ID}_pid_{os.getpid()}"
        stamp = time.strftime("%Y%m%d_%H%M%S", time.localtime(self.host_start / 1e9)) + f"_{self.session:03d}"
        folder = base / stamp
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        hw = rt.hw_clock
        mem = rt.memory[0]
        cols = {c: act[c][keep] for c in ("device", "stream_id", "kind", "start_ns", "end_ns", "nrt_sequence_id",
                                          "seq_nr", "th_id", "host_ns")}
        names = [act["name"][i] for i in keep.tolist()]
        work = act.get("work") or {}
        flops = np.asarray([work.get(int(s), (0.0, 0))[0] for s in cols["nrt_sequence_id"]], dtype=np.float64)
        nbytes = np.asarray([work.get(int(s), (0.0, 0))[1] for s in cols["nrt_sequence_id"]], dtype=np.int64)
        info = {"instance_id": INSTANCE_ID, "instance_type": INSTANCE_TYPE, "process_id": os.getpid(),
                "session": self.session, "modes": sorted(self.cfg.modes), "kind_names": list(KIND_NAMES),
                "host_start_ns": self.host_start, "host_stop_ns": host_stop, "events_lost": lost,
                "sync_points": [[t, hw.at(t)] for t in [*range(self.host_start, host_stop, SYNC_EVERY_NS), host_stop]],
                "hbm_capacity_bytes": mem.capacity, "memory": [mem.allocated.current, mem.reserved.current],
                "cc": {str(k): list(v) for k, v in (act.get("cc") or {}).items()},
                "peak_flops": rt.cfg.peak_flops_bf16, "hbm_bytes_per_s": rt.cfg.hbm_bytes_per_s}
        if self.host is not None:
            self.host.stop(folder)
        if RUNTIME_MODE in self.cfg.modes:
            # host clock for the runtime's calls (issue time), device clock for what the hardware recorded
            _npz(folder / SYSTEM_FILE, names=np.asarray(names, dtype=str),
                 neff=np.asarray([neff_name(n) for n in names], dtype=str),
                 hw_start=hw.at(cols["start_ns"]), hw_end=hw.at(cols["end_ns"]), **cols)
            (folder / INFO_FILE).write_bytes(orjson.dumps(info))
        if DEVICE_MODE in self.cfg.modes:
            neffs = [neff_name(n) for n in names]
            _npz(folder / f"profile_nc_0_session_{self.session}.ntff", names=np.asarray(names, dtype=str),
                 neff=np.asarray(neffs, dtype=str), kind=cols["kind"], start=hw.at(cols["start_ns"]),
                 end=hw.at(cols["end_ns"]), nrt_sequence_id=cols["nrt_sequence_id"], flops=flops, nbytes=nbytes,
                 first_hw=np.asarray([hw.at(self.host_start)]), last_hw=np.asarray([hw.at(host_stop)]),
                 info=np.asarray([orjson.dumps(info).decode()]))
            self._copy_neffs(rt, {str(n) for n in names}, folder)
        rt.last_capture = self
        return folder


    def _copy_neffs(self, rt: _state.Runtime, ran: set[str], folder: Path) -> None:
        """``neff_cache_dir`` set: the NEFFs of what ran that are cached there are copied into the capture folder
        (the profile artifact directory); unset, or not cached there, none is (the device profile's executions
        of those NEFFs cannot be processed)."""
        if self.cfg.neff_cache_dir is None:
            return
        cached = rt.cache.cached_names(self.cfg.neff_cache_dir, Path(DEFAULT_NEFF_CACHE_DIR))
        for n in sorted(ran & cached):
            p = folder / neff_name(n)
            if not p.exists():
                p.write_bytes(b"emulated NEFF placeholder: " + n.encode() + b"\n")


def neff_name(op: str) -> str:
    """The placeholder NEFF an execution ran: one per op (or graph) name."""
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in op)
    return f"{safe}.neff"


def _npz(path: Path, **arrays: Any) -> None:
    buf = io.BytesIO()
    # mypy matches the ** to savez's allow_pickle: bool
    np.savez_compressed(buf, **{k: np.asarray(v) for k, v in arrays.items()})  # type: ignore[arg-type]
    path.write_bytes(buf.getvalue())


_SESSIONS = iter(range(1, 1 << 30))


def on_start(exp: Any) -> None:
    """A profiler cycle started: begin a capture when its config is a Neuron one."""
    rt = _state.RUNTIME
    cfg = config_of(exp) if rt is not None else None
    if rt is None or cfg is None:
        return
    with _lock:
        cap = Capture(cfg, next(_SESSIONS))
        cap.start(rt)
        rt.capture = cap


def on_stop() -> None:
    """The cycle stopped: write the capture's files."""
    rt = _state.RUNTIME
    if rt is None:
        return
    with _lock:
        cap, rt.capture = rt.capture, None
    if cap is not None:
        cap.stop(rt)


def install() -> None:
    """Wrap torch.autograd.profiler.profile's cycle start and stop (the emulated Kineto plugin); once."""
    from torch.autograd import profiler as ap

    cls = ap.profile
    if getattr(cls, "_neuron_emulated_plugin", False):
        return
    start, exit_ = cls._start_trace, cls.__exit__

    def _start_trace(self: Any) -> Any:
        out = start(self)
        on_start(getattr(self, "experimental_config", None))
        return out

    def __exit__(self: Any, *exc: Any) -> Any:
        try:
            return exit_(self, *exc)
        finally:
            if getattr(self, "entered", True):
                on_stop()

    cls._start_trace, cls.__exit__ = _start_trace, __exit__  # type: ignore[method-assign]
    cls._neuron_emulated_plugin = True  # type: ignore[attr-defined]
