"""Process groups a profiled region destroys are torn down from Python, at the session's end.

A gloo process group's C++ destructor joins gloo's worker threads, and a worker that is still dropping a
finished collective needs the GIL (the collective holds the thread-local state of the backward pass that
launched it, which holds a Python object; torch.profiler adds its own copy for the span it records on gloo's
thread when the collective completes). torch releases the GIL when the last Python reference to a process
group goes, but not when the last reference is C++'s: a DDP model freed after ``destroy_process_group()``
(its Reducer holds the group), e.g. when the function that made it returns, destroys the group under the
GIL, and the join never returns. torch alone hangs so now and then; under the profiler a 2-rank DDP job with
``no_sync()`` hung in most runs (issue 22 under ``neuron-prof run``, issue 34 under ``profile()``).

`ProcessGroupKeeper` keeps a Python reference to each group destroyed while the session records, so a
Reducer never holds the last one; the session drops them when it ends, from Python, where torch joins
gloo's threads with the GIL released.
"""

from __future__ import annotations

import gc
from typing import Any

from neuron_prof.patches import Saved, patch, restore_patches


class ProcessGroupKeeper:
    """Holds the process groups that `torch.distributed.destroy_process_group` destroys until `release()`."""

    def __init__(self) -> None:
        self.kept: list[Any] = []
        self._saved: Saved = []

    def install(self) -> None:
        """Wrap destroy_process_group (torch.distributed's and distributed_c10d's); no-op without torch."""
        try:
            import torch.distributed as dist

            if not dist.is_available():
                return
            import torch.distributed.distributed_c10d as c10d
        except Exception:  # noqa: BLE001  (no torch, or no distributed build: nothing to keep)
            return
        orig = c10d.destroy_process_group
        kept = self.kept

        def destroy_process_group(group: Any = None) -> Any:
            kept.extend(_groups_destroyed(c10d, group))
            return orig(group)

        destroy_process_group.__doc__ = orig.__doc__
        destroy_process_group.__wrapped__ = orig  # type: ignore[attr-defined]
        for owner in (c10d, dist):
            if getattr(owner, "destroy_process_group", None) is orig:
                patch(owner, "destroy_process_group", destroy_process_group, self._saved)

    def release(self) -> None:
        """Undo the wrap, then drop the groups (the objects of the user's that are gone first)."""
        restore_patches(self._saved)
        if self.kept:
            gc.collect()  # the user's objects in reference cycles (a DDP model's Reducer) go first
            self.kept.clear()  # the last references: torch joins gloo's threads without the GIL


def _groups_destroyed(c10d: Any, group: Any) -> list[Any]:
    """The groups `destroy_process_group(group)` is about to destroy: all of them for None or WORLD."""
    try:
        if group is None or group == c10d.GroupMember.WORLD:
            return list(c10d._world.pg_map)
        return [group] if group is not None else []
    except Exception:  # noqa: BLE001  (another torch's internals: keep nothing, change nothing)
        return []
