"""A progress bar on stderr for commands that work through files one by one (rich; shown only on a terminal)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


@contextmanager
def steps(total: int, console: Console | None = None) -> Iterator[Callable[[str], None]]:
    """Yields `step(description)`: shows what starts now and advances the bar past what came before.

    Without `console`, the bar goes to stderr when it is a terminal and nowhere otherwise (pipes, CI logs)."""
    if console is None:
        if not sys.stderr.isatty():
            yield lambda description: None
            return
        console = Console(stderr=True)
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=console, transient=True)
    task = progress.add_task("", total=total)
    started = False

    def step(description: str) -> None:
        nonlocal started
        progress.update(task, description=description, advance=1 if started else 0)
        started = True

    with progress:
        yield step
        progress.update(task, completed=total)
