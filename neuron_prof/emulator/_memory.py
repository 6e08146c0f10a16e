"""Device memory accounting from live tensors, shaped like TorchNeuron's caching allocator stats.

Every device tensor's storage is counted once while any wrapper on it is alive (views share it); a
weakref finalizer releases it. `reserved` models the caching allocator: it grows in segments and only
shrinks on empty_cache(). Allocating past the configured capacity raises torch.OutOfMemoryError.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any


def _round_up(n: int, g: int) -> int:
    return -(-n // g) * g if g > 0 else n


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.2f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.2f} GiB"


class _Stat:
    __slots__ = ("current", "peak", "allocated", "freed")

    def __init__(self) -> None:
        self.current = self.peak = self.allocated = self.freed = 0

    def add(self, n: int) -> None:
        self.current += n
        self.allocated += n
        if self.current > self.peak:
            self.peak = self.current

    def sub(self, n: int) -> None:
        self.current -= n
        self.freed += n

    def as_dict(self) -> dict[str, int]:
        return {"current": self.current, "peak": self.peak, "allocated": self.allocated, "freed": self.freed}


class DeviceMemory:
    """Allocated / reserved / active bytes of one emulated device."""

    def __init__(self, index: int, capacity: int, granularity: int) -> None:
        self.index = index
        self.capacity = capacity
        self.granularity = granularity
        self.allocated = _Stat()
        self.reserved = _Stat()
        self.active = _Stat()
        self.num_ooms = 0
        self.num_tensor_frees = 0
        self.allocation_requests = 0
        self._live: dict[int, list[int]] = {}  # storage data_ptr -> [nbytes, wrapper count]
        self._refs: dict[
            int, tuple[weakref.ref[object], int]
        ] = {}  # id(ref) -> (ref to a host tensor, data_ptr)
        self._lock = threading.Lock()

    def check(self, nbytes: int) -> None:
        """Raise torch.OutOfMemoryError now if `nbytes` more would not fit."""
        if self.allocated.current + nbytes > self.capacity:
            with self._lock:
                self.num_ooms += 1
            raise _oom(self, nbytes)

    def track(self, owner: object, storage_key: int, nbytes: int) -> None:
        """Count a storage (once, however many tensors view it) until `owner` is garbage collected.

        The owner is the host tensor inside the device tensor, not the device tensor itself: a weakref on
        the latter would break Module.to(), which swaps parameters with torch.utils.swap_tensors.
        """
        if nbytes <= 0:
            return
        with self._lock:
            entry = self._live.get(storage_key)
            if entry is None:
                self.allocation_requests += 1
                if self.allocated.current + nbytes > self.capacity:
                    self.num_ooms += 1
                    raise _oom(self, nbytes)
                self._live[storage_key] = [nbytes, 1]
                self.allocated.add(nbytes)
                self.active.add(nbytes)
                want = _round_up(self.allocated.current, self.granularity)
                if want > self.reserved.current:
                    self.reserved.add(want - self.reserved.current)
            else:
                entry[1] += 1
        # A bare weakref with a callback costs a fraction of weakref.finalize; the dict keeps it alive.
        ref = weakref.ref(owner, self._on_dead)
        self._refs[id(ref)] = (ref, storage_key)

    def _on_dead(self, ref: weakref.ref[object]) -> None:
        entry_ref = self._refs.pop(id(ref), None)
        if entry_ref is None:
            return
        storage_key = entry_ref[1]
        with self._lock:
            entry = self._live.get(storage_key)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] == 0:
                del self._live[storage_key]
                self.allocated.sub(entry[0])
                self.active.sub(entry[0])
                self.num_tensor_frees += 1

    def empty_cache(self) -> None:
        with self._lock:
            want = _round_up(self.allocated.current, self.granularity)
            if want < self.reserved.current:
                self.reserved.sub(self.reserved.current - want)

    def reset_peak(self) -> None:
        with self._lock:
            for s in (self.allocated, self.reserved, self.active):
                s.peak = s.current

    def reset_accumulated(self) -> None:
        with self._lock:
            for s in (self.allocated, self.reserved, self.active):
                s.allocated = s.current
                s.freed = 0
            self.num_ooms = self.num_tensor_frees = self.allocation_requests = 0

    def stats(self) -> dict[str, Any]:
        """Nested like torch_neuronx._C._get_memory_stats(device_index)."""
        with self._lock:
            return {
                "allocated_bytes": self.allocated.as_dict(),
                "reserved_bytes": self.reserved.as_dict(),
                "active_bytes": self.active.as_dict(),
                "num_alloc_retries": 0,
                "num_ooms": self.num_ooms,
                "num_tensor_frees": self.num_tensor_frees,
                "allocation_requests": self.allocation_requests,
            }


def _oom(mem: DeviceMemory, nbytes: int) -> Exception:
    import torch

    return torch.OutOfMemoryError(
        f"Neuron out of memory. Tried to allocate {format_bytes(nbytes)} on neuron:{mem.index} "
        f"(capacity {format_bytes(mem.capacity)}; {format_bytes(mem.allocated.current)} already allocated)"
    )


class _Now:
    __slots__ = ("current", "peak")

    def __init__(self, current: int, peak: int) -> None:
        self.current, self.peak = current, peak


class ExtMemory:
    """DeviceMemory's interface over the C++ extension's allocator, which counts every device storage (its
    own allocations and host results it holds) and raises torch.OutOfMemoryError past the capacity."""

    def __init__(self, ext: Any, index: int, capacity: int, granularity: int) -> None:
        self._ext = ext
        self.index = index
        self.granularity = granularity
        self._capacity = capacity
        ext.set_memory_limits(capacity, granularity)

    @property
    def capacity(self) -> int:
        return self._capacity

    @capacity.setter
    def capacity(self, value: int) -> None:
        self._capacity = value
        self._ext.set_memory_limits(value, self.granularity)

    def _raw(self) -> list[int]:
        return list(self._ext.memory_stats())

    @property
    def allocated(self) -> _Now:
        v = self._raw()
        return _Now(v[0], v[1])

    @property
    def reserved(self) -> _Now:
        v = self._raw()
        return _Now(v[4], v[5])

    def check(self, nbytes: int) -> None:
        if self.allocated.current + nbytes > self.capacity:
            raise _oom_ext(self, nbytes)

    def empty_cache(self) -> None:
        self._ext.empty_cache()

    def reset_peak(self) -> None:
        self._ext.reset_peak()

    def reset_accumulated(self) -> None:
        self._ext.reset_accumulated()

    def stats(self) -> dict[str, Any]:
        """Nested like torch_neuronx._C._get_memory_stats(device_index)."""
        v = self._raw()
        keys = ("current", "peak", "allocated", "freed")
        out: dict[str, Any] = {}
        for i, name in enumerate(("allocated_bytes", "reserved_bytes", "active_bytes")):
            out[name] = dict(zip(keys, v[4 * i:4 * i + 4]))
        out.update(num_alloc_retries=0, num_ooms=v[12], num_tensor_frees=v[13], allocation_requests=v[14])
        return out


def _oom_ext(mem: ExtMemory, nbytes: int) -> Exception:
    import torch

    return torch.OutOfMemoryError(
        f"Neuron out of memory. Tried to allocate {format_bytes(nbytes)} on neuron:{mem.index} "
        f"(capacity {format_bytes(mem.capacity)}; {format_bytes(mem.allocated.current)} already allocated)"
    )
