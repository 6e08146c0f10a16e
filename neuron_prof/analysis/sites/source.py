"""The user's source text for a call site, when the file can be found from where the trace was read.

A call site's path is as torch.profiler writes it: absolute, or relative to a sys.path entry of the profiled
process ("train.py", "pkg/model.py"). It is looked for as given, then under the folder of the profiled
script (metadata ``argv[0]``), the folder of the trace file (metadata ``source``) and the working directory.
"""

from __future__ import annotations

import linecache
import os
from functools import lru_cache
from typing import Any

from neuron_prof.model import Meta


def _roots(metadata: dict[str, Any]) -> tuple[str, ...]:
    out: list[str] = []
    argv = metadata.get("argv")
    if isinstance(argv, list) and argv and isinstance(argv[0], str) and argv[0]:
        out.append(os.path.dirname(os.path.abspath(argv[0])))
    src = metadata.get(Meta.SOURCE)
    if isinstance(src, str) and src:
        out.append(os.path.dirname(os.path.abspath(src)))
    out.append(os.getcwd())
    return tuple(dict.fromkeys(out))


@lru_cache(maxsize=1024)
def _find(path: str, roots: tuple[str, ...]) -> str | None:
    if os.path.isabs(path):
        return path if os.path.isfile(path) else None
    for r in roots:
        p = os.path.join(r, path)
        if os.path.isfile(p):
            return p
    return None


def source_file(call_site: str, metadata: dict[str, Any]) -> tuple[str, int] | None:
    """(file on this machine, line) of a "path:LINE" call site, or None when the file is not found."""
    path, _, line = call_site.rpartition(":")
    if not path or not line.isdigit():
        return None
    f = _find(path, _roots(metadata))
    return (f, int(line)) if f else None


def source_line(call_site: str, metadata: dict[str, Any]) -> str:
    """The stripped text of the line a call site names; "" when the file or line is not found."""
    got = source_file(call_site, metadata)
    return linecache.getline(got[0], got[1]).strip() if got else ""


def source_context(call_site: str, metadata: dict[str, Any], around: int = 5) -> list[tuple[int, str]]:
    """(line number, text) of the lines around a call site's line (empty when the file is not found)."""
    got = source_file(call_site, metadata)
    if not got:
        return []
    f, ln = got
    out = []
    for i in range(max(1, ln - around), ln + around + 1):
        text = linecache.getline(f, i)
        if not text and i > ln:
            break
        out.append((i, text.rstrip("\n")))
    return out
