"""Finding: one diagnosis with its cost, where it happens, the evidence and what to do."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Final

SEVERITIES: Final = ("info", "warning", "critical")

COST_WARNING_SHARE: Final = 0.25
"""Severity follows cost: a finding costing this share of the profiled wall time or more is never below
`warning`, whatever its kind and its own rules (README, "Severity")."""

KINDS: Final = (
    "first_call_compile", "recompile", "shape_churn", "cpu_fallback", "dtype_demotion", "sync_point",
    "device_idle", "memory_peak", "collective", "straggler", "probe_error", "profiler_overhead",
    "device_error",
    "launch_blocking", "device_unattributed",
)


@dataclass(frozen=True)
class Finding:
    """A ranked diagnosis. `to_dict()` is the stable JSON form (README documents it)."""

    kind: str
    """Stable snake_case id, one of KINDS."""
    severity: str
    """"info", "warning" or "critical"."""
    title: str
    cost_ns: int
    """Time this problem cost in the profiled region."""
    share: float
    """cost_ns as a fraction (0-1) of the profiled wall time."""
    count: int
    call_site: str = ""
    """"path/to/file.py:LINE": the user's frame, not torch's."""
    module: str = ""
    """nn.Module path when known ("model.blocks.0.attn")."""
    advice: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    """What the finding rests on: slice rows, names, counts, time ranges (JSON-serialisable)."""
    ts_ns: int | None = None
    """Where on the timeline to look first (Unix ns)."""
    rank: int | None = None
    after_warmup: bool | None = None
    """Whether it happens in the steady steps (after warm-up); None when the trace has no steady steps to
    tell by. `check`'s default gate counts the findings that are not False."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def cost_floored(self, share: float | None = None) -> Finding:
        """This finding with the one cost rule applied: `info` costing COST_WARNING_SHARE or more of the
        profiled wall time becomes `warning` (the analyses' own rules may only raise it further). `share`:
        the part of its share no other finding counts (`_overlap.cost_floor`), else its whole share."""
        if self.severity == "info" and (self.share if share is None else share) >= COST_WARNING_SHARE:
            return replace(self, severity="warning")
        return self

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Finding:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})
