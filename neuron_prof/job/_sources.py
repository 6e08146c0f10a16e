"""What the user named on the command line, as one trace source per rank.

A file is one rank. A glob ("run/*.json") is each file it matches. A folder is either one trace (a folder
the loaders read as one trace, such as a processed Neuron Explorer profile: its Parquet tables) or a job:
the trace files in it (trace.rank0.json, ...), else each sub-folder that holds a trace (Explorer capture
folders: one `<instance>_pid_<pid>` folder per rank). A capture writes each rank twice (trace.rankR.json and
trace.rankR.pftrace): one file per name is kept, the .pftrace (it loads faster). URLs (s3://bucket/run/,
'gs://b/run/*.json') are listed through fsspec and read by the workers (_remote.py).
"""

from __future__ import annotations

import glob
import re
from pathlib import Path

from neuron_prof.errors import UsageError
from neuron_prof.formats import EXPLORER, TRACE_SUFFIXES, split_suffix
from neuron_prof.job._remote import is_url, remote_sources

_ONE_TRACE_FOLDER = EXPLORER.markers
"""Files that make a folder one trace (Neuron Explorer output) rather than a folder of ranks."""
_GLOB_CHARS = set("*?[")
_PID_FOLDER = re.compile(r"^.+_pid_\d+$")
RUN_WIDE = "parquet"
"""``RUN_DIR/parquet``: a job's tables processed together (``neuron-explorer view -d RUN_DIR``); with pid
folders beside it, it is no rank of its own (each pid folder loads its process's rows of it)."""


def _run_wide(d: Path) -> bool:
    return d.name == RUN_WIDE and any(x.is_dir() and _PID_FOLDER.match(x.name) for x in d.parent.iterdir())


def _stem(p: Path) -> str | None:
    stem, suffix = split_suffix(p)
    return stem if suffix else None


def _preference(p: Path) -> int:
    """Where `p`'s suffix comes in TRACE_SUFFIXES (preferred first when a rank was written twice)."""
    return TRACE_SUFFIXES.index(split_suffix(p)[1].lower())


def trace_files(folder: Path) -> list[Path]:
    """The trace files directly in `folder`, one per name (.pftrace over .json over .json.gz), sorted."""
    best: dict[str, Path] = {}
    for p in sorted(folder.iterdir()):
        stem = _stem(p)
        if stem is None or not p.is_file() or p.name.startswith("."):
            continue
        old = best.get(stem)
        if old is None or _preference(p) < _preference(old):
            best[stem] = p
    return sorted(best.values(), key=_natural)


def _natural(p: Path) -> tuple[object, ...]:
    """trace.rank2 before trace.rank10."""
    return tuple(int(x) if x.isdigit() else x for x in re.split(r"(\d+)", str(p)))


def _holds_one_trace(folder: Path) -> bool:
    return any(next(folder.glob(pattern), None) is not None for pattern in _ONE_TRACE_FOLDER)


def one_trace_root(folder: Path) -> Path | None:
    """The folder the loaders read as one trace: `folder` itself when it holds Explorer output, or its only
    sub-folder that does (a `<instance>_pid_<pid>` folder around its `<timestamp>` folder); else None."""
    if _holds_one_trace(folder):
        return folder
    inner = [d for d in folder.iterdir() if d.is_dir() and _holds_one_trace(d) and not _run_wide(d)]
    return inner[0] if len(inner) == 1 else None


def is_one_trace_folder(folder: Path) -> bool:
    """True for a folder that is a single trace (see `one_trace_root`)."""
    return one_trace_root(folder) is not None


def _folder_ranks(folder: Path) -> list[str]:
    files = trace_files(folder)
    if files:
        return [str(p) for p in files]
    subs = [d for d in sorted(folder.iterdir(), key=_natural) if d.is_dir() and not d.name.startswith(".")]
    out: list[str] = []
    for d in subs:
        if _run_wide(d):
            continue
        root = one_trace_root(d)
        if root is not None:
            out.append(str(root))
        else:
            inner = trace_files(d)
            if len(inner) == 1:  # an Explorer pid folder holding its trace.json
                out.append(str(inner[0]))
    return out


def is_job(args: tuple[str, ...] | list[str]) -> bool:
    """True when `args` name a job (several traces, a glob or a folder of ranks, or URLs: read on workers),
    not one trace file."""
    if len(args) != 1 or is_url(args[0]):
        return True
    a = args[0]
    if _GLOB_CHARS & set(a) and not Path(a).exists():
        return True
    p = Path(a)
    return p.is_dir() and not is_one_trace_folder(p)


def rank_sources(args: tuple[str, ...] | list[str]) -> list[str]:
    """One source per rank from files, globs and folders, in the order given (duplicates dropped).

    Raises UsageError when an argument names nothing."""
    out: list[str] = []
    for a in args:
        p = Path(a)
        if is_url(a):
            found = remote_sources(a, TRACE_SUFFIXES, bool(_GLOB_CHARS & set(a)))
            if not found:
                raise UsageError(f"{a}: matches no trace")
        elif p.is_dir():
            found = [str(root)] if (root := one_trace_root(p)) is not None else _folder_ranks(p)
            if not found:
                raise UsageError(f"{a}: is a directory holding no trace ({', '.join(TRACE_SUFFIXES)} files, "
                                 "or Neuron Explorer output)")
        elif p.exists():
            found = [a]
        elif _GLOB_CHARS & set(a):
            found = []
            for m in sorted(glob.glob(a), key=lambda s: _natural(Path(s))):
                mp = Path(m)
                if mp.is_dir():
                    root = one_trace_root(mp)
                    found += [str(root)] if root is not None else _folder_ranks(mp)
                elif _stem(mp) is not None:
                    found.append(m)
            if not found:
                raise UsageError(f"{a}: matches no trace")
        else:
            raise UsageError(f"{a}: no such file or folder")
        out += [f for f in found if f not in out]
    return _one_format_per_rank(out)


def _one_format_per_rank(paths: list[str]) -> list[str]:
    """A glob like run/trace.rank* matches each rank's .json and .pftrace: keep the preferred one."""
    keep: dict[tuple[str, str], str] = {}
    order: list[tuple[str, str]] = []
    for s in paths:
        p = Path(s)
        stem = _stem(p)
        key = (str(p.parent), stem) if stem is not None else (s, "")
        old = keep.get(key)
        if old is None:
            order.append(key)
            keep[key] = s
        elif stem is not None and _preference(p) < _preference(Path(old)):
            keep[key] = s
    return [keep[k] for k in order]
