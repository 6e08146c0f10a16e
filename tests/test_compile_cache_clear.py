"""A signature compiled twice because the program cleared the compile cache (issue 23, item 5): the cache keeps
one entry per key (``_C._get_compilation_cache_entries()``), so the compile probe reads the entries at each
``_C._clear_compilation_cache()`` the program makes; both compiles are placed, the clear is recorded at its
line, and analysis reports a `recompile` naming that line, never new shapes (docs/trainium.md)."""

from __future__ import annotations

import time
import types
from typing import Any

from neuron_prof.analysis import analyze
from neuron_prof.backends.base import CaptureContext
from neuron_prof.backends.probes.compile_cache import CompileCacheProbe
from neuron_prof.backends.probes.view import HostView
from neuron_prof.model import Arg, Cat, KinetoCat, TraceBuilder, TrackKind
from neuron_prof.model.schema import EventName

MS = 1_000_000
KEY = "aten::addmm_5d41402abc4b2a76"


class FakeCache:
    """The shapes of torch_neuronx._C's cache functions (TNX "Compile cache and timings"; docs/trainium.md):
    one entry per key, emptied by _clear_compilation_cache()."""

    def __init__(self) -> None:
        self.entries: dict[str, dict[str, Any]] = {}
        self.C = types.SimpleNamespace(_get_compilation_cache_entries=lambda: list(self.entries.values()),
                                       _clear_compilation_cache=self.entries.clear)

    def compile(self, key: str, ms: int) -> None:
        self.entries[key] = {"cache_key": key, "neff_size_bytes": 1024, "access_count": 1, "compilation_time_ms": ms}


def _run() -> tuple[Any, int]:
    """A host trace of four addmm calls, each pair around a clear of the cache: (trace, the clear's line)."""
    cache = FakeCache()
    probe = CompileCacheProbe(lambda: cache.C._get_compilation_cache_entries(), clear_owner=cache.C)
    ctx = CaptureContext(start_ns=time.time_ns())
    probe.start(ctx)
    calls = []
    for epoch in range(2):
        for i in range(2):
            t0 = time.time_ns()
            if i == 0:
                cache.compile(KEY, 20)  # the first call of each epoch compiles (20 ms, blocking)
            calls.append((t0, 21 * MS if i == 0 else MS))
            time.sleep(0.001)
        if epoch == 0:
            line = _clear(cache)
    probe.stop(ctx)
    b = TraceBuilder()
    host = b.thread_track(1, 1, "main")
    for t0, dur in calls:
        b.add_slice(host, t0, dur, "aten::addmm", KinetoCat.CPU_OP, {"Input Dims": [[4, 8], [8, 4]]})
    probe.contribute(b, ctx, HostView(b))
    return b.build(), line


def _clear(cache: FakeCache) -> int:
    cache.C._clear_compilation_cache()  # CLEAR
    return _clear.__code__.co_firstlineno + 1


def test_a_compile_cleared_from_the_cache_shows_twice_and_the_clear_at_its_line() -> None:
    trace, line = _run()
    comp = [i for i in range(len(trace.slices)) if trace.s(int(trace.slices.cat[i])) == Cat.COMPILE]
    assert len(comp) == 2, "the second compile of the one cache key is lost"
    assert {str(trace.args.get(int(trace.slices.args[i])).get(Arg.SIGNATURE)) for i in comp} == {KEY}
    t_first, t_second = sorted(int(trace.slices.ts_ns[i]) for i in comp)
    rows = trace.instants_on(TrackKind.COMPILE)
    [clear] = [r for r in rows if trace.s(int(trace.instants.name[r])) == EventName.CACHE_CLEARED]
    assert t_first < int(trace.instants.ts_ns[clear]) < t_second  # each compile on a call of its own epoch
    args = trace.instant_args(int(clear))
    assert args[Arg.CALL_SITE].endswith(f"test_compile_cache_clear.py:{line}") and args["entries"] == 1
    assert "_clear_compilation_cache" in args["call"]


def test_the_recompile_names_the_clear_and_nothing_says_new_shapes() -> None:
    trace, line = _run()
    found = analyze(trace)
    [re] = [f for f in found if f.kind == "recompile"]
    assert re.call_site.endswith(f"test_compile_cache_clear.py:{line}"), re
    assert re.count == 1 and "not new shapes" in re.title and "_clear_compilation_cache()" in re.advice
    assert re.evidence["cause"] == "cleared" and re.evidence["cleared"][0]["entries"] == 1
    assert not [f for f in found if f.kind == "shape_churn"]
    assert all("new shapes" not in f.title and "shape_churn" not in f.advice
               for f in found if f.kind == "first_call_compile")
