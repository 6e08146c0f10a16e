"""Version workarounds for torch-neuronx's API, each naming the release or source it comes from.

Every accessor returns a plain Python value or None when that API is absent; none raises for a missing
API, so the adapter works across releases (April 2026 source, Neuron 2.33 docs) and on look-alikes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_OVERLOAD = re.compile(r"\.[A-Za-z_][A-Za-z0-9_]*$")


def _call(obj: Any, *path: str) -> Any:
    for name in path[:-1]:
        obj = getattr(obj, name, None)
        if obj is None:
            return None
    fn = getattr(obj, path[-1], None)
    return fn() if callable(fn) else None


def fallback_ops(mod: Any) -> list[str] | None:
    """``torch_neuronx.get_fallback_ops()``: op names only, deduplicated (src 2026-04)."""
    got = _call(mod, "get_fallback_ops")
    return [str(x) for x in got] if got is not None else None


def executed_ops(mod: Any) -> list[str] | None:
    got = _call(mod, "get_executed_ops")
    return [str(x) for x in got] if got is not None else None


def clear_op_tracking(mod: Any) -> bool:
    return _call(mod, "clear_op_tracking") is not None or callable(getattr(mod, "clear_op_tracking", None))


def cache_entries(mod: Any) -> list[dict[str, Any]] | None:
    """``torch_neuronx._C._get_compilation_cache_entries()`` → [{cache_key, neff_size_bytes, access_count,
    compilation_time_ms}] (src 2026-04). Entries loaded from disk report 0 ms."""
    got = _call(mod, "_C", "_get_compilation_cache_entries")
    if got is None:
        return None
    return [dict(e) if isinstance(e, Mapping) else {k: getattr(e, k, None) for k in
                                                   ("cache_key", "neff_size_bytes", "access_count",
                                                    "compilation_time_ms")} for e in got]


def cache_stats(mod: Any) -> dict[str, Any] | None:
    """``_get_compilation_cache_stats()``; its ``total_compilation_time_ms`` is really µs in the April source."""
    got = _call(mod, "_C", "_get_compilation_cache_stats")
    return dict(got) if isinstance(got, Mapping) else None


def metric_samples(mod: Any, name: str) -> list[tuple[int, float]] | None:
    """``_C._neuron_metric_data(name)["samples"]`` as (steady-clock ns, value); the runtime keeps the last 1024."""
    fn = getattr(getattr(mod, "_C", None), "_neuron_metric_data", None)
    if not callable(fn):
        return None
    got = fn(name)
    if not isinstance(got, Mapping):
        return [] if got is None else None
    out = []
    for smp in got.get("samples") or ():
        if isinstance(smp, Mapping) and "timestamp_ns" in smp:
            out.append((int(smp["timestamp_ns"]), float(smp.get("value", 0))))
    return out


COMPILATION_TIME = "CompilationCache.CompilationTime"


def dynamo_metrics(mod: Any) -> list[dict[str, Any]] | None:
    """``torch_neuronx.get_dynamo_metrics()`` → per graph: graph_id, graph_name, timestamp, *_us phases."""
    got = _call(mod, "get_dynamo_metrics")
    if got is None:
        return None
    return [dict(r) if isinstance(r, Mapping) else dict(vars(r)) for r in got]


def synchronize(mod: Any, device_type: str = "neuron") -> None:
    """The module's ``synchronize`` (torch_neuronx re-exports it), else ``torch.neuron.synchronize()`` (docs)."""
    import torch

    fn = getattr(mod, "synchronize", None)
    if not callable(fn):
        fn = getattr(getattr(torch, device_type, None), "synchronize", None)
    if callable(fn):
        fn()


def device_count(mod: Any, device_type: str = "neuron") -> int:
    """The module's ``device_count``, else ``torch.neuron.device_count()``."""
    import torch

    fn = getattr(mod, "device_count", None) or getattr(getattr(torch, device_type, None), "device_count", None)
    try:
        return int(fn()) if callable(fn) else 0
    except Exception:  # noqa: BLE001
        return 0


def device_capacity(mod: Any, device_type: str, index: int) -> int | None:
    """Device memory in bytes: ``get_device_properties(d).total_memory`` of ``torch.<device>`` or the module
    (torch-neuronx-facts "Memory"); None when neither says."""
    import torch

    for owner in (getattr(torch, device_type, None), mod):
        fn = getattr(owner, "get_device_properties", None)
        if not callable(fn):
            continue
        try:
            v = getattr(fn(index), "total_memory", None)
        except Exception:  # noqa: BLE001  (an uninitialised runtime raises; another owner may answer)
            continue
        if isinstance(v, int) and v > 0:
            return v
    return None


def memory_current(stats: Mapping[str, Any]) -> tuple[int | None, int | None, int | None, int | None]:
    """(allocated, reserved, peak allocated, peak reserved) from nested (src) or flat CUDA-style (later builds)
    ``memory_stats()``."""

    def pick(kind: str, which: str) -> int | None:
        v = stats.get(kind)
        if isinstance(v, Mapping):  # nested: {"allocated_bytes": {"current", "peak", ...}}
            x = v.get(which)
            if isinstance(x, Mapping):  # CUDA-like nesting {"all": {...}}
                x = x.get("all")
            return int(x) if isinstance(x, (int, float)) else None
        for key in (f"{kind}.all.{which}", f"{kind}.{which}"):
            x = stats.get(key)
            if isinstance(x, (int, float)):
                return int(x)
        return None

    return (pick("allocated_bytes", "current"), pick("reserved_bytes", "current"),
            pick("allocated_bytes", "peak"), pick("reserved_bytes", "peak"))


def op_key(name: str) -> str:
    """Comparable op key for names in any format: "aten::add.Tensor", "add", "aten::add" -> "add"."""
    n = name.strip()
    if "::" in n:
        n = n.split("::", 1)[1]
    return _OVERLOAD.sub("", n)


def split_fused(name: str) -> list[str]:
    """Adaptive-eager fused names are joined with "|" ("mul|pow|aten::mm"): the op keys of each part."""
    return [op_key(p) for p in name.split("|") if p.strip()]
