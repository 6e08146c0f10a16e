"""torch.compile's own phase spans on the host threads: which span names are compile work (one rule for the ops
table, which sees through them, and the step phases and device idle, which count their time as compiling)."""

from __future__ import annotations

COMPILE_PHASES = ("entire_frame_compile", "backend_compile", "inductor_compile")
"""torch.compile's phase spans (cpu_op, torch-facts.md); wrappers named ``... (dynamo_timed)`` are too."""


def is_compile_span(name: str) -> bool:
    """Whether a host span of this name is torch.compile's own compile work."""
    return name.endswith("(dynamo_timed)") or name in COMPILE_PHASES
