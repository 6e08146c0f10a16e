"""All errors neuron-prof raises on purpose. One root, each carries the CLI exit code."""

from __future__ import annotations

import os
from typing import Any


class NeuronProfError(Exception):
    """Root of every error neuron-prof raises on purpose."""

    exit_code: int = 1

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its message and fields, whatever its constructor takes: one raised in a Dask worker reaches
        the client as it was (unpickling calls no `__init__`, which may read this machine, as `DiskFullError`'s)."""
        return _rebuilt, (type(self), self.args, dict(self.__dict__))


def _rebuilt(cls: type[NeuronProfError], args: tuple[Any, ...], fields: dict[str, Any]) -> NeuronProfError:
    e = cls.__new__(cls)
    Exception.__init__(e, *args)
    e.__dict__.update(fields)
    return e


class TraceLoadError(NeuronProfError):
    """A trace file could not be read: the message names the file and the problem."""

    exit_code = 2

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")

    @classmethod
    def from_os_error(cls, path: object, e: OSError) -> TraceLoadError:
        """The error for an OSError met opening or reading `path`, in the user's words."""
        if isinstance(e, IsADirectoryError):
            return cls(path, "is a directory, not a trace file")
        if isinstance(e, FileNotFoundError):
            return cls(path, "no such file")
        if isinstance(e, PermissionError):
            return cls(path, "permission denied")
        return cls(path, f"cannot read: {e.strerror or e}")


class TraceFormatError(TraceLoadError):
    """The file was read but is not a trace neuron-prof understands."""


class OutOfMemoryError(NeuronProfError):
    """The process ran out of memory (or of address space): `from_memory_error` says how big and the way out."""

    exit_code = 2

    @classmethod
    def from_memory_error(cls, inputs: list[str]) -> OutOfMemoryError:
        """The one-line error for a MemoryError met while working on the files `inputs` (those that exist)."""
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return cls(f"out of memory{_sizes(inputs)}: peak {_gb(peak)} in use{_limits()}. {_WAY_OUT}")

    @classmethod
    def before_load(cls, path: str, need: int) -> OutOfMemoryError:
        """The one-line error for a trace that loading in memory would take more than the process's memory
        limits leave (said before the load starts: an allocation failing inside a C parser can crash it)."""
        return cls(f"out of memory{_sizes([path])}: loading it in memory needs about {_gb(need)}{_limits()}. "
                   f"{_WAY_OUT}")


_WAY_OUT = ("Way out: NEURON_PROF_STREAM=1 reads a JSON or Perfetto trace in pieces into the column cache (disk "
            "about its size, ~/.cache/neuron-prof or $NEURON_PROF_CACHE_DIR) and every command then reads it memory-mapped; or "
            "capture less (neuron-prof run --max-events N or --steps A:B; profile(max_events=..., steps=...))")


def _limits() -> str:
    """", address space limited to X, data limited to Y" for the limits this process has ("" for none)."""
    import resource

    out = ""
    for what, rl in (("address space", resource.RLIMIT_AS), ("data", resource.RLIMIT_DATA)):
        soft, _ = resource.getrlimit(rl)
        if soft != resource.RLIM_INFINITY:
            out += f", {what} limited to {_gb(soft)}"
    return out


def _sizes(inputs: list[str]) -> str:
    """" (a is 1.2 GB; b is 3 MB)" for the files of `inputs` that exist ("" for none)."""
    sizes = []
    for a in inputs:
        try:
            if os.path.isfile(a):
                sizes.append(f"{a} is {_gb(os.path.getsize(a))}")
        except OSError:
            pass
    return f" ({'; '.join(sizes)})" if sizes else ""


def _gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.0f} MB"


class DiskFullError(NeuronProfError, OSError):
    """A trace streamed into the column cache found no room on the disk: the message names the trace, the
    folders tried and their free space, and the way out (`plain_json`: a .json, whose columns take about half its
    size). Also an OSError, as the failed write was."""

    exit_code = 2

    def __init__(self, path: object, folders: list[str], plain_json: bool = False) -> None:
        import shutil

        free = []
        for f in folders:
            try:
                free.append(f"{_gb(shutil.disk_usage(f).free)} free in {f}")
            except OSError:
                free.append(f"in {f}")
        try:
            size = f"the trace is {_gb(os.path.getsize(path))}; "  # type: ignore[arg-type]
        except (OSError, TypeError):
            size = ""
        # a plain JSON's columns are about half its text; a .json.gz's or a .pftrace's outgrow the file
        half = ("a JSON trace's columns take about half its size" if plain_json
                else "its columns may take more than its size")
        super().__init__(f"{path}: no space left on the disk for its column cache ({'; '.join(free)}; {size}"
                         f"{half}). Way out: free space there, or set NEURON_PROF_CACHE_DIR to a folder on a disk "
                         "with room")


class ExportError(NeuronProfError):
    """A trace could not be written."""

    exit_code = 2


class UsageError(NeuronProfError):
    """The user asked for something that cannot be done (bad option, bad combination)."""

    exit_code = 2


class EmulatorError(NeuronProfError):
    """The emulated neuron device was misused (e.g. enabled beside the real torch-neuronx)."""
