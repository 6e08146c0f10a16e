"""What a processed Neuron Explorer profile says about its own layout: ``SchemaFields`` and the schema version.

Sources: shared/design/neuron-explorer-facts.md ("Processing": ``SchemaFields`` describes every (table, field)
with type and unit; ``Metadata.profile_schema_version`` is MAJOR.MINOR.PATCH, MAJOR = incompatible) and
aws-neuron-sdk profile-schema-reference.rst (``SchemaFields``: ``table_name``, ``field_name``, ``field_type``,
``field_format``, ``field_required``, ``field_unit``; units are written ``nanoseconds``, ``bytes_per_second``...).

A profile with a ``SchemaFields`` table is read by what it declares; one without is read as the documented 7.4.0
layout (`_explorer_schema_740`). The reader never refuses a version: each view checks, in the files, the fields
it needs (`Tables.need`); the schema adds the declared type and unit of a field (a time field declared in µs is
scaled to ns, a field declared as a string where a number is expected disables its view instead of misreading).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from neuron_prof.loaders.explorer import _schema_740 as _explorer_schema_740

KNOWN_MAJOR = 7
"""The MAJOR of the documented schema this reader was written to (7.4.0, Neuron SDK 2.31); SDK 2.33 writes 12.0.1."""
ASSUMED = _explorer_schema_740.VERSION

_NS_PER = {"ns": 1, "nanoseconds": 1, "nanosecond": 1, "us": 1_000, "microseconds": 1_000, "microsecond": 1_000,
           "ms": 1_000_000, "milliseconds": 1_000_000, "s": 1_000_000_000, "seconds": 1_000_000_000}
"""A time field's declared unit -> ns per unit."""


@dataclass(frozen=True)
class FieldInfo:
    kind: str
    """"int", "float", "str", "bool", "list" or "other" (what the declared type is, not its width)."""
    required: bool
    unit: str = ""


@dataclass
class Schema:
    """Tables and fields a profile declares (or the assumed 7.4.0 layout)."""

    tables: dict[str, dict[str, FieldInfo]] = field(default_factory=dict)
    source: str = "assumed"
    """``SchemaFields`` when the profile declared its layout, else ``assumed`` (7.4.0)."""

    def info(self, table: str, name: str) -> FieldInfo | None:
        return self.tables.get(table, {}).get(name)

    def ns_per_unit(self, table: str, name: str) -> int:
        """ns per unit of a time field as declared (1 when undeclared or already ns)."""
        f = self.info(table, name)
        return _NS_PER.get(f.unit.strip().lower(), 1) if f is not None and f.unit else 1


def _kind(typ: str, fmt: str = "") -> str:
    t = f"{typ} {fmt}".strip().lower()
    if t.startswith(("array", "list")):
        return "list"
    if re.match(r"^(i\d+|u\d+|integer|int)", t):
        return "int"
    if re.match(r"^(f\d+|number|float|double)", t):
        return "float"
    if t.startswith(("str", "string")):
        return "str"
    if t.startswith(("bool", "boolean")):
        return "bool"
    return "other"


def builtin() -> Schema:
    """The documented 7.4.0 schema (``field:type[unit]``, ``?`` = not required), parsed from its text."""
    out: dict[str, dict[str, FieldInfo]] = {}
    for line in _explorer_schema_740.TEXT.splitlines():
        if line.startswith("#") or ":" not in line or line.startswith("ENUMS"):
            continue
        table, rest = line.split(":", 1)
        fields: dict[str, FieldInfo] = {}
        for part in _split_fields(rest):
            m = re.match(r"^\s*(\w+):(.*?)(\[([^\]]*)\])?(\?)?\s*$", part)
            if m:
                fields[m.group(1)] = FieldInfo(_kind(m.group(2)), m.group(5) is None, m.group(4) or "")
        out[table.strip()] = fields
    return Schema(out, "assumed")


def _split_fields(rest: str) -> list[str]:
    """Split on commas outside backquoted refs (``:ref:`A <b>``` holds none, but stay safe)."""
    return [p for p in re.split(r",\s+(?=\w+:)", rest.strip()) if p]


def from_schema_fields(t: Any) -> Schema:
    """A SchemaFields table (pyarrow) as a Schema; rows without a table or field name are skipped."""
    cols = set(t.column_names)
    get = lambda c: t.column(c).to_pylist() if c in cols else [None] * t.num_rows  # noqa: E731
    out: dict[str, dict[str, FieldInfo]] = {}
    for tb, name, typ, fmt, req, unit in zip(get("table_name"), get("field_name"), get("field_type"),
                                             get("field_format"), get("field_required"), get("field_unit")):
        if not tb or not name:
            continue
        out.setdefault(str(tb), {})[str(name)] = FieldInfo(_kind(str(typ or ""), str(fmt or "")),
                                                           bool(req), str(unit or ""))
    return Schema(out, "SchemaFields")


def major(version: str | None) -> int | None:
    """MAJOR of a ``MAJOR.MINOR.PATCH`` string; None when it does not read as one."""
    m = re.match(r"^\s*v?(\d+)(?:\.\d+)*", str(version or ""))
    return int(m.group(1)) if m else None


def version_warnings(version: str | None, schema: Schema) -> list[str]:
    """One warning for a version this reader was not written to (it still loads, view by view)."""
    if not version:
        src = "its SchemaFields" if schema.source == "SchemaFields" else f"the {ASSUMED} layout"
        return [f"Neuron Explorer profile has no profile_schema_version: read by {src}"]
    m = major(version)
    if m is None:
        return [f"Neuron Explorer profile_schema_version {version!r} is not MAJOR.MINOR.PATCH: read view by view"]
    if m != KNOWN_MAJOR:
        how = "its SchemaFields" if schema.source == "SchemaFields" else "field names alone (no SchemaFields)"
        return [f"Neuron Explorer profile schema {version}: this neuron-prof was written to schema "
                f"{KNOWN_MAJOR}.x; read by {how}, each view needing only its fields (a view whose fields are "
                f"gone is left out with its own warning)"]
    return []
