"""Session: one profiled region. torch.profiler plus the backend's probes, merged and written at the end.

    with neuron_prof.profile("trace.json") as prof:      # or @neuron_prof.profile("trace.json")
        for batch in data:
            train_step(batch)
            prof.step()
    prof.trace                                           # the Trace, also written to trace.json + trace.pftrace

Promises (issue 10): nothing the profiler does raises into the user's program. A failing probe, converter
or exporter is recorded in the trace's metadata (`probe_errors`) and reported once, after the block, as a
CaptureWarning. An exception, KeyboardInterrupt or SIGTERM inside the block still writes the trace of
what was captured; the exception is then re-raised and the signal re-delivered.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from neuron_prof.backends.base import CaptureContext
from neuron_prof.capture import _compile_quiet, _env, _outputs, _runtime, _steps
from neuron_prof.capture._end_progress import EndProgress, prepare, wanted
from neuron_prof.capture._groups import ProcessGroupKeeper
from neuron_prof.capture._report import CaptureWarning, dedup_errors, report_problems, user_stacklevel
from neuron_prof.capture._runqueue import PROBE as RUNQUEUE_PROBE
from neuron_prof.capture._runqueue import RunQueueSampler
from neuron_prof.capture._session_metadata import session_metadata
from neuron_prof.capture._signals import SignalGuard, defer_sigint
from neuron_prof.formats import DEFAULT_OUTPUT
from neuron_prof.model import Meta, TraceBuilder
from neuron_prof.model.callsite import traceback_site

if TYPE_CHECKING:
    from neuron_prof.model import Trace

_ACTIVE: Session | None = None
_ACTIVE_LOCK = threading.Lock()


def current_session() -> Session | None:
    """The session now recording in this process, if any (for `step()` under the decorator form)."""
    return _ACTIVE


class Session(contextlib.ContextDecorator):
    """A profiled region: a context manager, a decorator, or `start()`/`stop()` by hand.

    Args:
        output: where the trace goes (.json, .json.gz or .pftrace); None keeps it in memory only.
        backend: adapter name ("cpu", "cuda", "neuron"); None picks from `hint` or what is available.
        schedule: a torch.profiler schedule callable; or give `wait`/`warmup`/`active`/`repeat`/`skip_first`.
        record_shapes, with_stack, with_modules, profile_memory: torch.profiler options (all on by default;
            with_stack also turns on per-op call stacks).
        operator_lines: exact lines for operator statements too (``a * b``, ``x[i]``, ``x.T``): a recorded Python
            call per operator, which on microsecond ops costs up to ~1.5x torch.profiler's step time (see
            `capture._operators`). Off: such an op's line is 0 (unknown); ``float(t)``/``if t`` keep their lines.
        pftrace: also write the native Perfetto .pftrace beside a JSON output.
        quiet: do not print where the traces went (failures, and where the Neuron runtime's capture went and
            its size, are still reported).
        hint: a module, tensor or device that tells which backend to use.
        checkpoint: under a schedule, rewrite the output after each finished cycle (inside step()), so
            a crash that kills the process outright still leaves the cycles before it.
        profiler_kwargs: more torch.profiler.profile arguments (they win over ours and the backend's).
        system_profile: on Trainium, capture the Neuron runtime's system profile (on by default: executions on
            the device, runtime calls, host/device copies; designed for < 2% overhead, no HBM reserved). After the
            block ``neuron-explorer view`` processes the run directory (when on PATH; else the command is printed)
            and the device timeline joins the trace.
        device_profile: also capture the runtime's device profile (engines, collectives, HBM bandwidth, Summary
            metrics; reserves about 5 GB of HBM on Trn2) in a window of steps: True = after 3 warm-up steps
            (or NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP), N = after N steps, (a, b) = steps a..b-1. A folder
            (the old form) = from the first step, written there.
        profile_dir: where the runtime writes its capture and neuron-explorer its tables (default: a folder in
            neuron-prof's cache, the oldest removed beyond NEURON_PROF_RUNS_MAX_BYTES, 2 GiB).
        host_usage: with the runtime's capture, also its ProfileMode CPU_UTIL and HOST_MEMORY (host CPU per core
            and host memory in use, sampled by the runtime: counter tracks from Explorer's CpuUsage and
            HostMemUsage tables). Off by default.
        full_python_trace: keep every Python call torch.profiler's tracer recorded. Off (the default): Python work
            that launched no op is one slice per call at its line, builtins without an op are dropped unless they
            took 100 us or more (`capture._prune`); the frames leading to ops keep their exact lines.
        max_events: keep the written trace under this many events: the deepest Python frames go first, then
            steps are sampled (`capture._cap`); what went is in the metadata (``capture_reduced``) and `summary`.
        steps: record only these steps in full (torch.profiler's tracer is off in the others, so the capture stays
            bounded): N = the first N steps (warm-up and first compiles included), (A, B) or range(A, B) = steps
            A to B-1, (A, None) = from step A on (`capture._steps`). The trace's ``steps`` keep the recorded ones;
            ``capture_reduced`` and `summary` say which and how many were not recorded. Not with a schedule.
        **options: options for the backend's probes (e.g. probes=["compile"], deep_fallback=True).
    """

    def __init__(self, output: str | os.PathLike[str] | None = DEFAULT_OUTPUT, *, backend: str | None = None,
                 schedule: Callable[[int], Any] | None = None, wait: int | None = None, warmup: int | None = None,
                 active: int | None = None, repeat: int | None = None, skip_first: int | None = None,
                 record_shapes: bool = True, with_stack: bool = True, with_modules: bool = True,
                 profile_memory: bool = True, operator_lines: bool = False, pftrace: bool = True, quiet: bool = False, hint: object = None,
                 checkpoint: bool = True, profiler_kwargs: dict[str, Any] | None = None,
                 system_profile: bool = True, device_profile: bool | int | tuple[int, int | None] | str |
                 os.PathLike[str] = False, profile_dir: str | os.PathLike[str] | None = None,
                 host_usage: bool = False, full_python_trace: bool = False, max_events: int | None = None,
                 steps: _steps.StepsArg = None, **options: Any) -> None:
        self.output = Path(output) if output is not None else None
        self.backend_name = backend
        self.pftrace = pftrace
        self.operator_lines = operator_lines
        self.quiet = quiet
        self.hint = hint
        self.checkpoint = checkpoint
        if isinstance(device_profile, (str, os.PathLike)):  # the old form: a folder, device profile from the start
            profile_dir, device_profile = profile_dir or device_profile, 0
        self.system_profile = system_profile
        self.device_profile = device_profile
        self.host_usage = host_usage
        self.full_python_trace = full_python_trace
        self.max_events = max_events
        self.steps = _steps.window(steps)  # a ValueError for a malformed window, before anything starts
        if self.steps is not None and (schedule, wait, warmup, active, repeat, skip_first) != (None,) * 6:
            raise ValueError("profile(): give steps= or a schedule (schedule/wait/warmup/active), not both")
        self.profile_dir = Path(profile_dir) if profile_dir is not None else None
        self._schedule_args = (schedule, wait, warmup, active, repeat, skip_first)
        self._flags = {"record_shapes": record_shapes, "with_stack": with_stack, "with_modules": with_modules,
                       "profile_memory": profile_memory}
        self._profiler_kwargs = dict(profiler_kwargs or {})
        self.options = options
        self.trace: Trace | None = None
        """The captured Trace, set when the session ends (None while recording or if conversion failed)."""
        self.paths: list[Path] = []
        """Files written by the last run of this session."""
        self.context = CaptureContext()
        self._depth = 0
        self._recording = False
        self._reset()

    # ---- lifecycle -------------------------------------------------------------------------
    def _reset(self) -> None:
        self.context = CaptureContext(options=dict(self.options), host_pid=os.getpid(),
                                      main_tid=threading.get_native_id())
        self.trace = None
        self.paths = []
        self._prof: Any = None
        self._backend: Any = None
        self._collector: Any = None
        self._operators: Any = None
        self._ends_cycles = True
        self._quiet: Any = None
        self._exit_site = ""
        self._builder: TraceBuilder | None = None
        self._recording = False
        self._finished = False
        self._step = 0
        self._step_start = 0
        self._timings: dict[str, int] = {}
        self._in_steps_ns = 0
        """Time step() held the user's thread (its share of `_timings`' "in_steps", summed at stop)."""
        self._pg_info: dict[str, Any] | None = None
        self._next_checkpoint = 0.0
        self._signals = SignalGuard(self._on_signal)
        self._run_dir: _runtime.RuntimeDir | None = None
        self._runqueue: RunQueueSampler | None = None
        self._groups = ProcessGroupKeeper()
        self._totals: dict[str, Any] | None = None
        """The trace's totals, computed with its findings when the run history records the session."""
        self._write_report: _outputs.WriteReport | None = None

    @property
    def recording(self) -> bool:
        return self._recording

    def __enter__(self) -> Session:
        # A decorated function that calls itself enters the same Session again: the outer call records.
        self._depth += 1
        if self._depth == 1:
            self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        self._depth -= 1
        if self._depth > 0:
            return False
        if exc_type is None:
            reason = "ok"
        elif issubclass(exc_type, KeyboardInterrupt):
            reason = "KeyboardInterrupt"
        elif issubclass(exc_type, SystemExit):
            reason = f"SystemExit: {exc.code if isinstance(exc, SystemExit) else ''}"
        else:
            reason = f"exception: {exc_type.__name__}: {exc}"
            self._exit_site = traceback_site(tb).call_site
        self.stop(reason)
        return False  # the user's exception, if any, goes on unchanged

    def start(self) -> Session:
        """Start recording. Never raises: if the profiler cannot start, the block runs unprofiled."""
        global _ACTIVE
        if self._recording:
            return self  # start() twice: keep the recording that runs
        self._reset()
        with _ACTIVE_LOCK:
            if _ACTIVE is not None:
                warnings.warn("neuron-prof: a profile() session is already recording; this nested one records "
                              "nothing (its block runs normally)", CaptureWarning, stacklevel=user_stacklevel())
                self._finished = True
                return self
            _ACTIVE = self
        ctx = self.context
        t0 = time.perf_counter_ns()
        self._builder = TraceBuilder()
        _env.quiet_kineto()  # before torch.profiler first starts Kineto in this process
        if wanted(self.quiet):
            prepare()  # the end's bar then draws from its first phases on, not after importing rich
        backend_opts = self._open_backend()
        prof = self._make_profiler(backend_opts)
        self._guard("backend", "start", lambda: self._backend.start(ctx) if self._backend is not None else None)
        if prof is not None and self._collector is not None and self._collector.with_stack:
            from neuron_prof.capture._operators import OperatorRecorder

            rec = OperatorRecorder(self.operator_lines)
            if self._guard("operator recorder", "start", rec.install):
                self._operators = rec
            quiet = _compile_quiet.CompileQuiet()
            if self._guard("compile quiet", "start", quiet.install):
                self._quiet = quiet
            if self._backend is not None and self._backend.name != "cpu":
                from neuron_prof.capture._autograd_threads import trace_autograd_threads

                self._guard("autograd threads", "start", trace_autograd_threads)
        ctx.start_ns = time.time_ns()
        t1 = time.perf_counter_ns()
        if prof is not None and self._guard("torch.profiler", "start", prof.start):
            self._prof = prof
        self._timings["profiler_start"] = time.perf_counter_ns() - t1
        # The region starts once torch.profiler records: its first start in a process can take seconds
        # (Kineto init), which is neither the user's time nor part of any step.
        ctx.start_ns = time.time_ns()
        self._step_start = ctx.start_ns
        self._runqueue = RunQueueSampler(ctx.main_tid, lambda e: self._record_error(RUNQUEUE_PROBE, e))
        self._runqueue.load()
        self._runqueue.sample()
        self._recording = True
        self._guard("process groups", "start", self._groups.install)
        self._signals.install()
        atexit.register(self._atexit)
        self._timings["start"] = time.perf_counter_ns() - t0
        return self

    def step(self) -> None:
        """Mark the end of one training step (and the start of the next); a ProfilerStep#N span in the trace.

        The hot path of a capture: with stacks on, torch.profiler records each Python call made here (and each
        costs its tracer), so beyond torch.profiler's own step() this makes five C calls and no Python call
        (issue 32: the CPU tiny-op step). Bookkeeping that can wait (parsing the run-queue reads) waits for stop.
        """
        if not self._recording:
            return
        sig = self._signals
        nested = sig.deferring
        sig.deferring = True  # a SIGTERM inside torch.profiler's step() is handled after it (SignalGuard.deferred)
        try:
            now = time.time_ns()
            rq = self._runqueue
            if rq is not None and rq.fd is not None:
                try:
                    rq.at_steps.append((now, os.pread(rq.fd, 64, 0)))
                except OSError as e:
                    self._record_error(RUNQUEUE_PROBE, e)
                    rq.close()
            self.context.steps.append((self._step, self._step_start, now))
            self._step += 1
            self._step_start = now
            prof = self._prof
            if prof is not None:
                if self._ends_cycles:
                    self._step_cycle(prof)
                else:  # every step in one cycle (the default): torch's step() neither stops nor warns
                    try:
                        prof.step()
                    except Exception as e:  # noqa: BLE001  (never raised into the user's program)
                        self._record_error("torch.profiler", e, "step")
                self._in_steps_ns += time.time_ns() - now
        finally:
            if not nested:
                sig.deferring = False
                if sig.pending is not None:
                    sig.deliver_pending()

    def _step_cycle(self, prof: Any) -> None:
        """torch.profiler's step() under a schedule, where a cycle may end (its tracer stops, or restarts)."""
        _compile_quiet.new_cycle()
        with warnings.catch_warnings():  # ~9 µs: only where a cycle may end
            # torch warns that each cycle's events are cleared; we keep every cycle (on_trace_ready).
            warnings.filterwarnings("ignore", message="Warning: Profiler clears events")
            self._guard("torch.profiler", "step", prof.step)

    def stop(self, reason: str = "ok") -> Trace | None:
        """Stop recording, build the Trace, write the files. Returns the Trace (or None).

        Never raises, except KeyboardInterrupt for a Ctrl-C pressed while saving (raised once saved).
        """
        global _ACTIVE
        if self._finished:
            return self.trace
        self._finished = True
        self._signals.hold()  # a SIGTERM while saving waits for the save, then does what it does
        try:
            with defer_sigint():  # a Ctrl-C while saving waits for the save; a second one abandons it
                self._finish(reason)
        finally:
            self._recording = False
            pending = self._signals.release_held()
            atexit.unregister(self._atexit)
            self._guard("process groups", "stop", self._groups.release)
            with _ACTIVE_LOCK:
                if _ACTIVE is self:
                    _ACTIVE = None
        if pending is not None:
            signal.raise_signal(pending)
        return self.trace

    # ---- pieces ------------------------------------------------------------------------------
    def _open_backend(self) -> dict[str, Any]:
        from neuron_prof.backends import get_backend

        def _open() -> None:
            self._backend = get_backend(self.backend_name, hint=self.hint)

        if not self._guard("backend", "select", _open) or self._backend is None:
            return {}
        self._guard("runtime_profile", "start", self._enable_runtime_profile)
        opts: dict[str, Any] = {}

        def _opts() -> None:
            opts.update(self._backend.profiler_options() or {})

        self._guard(getattr(self._backend, "name", "backend"), "profiler_options", _opts)
        return opts

    def _enable_runtime_profile(self) -> None:
        """The Neuron runtime's capture for this session (`_runtime.RuntimeDir`), when the backend has one."""
        from neuron_prof.backends.probes.runtime_profile import window_of

        wants_device = self.device_profile is not False and self.device_profile is not None
        enable = getattr(self._backend, "enable_runtime_profile", None)
        if enable is None:
            if wants_device:
                raise RuntimeError(f"device_profile needs the neuron backend (this session uses "
                                   f"{getattr(self._backend, 'name', '?')}): no device profile captured")
            return
        if not (self.system_profile or wants_device):
            return
        self._run_dir = _runtime.RuntimeDir(self.profile_dir)
        enable(self._run_dir.path, window_of(self.device_profile), kept=self._run_dir.kept,
               host_usage=self.host_usage)

    def _make_profiler(self, backend_opts: dict[str, Any]) -> Any:
        from neuron_prof.capture._kineto import (
            KinetoCollector,
            cycle_schedule,
            ends_cycles,
            make_schedule,
            profiler_kwargs,
        )

        out: list[Any] = []

        def _make() -> None:
            import torch.profiler

            assert self._builder is not None
            source = str(self.output) if self.output is not None else "<capture>"
            tmpdir = str(self.output.parent) if self.output is not None and self.output.parent.is_dir() else None
            kw = profiler_kwargs(**self._flags, backend_options=backend_opts, extra=self._profiler_kwargs)
            self._collector = KinetoCollector(self._builder, source, self._record_error, tmpdir, self._on_cycle,
                                              with_stack=bool(kw.get("with_stack")),
                                              device_ops=self.context.device_ops,
                                              export=getattr(self._backend, "export_trace", None),
                                              prune=not self.full_python_trace)
            kw["schedule"] = make_schedule(*self._schedule_args)
            cuts = getattr(self._backend, "cycle_boundaries", None)
            if self.steps is not None:
                kw["schedule"] = _steps.schedule(self.steps)
            elif cuts is not None and self._schedule_args == (None,) * 6:
                kw["schedule"] = cycle_schedule(cuts())  # the device profile's window is a cycle of its own
            kw["on_trace_ready"] = self._collector
            self._ends_cycles = ends_cycles(kw["schedule"])
            out.append(torch.profiler.profile(**kw))

        self._guard("torch.profiler", "create", _make)
        return out[0] if out else None

    def _finish(self, reason: str) -> None:
        progress = EndProgress(wanted(self.quiet))  # names each phase on stderr once the end takes over 1 s
        try:
            self._finish_phases(reason, progress)
        finally:
            progress.close()
        self._report(self._write_report)

    def _finish_phases(self, reason: str, progress: EndProgress) -> None:
        ctx = self.context
        ctx.end_ns = time.time_ns()
        if self._runqueue is not None:
            self._runqueue.sample()
            self._runqueue.load()
        c = self._collector
        conv_in_loop = c.export_ns + c.parse_ns if c is not None else 0
        if c is not None:
            c.phase = progress.phase
        t0 = time.perf_counter_ns()
        _compile_quiet.new_cycle()
        progress.phase("stopping torch.profiler")
        if self._prof is not None:
            self._guard("torch.profiler", "stop", self._prof.stop)
        if self._operators is not None:
            self._guard("operator recorder", "stop", self._operators.remove)
            self._operators = None
        if self._quiet is not None:
            self._guard("compile quiet", "stop", self._quiet.remove)
            self._quiet = None
        if self._runqueue is not None:
            self._runqueue.close()  # parses the steps' reads: after the tracer stopped, which would record it
        t1 = time.perf_counter_ns()
        conv_at_stop = (c.export_ns + c.parse_ns if c is not None else 0) - conv_in_loop
        # stop() runs on_trace_ready (our conversion) for the last cycle: that is after the region, not in it.
        self._timings["profiler_stop"] = t1 - t0 - conv_at_stop
        self._timings["convert_in_loop"] = conv_in_loop
        progress.phase("stopping the probes")
        if self._backend is not None:
            self._guard(getattr(self._backend, "name", "backend"), "stop", lambda: self._backend.stop(ctx))
        self._timings["stop"] = time.perf_counter_ns() - t1 + (t1 - t0)
        self._fill_rank()
        builder = self._builder if self._builder is not None else TraceBuilder()
        self._set_metadata(builder, reason)
        if self._backend is not None:
            progress.phase("adding the probes' tracks")
            t2 = time.perf_counter_ns()
            self._guard(getattr(self._backend, "name", "backend"), "contribute",
                        lambda: self._backend.contribute(builder, ctx))
            self._timings["contribute"] = time.perf_counter_ns() - t2
        # After contribute: the backend may have rewritten probe_errors; keep every error exactly once.
        builder.metadata[Meta.PROBE_ERRORS] = dedup_errors(list(builder.metadata.get(Meta.PROBE_ERRORS) or []) + ctx.errors)
        t3 = time.perf_counter_ns()
        progress.phase("building the trace")
        try:
            self.trace = builder.build()
        except Exception as e:  # noqa: BLE001
            self._record_error("build", e)
            self.trace = None
        if self.trace is not None and self.max_events is not None:
            self._guard("max_events", "cap", self._cap)
        self._timings["build"] = time.perf_counter_ns() - t3
        if self.trace is not None:
            # Findings go into trace.json/.pftrace so every viewer shows them (a failing analysis is recorded).
            t4 = time.perf_counter_ns()
            progress.phase("finding problems")
            self._guard("analysis", "annotate", self._annotate)
            self._timings["annotate"] = time.perf_counter_ns() - t4
        self._write_report = None
        if self.trace is not None and self.output is not None:
            paths = _outputs.planned_paths(self.output, ctx.rank, ctx.world_size, self.pftrace)
            self._write_report = _outputs.write_all(self.trace, paths,
                                                    lambda p: progress.phase(f"writing {p.name}"))
            self.paths = list(self._write_report.written)
            if self._write_report.written and ctx.rank in (None, 0):
                progress.phase("recording the run history")
                self._record_history(self._write_report.written[0])

    def _cap(self) -> None:
        from neuron_prof.capture._cap import cap_events

        assert self.trace is not None and self.max_events is not None
        trace, dropped = cap_events(self.trace, self.max_events)
        if dropped:
            md = dict(trace.metadata)
            md[Meta.CAPTURE_REDUCED] = {**(md.get(Meta.CAPTURE_REDUCED) or {}), **dropped}
            self.trace = trace.replace(metadata=md)

    def _record_history(self, path: Path) -> None:
        """One row in the run history (`neuron_prof.history`); a failure is reported with the others."""
        t0 = time.perf_counter_ns()
        try:
            from neuron_prof.history import record

            why = record(self.trace, path, "capture", totals=self._totals)
        except Exception as e:  # noqa: BLE001  (an import that fails: never the user's problem)
            why = f"{type(e).__name__}: {e}"
        if why:
            self._record_error("run history", RuntimeError(why), "write")
        self._timings["history"] = time.perf_counter_ns() - t0

    def _annotate(self) -> None:
        from neuron_prof.analysis import Context, annotate, overview
        from neuron_prof.history import enabled

        assert self.trace is not None
        if enabled():  # the findings, and the history's totals, on one context
            try:
                rep = overview(self.trace, Context(self.trace))
                self._totals = rep.totals
                self.trace = annotate(self.trace, rep.findings)
                return
            except Exception as e:  # noqa: BLE001  (the totals' failure must not cost the findings)
                self._record_error("run history", e, "totals")
        self.trace = annotate(self.trace)

    def _fill_rank(self) -> None:
        ctx = self.context
        info = _env.distributed_info()
        if info is not None:
            ctx.rank, ctx.world_size = info["rank"], info["world_size"]
            self._pg_info = info
        else:
            ctx.rank, ctx.world_size = _env.env_rank()
            self._pg_info = None

    def _metadata(self, reason: str, end_ns: int) -> dict[str, Any]:
        if self._prof is not None and self._step:
            self._timings["in_steps"] = max(0, self._in_steps_ns)  # wall clock: a step across a clock jump
        if self._runqueue is not None:
            self._runqueue.flush()
        md = session_metadata(self.context, self._collector, self._timings, self._backend, self._pg_info,
                              self._runqueue, reason, end_ns)
        if self.steps is not None:
            md[Meta.STEPS], info = _steps.keep_recorded(md[Meta.STEPS], self.steps)
            md[Meta.CAPTURE_REDUCED] = {**(md.get(Meta.CAPTURE_REDUCED) or {}), _steps.KEY: info}
        return md

    def _set_metadata(self, builder: TraceBuilder, reason: str) -> None:
        ctx = self.context
        builder.metadata.update(self._metadata(reason, ctx.end_ns))
        if self._exit_site:
            builder.metadata[Meta.EXIT_SITE] = self._exit_site
        if ctx.rank is not None:
            # Tag the host process with its rank so merged views can tell ranks apart.
            for p in list(builder.processes):
                if p.pid == ctx.host_pid:
                    builder.process(p.pid, rank=ctx.rank)

    def _on_cycle(self) -> None:
        """A profiler cycle ended inside step() (a schedule): save the trace so far, so a later crash that
        no handler sees (SIGKILL, the OOM killer, a segfault) still leaves it. Probe tracks come at the end."""
        if not (self._recording and self.checkpoint) or self._finished or self.output is None:
            return
        if time.monotonic() < self._next_checkpoint:
            return
        t0 = time.perf_counter_ns()
        try:
            assert self._builder is not None and self._collector is not None
            self._fill_rank()
            md = {**self._builder.metadata,
                  **self._metadata(f"checkpoint after cycle {self._collector.cycles}", time.time_ns())}
            trace = self._builder.build().replace(metadata=md)
            path = _outputs.planned_paths(self.output, self.context.rank, self.context.world_size, False)[0]
            _outputs.write_atomic(trace, path)
        except Exception as e:  # noqa: BLE001
            self._record_error("checkpoint", e, "write")
        cost = time.perf_counter_ns() - t0
        self._timings["checkpoint"] = self._timings.get("checkpoint", 0) + cost
        # Each checkpoint rewrites everything so far, so it grows with the run; skip cycles so that
        # checkpoints take at most ~10% of the time they protect.
        self._next_checkpoint = time.monotonic() + 9 * cost / 1e9

    def _report(self, report: _outputs.WriteReport | None) -> None:
        report_problems(self.context.errors, report)
        if report is not None and not self.quiet:
            n = self.trace.n_events if self.trace is not None else 0
            with contextlib.suppress(Exception):
                print(_outputs.where_message(report, n), file=sys.stderr, flush=True)
        if self._run_dir is not None:
            with contextlib.suppress(Exception):  # what it wrote beyond the trace, and how much: said even when quiet
                msg = self._run_dir.finish()
                if msg:
                    print(msg, file=sys.stderr, flush=True)

    def _record_error(self, probe: str, e: BaseException, phase: str = "collect") -> None:
        self.context.errors.append({"probe": probe, "phase": phase, "error": f"{type(e).__name__}: {e}"})

    def _guard(self, probe: str, phase: str, fn: Callable[[], Any]) -> bool:
        """Run fn; an Exception becomes a recorded error. Returns whether it succeeded."""
        try:
            fn()
            return True
        except Exception as e:  # noqa: BLE001  (never raised into the user's program)
            self._record_error(probe, e, phase)
            return False

    def _on_signal(self, name: str) -> None:
        self.stop(name)

    def _atexit(self) -> None:
        # start() without stop(): the interpreter is exiting (sys.exit, end of script); save what we have.
        self.stop("atexit")
