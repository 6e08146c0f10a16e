"""Finding kinds: every kind a finding can have, declared once, with what the other layers need to know of it.

`Kind` is a StrEnum: `Kind.CPU_FALLBACK == "cpu_fallback"`, so findings as dicts (`f["kind"]`) and JSON
read the same as before. Analysis, job, merge, CLI, exporters and TUI name kinds through it, never as string
literals (tests/test_kinds.py checks the shipped code), and read the facts below instead of keeping lists.

Adding a kind touches two files: its entry here (value, label, family, the analysis module that emits it)
and the module that emits it. A new analysis module is imported by the pipeline because an entry names it;
the TUI and the reports place the kind by its family.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Family(StrEnum):
    """What a finding is about: a neutral concept that the TUI and the reports map to where they show it."""

    COMPILE = "compile"
    FALLBACK = "fallback"
    DTYPE = "dtype"
    SYNC = "sync"
    DEVICE = "device"
    """The device timeline (time the device sat idle)."""
    DEVICE_PROFILE = "device_profile"
    """What a device profile (Neuron Explorer) recorded."""
    MEMORY = "memory"
    COLLECTIVES = "collectives"
    RANKS = "ranks"
    """How ranks of one job differ (stragglers, skew, missing ranks)."""
    PROFILER = "profiler"
    """How the profile was taken: probe errors, the profiler's own cost, settings that change the timings."""


@dataclass(frozen=True)
class KindInfo:
    """The facts of one kind."""

    label: str
    """A short name for people ("CPU fallback")."""
    family: Family
    modules: tuple[str, ...] = ()
    """Analysis modules (under neuron_prof.analysis) whose registered analyses emit it; the pipeline imports
    these. Empty for kinds made outside the per-trace analyses (job, merge)."""
    cross_rank: bool = False
    """Made from several ranks at once (job summary, merge, a merged trace)."""
    spread: bool = False
    """Its cost is spread inside the time of the other findings (no events of its own)."""


class Kind(StrEnum):
    """Every finding kind. The value is the stable snake_case id written into files."""

    info: KindInfo

    def __new__(cls, value: str, info: KindInfo) -> Kind:
        member = str.__new__(cls, value)
        member._value_ = value
        member.info = info
        return member

    FIRST_CALL_COMPILE = "first_call_compile", KindInfo(
        "first-call compile stall", Family.COMPILE, ("compile.stalls",))
    RECOMPILE = "recompile", KindInfo("recompile", Family.COMPILE, ("compile.stalls", "compile.cache_lost"))
    SHAPE_CHURN = "shape_churn", KindInfo("shape churn", Family.COMPILE, ("compile.churn",))
    CPU_FALLBACK = "cpu_fallback", KindInfo("CPU fallback", Family.FALLBACK, ("device.fallback",))
    DTYPE_DEMOTION = "dtype_demotion", KindInfo("dtype demotion", Family.DTYPE, ("device.dtype",))
    SYNC_POINT = "sync_point", KindInfo("sync point", Family.SYNC, ("device.sync",))
    DEVICE_IDLE = "device_idle", KindInfo("device idle", Family.DEVICE, ("device.idle",))
    MEMORY_PEAK = "memory_peak", KindInfo("memory peak", Family.MEMORY, ("device.memory",))
    COLLECTIVE = "collective", KindInfo("collective", Family.COLLECTIVES, ("collectives.rows",))
    STRAGGLER = "straggler", KindInfo("straggler", Family.RANKS, ("collectives.stragglers",), cross_rank=True)
    PROBE_ERROR = "probe_error", KindInfo("probe error", Family.PROFILER, ("probes",))
    PROFILER_OVERHEAD = "profiler_overhead", KindInfo(
        "profiler overhead", Family.PROFILER, ("probes",), spread=True)
    DEVICE_ERROR = "device_error", KindInfo("device error", Family.DEVICE_PROFILE, ("device.profile",))
    LAUNCH_BLOCKING = "launch_blocking", KindInfo("launch blocking", Family.PROFILER, ("probes",))
    DEVICE_UNATTRIBUTED = "device_unattributed", KindInfo(
        "device time not attributed", Family.PROFILER, ("probes",))
    # made by the job summary (neuron_prof.job) and merge (neuron_prof.merge), from several ranks
    STEP_SKEW = "step_skew", KindInfo("step time skew", Family.RANKS, cross_rank=True)
    RANK_COMPILES = "rank_compiles", KindInfo("compiles of one rank", Family.RANKS, cross_rank=True)
    RANK_FALLBACKS = "rank_fallbacks", KindInfo("CPU fallbacks of one rank", Family.RANKS, cross_rank=True)
    COLLECTIVE_SPREAD = "collective_spread", KindInfo(
        "collective arrival spread", Family.COLLECTIVES, cross_rank=True)
    RANKS_TO_OPEN = "ranks_to_open", KindInfo("ranks to open", Family.RANKS, cross_rank=True)
    MISSING_RANK = "missing_rank", KindInfo("missing rank", Family.RANKS, cross_rank=True)
    STOPPED_RANK = "stopped_rank", KindInfo("stopped rank", Family.RANKS, cross_rank=True)


class UnknownKind(ValueError):
    """A finding made with a kind that is not declared in `Kind`."""


class ForeignKind(str):
    """A kind read from a file that another neuron-prof version wrote, not declared in this one's `Kind`.

    `Finding.from_dict` keeps such a finding with its kind as written (JSON out is the same string); it has
    no facts (`info_of` is None), so the TUI and reports show it without a family."""


def kind_of(value: str) -> Kind | None:
    """The declared kind whose value is `value`, else None."""
    member = Kind._value2member_map_.get(value)
    return member if isinstance(member, Kind) else None


def info_of(kind: str) -> KindInfo | None:
    """The facts of `kind` (a Kind or its value); None for a kind this version does not declare."""
    k = kind_of(kind)
    return k.info if k is not None else None


def in_family(kind: str, *families: Family) -> bool:
    """Whether `kind` (a Kind or its value) belongs to one of `families`."""
    info = info_of(kind)
    return info is not None and info.family in families


def of_family(*families: Family) -> tuple[Kind, ...]:
    """The kinds of `families`, in declaration order."""
    return tuple(k for k in Kind if k.info.family in families)


def analysis_modules() -> tuple[str, ...]:
    """The analysis modules that emit some kind, first named first (what the pipeline imports)."""
    return tuple(dict.fromkeys(m for k in Kind for m in k.info.modules))
