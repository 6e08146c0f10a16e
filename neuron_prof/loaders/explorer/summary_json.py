"""Neuron Explorer's ``--output-format summary-json``: whole-profile metrics as JSON.

    found = summaries_in(folder)    # {file name: {profile key: {Summary field: number}}}

Sources: the 2.34 announcement "Neuron Explorer no longer maintains the JSON output format starting with Neuron
2.34" (the retirement "does not affect the summary-json output format") and get-started.rst (``view -d DIR
--output-format summary-text``; the summary formats need no UI). **The documents do not give its layout.** What
neuron-prof takes from it is only what the documents name: the fields of the ``Summary`` table (schema 7.4.0,
profile-schema-reference.rst), found as numbers in a JSON object, either at its top level or one level down
(one object per profile; the keys naming the profiles are not documented and are kept as written). Anything
else in the file is ignored. A file is read when it sits in a processed profile's folder and reads so (at
least `MIN_FIELDS` Summary fields); the tool prints it to stdout, so its name is the user's.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from neuron_prof.formats import JSON_SUFFIXES

__all__ = ["MIN_FIELDS", "read_summary_json", "summaries_in", "summary_fields"]

MIN_FIELDS = 3
"""Summary fields an object must hold to be read as one profile's summary (not a JSON file that shares a name)."""
MAX_BYTES = 16 << 20
"""A summary is one object per profile: bigger JSON files in the folder are something else and are not opened."""


@lru_cache(maxsize=1)
def summary_fields() -> frozenset[str]:
    """The ``Summary`` table's fields in the documented schema 7.4.0."""
    from neuron_prof.loaders.explorer._schema import builtin

    return frozenset(builtin().tables.get("Summary", {}))


def _metrics(obj: Any) -> dict[str, float | int]:
    if not isinstance(obj, dict):
        return {}
    names = summary_fields()
    return {k: v for k, v in obj.items() if k in names and isinstance(v, (int, float)) and not isinstance(v, bool)}


def read_summary_json(path: Path) -> dict[str, dict[str, float | int]] | None:
    """{profile key: Summary metrics} of a summary-json file (key "" for a top-level summary); None when the
    file is not one (not JSON, or no object with `MIN_FIELDS` Summary fields)."""
    try:
        if path.stat().st_size > MAX_BYTES:
            return None
        doc = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(doc, dict):
        return None
    out: dict[str, dict[str, float | int]] = {}
    top = _metrics(doc)
    if len(top) >= MIN_FIELDS:
        out[""] = top
    for k, v in doc.items():
        m = _metrics(v)
        if len(m) >= MIN_FIELDS:
            out[str(k)] = m
    return out or None


def summaries_in(folder: Path) -> dict[str, dict[str, dict[str, float | int]]]:
    """Every summary-json file directly in `folder`: {file name: {profile key: metrics}}."""
    out = {}
    for f in sorted(folder.glob("*" + JSON_SUFFIXES[0])):
        got = read_summary_json(f)
        if got:
            out[f.name] = got
    return out
