"""neuron-prof's own errors cross processes as they are (a Dask worker's error is pickled to the client):
message, type and fields, whatever their constructors take."""

from __future__ import annotations

import pickle

import pytest

from neuron_prof.errors import (
    DiskFullError,
    ExportError,
    NeuronProfError,
    OutOfMemoryError,
    TraceFormatError,
    TraceLoadError,
    UsageError,
)


@pytest.mark.parametrize("err", [
    TraceLoadError("/data/trace.json", "no such file"),
    TraceFormatError("/data/trace.pftrace", "not a Perfetto trace"),
    DiskFullError("/data/trace.json", ["/nonexistent/cache"]),
    OutOfMemoryError.before_load("/data/trace.json", 5 << 30),
    ExportError("cannot write out.json"),
    UsageError("bad option"),
], ids=lambda e: type(e).__name__)
def test_an_error_survives_a_pickle(err: NeuronProfError) -> None:
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err)
    assert str(back) == str(err) and back.args == err.args
    assert vars(back) == vars(err) and back.exit_code == err.exit_code
    assert isinstance(back, OSError) == isinstance(err, OSError)
