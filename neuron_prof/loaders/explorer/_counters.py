"""Neuron Explorer system-profile samples as counters (host clock, Unix ns: placed as they are).

Source: neuron-explorer-schema-7.4.0.txt (aws-neuron-sdk profile-schema-reference.rst):

* ``SystemProfileHbmUsage`` (``timestamp``, ``total_bytes`` and about 20 ``*_bytes`` kinds, ``device_idx``,
  ``hbm_idx``) → per device and HBM: ``total`` a MEMORY track (the memory the device holds), each kind with data a
  COUNTER track in bytes;
* ``CpuUsage`` (``util_percent`` per ``cpu_id``) → a ``%`` counter per CPU on the instance's host process;
* ``HostMemUsage`` (``used_bytes``, ``used_percent``) → a bytes counter and a ``%`` counter.

The device profile's ``HbmUsage`` is a bandwidth series, not bytes by kind (`_explorer_device.add_bandwidth`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_prof.loaders.explorer._tables import Tables
from neuron_prof.model import ProcessKind, TraceBuilder, TrackKind


def _np(t: Any, c: str, fill: Any = 0) -> np.ndarray:
    return t.column(c).fill_null(fill).to_numpy(zero_copy_only=False)


def _series(b: TraceBuilder, tr: int, ts: np.ndarray, v: np.ndarray) -> None:
    o = np.argsort(ts, kind="stable")
    b.c_ts.extend(ts[o].tolist())
    b.c_track.extend([tr] * len(o))
    b.c_value.extend(v[o].astype(np.float64).tolist())


def add_hbm_bytes(b: TraceBuilder, tables: Tables) -> dict[str, int]:
    """SystemProfileHbmUsage counters; returns the peak of each total track."""
    import pyarrow as pa

    table = "SystemProfileHbmUsage"
    if not tables.need("HBM bytes by kind", table, ("timestamp", "total_bytes")):
        return {}
    kinds = sorted(c for c in tables.columns(table) if c.endswith("_bytes"))
    i64 = pa.int64()
    t = tables.table(table, {"timestamp": i64, "device_idx": i64, "hbm_idx": i64, **{k: i64 for k in kinds}})
    if t is None or not t.num_rows:
        return {}
    ts, dev, hbm = _np(t, "timestamp"), _np(t, "device_idx"), _np(t, "hbm_idx")
    peaks: dict[str, int] = {}
    for d, h in sorted({(int(x), int(y)) for x, y in zip(dev.tolist(), hbm.tolist())}):
        m = (dev == d) & (hbm == h)
        pid = f"neuron device {d}"
        p = b.process(pid, name=pid, kind=ProcessKind.DEVICE, sort_index=900 + d)
        for k in kinds:
            col = t.column(k)
            if col.null_count == len(col):
                continue
            v = col.fill_null(0).to_numpy(zero_copy_only=False)[m]
            if k != "total_bytes" and not v.any():
                continue
            name = f"{pid} HBM {h} {k.removesuffix('_bytes')}"
            # the total is the memory the device holds; the kinds are its parts (not peaks of their own)
            tr = b.track(p, name, TrackKind.MEMORY if k == "total_bytes" else TrackKind.COUNTER, unit="bytes")
            _series(b, tr, ts[m], v)
            if k == "total_bytes":
                peaks[name] = int(v.max()) if len(v) else 0
    return peaks


def _host(b: TraceBuilder, instance: str) -> int:
    pid = f"{instance or 'host'} (Neuron Explorer)"
    return b.process(pid, name=pid, kind=ProcessKind.HOST, sort_index=800)


def add_host_usage(b: TraceBuilder, tables: Tables) -> dict[str, float]:
    """CpuUsage and HostMemUsage counters; returns the peak of each track."""
    import pyarrow as pa

    peaks: dict[str, float] = {}
    s, f64, i64 = pa.string(), pa.float64(), pa.int64()
    if tables.need("CPU usage", "CpuUsage", ("timestamp", "util_percent")):
        t = tables.table("CpuUsage", {"timestamp": i64, "util_percent": f64, "cpu_id": s, "instance_id": s})
        if t is not None and t.num_rows:
            ts, v = _np(t, "timestamp"), _np(t, "util_percent", 0.0)
            cpu = np.asarray(t.column("cpu_id").fill_null("all").to_pylist(), dtype=object)
            inst = np.asarray(t.column("instance_id").fill_null("").to_pylist(), dtype=object)
            for i, c in sorted({(str(a), str(z)) for a, z in zip(inst, cpu)}):
                m = (inst == i) & (cpu == c)
                name = f"CPU {c} utilisation"
                _series(b, b.track(_host(b, i), name, TrackKind.COUNTER, unit="%"), ts[m], v[m])
                peaks[f"{i} {name}".strip()] = float(v[m].max())
    if tables.need("host memory", "HostMemUsage", ("timestamp",), one_of=("used_bytes", "used_percent")):
        t = tables.table("HostMemUsage", {"timestamp": i64, "used_bytes": i64, "used_percent": f64,
                                          "instance_id": s})
        if t is not None and t.num_rows:
            ts = _np(t, "timestamp")
            inst = np.asarray(t.column("instance_id").fill_null("").to_pylist(), dtype=object)
            for i in sorted(set(inst.tolist())):
                m = inst == i
                for col, name, unit in (("used_bytes", "host memory used", "bytes"),
                                        ("used_percent", "host memory used %", "%")):
                    c = t.column(col)
                    if c.null_count == len(c):
                        continue
                    v = c.fill_null(0).to_numpy(zero_copy_only=False)[m]
                    _series(b, b.track(_host(b, str(i)), name, TrackKind.COUNTER, unit=unit), ts[m], v)
                    peaks[f"{i} {name}".strip()] = float(v.max())
    return peaks
