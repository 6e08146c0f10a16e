"""torch.compile probe: one event per Dynamo compile, graph breaks, and recompile-limit hits.

Source: ``torch._dynamo.utils.get_compilation_metrics()`` (a deque of at most 64 records, each with
``compile_id``, frame, Unix-µs start and duration, per-phase seconds, ``recompile_reason``, ``fail_type``).
Records that exist at start() are remembered by identity and skipped. A record whose ``fail_reason`` says
the recompile limit was exceeded becomes a "recompile limit hit" instant: after it Dynamo runs the frame
eagerly without saying so again, which would otherwise hide every later recompile.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from neuron_prof.backends.probes._common import probe_track, site_args, step_of
from neuron_prof.backends.probes.probe import Probe
from neuron_prof.model import Arg, Cat, TrackKind
from neuron_prof.model.callsite import display_path
from neuron_prof.model.schema import EventName

if TYPE_CHECKING:
    from neuron_prof.backends.base import CaptureContext
    from neuron_prof.backends.probes.view import HostView
    from neuron_prof.model import TraceBuilder

LIMIT_HIT = EventName.RECOMPILE_LIMIT
GRAPH_BREAK = EventName.GRAPH_BREAK
_PHASES = (("entire_frame_compile", "entire_frame_compile_time_s"), ("backend_compile", "backend_compile_time_s"),
           ("inductor_compile", "inductor_compile_time_s"), ("code_gen", "code_gen_time_s"))


def _metrics() -> list[Any]:
    # Importing Dynamo costs seconds: when nobody imported it, nothing was compiled, and there is nothing to read.
    if "torch._dynamo.utils" not in sys.modules:
        return []
    from torch._dynamo.utils import get_compilation_metrics

    return list(get_compilation_metrics())


class CompileProbe(Probe):
    """Dynamo compile records taken during the capture, turned into compile-track events."""

    name = "compile"

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[int] = set()
        self.records: list[Any] = []
        self.extra_phases: dict[str, dict[str, int]] = {}
        """compile_id -> {phase: ns} added by a backend (e.g. torch_neuronx's dynamo metrics)."""

    def start(self, ctx: CaptureContext) -> None:
        self._seen = {id(m) for m in _metrics()}

    def stop(self, ctx: CaptureContext) -> None:
        self.records = [m for m in _metrics() if id(m) not in self._seen]

    def contribute(self, builder: TraceBuilder, ctx: CaptureContext, view: HostView) -> None:
        if not self.records:
            return
        track = probe_track(builder, ctx, TrackKind.COMPILE)
        for m in self.records:
            self._add(builder, ctx, view, track, m)

    def _add(self, builder: TraceBuilder, ctx: CaptureContext, view: HostView, track: int, m: Any) -> None:
        def g(k: str) -> Any:  # records are dataclasses whose fields move between versions
            return getattr(m, k, None)
        start_us, dur_us = g("start_time_us"), g("duration_us")
        if start_us is None:
            st = g("start_time")
            start_us = int(st * 1e6) if st else 0
        if dur_us is None:
            dur_us = int((g("entire_frame_compile_time_s") or 0) * 1e6)
        ts, dur = int(start_us) * 1000, int(dur_us) * 1000
        cid = str(g("compile_id") or "")
        filename, line = g("co_filename"), g("co_firstlineno")
        code = f"{display_path(filename)}:{line} {g('co_name') or ''}".strip() if filename else ""
        # the user's call that ran into the compile: the host op running when it started (Dynamo compiles
        # inside the call of the compiled function); the compiled function itself is `code`
        site = view.site_at(ts + 1, ctx.main_tid) if ctx.main_tid else view.site_at(ts + 1, None)
        module = view.modules_at(ts, ts + dur) or site.module
        fail = str(g("fail_reason") or "")
        if fail and ("recompile limit" in fail.lower() or "cache_size_limit" in fail or "cache size limit" in fail):
            args: dict[str, Any] = {Arg.COMPILE_ID: cid, Arg.REASON: fail.split("\n", 1)[0], "limit": _limit(),
                                    Arg.STEP: step_of(ts, ctx)}
            if g("recompile_reason"):
                args[Arg.RECOMPILE_REASON] = g("recompile_reason")
            builder.add_instant(track, ts, LIMIT_HIT, Cat.COMPILE, args)
            return
        phases = {name: int(round(g(attr) * 1e9)) for name, attr in _PHASES if g(attr)}
        phases.update(self.extra_phases.get(cid, {}))
        args = {
            Arg.COMPILE_KIND: "torch.compile" if g("is_forward") is not False else "backward",
            Arg.COMPILE_ID: cid, **site_args(site), Arg.MODULE: module, "code": code, Arg.CACHE: _cache_state(m),
            Arg.PHASES: phases, Arg.STEP: step_of(ts, ctx), "graph_op_count": g("graph_op_count"),
            "guard_count": g("guard_count"),
        }
        if g("recompile_reason"):
            args[Arg.RECOMPILE_REASON] = g("recompile_reason")
        if g("fail_type"):
            args["fail_type"] = g("fail_type")
            args["fail_reason"] = fail.split("\n", 1)[0]
        builder.add_slice(track, ts, dur, str(g("co_name") or cid or "compile"), Cat.COMPILE,
                          {k: v for k, v in args.items() if v not in (None, "")})
        for reason in sorted(g("restart_reasons") or ()):
            builder.add_instant(track, ts, GRAPH_BREAK, Cat.COMPILE,
                                {Arg.REASON: str(reason).split("\n", 1)[0], Arg.COMPILE_ID: cid, **site_args(site)})


def _cache_state(m: Any) -> str:
    hits = sum(getattr(m, k, None) or 0 for k in ("inductor_fx_local_cache_hit_count",
                                                   "aotautograd_local_cache_hit_count",
                                                   "inductor_fx_remote_cache_hit_count",
                                                   "aotautograd_remote_cache_hit_count"))
    return "hit" if hits else "miss"


def _limit() -> int | None:
    try:
        import torch._dynamo.config as cfg

        return int(getattr(cfg, "recompile_limit", getattr(cfg, "cache_size_limit", 0)))
    except Exception:  # noqa: BLE001  (config names move between torch versions)
        return None
