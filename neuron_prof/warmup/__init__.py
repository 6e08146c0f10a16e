"""Warm-up plans: from a trace's compiles, a `warmup.py` that compiles, before training, every eager (op, dtype,
shape) signature and torch.compile graph shape the profiled run compiled, with bucket helpers for the churned
dimensions (the sizes the shape-churn finding chose).

    text = neuron_prof.plan("trace.json", "warmup.py")   # or: neuron-prof plan trace.json -o warmup.py
    # the cure: fill the persistent NEFF cache once, in a step of its own; training then starts with it warm
    TORCH_NEURONX_NEFF_CACHE_DIR=cache python warmup.py && TORCH_NEURONX_NEFF_CACHE_DIR=cache python train.py
    # or in the training script, before the first step (moves the compiles out of the steps, not out of the run):
    import warmup; warmup.run("neuron")                   # prints how long it took

The plan's data comes from `analysis.compile.warmup` (no torch); running it, from `warmup.replay` (torch).
"""

from __future__ import annotations

import datetime as _dt
import os
import pprint
from pathlib import Path
from typing import Any

from neuron_prof.version import __version__

_TEMPLATE = '''"""Warm-up plan written by neuron-prof {version} from {source} ({date}).

Compiles, before training, the {n_eager} eager (op, dtype, shape) signatures and {n_graphs} torch.compile graph
shapes the profiled run compiled ({compile_s:.2f} s of compiling there), so that no training step compiles them.

Run it once as a step of its own, before training, to fill the persistent NEFF cache; the training run then
loads every NEFF from the cache instead of compiling it, and reaches its first steady step sooner:

    TORCH_NEURONX_NEFF_CACHE_DIR=/path/to/cache python warmup.py   # prints how long it took
    TORCH_NEURONX_NEFF_CACHE_DIR=/path/to/cache python train.py    # the same cache folder
(on the emulated device, NEURON_PROF_EMULATE=1 too). Or in the training process, before the first step (the
compiles leave the steps, not the run; without a persistent cache this is the way):

    import warmup
    warmup.run("neuron")

Graphs are compiled through the callables you pass, by frame id (GRAPHS' "frame"): fn(size) for each size its
churned dimension took ("sizes"), else fn(*zero tensors of its input shapes):
    warmup.run("neuron", compiled={{"0": lambda n: model_c(torch.zeros(n, 16, device="neuron"))}})
(`python warmup.py` compiles the eager signatures only: graphs need their callables.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

EAGER: list[dict[str, Any]] = {eager}

GRAPHS: list[dict[str, Any]] = {graphs}

BUCKETS: dict[str, list[int]] = {buckets}
"""Per churned dimension ("dimension of subject"), the bucket sizes the shape-churn finding chose."""


def bucket(size: int, buckets: Sequence[int]) -> int:
    """The smallest bucket >= size (size itself when it is larger than every bucket): pad inputs up to it."""
    return next((b for b in sorted(buckets) if b >= size), size)


def run(device: Any = "neuron", compiled: dict[str, Callable[..., Any]] | None = None,
        quiet: bool = False) -> dict[str, Any]:
    """Compile every signature above on `device`; returns what it did and how long it took (seconds)."""
    from neuron_prof.warmup.replay import run as _run

    return _run(EAGER, GRAPHS, device, compiled=compiled, quiet=quiet)


if __name__ == "__main__":
    import os
    import sys

    run(sys.argv[1] if len(sys.argv) > 1 else "neuron")
    print("neuron-prof warm-up: NEFF cache", os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR")
          or "the runtime's default (TORCH_NEURONX_NEFF_CACHE_DIR unset)", flush=True)
'''


def plan_data(trace: Any, *, warmup_steps: int | None = None) -> dict[str, Any]:
    """What the plan compiles (`analysis.compile.warmup.warmup_entries`) for a Trace or a trace's path."""
    from neuron_prof.analysis import Context
    from neuron_prof.analysis.compile.warmup import warmup_entries
    from neuron_prof.loaders import load

    if isinstance(trace, (str, os.PathLike)):
        trace = load(trace)
    return warmup_entries(trace, Context(trace, warmup_steps))


def plan(trace: Any, output: str | os.PathLike[str] | None = None, *, warmup_steps: int | None = None,
         data: dict[str, Any] | None = None) -> str:
    """The warm-up plan (Python source) for a Trace or a trace's path; written to `output` when given. `data`:
    `plan_data`'s result when already computed."""
    from neuron_prof.model import Meta

    source = str(trace) if isinstance(trace, (str, os.PathLike)) else str(trace.metadata.get(Meta.SOURCE) or "a trace")
    d = data if data is not None else plan_data(trace, warmup_steps=warmup_steps)
    buckets = {f"{b['dimension']} of {b['subject']}": b["buckets"] for b in d["buckets"]}
    text = _TEMPLATE.format(
        version=__version__, source=os.path.basename(source), date=_dt.date.today().isoformat(),
        n_eager=len(d["eager"]), n_graphs=len(d["graphs"]),
        compile_s=sum(e["compile_ns"] for e in d["eager"] + d["graphs"]) / 1e9,
        eager=_literal(d["eager"]), graphs=_literal(d["graphs"]), buckets=_literal(buckets),
    )
    if output is not None:
        Path(output).write_text(text, encoding="utf-8")
    return text


def _literal(v: Any) -> str:
    """A list as one item a line (a plan stays readable with hundreds of signatures); else pprint's form."""
    if isinstance(v, list):
        return "[\n" + "".join(f"    {item!r},\n" for item in v) + "]" if v else "[]"
    return pprint.pformat(v, width=118, sort_dicts=False)
