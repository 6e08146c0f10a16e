"""Reading a processed Neuron Explorer profile folder: its Parquet tables, a few columns at a time.

Source: shared/design/neuron-explorer-facts.md ("Processing"; aws-neuron-sdk tools/neuron-explorer). A table is
``Name.parquet`` or, when big, split into ``Name_0.parquet``, ``Name_1.parquet``...; every part is read with only
the columns asked for (an ``Instruction`` table can hold 10^8 rows), cast to the type the reader works in.
Columns and tables the reader does not use are never read. What the profile declares about itself
(``SchemaFields``, `_explorer_schema`) gives each field's kind and unit.

Each view asks `Tables.need` for the fields it uses: a table the profile lacks is silently no view (no device
profile: no ActiveTime); a table that lacks a needed field, or holds it as another kind of value, leaves that
view out with one warning naming ``Table.field``. A file that is not Parquet is a TraceFormatError naming it.
A run-wide table (``neuron-explorer view -d RUN_DIR``) is cut to one process by `RowFilter`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from neuron_prof.errors import TraceFormatError, TraceLoadError
from neuron_prof.loaders.explorer._schema import Schema, builtin, from_schema_fields

_PART = re.compile(r"^(?P<table>[A-Za-z][A-Za-z0-9]*?)(?:_(?P<part>\d+))?\.parquet$")
RowFilter = dict[str, Any]
"""{column: value} rows must match where a table has that column (``instance_id``, ``process_id``)."""
_KIND = {"int": ("int", "uint", "timestamp", "duration", "bool"), "float": ("int", "uint", "float", "double",
                                                                             "halffloat", "decimal"),
         "str": ("string", "large_string", "dictionary"), "list": ("list", "large_list")}


def _pa() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # an optional extra: say how to get it
        raise TraceLoadError("pyarrow", "reading Neuron Explorer Parquet needs pyarrow: "
                             "pip install 'neuron-prof[parquet]'") from None
    return pa, pq


def table_parts(folder: Path) -> dict[str, list[Path]]:
    """Table name -> its files in part order (``Name.parquet`` first, then ``Name_0``, ``Name_1``...)."""
    out: dict[str, list[tuple[int, Path]]] = {}
    for f in folder.iterdir():
        m = _PART.match(f.name)
        if m is None or not f.is_file():
            continue
        part = int(m.group("part")) if m.group("part") is not None else -1
        out.setdefault(m.group("table"), []).append((part, f))
    return {k: [f for _, f in sorted(v)] for k, v in out.items()}


def is_explorer_folder(folder: Path) -> bool:
    """True when the folder holds Parquet tables named after Explorer's (Metadata, SystemProfileEvents...)."""
    try:
        names = set(table_parts(folder))
    except OSError:
        return False
    return bool(names & {"Metadata", "SystemProfileEvents", "SystemProfileMetadata", "Summary", "ActiveTime",
                         "CcOp", "Instruction", "SchemaFields"})


class Tables:
    """The tables of one processed profile folder, optionally cut to one process's rows."""

    def __init__(self, folder: Path, rows: RowFilter | None = None) -> None:
        self.folder = folder
        self.parts = table_parts(folder)
        self.rows = {k: v for k, v in (rows or {}).items() if v is not None}
        self.read: list[str] = []
        """Tables read so far, for the trace's metadata."""
        self.warnings: list[str] = []
        self.missing: list[str] = []
        """``Table.field`` a view needed and the profile lacks (or holds as another kind of value)."""
        self.views: dict[str, bool] = {}
        """View name -> shown (True) or left out for a missing field (False); tables absent: no entry."""
        self._schemas: dict[Path, Any] = {}
        self._declared: Schema | None = None

    @property
    def schema(self) -> Schema:
        """The layout the profile declares in SchemaFields, else the documented 7.4.0 one."""
        if self._declared is None:
            self._declared = builtin()
            if self.has("SchemaFields"):
                pa, _ = _pa()
                t = self._read("SchemaFields", {c: pa.string() for c in ("table_name", "field_name", "field_type",
                                                                         "field_format", "field_unit")}
                               | {"field_required": pa.bool_()}, filtered=False)
                if t is not None and t.num_rows:
                    self._declared = from_schema_fields(t)
        return self._declared

    def has(self, table: str) -> bool:
        return table in self.parts

    def columns(self, table: str) -> set[str]:
        """Union of the column names of the table's parts (reads only the Parquet footers)."""
        _, pq = _pa()
        out: set[str] = set()
        for f in self.parts.get(table, ()):
            out.update(self._schema(pq, f).names)
        return out

    def need(self, view: str, table: str, fields: tuple[str, ...] = (), one_of: tuple[str, ...] = ()) -> bool:
        """Whether `view` can be shown: the table is there with every field of `fields` and one of `one_of`.
        A table the profile lacks is False without a word; a missing field is False with one warning."""
        if not self.has(table):
            return False
        _, pq = _pa()
        have = set.intersection(*(set(self._schema(pq, f).names) for f in self.parts[table]))  # in every part
        lost = [f for f in fields if f not in have]
        if one_of and not any(f in have for f in one_of):
            lost.append(" or ".join(one_of))
        lost += [f for f in fields if f in have and f not in lost and not self._kind_ok(table, f)]
        if lost:
            names = ", ".join(f"{table}.{f}" for f in lost)
            self.missing += [f"{table}.{f}" for f in lost]
            self.warnings.append(f"Neuron Explorer profile has no usable {names}: {view} not shown")
        self.views[view] = not lost
        return not lost

    def _kind_ok(self, table: str, name: str) -> bool:
        """False when the files hold a field the reader needs as a number as text (or the other way)."""
        want = _WANT.get(name)
        if want is None:
            return True
        _, pq = _pa()
        for f in self.parts.get(table, ()):
            s = self._schema(pq, f)
            if name in s.names and not str(s.field(name).type).startswith(_KIND[want]):
                return False
        return True

    def table(self, table: str, spec: Mapping[str, Any]) -> Any | None:
        """The table with the columns of `spec` ({name: pyarrow type}) present in any part, cast to those types
        (time fields declared in another unit scaled to ns) and cut to `rows`; None when the folder has no such
        table or a column does not cast (a warning names it). Parts missing a column get nulls."""
        return self._read(table, spec, filtered=True)

    def _read(self, table: str, spec: Mapping[str, Any], filtered: bool) -> Any | None:
        pa, pq = _pa()
        files = self.parts.get(table)
        if not files:
            return None
        pieces = []
        for f in files:
            names = set(self._schema(pq, f).names)
            keys = [k for k in self.rows if k in names] if filtered else []
            want = list(dict.fromkeys([c for c in spec if c in names] + keys))
            try:
                t = pq.read_table(f, columns=want)
            except (OSError, pa.ArrowException) as e:
                raise TraceFormatError(f, f"not a readable Parquet file ({e})") from None
            t = self._cut(t, keys)
            cols = []
            for c, typ in spec.items():
                col = _cast(pa, t.column(c), typ) if c in names else pa.nulls(t.num_rows, typ)
                if col is None:
                    self.missing.append(f"{table}.{c}")
                    self.warnings.append(f"Neuron Explorer {table}.{c} is {t.column(c).type}, not {typ}: "
                                         f"{table} not read")
                    return None
                cols.append(self._scaled(table, c, col))
            pieces.append(pa.table(cols, names=list(spec)))
        self.read.append(table)
        return pa.concat_tables(pieces)

    def _cut(self, t: Any, keys: list[str]) -> Any:
        import pyarrow.compute as pc

        for k in keys:
            t = t.filter(pc.fill_null(pc.equal(t.column(k).cast(_arrow_of(self.rows[k])), self.rows[k]), False))
        return t

    def _scaled(self, table: str, name: str, col: Any) -> Any:
        k = self.schema.ns_per_unit(table, name) if name.endswith(("_ts", "timestamp", "_ns")) else 1
        if k == 1:
            return col
        import pyarrow.compute as pc

        return pc.multiply(col, k)

    def batches(self, table: str, columns: list[str], batch_rows: int = 1 << 20) -> Iterator[Any]:
        """Record batches of only `columns` (those present), part after part: for tables too big to hold.
        (Device-profile tables such as Instruction have no process columns: never cut.)"""
        pa, pq = _pa()
        for f in self.parts.get(table, ()):
            try:
                pf = pq.ParquetFile(f)
                want = [c for c in columns if c in pf.schema_arrow.names]
                yield from pf.iter_batches(batch_size=batch_rows, columns=want)
            except (OSError, pa.ArrowException) as e:
                raise TraceFormatError(f, f"not a readable Parquet file ({e})") from None
        if table in self.parts:
            self.read.append(table)

    def _schema(self, pq: Any, f: Path) -> Any:
        s = self._schemas.get(f)
        if s is None:
            pa, _ = _pa()
            try:
                s = self._schemas[f] = pq.read_schema(f)
            except (OSError, pa.ArrowException) as e:
                raise TraceFormatError(f, f"not a readable Parquet file ({e})") from None
        return s


_WANT = {"start_ts": "int", "end_ts": "int", "duration_ns": "int", "timestamp": "int", "execution_start_ts": "int",
         "execution_end_ts": "int", "first_hw_timestamp": "int", "current_throughput": "float",
         "util_percent": "float", "used_bytes": "int", "total_bytes": "int", "instruction_time_ns": "int",
         "raw_framework_id": "int", "process_id": "int", "nc_idx": "int", "pcore_idx": "int"}
"""Fields read as numbers: a part holding one as text leaves its view out (`Tables.need`)."""


def _arrow_of(v: Any) -> Any:
    import pyarrow as pa

    return pa.int64() if isinstance(v, int) else pa.string()


def _cast(pa: Any, col: Any, typ: Any) -> Any | None:
    if col.type == typ:
        return col
    try:
        return col.cast(typ)
    except (pa.ArrowException, ValueError):
        return None
