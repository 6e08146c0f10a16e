"""torch.profiler set-up and the route from a Kineto result into a TraceBuilder.

Route chosen: `export_chrome_trace` to a temporary file, orjson, then the Kineto JSON loader's
`parse_kineto_into`. Measured on torch 2.13 CPU (2 cores), one 47k-event result of a small transformer
with every option on: export 0.16 s, read + orjson 0.25 s. `kineto_results.events()` costs 0.20 s just
to read ten attributes per event, and it is incomplete: no `fwdbwd` flows, no process/thread names, no
`baseTimeNanoseconds`/`deviceProperties`/`distributedInfo`, and `name()` raises UnicodeDecodeError on
events whose strings Kineto corrupted (seen: "Call stack" of the profiler's own import frames). The JSON
route also makes a fresh capture and `neuron_prof.load(trace.json)` the same Trace by construction,
because both go through one parser.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from neuron_prof.model import TraceBuilder


def make_schedule(schedule: Callable[[int], Any] | None, wait: int | None, warmup: int | None,
                  active: int | None, repeat: int | None, skip_first: int | None) -> Callable[[int], Any]:
    """A torch.profiler schedule. Without one, every step is recorded.

    torch adds the `ProfilerStep#N` annotations only when a schedule is given, so "record every step"
    is passed as an explicit schedule rather than left to torch's default.
    """
    import torch.profiler as tp

    if schedule is not None:
        return schedule
    if any(v is not None for v in (wait, warmup, active, repeat, skip_first)):
        return tp.schedule(wait=wait or 0, warmup=warmup or 0, active=active if active is not None else 1,
                           repeat=repeat or 0, skip_first=skip_first or 0)
    return _record_always


def _record_always(step: int) -> Any:
    from torch.profiler import ProfilerAction

    return ProfilerAction.RECORD


def profiler_kwargs(*, record_shapes: bool, with_stack: bool, with_modules: bool, profile_memory: bool,
                    backend_options: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for torch.profiler.profile: our defaults, then the backend's, then the user's."""
    import torch
    from torch.profiler import ProfilerActivity

    kw: dict[str, Any] = {
        "activities": [ProfilerActivity.CPU],
        "record_shapes": record_shapes,
        "with_stack": with_stack,
        "with_modules": with_modules,
        "profile_memory": profile_memory,
    }
    if with_stack:
        # Per-op "Call stack" args need verbose=True on top of with_stack (torch 2.13).
        kw["experimental_config"] = torch._C._profiler._ExperimentalConfig(verbose=True)
    kw.update(backend_options)  # e.g. CUDA/PrivateUse1 activities, a NeuronConfig experimental_config
    kw.update(extra)
    return kw


def read_kineto_json(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse a Kineto JSON export, replacing invalid UTF-8 (Kineto sometimes writes corrupted strings)."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        data = orjson.loads(raw.decode("utf-8", errors="replace"))
    if not isinstance(data, dict):
        raise ValueError("Kineto export is not a JSON object")
    return data  # type: ignore[no-any-return]


class KinetoCollector:
    """`on_trace_ready` callback: each finished profiler cycle goes into the builder at once.

    Parsing per cycle keeps memory at the size of the model, not of all cycles' JSON, and means a
    schedule with `repeat` cycles keeps every cycle.
    """

    def __init__(self, builder: TraceBuilder, source: str, on_error: Callable[[str, BaseException], None],
                 tmpdir: str | None = None, on_cycle: Callable[[], None] | None = None) -> None:
        self.builder = builder
        self.source = source
        self.on_error = on_error
        self.tmpdir = tmpdir
        self.on_cycle = on_cycle
        """Called after each cycle is in the builder (the session checkpoints from it)."""
        self.cycles = 0
        self.export_ns = 0
        self.parse_ns = 0

    def __call__(self, prof: Any) -> None:
        try:
            t0 = time.perf_counter_ns()
            data = self._export(prof)
            t1 = time.perf_counter_ns()
            from neuron_prof.loaders.kineto_json import parse_kineto_into

            parse_kineto_into(self.builder, data, self.source)
            self.export_ns += t1 - t0
            self.parse_ns += time.perf_counter_ns() - t1
            self.cycles += 1
        except Exception as e:  # noqa: BLE001  (a failed conversion is reported, never raised into user code)
            self.on_error("kineto", e)
            return
        if self.on_cycle is not None:
            self.on_cycle()

    def _export(self, prof: Any) -> dict[str, Any]:
        errors: list[BaseException] = []
        # The temp dir first; if it is full or read-only, beside the output.
        for d in dict.fromkeys([None, self.tmpdir]):
            path = ""
            try:
                fd, path = tempfile.mkstemp(prefix="neuron-prof-kineto-", suffix=".json", dir=d)
                os.close(fd)
                prof.export_chrome_trace(path)
                return read_kineto_json(path)
            except Exception as e:  # noqa: BLE001
                errors.append(e)
                if "already saved" in str(e):  # torch exports a result once; a retry cannot help
                    break
            finally:
                if path:
                    try:
                        os.unlink(path)
                    except OSError:
                        pass
        raise errors[-1]
