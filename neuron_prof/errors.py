"""All errors neuron-prof raises on purpose. One root, each carries the CLI exit code."""

from __future__ import annotations


class NeuronProfError(Exception):
    """Root of every error neuron-prof raises on purpose."""

    exit_code: int = 1


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


class ExportError(NeuronProfError):
    """A trace could not be written."""

    exit_code = 2


class UsageError(NeuronProfError):
    """The user asked for something that cannot be done (bad option, bad combination)."""

    exit_code = 2


class EmulatorError(NeuronProfError):
    """The emulated neuron device was misused (e.g. enabled beside the real torch-neuronx)."""
