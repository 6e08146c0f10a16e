"""`neuron-prof diff BASE NEW`: what got faster or slower between two traces."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the diff as JSON.")
@click.option("--markdown", is_flag=True, help="Print Markdown.")
@click.option("--top", type=click.IntRange(min=1), default=15, show_default=True, help="Ops to list.")
@click.option(
    "--warmup-steps", type=click.IntRange(min=0), default=None, help="Leading steps to treat as warm-up."
)
def command(base: Path, new: Path, as_json: bool, markdown: bool, top: int, warmup_steps: int | None) -> int:
    """Compare two traces: step time, per-op time, findings per kind, fallbacks and compiles that
    appeared or disappeared.

    \b
    neuron-prof diff before.json after.json
    """
    import orjson

    from neuron_prof.analysis import diff
    from neuron_prof.errors import UsageError
    from neuron_prof.exporters.diff_text import diff_markdown, diff_text
    from neuron_prof.loaders import load

    if as_json and markdown:
        raise UsageError("choose one of --json and --markdown")
    d = diff(load(base), load(new), warmup_steps=warmup_steps, top=top)
    if as_json:
        click.echo(orjson.dumps(d, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE), nl=False)
    elif markdown:
        click.echo(diff_markdown(d, str(base), str(new)), nl=False)
    else:
        click.echo(diff_text(d, str(base), str(new)), nl=False)
    return 0
