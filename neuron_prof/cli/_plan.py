"""`neuron-prof plan TRACE -o warmup.py`: a warm-up plan that compiles, before training, what the trace compiled."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("trace_path", metavar="TRACE", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), default=Path("warmup.py"),
              show_default=True, help="The plan (a Python module) to write.")
@click.option("--warmup-steps", type=click.IntRange(min=0), default=None, help="Leading steps to treat as warm-up.")
def command(trace_path: Path, output: Path, warmup_steps: int | None) -> int:
    """Write a warm-up plan: a Python module that compiles every eager (op, dtype, shape) signature and every
    torch.compile graph shape the trace compiled, with bucket helpers for the churned dimensions. Run it in the
    training process before the first step (it prints how long it took); with a persistent compile cache
    (TORCH_NEURONX_NEFF_CACHE_DIR) run it as a separate step before training: the training run then loads
    every NEFF from the cache and reaches its first steady step sooner.

    \b
    neuron-prof plan trace.json -o warmup.py
    TORCH_NEURONX_NEFF_CACHE_DIR=cache python warmup.py
    TORCH_NEURONX_NEFF_CACHE_DIR=cache python train.py
    # or in train.py, before the first step:
    import warmup; warmup.run("neuron")
    """
    from neuron_prof.errors import ExportError
    from neuron_prof.loaders import load
    from neuron_prof.warmup import plan, plan_data

    trace = load(trace_path)
    d = plan_data(trace, warmup_steps=warmup_steps)
    try:
        plan(trace, output, data=d)
    except OSError as e:
        raise ExportError(f"{output}: cannot write: {e.strerror or e}") from None
    secs = sum(e["compile_ns"] for e in d["eager"] + d["graphs"]) / 1e9
    click.echo(f"wrote {output}: {len(d['eager'])} eager signatures, {len(d['graphs'])} graph shapes, "
               f"{len(d['buckets'])} bucketed dimensions ({secs:.2f} s of compiling in {trace_path.name}). Fill "
               f"the persistent compile cache before training: TORCH_NEURONX_NEFF_CACHE_DIR=DIR python {output}; or "
               f"in the training process, before the first step: import {output.stem}; {output.stem}.run(\"neuron\")")
    return 0
