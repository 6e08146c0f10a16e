"""Traces named by URL (s3://, gs://, https://, file://, ...): listed and read through fsspec.

    urls = remote_sources("s3://bucket/run/")          # one URL per rank (the rules of _sources.py)
    trace = load_any("s3://bucket/run/trace.rank3.json")   # copied to a local temporary file, then loaded

Each worker reads its own rank: the client lists names only. A protocol needs its fsspec package on every
worker (s3fs, gcsfs, ...); a missing one is one line naming it.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from typing import Any

from neuron_prof.errors import DiskFullError, TraceLoadError, UsageError
from neuron_prof.formats import split_suffix
from neuron_prof.loaders import load
from neuron_prof.model import Trace

_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
_CHUNK = 8 << 20


def is_url(source: str) -> bool:
    return bool(_URL.match(source))


def _fs(url: str) -> tuple[Any, str]:
    from fsspec.core import url_to_fs

    try:
        return url_to_fs(url)  # type: ignore[no-any-return]
    except (ImportError, ValueError) as e:
        raise UsageError(f"{url}: cannot read this kind of URL ({e})") from None


def remote_sources(url: str, suffixes: tuple[str, ...], is_glob: bool) -> list[str]:
    """The trace files a URL names: itself, what its glob matches, or the trace files in the folder it names."""
    fs, path = _fs(url)
    try:
        if is_glob:
            found = fs.glob(path)
        elif fs.isdir(path):
            found = [p for p in fs.ls(path, detail=False) if str(p).endswith(suffixes)]
        elif fs.exists(path):
            found = [path]
        else:
            raise UsageError(f"{url}: no such file or folder")
    except OSError as e:
        raise UsageError(f"{url}: cannot list: {e}") from None
    return sorted(fs.unstrip_protocol(p) for p in found if str(p).endswith(suffixes))


def load_any(source: str) -> Trace:
    """`neuron_prof.load` of a path, or of a URL's bytes copied to a local temporary file (same suffix)."""
    if not is_url(source):
        return load(source)
    fs, path = _fs(source)
    suffix = split_suffix(path)[1]
    fd, tmp = tempfile.mkstemp(prefix="neuron-prof-", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as out, fs.open(path, "rb") as src:
            shutil.copyfileobj(src, out, _CHUNK)
        trace = load(tmp)
    except FileNotFoundError:
        raise TraceLoadError(source, "no such file") from None
    except TraceLoadError as e:
        raise TraceLoadError(source, e.problem) from None
    except DiskFullError:
        raise  # no room for the copy's columns: said as it is, not as a read error
    except OSError as e:
        raise TraceLoadError(source, f"cannot read: {e}") from None
    finally:
        os.unlink(tmp)
    return trace.replace(metadata={**trace.metadata, "source": source})
