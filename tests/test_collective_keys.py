"""Each rank's collectives, read from their args as columns (`collectives.match._candidates`): the key is the
process group and the op ("group/op"), the bytes come from the sizes, per source (record_param_comms on the host,
a probe's collective track), from memory and from a column folder alike."""

from __future__ import annotations

import math
from pathlib import Path

from neuron_prof.analysis.collectives.match import extract_collectives, match
from neuron_prof.model import Trace, TraceBuilder, TrackKind
from tests._column_folder import mapped_copy


def _two_groups() -> Trace:
    """Two ranks, each calling all_reduce on process groups "0" and "1" in turn (rank 1 in the other order within
    each pair), one call without a size."""
    b = TraceBuilder()
    for rank in (0, 1):
        p = b.process(100 + rank, rank=rank)
        host = b.thread_track(100 + rank, 1, "main")
        probe = b.track(p, "collectives", TrackKind.COLLECTIVE)
        for i in range(4):
            groups = ("0", "1") if rank == 0 else ("1", "0")
            for j, g in enumerate(groups):
                t = 1_000_000 * i + 1_000 * j
                args = {"Collective name": "allreduce", "Process Group Name": g, "dtype": "Float",
                        "In msg nelems": 256 * (int(g) + 1)}
                if i == 3 and g == "1":
                    del args["In msg nelems"]
                b.add_slice(host, t, 500, "record_param_comms", "cpu_op", args)
                b.add_slice(probe, t + 10, 400, "all_gather", "collective", {"group": f"pg{g}", "bytes_in": 64})
    return b.build()


def _keys(trace: Trace) -> dict[int, tuple[str, list[str], list[float]]]:
    return {r: (c.source, c.key, c.bytes.tolist()) for r, c in extract_collectives(trace).items()}


def test_collectives_are_keyed_by_group_and_sized(tmp_path: Path) -> None:
    trace = _two_groups()
    got = _keys(trace)
    assert got[0][0] == "probe" and got[0][1] == ["pg0/allgather", "pg1/allgather"] * 4
    assert got[1][1] == ["pg1/allgather", "pg0/allgather"] * 4
    assert got[0][2] == [64.0] * 8
    assert _keys(mapped_copy(trace, tmp_path / "cols")) == got


def test_record_param_comms_keys_and_bytes_match_across_ranks(tmp_path: Path) -> None:
    trace = _two_groups()
    keep = trace.slices.name == trace.strings.get("record_param_comms")
    host_only = trace.replace(slices=trace.slices.take(keep.nonzero()[0]), flows=trace.flows.take([]))
    per = extract_collectives(host_only)
    assert per[0].source == "record_param_comms"
    assert per[0].key == ["0/allreduce", "1/allreduce"] * 4
    assert per[1].key == ["1/allreduce", "0/allreduce"] * 4
    sizes = per[0].bytes.tolist()
    assert sizes[:6] == [1024.0, 2048.0] * 3 and sizes[6] == 1024.0 and math.isnan(sizes[7])
    ranks, m = match(per)
    assert ranks == [0, 1] and len(m) == 8
    for k0, k1 in m.tolist():  # each call meets the other rank's call on the same group, whatever the order
        assert per[0].key[k0] == per[1].key[k1]
