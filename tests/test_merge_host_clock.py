"""Ranks captured on one machine share its Unix clock (issue 34): DDP's gradient all-reduce on gloo is recorded
where each host issues it, so a late rank's records end late too; aligning their exits shifted rank 1's 40 ms of
lateness away on the CPU and its straggler went unseen."""

from __future__ import annotations

from neuron_prof.analysis.collectives.stragglers import straggler_findings
from neuron_prof.merge import merge_traces
from neuron_prof.model import KinetoCat, Meta, Trace, TraceBuilder, TrackKind

MS = 1_000_000
T0 = 1_700_000_000_000_000_000
STEPS = 8


def _rank(rank: int, late_ms: int, host: str) -> Trace:
    """Each step: 12 ms of work (+ `late_ms` of sleep), then an all-reduce issued asynchronously (0.3 ms)."""
    b = TraceBuilder()
    pid = 1000 + rank
    p = b.process(pid, name="python", rank=rank)
    main_t = b.thread_track(pid, 1, "main")
    coll = b.track(p, "collectives", TrackKind.COLLECTIVE)
    rows = []
    for k in range(STEPS):
        s = T0 + k * 80 * MS
        b.add_slice(main_t, s, 12 * MS, "aten::mm", KinetoCat.CPU_OP)
        if late_ms:
            b.add_slice(main_t, s + 12 * MS, late_ms * MS, "<built-in function sleep>", KinetoCat.PYTHON,
                        {"call_site": "train.py:20"})
        b.add_slice(coll, s + (12 + late_ms) * MS + 100_000, 300_000, "all_reduce",
                    args={"group": "0", "bytes_in": 4096, "bytes_out": 4096})
        rows.append([k, s, s + 80 * MS])
    b.metadata.update({Meta.RANK: rank, Meta.WORLD_SIZE: 2, Meta.STEPS: rows, Meta.CLOCK: "unix",
                       Meta.HOST_NAME: host, Meta.WALL: [T0, T0 + STEPS * 80 * MS]})
    return b.build()


def test_ranks_of_one_machine_keep_its_clock_and_the_late_rank_is_seen() -> None:
    merged, align = merge_traces([_rank(0, 0, "node-a"), _rank(1, 40, "node-a")])
    assert (align.offsets[1].method, align.offsets[1].offset_ns) == ("host_clock", 0)
    (f,) = straggler_findings(merged)
    assert f.rank == 1 and f.severity != "info" and f.call_site == "train.py:20", f.title


def test_ranks_of_two_machines_are_aligned_on_their_collectives() -> None:
    _, align = merge_traces([_rank(0, 0, "node-a"), _rank(1, 40, "node-b")])
    assert align.offsets[1].method == "collectives" and abs(align.offsets[1].offset_ns + 40 * MS) < MS


def _booted(t: Trace, host: str, boot: str) -> Trace:
    t.metadata[Meta.HOST_NAME], t.metadata[Meta.BOOT_ID] = host, boot
    return t


def test_the_kernel_boot_id_decides_one_clock_not_the_host_name() -> None:
    """Containers are often all `localhost`: two machines of one name are aligned on their collectives, two
    containers of one kernel (one boot id) under different names keep its one clock."""
    _, align = merge_traces([_booted(_rank(0, 0, "x"), "localhost", "0a1b2c3d-1111-2222-3333-444455556666"),
                             _booted(_rank(1, 40, "x"), "localhost", "9f8e7d6c-1111-2222-3333-444455556666")])
    assert align.offsets[1].method == "collectives" and abs(align.offsets[1].offset_ns + 40 * MS) < MS
    _, align = merge_traces([_booted(_rank(0, 0, "x"), "pod-a", "0a1b2c3d-1111-2222-3333-444455556666"),
                             _booted(_rank(1, 40, "x"), "pod-b", "0a1b2c3d-1111-2222-3333-444455556666")])
    assert (align.offsets[1].method, align.offsets[1].offset_ns) == ("host_clock", 0)
    assert "kernel boot 0a1b2c3d-1111" in align.offsets[1].note


def test_a_capture_records_its_kernels_boot_id() -> None:
    from pathlib import Path

    from neuron_prof.capture._env import host_metadata

    boot = Path("/proc/sys/kernel/random/boot_id")
    assert host_metadata().get("boot_id") == (boot.read_text().strip() if boot.exists() else None)
