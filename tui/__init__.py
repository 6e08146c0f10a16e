"""The Textual terminal UI (`neuron-prof tui`).

    from neuron_prof.tui import NeuronProfApp
    NeuronProfApp(["trace.json"]).run()

Importing this package imports Textual; the CLI imports it only when `tui` runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from neuron_prof.tui.app import NeuronProfApp

__all__ = ["NeuronProfApp"]


def __getattr__(name: str) -> Any:
    # lazy: `import neuron_prof.tui._shape` (pure numpy) must not pull in Textual
    if name == "NeuronProfApp":
        from neuron_prof.tui.app import NeuronProfApp

        return NeuronProfApp
    raise AttributeError(name)
