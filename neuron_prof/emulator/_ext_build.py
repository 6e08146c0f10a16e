"""Building the emulated device's C++ extension (`_privateuse1_csrc`) once per machine, into the user cache.

torch.utils.cpp_extension compiles it on first use (about 30 s on an idle core, 1-2 minutes on a loaded
2-core machine) and loads the cached build afterwards (under a second). The folder is named after torch's
version and a hash of the source and flags, so checkouts with different sources never rebuild each other's.
Processes that build at once (pytest-xdist workers, the ranks of a job) queue on an flock: one compiles,
the others then load its build. cpp_extension's own lock is a file that a killed build leaves behind, which
would make every later process wait forever; under the flock no other build can be running, so such a file
is stale and removed. A build that ended well is marked (`built`: the library's size and mtime), and later
processes import that library directly, without cpp_extension (which imports setuptools and runs ninja to
find nothing to do: 0.3-0.4 s of each enable()).

    python -m neuron_prof.emulator._ext_build      # build now (make's install step does this)
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

NAME = "neuron_prof_emulator_device"
_FLAGS = ["-O1"]
BUILD_SECONDS: float | None = None
"""Seconds the last load() spent compiling or loading (a cached build only loads)."""


def compiler() -> str | None:
    """The C++ compiler cpp_extension would use ($CXX, else c++), or None when there is none."""
    return shutil.which(os.environ.get("CXX") or "c++")


def build_dir() -> Path:
    """$NEURON_PROF_EMULATOR_BUILD_DIR, else the user cache ($XDG_CACHE_HOME or ~/.cache)/neuron-prof/
    emulator-device, then <torch version>-<hash of the source, the flags, the compiler and torch's folder>.

    Two environments with the same torch version (two venvs, a fresh clone's beside a checkout's) build
    with different include and library paths; in one folder each would rebuild (30 s to 2 minutes, every
    other process waiting on the lock) whenever the other built last."""
    import torch

    base = os.environ.get("NEURON_PROF_EMULATOR_BUILD_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "neuron-prof", "emulator-device")
    what = [*_sources(), " ".join(_FLAGS), compiler() or "", os.path.dirname(os.path.realpath(torch.__file__))]
    key = hashlib.sha1("\0".join(what).encode()).hexdigest()[:12]
    d = Path(base) / f"{torch.__version__.replace('+', '_')}-{key}"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _sources() -> list[str]:
    """The extension's source: the device (`_privateuse1_csrc`), then its launch path (`csrc.launch`)."""
    from neuron_prof.emulator._privateuse1_csrc import CPP
    from neuron_prof.emulator.csrc.launch import LAUNCH_CPP

    return [CPP, LAUNCH_CPP]


def is_built() -> bool:
    return (build_dir() / f"{NAME}.so").exists()


def _stamp(lib: Path) -> str:
    st = lib.stat()
    return f"{st.st_size} {st.st_mtime_ns}"


def _import_built(d: Path) -> Any:
    """The library a build that ended well left in `d` (its `built` mark matches it), else None."""
    lib = d / f"{NAME}.so"
    try:
        if (d / "built").read_text() != _stamp(lib):
            return None
    except OSError:
        return None
    spec = importlib.util.spec_from_file_location(NAME, lib)
    if spec is None or spec.loader is None:
        return None
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except ImportError:
        return None  # e.g. torch reinstalled in place: cpp_extension rebuilds it
    return mod


def load(announce: bool = True) -> Any:
    """Build (once) or load the extension; returns its module. Raises when it cannot be built."""
    global BUILD_SECONDS
    d = build_dir()
    t0 = time.perf_counter()
    with open(d / "flock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        mod = _import_built(d)
        if mod is None:
            from torch.utils.cpp_extension import load_inline

            (d / "lock").unlink(missing_ok=True)  # cpp_extension's, left by a killed build (docstring)
            (d / "built").unlink(missing_ok=True)
            if announce and not (d / f"{NAME}.so").exists():
                print(f"neuron (emulated): building the device extension once into {d} (30 s to 2 minutes)",
                      file=sys.stderr, flush=True)
            mod = load_inline(NAME, cpp_sources=_sources(), build_directory=str(d), extra_cflags=_FLAGS,
                              verbose=False)
            (d / "built").write_text(_stamp(d / f"{NAME}.so"))
    BUILD_SECONDS = time.perf_counter() - t0
    return mod


if __name__ == "__main__":
    load()
    print(f"neuron (emulated): device extension ready in {build_dir()} ({BUILD_SECONDS:.1f} s)")
