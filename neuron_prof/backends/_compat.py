"""The one door to torch-neuronx: every API the adapter uses, looked up here and nowhere else.

Each accessor names its source (shared/design/torch-neuronx-facts.md): "src" = the April 2026 source, "docs" =
the Neuron SDK docs (2026-08/10 and 2.32-2.34 as issue 33 quotes them). None raises
for a missing API: it returns None (or False), so the adapter works across releases and on look-alikes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

_OVERLOAD = re.compile(r"\.[A-Za-z_][A-Za-z0-9_]*$")
COMPILATION_TIME = "CompilationCache.CompilationTime"
METRICS_ENV = "TORCH_NEURONX_METRICS_ENABLED"
DYNAMO_TS_FORMAT = "%Y%m%d_%H%M%S_%f"
"""``get_dynamo_metrics()`` record timestamps: strings in local time (facts, "Corrections and additions")."""


def _fn(obj: Any, *path: str) -> Callable[..., Any] | None:
    for name in path:
        obj = getattr(obj, name, None)
        if obj is None:
            return None
    return obj if callable(obj) else None


def _call(obj: Any, *path: str) -> Any:
    fn = _fn(obj, *path)
    return fn() if fn is not None else None


# ---- CPU fallback (src) ------------------------------------------------------------------------------------
def fallback_ops(mod: Any) -> list[str] | None:
    """``torch_neuronx.get_fallback_ops()``: op names only, deduplicated (src)."""
    got = _call(mod, "get_fallback_ops")
    return [str(x) for x in got] if got is not None else None


def has_fallback_ops(mod: Any) -> bool:
    return _fn(mod, "get_fallback_ops") is not None


def op_tracking_clearer(mod: Any) -> Callable[[], Any] | None:
    """``torch_neuronx.clear_op_tracking`` (src): resets the fallback and executed lists."""
    return _fn(mod, "clear_op_tracking")


# ---- compile cache and metrics (src; metrics switch: corrections) --------------------------------------------
def cache_entries(mod: Any) -> list[dict[str, Any]] | None:
    """``torch_neuronx._C._get_compilation_cache_entries()`` → [{cache_key, neff_size_bytes, access_count,
    compilation_time_ms}] (src). Entries loaded from disk report 0 ms; the key's suffix format is undocumented."""
    got = _call(mod, "_C", "_get_compilation_cache_entries")
    if got is None:
        return None
    return [dict(e) if isinstance(e, Mapping) else {k: getattr(e, k, None) for k in
                                                   ("cache_key", "neff_size_bytes", "access_count",
                                                    "compilation_time_ms")} for e in got]


def metric_samples(mod: Any, name: str) -> list[tuple[int, float]] | None:
    """``_C._neuron_metric_data(name)["samples"]`` as (steady-clock ns, value) (src: the binding behind
    ``torch_neuronx.metrics``; the runtime keeps the last 1024, and none unless metrics are enabled)."""
    fn = _fn(mod, "_C", "_neuron_metric_data")
    if fn is None:
        return None
    got = fn(name)
    if not isinstance(got, Mapping):
        return [] if got is None else None
    out = []
    for smp in got.get("samples") or ():
        if isinstance(smp, Mapping) and "timestamp_ns" in smp:
            out.append((int(smp["timestamp_ns"]), float(smp.get("value", 0))))
    return out


def metrics_enabled(mod: Any) -> bool:
    """Whether runtime metrics are on: the module's own answer where it gives one (``_C._neuron_metrics_enabled``,
    src: the binding beside ``_neuron_set_metrics_enabled``), else ``TORCH_NEURONX_METRICS_ENABLED`` as the
    process started (src: off by default)."""
    fn = _fn(mod, "_C", "_neuron_metrics_enabled")
    if fn is not None:
        return bool(fn())
    return os.environ.get(METRICS_ENV, "0").strip().lower() in ("1", "true", "yes", "on")


def set_metrics_enabled(mod: Any, on: bool) -> bool:
    """``torch_neuronx.metrics.set_enabled(on)`` (corrections, docs), else ``_C._neuron_set_metrics_enabled``
    (src, C++); False when neither exists."""
    fn = _fn(mod, "metrics", "set_enabled") or _fn(mod, "_C", "_neuron_set_metrics_enabled")
    if fn is None:
        return False
    fn(bool(on))
    return True


def dynamo_metrics(mod: Any) -> list[dict[str, Any]] | None:
    """``torch_neuronx.get_dynamo_metrics()`` → per graph: graph_id, graph_name, timestamp, *_us phases (src)."""
    got = _call(mod, "get_dynamo_metrics")
    if got is None:
        return None
    return [dict(r) if isinstance(r, Mapping) else dict(vars(r)) for r in got]


def timestamp_us(ts: Any) -> int | None:
    """A ``get_dynamo_metrics()`` timestamp as Unix µs: the documented local-time string
    ``"%Y%m%d_%H%M%S_%f"`` (corrections), or a number in Unix s, ms, µs or ns (older builds); else None."""
    if isinstance(ts, str):
        s = ts.strip()
        try:
            return int(round(datetime.strptime(s, DYNAMO_TS_FORMAT).timestamp() * 1e6))  # naive = local time
        except ValueError:
            pass
        try:
            ts = float(s)
        except ValueError:
            return None
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or ts <= 0:
        return None
    for scale in (1e6, 1e3, 1.0, 1e-3):
        v = ts * scale
        if 1e15 <= v < 1e17:  # Unix µs in years 2001..2286
            return int(v)
    return None


# ---- device, memory (src, docs) -------------------------------------------------------------------------------
def synchronize(mod: Any, device_type: str = "neuron") -> None:
    """The module's ``synchronize`` (src re-exports it), else ``torch.neuron.synchronize()`` (docs)."""
    import torch

    fn = _fn(mod, "synchronize") or _fn(torch, device_type, "synchronize")
    if fn is not None:
        fn()


def device_count(mod: Any, device_type: str = "neuron") -> int:
    """The module's ``device_count``, else ``torch.neuron.device_count()`` (src)."""
    import torch

    fn = _fn(mod, "device_count") or _fn(torch, device_type, "device_count")
    try:
        return int(fn()) if fn is not None else 0
    except Exception:  # noqa: BLE001
        return 0


def device_capacity(mod: Any, device_type: str, index: int) -> int | None:
    """Device memory in bytes: ``get_device_properties(d).total_memory`` of ``torch.<device>`` or the module
    (src, corrections "Memory"); None when neither says (an Explorer profile gives ``hbm_capacity_bytes``)."""
    import torch

    for owner in (getattr(torch, device_type, None), mod):
        fn = _fn(owner, "get_device_properties")
        if fn is None:
            continue
        try:
            v = getattr(fn(index), "total_memory", None)
        except Exception:  # noqa: BLE001  (an uninitialised runtime raises; another owner may answer)
            continue
        if isinstance(v, int) and v > 0:
            return v
    return None


def memory_reader(mod: Any, device_type: str = "neuron") -> Callable[[int], tuple[int | None, ...] | None]:
    """device index -> (allocated, reserved, peak allocated) bytes from ONE ``memory_stats()`` read, nested or
    flat (src, docs): ``memory_allocated``, ``memory_reserved`` and ``max_memory_allocated`` each read
    ``memory_stats()`` in full (src), so three of them cost three reads; they serve only where ``memory_stats``
    is missing. Of the module given first (the authority), else of ``torch.<device>``. The device runs
    asynchronously: without a sync the stats show the work completed so far (src, docs)."""

    def read(d: int) -> tuple[int | None, ...] | None:
        import torch

        dev_mod = mod if _fn(mod, "memory_stats") is not None else getattr(torch, device_type, None)
        fn = _fn(dev_mod, "memory_stats")
        if fn is not None:
            alloc, res, peak, _ = memory_current(fn(d))
            return alloc, res, peak
        alloc_fn, res_fn = _fn(dev_mod, "memory_allocated"), _fn(dev_mod, "memory_reserved")
        if alloc_fn is None or res_fn is None:
            return None
        peak_fn = _fn(dev_mod, "max_memory_allocated")
        return int(alloc_fn(d)), int(res_fn(d)), int(peak_fn(d)) if peak_fn is not None else None

    return read


def memory_current(stats: Mapping[str, Any]) -> tuple[int | None, int | None, int | None, int | None]:
    """(allocated, reserved, peak allocated, peak reserved) from nested (src) or flat CUDA-style (docs, later
    builds) ``memory_stats()``."""

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


def profiler_mappings(mod: Any) -> Any:
    """``_C._get_profiler_mappings()`` (corrections): the framework→runtime mapping in memory, the document of
    ``framework_mapping_*.json`` (see `neuron_prof.loaders.explorer.framework_mapping`); None when absent."""
    return _call(mod, "_C", "_get_profiler_mappings")


def set_profiler_mapping(mod: Any, on: bool) -> bool:
    """``_C._set_profiler_mapping_enabled(on)`` (corrections); False when absent."""
    fn = _fn(mod, "_C", "_set_profiler_mapping_enabled")
    if fn is None:
        return False
    fn(bool(on))
    return True


# ---- the runtime's capture (docs: torch-neuronx-facts "Profiler", neuron-explorer-facts "Capture"; issue 21) ----
SYSTEM_PROFILE_MODES = ("RUNTIME",)
"""The system profile: runtime and hardware execution events, host/device copies (ntrace.pb + trace_info.pb);
designed for < 2% overhead, no HBM reserve."""
DEVICE_PROFILE_MODES = ("DEVICE", "RUNTIME")
"""``NeuronConfig``'s default modes (docs): DEVICE adds .neff + .ntff and reserves about 5 GB of HBM on Trn2."""
NEFF_CACHE_ENV = "TORCH_NEURONX_NEFF_CACHE_DIR"
DEFAULT_NEFF_CACHE_DIR = "/tmp/neff_cache"
"""The compiler's NEFF cache: ``TORCH_NEURONX_NEFF_CACHE_DIR``, default ``/tmp/neff_cache`` (src, docs)."""


def neff_cache_dir() -> str:
    """The NEFF cache this job compiles into (`NEFF_CACHE_ENV`, else `DEFAULT_NEFF_CACHE_DIR`): the one to give
    ``NeuronConfig(neff_cache_dir=...)``, whose cached NEFFs are copied into the profile on stop (docs); a new
    folder would recompile every NEFF or find none to copy (issue 33)."""
    v = os.environ.get(NEFF_CACHE_ENV, "").strip()
    return v or DEFAULT_NEFF_CACHE_DIR


def profiling_api(mod: Any) -> str | None:
    """"docs" when this torch_neuronx has the documented profiling API (``profiling.NeuronConfig`` +
    ``NeuronProfiler(cfg).export_trace``, SDK docs 2.31-2.34), else None. The April source's shape (a
    ``NeuronProfiler`` context manager, no ``NeuronConfig``) is not supported: that package needs torch ~=2.10 and
    Python < 3.11, so it cannot be installed beside neuron-prof (issue 33)."""
    prof = getattr(mod, "profiling", None)
    if _fn(prof, "NeuronConfig") is not None and _fn(prof, "NeuronProfiler") is not None:
        return "docs"
    return None


def neuron_config(mod: Any, output_dir: str, modes: tuple[str, ...] = DEVICE_PROFILE_MODES,
                  neff_cache_dir: str | None = None) -> Any | None:
    """``torch_neuronx.profiling.NeuronConfig(modes=[ProfileMode.<m>...], profile_output_dir=output_dir,
    neff_cache_dir=...)`` (docs), passed to torch.profiler as ``experimental_config``; None when absent."""
    prof = getattr(mod, "profiling", None)
    cls = _fn(prof, "NeuronConfig")
    if cls is None:
        return None
    kw: dict[str, Any] = {"profile_output_dir": output_dir}
    if neff_cache_dir is not None:
        kw["neff_cache_dir"] = neff_cache_dir
    pm = getattr(prof, "ProfileMode", None)
    if pm is not None and all(hasattr(pm, m) for m in modes):
        kw["modes"] = [getattr(pm, m) for m in modes]
    return cls(**kw)


def neuron_profiler_export(mod: Any, config: Any) -> Callable[[Any], Any] | None:
    """``torch_neuronx.profiling.NeuronProfiler(config).export_trace`` (docs: torch.profiler's ``on_trace_ready``;
    it writes the capture folder's trace.json and framework mapping); None when absent."""
    cls = _fn(getattr(mod, "profiling", None), "NeuronProfiler")
    return _fn(cls(config), "export_trace") if cls is not None else None


def launch_blocking_env() -> str:
    """``NEURON_LAUNCH_BLOCKING`` as set ("1" blocking, "0" asynchronous compiles), or "unset" (release builds
    then block, dev builds do not: corrections; which build this is, no API says)."""
    v = os.environ.get("NEURON_LAUNCH_BLOCKING")
    return v.strip() if v is not None and v.strip() else "unset"


# ---- op names (src: mixed formats) ------------------------------------------------------------------------------
def op_key(name: str) -> str:
    """Comparable op key for names in any format: "aten::add.Tensor", "add", "aten::add" -> "add"."""
    n = name.strip()
    if "::" in n:
        n = n.split("::", 1)[1]
    return _OVERLOAD.sub("", n)


def split_fused(name: str) -> list[str]:
    """Adaptive-eager fused names are joined with "|" ("mul|pow|aten::mm"): the op keys of each part."""
    return [op_key(p) for p in name.split("|") if p.strip()]


def key_ops(cache_key: str, known: set[str]) -> list[str]:
    """The ops a NEFF cache key starts with (src: "for eager ops cache_key starts with the op name"; its suffix
    is undocumented, corrections): each "|"-joined part before the last is one op; the last is the longest
    op name in `known` (op keys, see `op_key`) that it starts with. [] when it names no known op (a graph)."""
    parts = cache_key.split("|")
    out = [op_key(p) for p in parts[:-1] if p.strip()]
    last = parts[-1].strip()
    if "::" in last:
        last = last.split("::", 1)[1]
    # the name must end where the key's name ends ("add" in "add_9f" or "add[f32]", never in "addmm_9f")
    best = max((k for k in known if k and last.startswith(k) and (len(k) == len(last) or not last[len(k)].isalnum())),
               key=len, default="")
    return [*out, best] if best else out
