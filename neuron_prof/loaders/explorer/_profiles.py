"""The device profiles of a processed folder, each placed on the host clock and shown; their numbers merged.

A device profile is one NTFF: one logical core of one process (`_explorer_device`). A folder holds at most one
device profile's tables itself; a run processed as a whole (``RUN_DIR/parquet``) may hold more, one per
sub-folder ``<device_profile_name>/`` with its own ``Metadata``, ``DeviceProfileList`` and device tables (the
layout neuron-prof reads: docs/trainium.md, "Where the tables are"). With `Tables.rows` set (one process of a
run), a device profile whose ``DeviceProfileList`` names another process is skipped.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_prof.loaders.explorer import _instructions as _ins
from neuron_prof.loaders.explorer._device import (
    DEVICE_TABLES,
    DeviceProfile,
    add_active_time,
    add_bandwidth,
    add_cc_ops,
    add_errors,
    device_profile,
)
from neuron_prof.loaders.explorer._events import Executions
from neuron_prof.loaders.explorer._summary import executions_per_neff, one_row, opcodes, summary
from neuron_prof.loaders.explorer._tables import Tables, is_explorer_folder
from neuron_prof.model import KinetoCat, TraceBuilder

_META_FIELDS = ("first_hw_timestamp", "last_hw_timestamp", "first_ts", "neuroncore_idx")


def device_folders(tables: Tables) -> list[Tables]:
    """The folder's own device profile (when it has device tables) and one per sub-folder that has them."""
    out = [tables] if any(tables.has(t) for t in DEVICE_TABLES) else []
    for d in sorted(p for p in tables.folder.iterdir() if p.is_dir()):
        if is_explorer_folder(d):
            sub = Tables(d, tables.rows)
            if any(sub.has(t) for t in DEVICE_TABLES):
                out.append(sub)
    return out


def add_device_profiles(b: TraceBuilder, tables: Tables, meta: dict[str, Any], execs: Executions,
                        warnings: list[str], host_clock: bool = False) -> dict[str, Any]:
    """Every device profile of the folder on the host clock; ``metadata["neuron_explorer"]`` entries (busy time,
    collectives, errors, bandwidth peaks, instructions, device time per framework op / line / host op summed;
    Summary and OpcodeSummary of the first profile that has them; ``device_clock`` of each). `host_clock`: the
    trace has host-clock rows (a system profile, or a capture's trace.json): device rows nothing places on
    the host clock are left out rather than mixed in."""
    own: dict[str, Any] = {}
    clocks = []
    for t in device_folders(tables):
        m = meta if t is tables else (one_row(t, "Metadata", _META_FIELDS) or {})
        dev = device_profile(b, t, m, execs, warnings)
        if dev is not None:
            clocks.append({"anchored_by": dev.clock.how, "executions_paired": dev.clock.paired, "logical_core": dev.nc})
            if dev.clock.placed or not host_clock:  # unplaced device rows never sit among host-clock ones
                _merge(own, "active_time_ns", add_active_time(b, t, dev))
                _merge(own, "collectives", add_cc_ops(b, t, dev))
                _merge(own, "bandwidth_peak_Bps", add_bandwidth(b, t, dev))
                _merge(own, "errors", add_errors(b, t, dev))
        elif t.rows and t is not tables:
            continue  # another process's device profile
        for key, fn in (("summary", summary), ("opcodes", opcodes)):
            if not own.get(key):
                own[key] = fn(t)
        _merge(own, "executions", executions_per_neff(t))
        for k, v in _instructions(b, t, dev).items():
            _merge(own, k, v)
        if t is not tables:
            warnings += t.warnings
            own.setdefault("views_left_out", []).extend(v for v, ok in t.views.items() if not ok)
            own.setdefault("device_profile_folders", []).append(t.folder.name)
    if clocks:
        own["device_clock"] = clocks[0] if len(clocks) == 1 else {**clocks[0], "profiles": clocks}
    for k in ("framework_ops", "source_lines", "host_ops"):
        if k in own:
            own[k] = sorted(own[k], key=lambda r: -r["device_ns"])[: _ins.TOP]
    return own


def _merge(own: dict[str, Any], key: str, v: Any) -> None:
    """Sum numbers, merge dicts (summing what both have), concatenate lists (rows with the same name summed)."""
    if v in (None, {}, [], 0) and key in own:
        return
    old = own.get(key)
    if old is None:
        own[key] = v
    elif isinstance(v, (int, float)):
        own[key] = old + v
    elif isinstance(v, dict):
        for k, x in v.items():
            if isinstance(x, dict) and isinstance(old.get(k), dict):
                _merge(old, k, x)
            elif isinstance(x, (int, float)) and isinstance(old.get(k), (int, float)):
                old[k] = max(old[k], x) if key.endswith("peak_Bps") else old[k] + x
            else:
                old[k] = x
    elif isinstance(v, list):
        name = next((n for n in ("framework_name", "site", "op") if v and isinstance(v[0], dict) and n in v[0]), None)
        if name is None:
            old.extend(v)
            return
        at = {r[name]: r for r in old}
        for r in v:
            if r[name] in at:
                for k in ("device_ns", "instructions", "executions"):
                    if k in r:
                        at[r[name]][k] = at[r[name]].get(k, 0) + r[k]
            else:
                old.append(r)
                at[r[name]] = r


def _instructions(b: TraceBuilder, tables: Tables, dev: DeviceProfile | None) -> dict[str, Any]:
    """Instruction aggregates, device time per framework op and source line, and per host op through the
    executions each op launched."""
    got = _ins.instruction_pass(tables, dev.exec_start if dev is not None else None,
                                dev.exec_end if dev is not None else None)
    out: dict[str, Any] = {}
    if not got:
        return out
    fw, frames, per_exec = got.pop("_framework_ids", None), got.pop("_frames", None), got.pop("_per_execution", None)
    out["instructions"] = got
    if fw:
        out["framework_ops"] = _ins.framework_ops(tables, fw)[:_ins.TOP]
    if frames:
        out["source_lines"] = _ins.source_lines(tables, frames)
    if per_exec is not None and dev is not None:
        out["host_ops"] = _host_ops(b, dev.exec_rows, per_exec)
    return out


def _host_ops(b: TraceBuilder, exec_rows: np.ndarray, ns: np.ndarray) -> list[dict[str, Any]]:
    """Instruction time of each execution summed per host op that launched it (the launch flows back from the
    hardware execution: op → runtime call → execution), most first."""
    back: dict[int, int] = {}
    for s, d in zip(b.f_src, b.f_dst):
        back.setdefault(d, s)
    cpu = b.strings.get(KinetoCat.CPU_OP)
    acc: dict[str, list[int]] = {}
    for r, v in zip(exec_rows.tolist(), ns.tolist()):
        if r < 0 or not v:
            continue
        cur, hops = back.get(r), 0
        while cur is not None and b.s_cat[cur] != cpu and hops < 4:
            cur, hops = back.get(cur), hops + 1
        if cur is None or b.s_cat[cur] != cpu:
            continue
        a = acc.setdefault(b.strings[b.s_name[cur]], [0, 0])
        a[0] += 1
        a[1] += int(v)
    rows: list[dict[str, Any]] = [{"op": k, "executions": c, "device_ns": ns} for k, (c, ns) in acc.items()]
    return sorted(rows, key=lambda r: -r["device_ns"])[:_ins.TOP]


