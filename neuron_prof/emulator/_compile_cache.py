"""First-call compile of each (op or graph, shapes, dtypes, static args) signature, and the NEFF cache.

Lookup order as in TorchNeuron: in memory, then the on-disk cache directory, then "neuronx-cc" (here: the
host sleeps for the modelled compile time). Entries, stats and metric samples have the shapes of
torch_neuronx._C._get_compilation_cache_entries / _get_compilation_cache_stats / _neuron_metric_data.
Runtime metrics (the ``CompilationCache.*`` counters and samples) are recorded only while enabled: off by
default, on with ``TORCH_NEURONX_METRICS_ENABLED=1`` or ``torch_neuronx.metrics.set_enabled(True)``
(torch-neuronx-facts, "Corrections and additions"); the cache's own entries and stats are always kept.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from neuron_prof.emulator._groundtruth import GroundTruth

_SAMPLES = 1024  # the runtime's metric ring buffer


class _Entry:
    __slots__ = ("cache_key", "neff_size_bytes", "access_count", "compilation_time_ms")

    def __init__(self, cache_key: str, neff_size_bytes: int, compilation_time_ms: int) -> None:
        self.cache_key = cache_key
        self.neff_size_bytes = neff_size_bytes
        self.access_count = 1
        self.compilation_time_ms = compilation_time_ms


class CompileCache:
    """NEFF cache shared by eager ops and torch.compile graphs."""

    def __init__(self, cache_dir: str | None, disk_load_ms: float, gt: GroundTruth) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir else None
        if self.cache_dir is not None:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.disk_load_ms = disk_load_ms
        self.gt = gt
        self._by_sig: dict[Any, _Entry] = {}
        self._lock = threading.Lock()
        self._ids: dict[Any, int] = {}
        self._id_sigs: list[Any] = []
        self.pull: Callable[[], None] | None = None
        """Launch mode: counts the hits of the ops the extension launched (`_timing.Activity.drain`)."""
        self.on_clear: Callable[[], None] | None = None
        """Launch mode: forgets the extension's warm signatures when the in-memory cache is dropped."""
        self.counters = {
            "CompilationCache.InMemoryHits": 0,
            "CompilationCache.InMemoryMisses": 0,
            "CompilationCache.PersistentHits": 0,
            "CompilationCache.PersistentMisses": 0,
            "CompilationCache.Evictions": 0,
            "CompilationCache.TotalCompilations": 0,
        }
        self.samples: dict[str, deque[tuple[int, float]]] = {
            "CompilationCache.CompilationTime": deque(maxlen=_SAMPLES),
            "CompilationCache.MemoryUsage": deque(maxlen=_SAMPLES),
        }
        self._time_acc_ns = 0.0
        self.thread_free_at_ns = 0
        """When the background compile thread finishes the compiles queued on it (asynchronous mode)."""
        self.tally = dict.fromkeys(self.counters, 0)
        """The cache's own counts (stats()), kept whether metrics are on or not."""
        self.metrics_enabled = os.environ.get("TORCH_NEURONX_METRICS_ENABLED", "0").strip().lower() in (
            "1", "true", "yes", "on")

    def _count(self, name: str) -> None:
        self.tally[name] += 1
        if self.metrics_enabled:
            self.counters[name] += 1

    def _sample(self, name: str, value: float) -> None:
        if self.metrics_enabled:
            self.samples[name].append((time.monotonic_ns(), value))

    def get(self, sig: Any) -> bool:
        """Fast path: True (and one more access) when `sig` is already compiled in memory."""
        e = self._by_sig.get(sig)
        if e is None:
            return False
        e.access_count += 1
        self._count("CompilationCache.InMemoryHits")
        return True

    def entry_id(self, sig: Any) -> int:
        """A small number for `sig`, by which launch mode reports its launches' hits (`hit`)."""
        i = self._ids.get(sig)
        if i is None:
            i = self._ids[sig] = len(self._id_sigs)
            self._id_sigs.append(sig)
        return i

    def hit(self, entry_id: int) -> None:
        """One launch of the signature numbered `entry_id` looked its NEFF up (as `get` counts a call)."""
        if 0 <= entry_id < len(self._id_sigs):
            self.get(self._id_sigs[entry_id])

    def fresh(self) -> CompileCache:
        """This cache, with the launches not yet counted counted (launch mode)."""
        if self.pull is not None:
            self.pull()
        return self

    @staticmethod
    def _digest(sig: Any) -> str:
        return hashlib.blake2b(repr(sig).encode(), digest_size=8).hexdigest()

    def key_for(self, sig: Any, name: str) -> str:
        """The cache_key `sig` gets: the op or graph name, then a digest of the signature."""
        return f"{name}_{self._digest(sig)}"

    def compile(self, sig: Any, name: str, cost_ms: float, neff_size_bytes: int, device: int = 0,
                blocking: bool = True) -> int:
        """Miss path: load `sig` from disk or compile it; returns the Unix ns when its NEFF is ready.

        Blocking (``NEURON_LAUNCH_BLOCKING=1``): the host sleeps for the load or compile. Asynchronous: the
        work is queued on the background compile thread (one compile at a time) and the host goes on; the
        entry exists at once (a second call does not compile again) and the device cannot run the op before
        the returned time. The thread is modelled as a clock, like the device's queue.
        """
        digest = self._digest(sig)
        key = f"{name}_{digest}"
        now = time.time_ns()
        self._count("CompilationCache.InMemoryMisses")
        path = self.cache_dir / f"{digest}.neff" if self.cache_dir is not None else None
        from_disk = path is not None and path.exists()
        if path is not None:
            self._count("CompilationCache.PersistentHits" if from_disk else "CompilationCache.PersistentMisses")
        cost_ns = int((self.disk_load_ms if from_disk else cost_ms) * 1e6)
        if blocking:
            t0 = now
            if cost_ns > 0:
                time.sleep(cost_ns / 1e9)
            t1 = time.time_ns()
        else:
            with self._lock:
                t0 = max(now, self.thread_free_at_ns)
                t1 = t0 + max(cost_ns, 0)
                self.thread_free_at_ns = t1
        if from_disk:
            entry = _Entry(key, neff_size_bytes, 0)  # like the real cache: loaded from disk = 0 ms
            source = "disk"
        else:
            elapsed_ns = t1 - t0
            self._count("CompilationCache.TotalCompilations")
            self._time_acc_ns += elapsed_ns
            # the runtime takes its sample when the compile ends (steady clock)
            if self.metrics_enabled:
                self.samples["CompilationCache.CompilationTime"].append(
                    (time.monotonic_ns() + (t1 - time.time_ns()), float(elapsed_ns)))
            entry = _Entry(key, neff_size_bytes, int(round(elapsed_ns / 1e6)))
            source = "compile"
            if path is not None:
                tmp = path.with_suffix(f".tmp{os.getpid()}")
                tmp.write_bytes(key.encode() + b"\n" + bytes(64))
                os.replace(tmp, path)
        with self._lock:
            self._by_sig[sig] = entry
            mem = sum(e.neff_size_bytes for e in self._by_sig.values())
        self._sample("CompilationCache.MemoryUsage", float(mem))
        self.gt.add("compile", name, t0, t1, device, detail={"cache_key": key, "source": source,
                                                            "blocking": blocking, "submitted_ns": now,
                                                            "modelled_ns": cost_ns})
        return t1

    # --- the torch_neuronx._C shapes -------------------------------------------------------------------

    def entries(self) -> list[dict[str, Any]]:
        self.fresh()
        with self._lock:
            es = list(self._by_sig.values())
        return [
            {
                "cache_key": e.cache_key,
                "neff_size_bytes": e.neff_size_bytes,
                "access_count": e.access_count,
                "compilation_time_ms": e.compilation_time_ms,
            }
            for e in es
        ]

    def stats(self) -> dict[str, Any]:
        c = self.fresh().tally
        hits = c["CompilationCache.InMemoryHits"] + c["CompilationCache.PersistentHits"]
        misses = c["CompilationCache.InMemoryMisses"] + c["CompilationCache.PersistentMisses"]
        with self._lock:
            mem = sum(e.neff_size_bytes for e in self._by_sig.values())
            n = len(self._by_sig)
        max_bytes = 4 << 30
        return {
            "total_entries": n,
            "in_memory_hits": c["CompilationCache.InMemoryHits"],
            "in_memory_misses": c["CompilationCache.InMemoryMisses"],
            "persistent_hits": c["CompilationCache.PersistentHits"],
            "persistent_misses": c["CompilationCache.PersistentMisses"],
            "cache_hits": hits,
            "cache_misses": misses,
            "hit_rate": hits / (hits + misses) if hits + misses else 0.0,
            "memory_usage_bytes": mem,
            # Faithful to the real binding: it sums ns samples and divides by 1000, so this "ms" is really µs.
            "total_compilation_time_ms": self._time_acc_ns / 1000.0,
            "evictions_performed": c["CompilationCache.Evictions"],
            "total_compilations": c["CompilationCache.TotalCompilations"],
            "max_cache_size_bytes": max_bytes,
            "max_cache_entries": 100_000,
            "memory_utilization_ratio": mem / max_bytes,
        }

    def all_keys(self) -> set[str]:
        with self._lock:
            return {e.cache_key for e in self._by_sig.values()}

    def cached_names(self, directory: Path, default_dir: Path) -> set[str]:
        """Names of the ops and graphs whose NEFF is cached in `directory`: the ``*.neff`` files there (each names
        its key on its first line), or, when this cache is in memory only and `directory` is TorchNeuron's
        default cache (`default_dir`, which the in-memory cache stands in for), the entries held in memory."""
        if self.cache_dir is None and directory == default_dir:
            with self._lock:
                return {e.cache_key.rsplit("_", 1)[0] for e in self._by_sig.values()}
        out = set()
        for f in directory.glob("*.neff") if directory.is_dir() else ():
            try:
                with open(f, "rb") as fh:
                    key = fh.readline().decode(errors="replace").strip()
            except OSError:
                continue
            if "_" in key:
                out.add(key.rsplit("_", 1)[0])
        return out

    def clear(self, memory_only: bool = False) -> None:
        """Drop the in-memory cache (and, unless memory_only, the files of the disk cache)."""
        self.fresh()
        with self._lock:
            self._by_sig.clear()
        if self.on_clear is not None:
            self.on_clear()
        if not memory_only and self.cache_dir is not None:
            for p in self.cache_dir.glob("*.neff"):
                p.unlink(missing_ok=True)

    def metric_data(self, name: str) -> dict[str, Any] | None:
        """Like _C._neuron_metric_data: accumulator, total_samples, samples [{timestamp_ns, value}]"""
        s = self.fresh().samples.get(name)
        if s is None or not s:
            return None
        samples = list(s)
        acc = sum(v for _, v in samples)
        return {
            "accumulator": acc,
            "total_samples": len(samples),
            "repr": f"{acc / 1e6:.3f}ms",
            "samples": [{"timestamp_ns": t, "value": v} for t, v in samples],
        }
