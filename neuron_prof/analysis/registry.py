"""The analysis registry: each finding family is a function `(trace, ctx) -> list[Finding]`.

Add one with the decorator in its own module and name the module in its kind's entry
(`neuron_prof.analysis.kinds`, `KindInfo.modules`): the pipeline imports the modules the kinds name.

    @register(Kind.STRAGGLER)
    def stragglers(trace: Trace, ctx: Context) -> list[Finding]: ...
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

from neuron_prof.analysis.context import Context
from neuron_prof.analysis.finding import Finding
from neuron_prof.model import Trace

Analysis: TypeAlias = Callable[[Trace, Context], list[Finding]]

ANALYSES: dict[str, Analysis] = {}
"""name -> analysis, in registration order."""


def register(name: str) -> Callable[[Analysis], Analysis]:
    """Decorator adding an analysis under `name` (re-registering a name replaces it)."""

    def deco(fn: Analysis) -> Analysis:
        ANALYSES[name] = fn
        return fn

    return deco
