"""Never break the job: a fault injected into every probe (neuron_prof/backends/probes/) and every hook of the
CPU adapter. The user's program gives the same result, the trace is written and loadable with Kineto's events,
`probe_errors` names each failing probe, and the failure is reported once, after the block.

Faults are injected by wrapping the probe objects the session really uses (our own code, never torch).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import neuron_prof
from neuron_prof.backends import register_backend
from neuron_prof.backends.base import CaptureContext
from neuron_prof.backends.cpu import CpuBackend
from neuron_prof.backends.probes.probe import Probe
from neuron_prof.capture import CaptureWarning
from tests._builders import slice_names, tiny_model, train_step

REPO = Path(__file__).resolve().parents[1]
PHASES = ("start", "stop", "contribute")


def every_probe() -> list[Probe]:
    """One fresh instance of each probe class in neuron_prof/backends/probes/, set up for a CPU run."""
    from neuron_prof.backends.probes.collectives import CollectivesProbe
    from neuron_prof.backends.probes.compile import CompileProbe
    from neuron_prof.backends.probes.compile_cache import CompileCacheProbe
    from neuron_prof.backends.probes.cuda_trace import CudaTraceProbe
    from neuron_prof.backends.probes.device import KinetoDeviceLinkProbe
    from neuron_prof.backends.probes.dtype import DtypeProbe
    from neuron_prof.backends.probes.fallback import DeepFallbackProbe, FallbackProbe
    from neuron_prof.backends.probes.memory import KinetoMemoryProbe, MemoryProbe
    from neuron_prof.backends.probes.runtime_profile import RuntimeProfileProbe
    from neuron_prof.backends.probes.stalls import StallProbe
    from neuron_prof.backends.probes.sync import SyncProbe

    return [CompileProbe(), CollectivesProbe(), KinetoMemoryProbe(), SyncProbe("cpu"), StallProbe(),
            DtypeProbe("cpu"), DeepFallbackProbe("cpu"), FallbackProbe(lambda: ["aten::addmm"]),
            MemoryProbe("cpu", lambda: 1, lambda d: (1024, 2048)), RuntimeProfileProbe(Path("neuron_profile")),
            KinetoDeviceLinkProbe(), CompileCacheProbe(lambda: []), CudaTraceProbe()]


ALL_NAMES = [p.name for p in every_probe()]

# What the next session's backend injects: {"mode": raise|slow|garbage, "phases": (...)}; set by each test.
FAULT: dict[str, Any] = {}
SLOW_S = 0.05


def _garbage(builder: Any, ctx: CaptureContext) -> None:
    """Hostile events a broken probe might write: they must not cost the trace."""
    track = builder.track(builder.process(ctx.host_pid), "garbage \x00\x1b[31m", "other")
    builder.add_slice(track, -5, -7, "\x00\x1b[2J[bold]garbage</script>", "c\tat",
                      {"nan": math.nan, "inf": -math.inf, "big": 2**80, "neg": -(2**70), "bytes": "b\udcff"})
    builder.add_instant(track, 2**62, "late", "c", {"deep": [[[[[1]]]]]})


def _inject(p: Probe) -> Probe:
    mode, phases = FAULT["mode"], FAULT["phases"]
    for phase in phases:
        orig: Callable[..., Any] = getattr(p, phase)

        def faulty(*args: Any, _orig: Callable[..., Any] = orig, _phase: str = phase, _name: str = p.name) -> Any:
            if mode == "raise":
                if _phase == "stop":
                    _orig(*args)  # fail after removing its hooks, or they would outlive this test
                raise RuntimeError(f"injected {_phase} fault in {_name}")
            if mode == "slow":
                time.sleep(SLOW_S)
                return _orig(*args)
            _orig(*args)
            if _phase == "contribute":
                _garbage(args[0], args[1])
            return object()  # a hook returning garbage: its result must be ignored

        setattr(p, phase, faulty)  # the instance the adapter drives
    return p


class FaultyProbesBackend(CpuBackend):
    """The CPU adapter running every probe, each wrapped with the fault in FAULT."""

    name = "faulty_probes"

    def default_probes(self, ctx: CaptureContext) -> list[Probe]:
        return [_inject(p) for p in every_probe()]


class FaultyHooksBackend(CpuBackend):
    """The CPU adapter whose own hooks fail as FAULT["hooks"] says."""

    name = "faulty_hooks"

    def profiler_options(self) -> dict[str, Any]:
        how = FAULT.get("options")
        if how == "raise":
            raise RuntimeError("injected profiler_options fault")
        if how == "garbage":
            return 42  # type: ignore[return-value]
        if how == "bad_activity":
            return {"activities": ["not an activity"]}
        return super().profiler_options()

    def default_probes(self, ctx: CaptureContext) -> list[Probe]:
        if FAULT.get("default_probes") == "raise":
            raise RuntimeError("injected default_probes fault")
        return super().default_probes(ctx)

    def contribute(self, builder: Any, ctx: CaptureContext) -> None:
        super().contribute(builder, ctx)
        if FAULT.get("contribute") == "raise":
            raise RuntimeError("injected adapter contribute fault")


register_backend("faulty_probes", f"{__name__}:FaultyProbesBackend")
register_backend("faulty_hooks", f"{__name__}:FaultyHooksBackend")


def _reference_losses(steps: int) -> list[float]:
    model, opt = tiny_model()
    return [train_step(model, opt, i) for i in range(steps)]


@pytest.fixture(scope="module")
def REF() -> list[float]:  # reads as the constant it stands for
    """The unprofiled losses (computed when first needed: a backward at import time would start autograd's
    engine during collection, before the emulated device of other test modules can register)."""
    return _reference_losses(2)


def _profiled(out: Path, backend: str) -> tuple[list[float], Any, list[warnings.WarningMessage]]:
    model, opt = tiny_model()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with neuron_prof.profile(out, backend=backend, quiet=True, with_stack=False) as prof:
            losses = []
            for i in range(2):
                losses.append(train_step(model, opt, i))
                prof.step()
    return losses, prof, [w for w in caught if issubclass(w.category, CaptureWarning)]


@pytest.mark.parametrize("phase", PHASES)
def test_every_probe_raising_in_a_phase(tmp_path: Path, REF: list[float], phase: str) -> None:
    FAULT.clear()
    FAULT.update(mode="raise", phases=(phase,))
    out = tmp_path / "t.json"
    losses, prof, ours = _profiled(out, "faulty_probes")
    assert losses == REF  # the program's result is unchanged
    trace = neuron_prof.load(out)  # written and loadable
    assert "aten::addmm" in slice_names(trace) and (tmp_path / "t.pftrace").is_file()
    errors = trace.metadata["probe_errors"]
    got = {e["probe"] for e in errors if e["phase"] == phase and e["error"].startswith("RuntimeError: injected")}
    assert got == set(ALL_NAMES)  # each probe named, once
    assert len(errors) == len({(e["probe"], e["phase"], e["error"]) for e in errors})
    assert len(ours) == 1 and ours[0].filename == __file__  # once, after the block, at the user's `with`
    text = str(ours[0].message)
    for name in ALL_NAMES:
        assert f"{name} ({phase}): RuntimeError: injected {phase} fault in {name}" in text


def test_every_probe_failing_everywhere_still_leaves_the_kineto_trace(tmp_path: Path, REF: list[float]) -> None:
    FAULT.clear()
    FAULT.update(mode="raise", phases=PHASES)
    out = tmp_path / "t.json"
    losses, prof, ours = _profiled(out, "faulty_probes")
    assert losses == REF
    trace = neuron_prof.load(out)
    assert trace.metadata["capture_exit"] == "ok" and len(trace.metadata["steps"]) == 2
    assert sum(n == "ProfilerStep#0" or n == "ProfilerStep#1" for n in slice_names(trace)) >= 2
    assert {(e["probe"], e["phase"]) for e in trace.metadata["probe_errors"]} == {
        (n, ph) for n in ALL_NAMES for ph in PHASES}
    assert len(ours) == 1


def test_slow_probes_do_not_change_results_and_are_accounted(tmp_path: Path, REF: list[float]) -> None:
    FAULT.clear()
    FAULT.update(mode="slow", phases=PHASES)
    out = tmp_path / "t.json"
    losses, prof, ours = _profiled(out, "faulty_probes")
    assert losses == REF and not ours  # slow is not an error
    trace = neuron_prof.load(out)
    assert not trace.metadata["probe_errors"]
    per = trace.metadata["probe_overhead_ns"]
    assert set(per) == set(ALL_NAMES)
    for name in ALL_NAMES:  # start + stop ran inside the region: the sleep is in the accounting
        assert per[name] >= 2 * SLOW_S * 1e9 * 0.9, (name, per[name])


def test_probes_returning_garbage_and_writing_hostile_events(tmp_path: Path, REF: list[float]) -> None:
    FAULT.clear()
    FAULT.update(mode="garbage", phases=PHASES)
    out = tmp_path / "t.json"
    losses, prof, ours = _profiled(out, "faulty_probes")
    assert losses == REF
    for path in (out, tmp_path / "t.pftrace"):  # both formats written and readable back
        trace = neuron_prof.load(path)
        assert "aten::addmm" in slice_names(trace)
        # every probe's garbage slice survived, its name kept literally, and no probe error was recorded
        names = [trace.slice_name(i) for i in range(len(trace.slices))]
        assert names.count("\x00\x1b[2J[bold]garbage</script>") == len(ALL_NAMES), path
        assert not trace.metadata["probe_errors"]
    from tests.conftest import pftrace_check

    chk = pftrace_check(tmp_path / "t.pftrace")
    assert chk.returncode == 0, chk.stdout + chk.stderr


@pytest.mark.parametrize("fault, where", [
    ({"options": "raise"}, ("faulty_hooks", "profiler_options")),
    ({"options": "garbage"}, ("faulty_hooks", "profiler_options")),
    ({"default_probes": "raise"}, ("backend", "start")),
    ({"contribute": "raise"}, ("faulty_hooks", "contribute")),
])
def test_adapter_hook_faults(tmp_path: Path, REF: list[float], fault: dict[str, str], where: tuple[str, str]) -> None:
    FAULT.clear()
    FAULT.update(fault)
    out = tmp_path / "t.json"
    losses, prof, ours = _profiled(out, "faulty_hooks")
    assert losses == REF
    trace = neuron_prof.load(out)
    assert "aten::addmm" in slice_names(trace)
    assert where in {(e["probe"], e["phase"]) for e in trace.metadata["probe_errors"]}
    assert len(ours) == 1 and where[1] in str(ours[0].message)


def test_adapter_options_torch_rejects_runs_the_block_unprofiled(tmp_path: Path, REF: list[float]) -> None:
    # options torch.profiler refuses: the profiler cannot start, the block still runs, a trace (of the
    # step markers and metadata) is still written and the reason is reported.
    FAULT.clear()
    FAULT.update(options="bad_activity")
    out = tmp_path / "t.json"
    losses, prof, ours = _profiled(out, "faulty_hooks")
    assert losses == REF
    trace = neuron_prof.load(out)
    assert len(trace.metadata["steps"]) == 2
    assert any(e["probe"] == "torch.profiler" for e in trace.metadata["probe_errors"])
    assert len(ours) == 1 and "torch.profiler" in str(ours[0].message)


# ---- faults inside hooks that run in the user's code (wrappers installed by probes) -------------------------
def _raise_call_site(*a: Any, **k: Any) -> str:
    raise RuntimeError("injected fault while recording")


@pytest.mark.parametrize("module, attr, user_code", [
    ("sync", "live_site", lambda: (torch.cpu.synchronize(), float(torch.ones(3).sum()))[1]),
    ("fallback", "DeepFallbackProbe._record", lambda: float((torch.ones(3) * 2).sum())),
    ("collectives", "live_site", lambda: float(torch.arange(4.0).sum())),
])
def test_a_failing_hook_never_raises_into_user_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str,
                                                    attr: str, user_code: Callable[[], float]) -> None:
    import importlib

    owner: Any = importlib.import_module(f"neuron_prof.backends.probes.{module}")
    *path, name = attr.split(".")
    for part in path:
        owner = getattr(owner, part)
    expected = user_code()
    monkeypatch.setattr(owner, name, _raise_call_site)
    FAULT.clear()
    FAULT.update(mode="none", phases=())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CaptureWarning)
        with neuron_prof.profile(tmp_path / "t.json", backend="faulty_probes", quiet=True, with_stack=False):
            got = user_code()
    assert got == expected
    assert neuron_prof.load(tmp_path / "t.json").n_events > 0


def test_a_failing_stack_walk_is_recorded_and_no_stack_is_guessed(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The end-of-cycle walk that gives exact lines fails: the user's results, the trace and the error record
    remain, and no op carries a line it could not prove (the trace is not marked exact)."""
    import neuron_prof.capture._sites as sites

    monkeypatch.setattr(sites, "walk", _raise_call_site)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CaptureWarning)
        with neuron_prof.profile(tmp_path / "t.json", quiet=True, backend="cpu") as p:
            got = float((torch.ones(3) * 2).sum())
    assert got == 6.0
    t = neuron_prof.load(tmp_path / "t.json")
    assert any(e["probe"] == "call sites" for e in t.metadata["probe_errors"])
    assert "stack_lines" not in t.metadata and p.trace is not None
    assert not any("Call stack" in t.slice_args(r) for r in range(len(t.slices)))


def test_exit_code_and_output_unchanged_with_every_probe_failing(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        import sys, torch, neuron_prof
        from tests import test_reliability_probes as t
        t.FAULT.update(mode="raise", phases=t.PHASES)
        torch.manual_seed(0)
        m = torch.nn.Linear(4, 2)
        with neuron_prof.profile("trace.json", backend="faulty_probes", quiet=True, with_stack=False):
            total = float(m(torch.ones(3, 4)).sum())
        print("result", round(total, 6))
        sys.exit(4)
    """))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=120)
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 2)
    assert p.returncode == 4, p.stderr
    assert p.stdout.strip() == f"result {round(float(m(torch.ones(3, 4)).sum()), 6)}"
    assert p.stderr.count("CaptureWarning") == 1 and "your program was not affected" in p.stderr
    assert "Traceback" not in p.stderr
    assert neuron_prof.load(tmp_path / "trace.json").metadata["capture_exit"] == "ok"


_GARBAGE_SURVIVED = threading.Event()
"""Set by the garbage sampler's reader once it was asked again after two garbage answers."""


class _SamplerBackend(CpuBackend):
    """The CPU adapter with a memory sampler whose reader answers well once, then returns garbage."""

    name = "garbage_sampler"

    def default_probes(self, ctx: CaptureContext) -> list[Probe]:
        from neuron_prof.backends.probes.memory import MemoryProbe

        calls = []

        def read(d: int) -> Any:
            calls.append(d)
            if len(calls) >= 5:  # the third garbage answer asked for: the thread survived two
                _GARBAGE_SURVIVED.set()
            return (1024, 2048) if len(calls) <= 2 else 42  # 42: not a tuple

        return [MemoryProbe("cpu", lambda: 1, read)]


register_backend("garbage_sampler", f"{__name__}:_SamplerBackend")


def test_memory_sampler_reader_returning_garbage_prints_nothing(tmp_path: Path, REF: list[float],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    died: list[str] = []  # what Python would print as "Exception in thread neuron-prof-memory: Traceback..."
    monkeypatch.setattr(threading, "excepthook", lambda a: died.append(f"{a.thread.name}: {a.exc_type.__name__}"))
    model, opt = tiny_model()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CaptureWarning)
        with neuron_prof.profile(tmp_path / "t.json", backend="garbage_sampler", quiet=True, with_stack=False,
                                 memory_interval_ms=1.0) as prof:
            losses = []
            _GARBAGE_SURVIVED.clear()
            for i in range(2):
                losses.append(train_step(model, opt, i))
                if i == 0:  # the sampler meets the garbage (and keeps sampling) while the program runs
                    assert _GARBAGE_SURVIVED.wait(timeout=30)
                prof.step()
    assert losses == REF
    assert neuron_prof.load(tmp_path / "t.json").n_events > 0
    assert not died
