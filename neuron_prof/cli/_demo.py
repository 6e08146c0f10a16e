"""`neuron-prof demo`: train a small GPT-style transformer under the profiler and say where the traces are."""

from __future__ import annotations

import click

from neuron_prof.formats import DEFAULT_OUTPUT, PFTRACE


@click.command()
@click.option("-o", "--output", default=DEFAULT_OUTPUT, show_default=True,
              help=f"Trace file; the {PFTRACE.suffixes[0]} is written beside it.")
@click.option("--steps", default=12, show_default=True, type=click.IntRange(1, 10_000), help="Training steps.")
@click.option("--device", type=click.Choice(["cpu", "neuron"]), default=None,
              help="Where to train (default: the emulated neuron device when available, else cpu).")
@click.option("--with-stack/--no-with-stack", default=True, show_default=True,
              help="Record Python call stacks: every finding gets the exact line of the statement.")
@click.option("-q", "--quiet", is_flag=True, default=False, help="Print only the file names.")
def command(output: str, steps: int, device: str | None, with_stack: bool, quiet: bool) -> int:
    """Train a tiny GPT (2 layers, d_model 64, byte vocabulary) for a few steps under neuron_prof.profile().

    Writes OUTPUT (Chrome/Kineto JSON) and the .pftrace beside it, then prints wall time, step times,
    the busiest ops and how to open the traces.
    """
    from neuron_prof.demo import run_demo
    from neuron_prof.demo.summary import print_summary

    result = run_demo(output, steps=steps, device=device, quiet=True, with_stack=with_stack)
    if quiet:
        for p in result.paths:
            click.echo(str(p))
    else:
        print_summary(result)
    return 0 if result.paths else 1
