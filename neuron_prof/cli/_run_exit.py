"""How `neuron-prof run` ends a script: its own traceback, as python shows it.

(The process groups a script destroys are torn down by the profiling session itself: `capture._groups`.)
"""

from __future__ import annotations

import os
import sys
import types

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
"""neuron_prof/ (its frames are the profiler's: hidden from the script's traceback)."""
_EMULATOR = os.path.join(_PKG, "emulator", "")
"""...except the emulated device's, which stand where torch_neuronx's frames stand on Trainium."""


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
