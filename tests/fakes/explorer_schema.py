"""Neuron Explorer tables written from the schema DOCUMENT (neuron-explorer-schema-7.4.0.txt, vendored here from
../shared/design, itself from aws-neuron-sdk profile-schema-reference.rst), never from the reader's code.

    schema = documented()                       # {table: {field: Field}}
    later = evolve(schema, add={...}, drop={...})  # a later schema: tables/fields added, optional fields gone
    write_table(folder, schema, "ActiveTime", {"start_ts": [...], ...}, parts=2)
    write_schema_fields(folder, schema)         # the SchemaFields table describing `schema`

Every table written has every REQUIRED field of its schema (values not given are 0, "", False or []) with the
documented type, and only documented fields: a test cannot write a column the document does not have by mistake.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

DOC = Path(__file__).with_name("neuron-explorer-schema-7.4.0.txt")
SHARED_DOC = Path(__file__).resolve().parents[2].parent / "shared" / "design" / "neuron-explorer-schema-7.4.0.txt"


@dataclass(frozen=True)
class Field:
    type: str
    """As the document writes it: i64, i32, f32, f64, str, bool, ``array of i64``, ``list<str>``..."""
    unit: str
    required: bool


Schema = dict[str, dict[str, Field]]


def documented(path: Path = DOC) -> Schema:
    """The document's tables: ``Table: field:type[unit], field:type?`` lines (``?`` = not required)."""
    out: Schema = {}
    for line in path.read_text().splitlines():
        if line.startswith(("#", "ENUMS")) or ": " not in line:
            continue
        table, rest = line.split(": ", 1)
        fields = {}
        for part in re.split(r", (?=\w+:)", rest):
            name, typ = part.split(":", 1)
            req = not typ.endswith("?")
            typ = typ.rstrip("?")
            m = re.match(r"^(.*?)\[([^\]]*)\]$", typ)
            unit = ""
            if m:
                typ, unit = m.group(1), m.group(2)
            fields[name] = Field(typ, unit, req)
        out[table] = fields
    return out


def evolve(schema: Schema, add: dict[str, dict[str, Field]] | None = None,
           drop: dict[str, list[str]] | None = None) -> Schema:
    """A later schema: tables or fields added (`add`), fields removed (`drop`)."""
    out = copy.deepcopy(schema)
    for table, fields in (add or {}).items():
        out.setdefault(table, {}).update(fields)
    for table, names in (drop or {}).items():
        for n in names:
            out[table].pop(n)
    return out


def arrow(typ: str) -> pa.DataType | None:
    t = typ.split(" enum ")[0].strip()
    scalar = {"i64": pa.int64(), "i32": pa.int32(), "f32": pa.float32(), "f64": pa.float64(), "str": pa.string(),
              "bool": pa.bool_()}
    if t in scalar:
        return scalar[t]
    if t.startswith("array of "):
        inner = arrow(t[len("array of "):])
        return pa.list_(inner) if inner is not None else None
    m = re.match(r"^list<(\w+)>$", t)
    if m:
        return pa.list_(scalar[m.group(1)])
    return None  # a reference to another documented object: not a column we write


def _default(typ: pa.DataType) -> Any:
    if pa.types.is_list(typ):
        return []
    if pa.types.is_string(typ):
        return ""
    if pa.types.is_boolean(typ):
        return False
    return 0


def write_table(folder: Path, schema: Schema, table: str, cols: dict[str, list[Any]], parts: int = 1,
                rows: int | None = None, strict: bool = True) -> None:
    """Table `table` of `schema` from {field: values}; missing required fields get defaults; split into
    ``Table_<i>.parquet`` when `parts` > 1. `strict`: a field the schema lacks is an error (else not written:
    a schema that dropped it)."""
    fields = schema[table]
    unknown = set(cols) - set(fields)
    assert not (strict and unknown), f"{table} has no documented field {sorted(unknown)}"
    n = rows if rows is not None else len(next(iter(cols.values()))) if cols else 1
    arrays, names = [], []
    for name, f in fields.items():
        typ = arrow(f.type)
        if typ is None:
            continue
        if name in cols:
            arrays.append(pa.array(cols[name], type=typ))
        elif f.required:
            arrays.append(pa.array([_default(typ)] * n, type=typ))
        else:
            continue
        names.append(name)
    t = pa.table(arrays, names=names)
    folder.mkdir(parents=True, exist_ok=True)
    if parts == 1:
        pq.write_table(t, folder / f"{table}.parquet")
        return
    step = -(-t.num_rows // parts)
    for i in range(parts):
        pq.write_table(t.slice(i * step, step), folder / f"{table}_{i}.parquet")


_OPENAPI = {"i64": ("integer", "int64"), "i32": ("integer", "int32"), "f32": ("number", "float"),
            "f64": ("number", "double"), "str": ("string", None), "bool": ("boolean", None)}
_UNITS = {"ns": "nanoseconds", "B/s": "bytes_per_second", "bytes": "bytes", "%": "percent", "s": "seconds",
          "GHz": "gigahertz", "flops": "flops", "cycles": "cycles"}


def write_schema_fields(folder: Path, schema: Schema) -> None:
    """SchemaFields: one row per (table, field), types as the reference writes them (``integer`` + format
    ``int64``, ``number`` + ``float``, ``string``...), units spelled out (``nanoseconds``, ``bytes_per_second``)."""
    rows: dict[str, list[Any]] = {k: [] for k in ("table_name", "table_description", "field_name",
                                                   "field_description", "field_type", "field_required",
                                                   "field_format", "field_unit")}
    for table, fields in schema.items():
        for name, f in fields.items():
            base = f.type.split(" enum ")[0]
            typ, fmt = _OPENAPI.get(base, ("array" if base.startswith(("array", "list")) else "object", None))
            for k, v in (("table_name", table), ("table_description", ""), ("field_name", name),
                         ("field_description", ""), ("field_type", typ), ("field_required", f.required),
                         ("field_format", fmt), ("field_unit", _UNITS.get(f.unit, f.unit) or None)):
                rows[k].append(v)
    write_table(folder, schema, "SchemaFields", rows)
