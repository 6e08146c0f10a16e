"""torch.profiler set-up and the route from a Kineto result into the session's TraceBuilder.

Route chosen: `export_chrome_trace` to a temporary file, the Kineto JSON loader's chunked reader
(`load_kineto_json`), then `append_trace` into the session's builder. Measured on torch 2.13 CPU
(2 shared cores), one 45k-event result of a small transformer with every option on: export 0.2 s;
chunked load 0.46-0.65 s vs 1.2-2.2 s for orjson of the whole document + `parse_kineto_into` (which
also holds ~2 kB of Python objects per event at its peak). `kineto_results.events()` costs 0.2 s just
to read ten attributes per event and is incomplete: no `fwdbwd` flows, no process/thread names, no
`baseTimeNanoseconds`/`deviceProperties`/`distributedInfo`, and `name()` raises UnicodeDecodeError on
events whose strings Kineto corrupted (seen: "Call stack" of the profiler's own import frames). The
JSON route also makes a fresh capture and `neuron_prof.load(trace.json)` the same Trace by
construction, because both go through one parser.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from neuron_prof.formats import CHROME_JSON

if TYPE_CHECKING:
    from neuron_prof.capture._sites import CycleSites, StackRewriter
    from neuron_prof.model import Trace, TraceBuilder


def make_schedule(schedule: Callable[[int], Any] | None, wait: int | None, warmup: int | None,
                  active: int | None, repeat: int | None, skip_first: int | None) -> Callable[[int], Any]:
    """A torch.profiler schedule. Without one, every step is recorded.

    torch adds the `ProfilerStep#N` annotations only when a schedule is given, so "record every step"
    is passed as an explicit schedule rather than left to torch's default.
    """
    import torch.profiler as tp

    if not _RECORD:
        _RECORD.append(tp.ProfilerAction.RECORD)
    if schedule is not None:
        return schedule
    if any(v is not None for v in (wait, warmup, active, repeat, skip_first)):
        return tp.schedule(wait=wait or 0, warmup=warmup or 0, active=active if active is not None else 1,
                           repeat=repeat or 0, skip_first=skip_first or 0)
    return _record_always


def cycle_schedule(boundaries: list[int]) -> Callable[[int], Any]:
    """Record every step, ending a profiler cycle after each step number in `boundaries` (a cycle of its own for
    the Neuron device profile's window); with none, `_record_always`."""
    cuts = {b - 1 for b in boundaries if b > 0}
    if not cuts:
        return _record_always

    def schedule(step: int) -> Any:
        from torch.profiler import ProfilerAction

        return ProfilerAction.RECORD_AND_SAVE if step in cuts else ProfilerAction.RECORD

    return schedule


def ends_cycles(schedule: Callable[[int], Any]) -> bool:
    """Whether a step under `schedule` may end a profiler cycle (and torch warn that it clears events): not
    under `_record_always`, which records every step in one cycle."""
    return schedule is not _record_always


def _record_always(step: int) -> Any:
    """RECORD: called by torch.profiler's step(), so one Python call and no import (`make_schedule` set it)."""
    return _RECORD[0]


_RECORD: list[Any] = []
"""ProfilerAction.RECORD, once torch.profiler is imported (this module imports no torch at its top)."""


def profiler_kwargs(*, record_shapes: bool, with_stack: bool, with_modules: bool, profile_memory: bool,
                    backend_options: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for torch.profiler.profile: our defaults, then the backend's, then the user's."""
    from torch.profiler import ProfilerActivity

    kw: dict[str, Any] = {
        "activities": [ProfilerActivity.CPU],
        "record_shapes": record_shapes,
        "with_stack": with_stack,
        "with_modules": with_modules,
        "profile_memory": profile_memory,
    }
    # No verbose=True: Kineto's per-event "Call stack" strings (function entry lines, on every Python event too)
    # would be most of the JSON; capture writes exact stacks on the ops itself (`_sites`).
    kw.update(backend_options)  # e.g. CUDA/PrivateUse1 activities, a NeuronConfig experimental_config
    kw.update(extra)
    return kw


def load_in_process(path: str, sites: CycleSites | None = None) -> tuple[Trace, StackRewriter]:
    """The Kineto JSON loader with the cycle's exact stacks applied. A loader with a transform reads in this
    process (its parallel mode would start worker processes inside the user's job: eight ranks a host would
    start 32 at once)."""
    from neuron_prof.capture._sites import StackRewriter, base_ns
    from neuron_prof.loaders.json.reader import load_kineto_json

    rewriter = StackRewriter(sites, base_ns(path))
    return load_kineto_json(path, transform=rewriter), rewriter


class KinetoCollector:
    """`on_trace_ready` callback: each finished profiler cycle goes into the builder at once.

    Parsing per cycle keeps memory at the size of the model, not of all cycles' JSON, and means a
    schedule with `repeat` cycles keeps every cycle.
    """

    def __init__(self, builder: TraceBuilder, source: str, on_error: Callable[[str, BaseException], None],
                 tmpdir: str | None = None, on_cycle: Callable[[], None] | None = None,
                 with_stack: bool = False, device_ops: list[Any] | None = None,
                 export: Callable[[Any], str | os.PathLike[str] | None] | None = None, prune: bool = True) -> None:
        from neuron_prof.capture._prune import PruneStats

        self.builder = builder
        self.prune = prune
        """Fold each cycle's op-free Python work (`_prune`); False keeps every call the Python tracer recorded."""
        self.pruned = PruneStats()
        self.export = export
        """The backend's own export of a cycle (a device profile's NeuronProfiler): the JSON file it wrote,
        read instead of a second export (Kineto saves a result once); None or a failure: ours."""
        self.with_stack = with_stack
        """Exact call stacks are taken from the profiler's event tree (`_sites`) for each cycle."""
        self.exact_cycles = 0
        self.user_files: set[str] = set()
        self.device_ops = device_ops if device_ops is not None else []
        """DeviceOp facts of every cycle (the session's CaptureContext.device_ops, read by the probes)."""
        self.source = source
        self.on_error = on_error
        self.tmpdir = tmpdir
        self.on_cycle = on_cycle
        """Called after each cycle is in the builder (the session checkpoints from it)."""
        self.phase: Callable[[str], None] = _no_phase
        """Told each phase of a conversion as it starts (the session's end names them: `_end_progress`)."""
        self.cycles = 0
        self.export_ns = 0
        """Kineto writing its JSON."""
        self.parse_ns = 0
        """Loading that JSON and appending it to the builder."""
        self.sites_ns = 0
        """CPU time of the exact-site walks (part of `parse_ns`)."""
        self.rewrite_ns = 0
        """CPU time of the stack rewrites (part of `parse_ns`)."""

    def __call__(self, prof: Any) -> None:
        try:
            t0 = time.perf_counter_ns()
            e0 = self.export_ns
            self.phase("finding exact call sites")
            sites = self._sites(prof)
            trace, rewriter = self._export(prof, sites)
            if self.prune:
                from neuron_prof.capture._prune import prune_python

                self.phase("folding Python work that launched no op")
                trace, st = prune_python(trace, self.user_files)
                self.pruned.add(st)
            from neuron_prof.capture._append import append_trace

            append_trace(self.builder, trace)
            self._mark_stacks(rewriter)
            self.sites_ns += sites.cpu_ns if sites is not None else 0
            self.rewrite_ns += rewriter.cpu_ns if rewriter is not None else 0
            self.parse_ns += time.perf_counter_ns() - t0 - (self.export_ns - e0)
            self.cycles += 1
        except Exception as e:  # noqa: BLE001  (a failed conversion is reported, never raised into user code)
            self.on_error("kineto", e)
            return
        if self.on_cycle is not None:
            self.on_cycle()

    def _sites(self, prof: Any) -> CycleSites | None:
        """The cycle's exact stacks and device facts (None if the walk fails: recorded, not raised)."""
        from neuron_prof.capture._sites import walk

        try:
            sites = walk(prof)
        except Exception as e:  # noqa: BLE001  (a failed walk leaves torch's entry-line stacks, unmarked)
            self.on_error("call sites", e)
            return None
        self.user_files |= sites.user_files
        self.device_ops.extend(sorted(sites.device_ops.values(), key=lambda d: d.start_ns))
        return sites

    def _mark_stacks(self, rewriter: StackRewriter | None) -> None:
        """The trace's stacks are exact only if every cycle's were rewritten."""
        from neuron_prof.model.callsite import EXACT, STACK_LINES, USER_FILES

        md = self.builder.metadata
        if rewriter is not None and not rewriter.by_path and rewriter.base is not None:
            self.exact_cycles += 1
        if self.with_stack and self.exact_cycles == self.cycles + 1:
            md[STACK_LINES] = EXACT
            md[USER_FILES] = sorted(self.user_files)
        else:
            md.pop(STACK_LINES, None)

    def _export(self, prof: Any, sites: CycleSites | None = None) -> tuple[Trace, StackRewriter | None]:
        own = self._backend_export(prof)
        if own is not None:  # the backend's file (the capture folder's trace.json): read, kept
            return load_in_process(str(own), sites)
        self.phase("exporting Kineto's events")
        path = self._write_json(prof)
        try:
            self.phase("reading Kineto's events")
            return load_in_process(path, sites)
        finally:
            _unlink(path)

    def _backend_export(self, prof: Any) -> str | os.PathLike[str] | None:
        if self.export is None:
            return None
        t0 = time.perf_counter_ns()
        try:
            return self.export(prof)
        except Exception as e:  # noqa: BLE001  (our own export follows; if the result was saved, it says so)
            self.on_error("device profile export", e)
            return None
        finally:
            self.export_ns += time.perf_counter_ns() - t0

    def _write_json(self, prof: Any) -> str:
        """Kineto's JSON of this cycle in a temporary file: the temp dir first; if it is full or read-only,
        beside the output. torch exports a result once, so a failed load is never retried with a new export
        (that would only report "Trace is already saved" instead of what went wrong)."""
        errors: list[BaseException] = []
        for d in dict.fromkeys([None, self.tmpdir]):
            path = ""
            try:
                # plain JSON: torch gzips the export when the name says so
                fd, path = tempfile.mkstemp(prefix="neuron-prof-kineto-", suffix=CHROME_JSON.suffixes[0], dir=d)
                os.close(fd)
                t0 = time.perf_counter_ns()
                prof.export_chrome_trace(path)
                self.export_ns += time.perf_counter_ns() - t0
                return path
            except Exception as e:  # noqa: BLE001
                errors.append(e)
                if path:
                    _unlink(path)
                if "already saved" in str(e):  # a retry cannot help; the first error says what went wrong
                    break
        raise errors[0]


def _no_phase(name: str) -> None:
    pass


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
