"""Where a capture's traces go, and writing them so that one failing file never costs the others.

Each file is written to a hidden temporary sibling and renamed into place, so a full disk or a crash
mid-write leaves either the old file or the new one, never half of one. When nothing could be written
where the user asked, the JSON goes to the temporary directory instead and the message says where.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from neuron_prof import formats
from neuron_prof.formats import split_suffix

if TYPE_CHECKING:
    from neuron_prof.model import Trace

def rank_path(output: Path, rank: int | None, world_size: int | None) -> Path:
    """`run/trace.json` -> `run/trace.rank3.json` in a job of more than one rank; unchanged otherwise."""
    if rank is None or not world_size or world_size <= 1:
        return output
    return formats.rank_path(output, rank)


def planned_paths(output: str | os.PathLike[str], rank: int | None, world_size: int | None,
                  pftrace: bool) -> list[Path]:
    """The files a capture writes: the JSON (or whatever `output` names) and, if wanted, the native trace
    beside it (`neuron_prof.formats.companion_pftrace`)."""
    main = rank_path(Path(output), rank, world_size)
    paths = [main]
    companion = formats.companion_pftrace(main) if pftrace else None
    if companion is not None:
        paths.append(companion)
    return paths


@dataclass
class WriteReport:
    """What happened to each output file."""

    written: list[Path] = field(default_factory=list)
    failed: list[tuple[Path, str]] = field(default_factory=list)
    fallback: Path | None = None
    """Where the JSON went when nothing could be written where asked."""
    write_ns: int = 0


def _describe(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return f"{type(e).__name__}: {e}"


def write_atomic(trace: Trace, path: Path) -> None:
    """Write `trace` to `path` through a temporary sibling and a rename. Raises what the exporter raises."""
    from neuron_prof.exporters import write_trace

    fmt = formats.format_for(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    stem, suf = split_suffix(path)
    tmp = path.with_name(f".{stem}.partial-{os.getpid()}{suf}")
    try:
        write_trace(trace, tmp, fmt=fmt)
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise


def write_all(trace: Trace, paths: list[Path], on_file: Callable[[Path], None] | None = None) -> WriteReport:
    """Write every path, each on its own (`on_file` is told each as it starts); if none succeeds, write the JSON
    into the temp directory."""
    rep = WriteReport()
    t0 = time.perf_counter_ns()
    for p in paths:
        if on_file is not None:
            on_file(p)
        try:
            write_atomic(trace, p)
            rep.written.append(p)
        except Exception as e:  # noqa: BLE001  (an exporter failure must never reach the user's program)
            rep.failed.append((p, _describe(e)))
    if paths and not rep.written:
        stem, _ = split_suffix(paths[0])
        fb = Path(tempfile.gettempdir()) / (f"neuron-prof-{stem}-{os.getpid()}-{int(time.time())}"
                                            + formats.CHROME_JSON.suffixes[0])
        try:
            write_atomic(trace, fb)
            rep.fallback = fb
            rep.written.append(fb)
        except Exception as e:  # noqa: BLE001
            rep.failed.append((fb, _describe(e)))
    rep.write_ns = time.perf_counter_ns() - t0
    return rep


def _size(p: Path) -> str:
    from neuron_prof.analysis.fmt import fmt_bytes  # at the session's end, which imports analysis anyway

    try:
        return fmt_bytes(p.stat().st_size)
    except OSError:
        return "?"


def where_message(rep: WriteReport, n_events: int) -> str:
    """One or two lines saying where the traces went and how to open them."""
    if not rep.written:
        return "neuron-prof: no trace could be written (see the warning above)"
    files = ", ".join(f"{p} ({_size(p)})" for p in rep.written)
    first = str(rep.written[0])
    return (f"neuron-prof: {n_events:,} events -> {files}\n"
            f"neuron-prof: open with `neuron-prof tui {first}` or drop the file on https://ui.perfetto.dev")
