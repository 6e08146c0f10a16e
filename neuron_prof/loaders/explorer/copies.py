"""Host/device copies in a processed Neuron Explorer profile, as evidence for fallbacks and syncs.

Source: neuron-explorer-schema-7.4.0.txt, enum ``MemoryBandwidthDirection``: ``host_to_device`` (=
``dmem_buf_copyin``), ``device_to_host`` (= ``dmem_buf_copyout``), ``bidirectional``: the system profile's copy
events carry those names. A copy links to the framework op whose work it was through ``flow_id``, as a runtime
execution does (neuron-explorer-facts, ``SystemProfileEvents``).

    copy_hosts(profile, "device_to_host")   # [(thread id, start ns)] of the framework ops that read back
"""

from __future__ import annotations

from pathlib import Path

from neuron_prof.loaders.explorer._events import COPY_IN, COPY_OUT, FRAMEWORK, TABLE
from neuron_prof.loaders.explorer._tables import RowFilter, Tables

DIRECTIONS = {"host_to_device": (COPY_IN,), "device_to_host": (COPY_OUT,), "bidirectional": (COPY_IN, COPY_OUT)}


def copy_hosts(profile: Path, direction: str = "device_to_host", rows: RowFilter | None = None
               ) -> list[tuple[int, int]]:
    """(thread id, start ns) of each framework event sharing a flow id with a copy of `direction`
    (`DIRECTIONS`); [] when the profile has no system events or no such copy."""
    import pyarrow as pa
    import pyarrow.compute as pc

    tables = Tables(profile, rows)
    if not tables.need("host/device copies", TABLE, ("name", "trace_event_source", "thread_id", "start_ts",
                                                     "flow_id")):
        return []
    s = pa.string()
    t = tables.table(TABLE, {"name": s, "trace_event_source": s, "thread_id": pa.int64(), "start_ts": pa.int64(),
                             "flow_id": pa.list_(s)})
    if t is None or not t.num_rows:
        return []
    copies = t.filter(pc.fill_null(pc.is_in(t.column("name"), pa.array(DIRECTIONS[direction])), False))
    ids = set(pc.list_flatten(copies.column("flow_id")).drop_null().to_pylist())
    if not ids:
        return []
    fw = t.filter(pc.fill_null(pc.equal(t.column("trace_event_source"), FRAMEWORK), False))
    return [(int(r["thread_id"]), int(r["start_ts"])) for r in fw.to_pylist()
            if r["thread_id"] is not None and ids.intersection(r["flow_id"] or ())]
