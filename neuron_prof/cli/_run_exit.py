"""How `neuron-prof run` ends a script: its own traceback, and its process groups torn down in a safe order.

A gloo process group's C++ destructor joins gloo's worker threads, and a worker that is still dropping a
finished collective needs the GIL (the collective holds tensors that have Python objects, and the
thread-local state of the backward pass that launched it). torch releases the GIL when the last Python
reference to a process group goes, but not when the last reference is C++'s: a DDP model freed after
``destroy_process_group()`` (its Reducer holds the group) destroys the group under the GIL, and the join
never returns. Under ``run`` the profiler also records each collective on gloo's thread after it
completes, which widens that window: a 4-rank job hung at exit in most attempts (issue 22).

`ProcessGroupKeeper` keeps a Python reference to each group the script destroys, so a Reducer never holds
the last one; `run` drops the script's objects first, then the groups, from Python, where torch joins
gloo's threads with the GIL released.
"""

from __future__ import annotations

import gc
import os
import sys
import types
from typing import Any

from neuron_prof.patches import Saved, patch, restore_patches

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
"""neuron_prof/ (its frames are the profiler's: hidden from the script's traceback)."""
_EMULATOR = os.path.join(_PKG, "emulator", "")
"""...except the emulated device's, which stand where torch_neuronx's frames stand on Trainium."""


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
        """Undo the wrap, then drop the groups: call it once the script's own objects are gone."""
        restore_patches(self._saved)
        gc.collect()  # the script's objects in reference cycles (its functions and globals) go first
        self.kept.clear()  # the last references: torch joins gloo's threads without the GIL


def _groups_destroyed(c10d: Any, group: Any) -> list[Any]:
    """The groups `destroy_process_group(group)` is about to destroy: all of them for None or WORLD."""
    try:
        if group is None or group == c10d.GroupMember.WORLD:
            return list(c10d._world.pg_map)
        return [group] if group is not None else []
    except Exception:  # noqa: BLE001  (another torch's internals: keep nothing, change nothing)
        return []


def _launcher_frame(filename: str) -> bool:
    """A frame of what starts the script (neuron-prof, click, runpy), never the script's own."""
    name = filename.replace("\\", "/")
    return (_profiler_frame(filename) or "/click/" in name or name.endswith(("/runpy.py", "<frozen runpy>"))
            or os.path.basename(name) == "neuron-prof")


def _profiler_frame(filename: str) -> bool:
    """A frame of neuron-prof's own code (its operator forwarders, collective wrappers)."""
    path = os.path.abspath(filename) if filename and not filename.startswith("<") else filename
    return path.startswith(_PKG) and not path.startswith(_EMULATOR)


def _user_tb(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback without the launcher's leading frames and without neuron-prof's frames inside it."""
    while tb is not None and _launcher_frame(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    entries = []
    while tb is not None:
        if not _profiler_frame(tb.tb_frame.f_code.co_filename):
            entries.append(tb)
        tb = tb.tb_next
    out = None
    for e in reversed(entries):
        out = types.TracebackType(out, e.tb_frame, e.tb_lasti, e.tb_lineno)
    return out


def print_user_traceback(exc: BaseException) -> None:
    """Print `exc` as Python would for the script run alone: through sys.excepthook (the script's own
    hook, if it set one), with neuron-prof's, click's and runpy's frames left out of it and of the
    exceptions chained to it."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        e.__traceback__ = _user_tb(e.__traceback__)
        e = e.__cause__ or e.__context__
    try:
        sys.excepthook(type(exc), exc, exc.__traceback__)
    except Exception:  # noqa: BLE001  (a broken hook: Python falls back to its own printer)
        sys.__excepthook__(type(exc), exc, exc.__traceback__)
    finally:
        sys.stderr.flush()
