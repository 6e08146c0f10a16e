"""Finding: one diagnosis with its cost, where it happens, the evidence and what to do."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Final

from neuron_prof.analysis.kinds import ForeignKind, Kind, UnknownKind, kind_of

SEVERITIES: Final = ("info", "warning", "critical")

COST_WARNING_SHARE: Final = 0.25
"""Severity follows cost: a finding costing this share of the profiled wall time or more is never below
`warning`, whatever its kind and its own rules (docs/findings.md, "Severity")."""

KINDS: Final[tuple[Kind, ...]] = tuple(Kind)
"""Every declared kind (`neuron_prof.analysis.kinds`), in declaration order."""


@dataclass(frozen=True)
class Finding:
    """A ranked diagnosis. `to_dict()` is the stable JSON form (docs/summary.md documents it)."""

    kind: str
    """A `Kind` (a plain string naming one is made the Kind; any other raises UnknownKind); a `ForeignKind`
    only when read by `from_dict` from a file another version wrote."""
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

    def __post_init__(self) -> None:
        if isinstance(self.kind, (Kind, ForeignKind)):
            return
        kind = kind_of(self.kind) if isinstance(self.kind, str) else None
        if kind is None:
            raise UnknownKind(f"unknown finding kind {self.kind!r}: declare it in neuron_prof/analysis/kinds.py")
        object.__setattr__(self, "kind", kind)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values (the kind as a plain string)."""
        return {**asdict(self), "kind": str(self.kind)}

    def cost_floored(self, share: float | None = None) -> Finding:
        """This finding with the one cost rule applied: `info` costing COST_WARNING_SHARE or more of the
        profiled wall time becomes `warning` (the analyses' own rules may only raise it further). `share`:
        the part of its share no other finding counts (`_overlap.cost_floor`), else its whole share."""
        if self.severity == "info" and (self.share if share is None else share) >= COST_WARNING_SHARE:
            return replace(self, severity="warning")
        return self

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Finding:
        """A finding back from its dict (a file, `summary --json`). A kind this version does not declare (the
        file came from another version) is kept as written, as a ForeignKind: the finding is shown, not lost."""
        known = {f for f in cls.__dataclass_fields__}
        fields = {k: v for k, v in d.items() if k in known}
        kind = str(fields.get("kind", ""))
        fields["kind"] = kind_of(kind) or ForeignKind(kind)
        return cls(**fields)
