"""The `neuron-prof` command line. One module per subcommand, loaded only when that command runs.

Each module `neuron_prof/cli/_<name>.py` defines `command`, a `click.Command` whose docstring is its help.
Register it in `COMMANDS` below. Heavy imports (torch, textual, plotly) go inside the command's function.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

import click

from neuron_prof.errors import NeuronProfError, OutOfMemoryError
from neuron_prof.formats import CHROME_JSON, DEFAULT_OUTPUT, PFTRACE, suffix_list
from neuron_prof.version import __version__

COMMANDS: dict[str, tuple[str, str]] = {
    # name: (module, one-line help shown in `neuron-prof --help` without importing the module)
    "demo": ("neuron_prof.cli._demo", f"Train a small transformer under the profiler and write {DEFAULT_OUTPUT}/{PFTRACE.suffixes[0]}."),
    "run": ("neuron_prof.cli._run", "Profile a Python script with no code change."),
    "convert": ("neuron_prof.cli._convert", f"Convert a trace between {suffix_list((CHROME_JSON,))} and {PFTRACE.suffixes[0]}."),
    "summary": ("neuron_prof.cli._summary", "Totals and ranked findings for a trace; for many ranks, the job summary (Dask)."),
    "check": ("neuron_prof.cli._check", "CI gate: exit 1 on findings after warm-up or broken limits, 3 on a partial trace."),
    "history": ("neuron_prof.cli._history", "List recorded runs (one row each) and the step-time trend per script."),
    "plan": ("neuron_prof.cli._plan", "Write a warm-up plan (warmup.py) that compiles what a trace compiled, before training."),
    "diff": ("neuron_prof.cli._diff", "Compare two traces: step time, ops, findings, new fallbacks and compiles."),
    "tui": ("neuron_prof.cli._tui", "Open the terminal UI on one or more traces."),
    "export": ("neuron_prof.cli._export", "Export a trace as Parquet tables (or json/pftrace); many ranks as one dataset."),
    "merge": ("neuron_prof.cli._merge", "Merge per-rank traces onto one timeline, aligning clocks."),
    "open": ("neuron_prof.cli._open", "Serve a trace once on 127.0.0.1 and print its Perfetto UI link."),
    "report": ("neuron_prof.cli._report", "Write a self-contained HTML report (findings and plots) for a trace."),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        cmd = importlib.import_module(entry[0]).command
        assert isinstance(cmd, click.Command)
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="neuron-prof")
def cli() -> None:
    """neuron-prof: profile PyTorch on AWS Trainium (and read any torch.profiler trace)."""


_OOM = object()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 1 a check failed, 2 bad input or usage, 3 `check` of a partial
    trace)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        rv = cli.main(args=args, prog_name="neuron-prof", standalone_mode=False)
    except NeuronProfError as e:
        click.echo(f"neuron-prof: error: {e}", err=True)
        return e.exit_code
    except click.exceptions.Exit as e:
        return int(e.exit_code)
    except click.ClickException as e:
        e.show()
        return 2
    except MemoryError:
        rv = _OOM  # said below, once the traceback (and the memory its frames hold) is gone
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return 130
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        return 130
    if rv is _OOM:
        oom = OutOfMemoryError.from_memory_error(args)
        click.echo(f"neuron-prof: error: {oom}", err=True)
        return oom.exit_code
    return int(rv) if isinstance(rv, int) else 0
