"""A fake ``torch_neuronx`` with exactly the documented API shapes (shared/design/torch-neuronx-facts.md).

It runs nothing on a device: the test's workload runs real CPU ops under a real torch.profiler, and the fake
reports about it what torch-neuronx would: bare, deduplicated fallback names in mixed formats, NEFF cache
entries ``{cache_key, neff_size_bytes, access_count, compilation_time_ms}`` (disk loads report 0 ms), Dynamo
metrics records, nested (April source) or flat (later builds) ``memory_stats``.
"""

from __future__ import annotations

import hashlib
import time
import types
from typing import Any

import torch

LIB = "npfake"


class FakeNeuronx:
    """State behind the fake module; `module` is what the adapter receives."""

    def __init__(self, flat_memory: bool = False, with_cache: bool = True) -> None:
        self.fallback: set[str] = set()
        self.executed: set[str] = set()
        self.entries: list[dict[str, Any]] = []
        self.dynamo: list[dict[str, Any]] = []
        self.allocated = 0
        self.peak = 0
        self.flat_memory = flat_memory
        self.compile_ms = 40
        m = types.ModuleType("torch_neuronx")
        m.get_fallback_ops = lambda: list(self.fallback)  # type: ignore[attr-defined]
        m.get_executed_ops = lambda: list(self.executed)  # type: ignore[attr-defined]
        m.clear_op_tracking = self._clear  # type: ignore[attr-defined]
        m.get_dynamo_metrics = lambda: list(self.dynamo)  # type: ignore[attr-defined]
        m.reset_dynamo_metrics = self.dynamo.clear  # type: ignore[attr-defined]
        m.synchronize = lambda device=None: None  # type: ignore[attr-defined]
        m.device_count = lambda: 1  # type: ignore[attr-defined]
        m.memory_stats = self.memory_stats  # type: ignore[attr-defined]
        c = types.ModuleType("torch_neuronx._C")
        if with_cache:
            c._get_compilation_cache_entries = lambda: [dict(e) for e in self.entries]  # type: ignore[attr-defined]
        m._C = c  # type: ignore[attr-defined]
        self.module = m

    def _clear(self) -> None:
        self.fallback.clear()
        self.executed.clear()

    def memory_stats(self, device: Any = None) -> dict[str, Any]:
        if self.flat_memory:
            return {"allocated_bytes.all.current": self.allocated, "allocated_bytes.all.peak": self.peak,
                    "reserved_bytes.all.current": self.allocated * 2, "reserved_bytes.all.peak": self.peak * 2,
                    "num_ooms": 0}
        return {"allocated_bytes": {"current": self.allocated, "peak": self.peak, "allocated": self.peak, "freed": 0},
                "reserved_bytes": {"current": self.allocated * 2, "peak": self.peak * 2, "allocated": 0,
                                   "freed": 0},
                "active_bytes": {"current": self.allocated, "peak": self.peak},
                "num_alloc_retries": 0, "num_ooms": 0}

    def alloc(self, n: int) -> None:
        self.allocated += n
        self.peak = max(self.peak, self.allocated)

    # ---- what the "device" does for the workload's custom ops ---------------------------------
    def compile_if_new(self, op: str, x: torch.Tensor, from_disk: bool = False) -> None:
        """First call of (op, shape, dtype): block like a NEFF compile and add a cache entry."""
        key = f"{op}_{hashlib.blake2b(repr((tuple(x.shape), x.dtype)).encode(), digest_size=8).hexdigest()}"
        for e in self.entries:
            if e["cache_key"] == key:
                e["access_count"] += 1
                return
        if not from_disk:
            time.sleep(self.compile_ms / 1e3)
        self.entries.append({"cache_key": key, "neff_size_bytes": 8192, "access_count": 1,
                             "compilation_time_ms": 0 if from_disk else self.compile_ms})


FAKE: FakeNeuronx | None = None
_lib: Any = None


def install_ops() -> None:
    """Custom ops whose CPU kernels act like a device backend (compile on first call, host fallback)."""
    global _lib
    if _lib is not None:
        return
    _lib = torch.library.Library(LIB, "DEF")
    _lib.define("compiled(Tensor x) -> Tensor")
    _lib.define("host_op(Tensor x) -> Tensor")

    def compiled(x: torch.Tensor) -> torch.Tensor:
        if FAKE is not None:
            FAKE.compile_if_new(f"{LIB}::compiled", x)
            FAKE.executed.add(f"{LIB}::compiled")
        return x * 2

    def host_op(x: torch.Tensor) -> torch.Tensor:
        # A boxed CPU fallback: inputs copied to the host, computed there, copied back (nested copy ops).
        h = x.to(torch.float64, copy=True)
        out = (h.sort().values + 1).to(x.dtype)
        if FAKE is not None:
            FAKE.fallback.add(f"{LIB}::host_op.default")
        return out

    _lib.impl("compiled", compiled, "CPU")
    _lib.impl("host_op", host_op, "CPU")
