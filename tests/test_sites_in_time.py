"""Ops with no stack of their own (issue 34): DDP's collectives on the emulated device and under gloo run on
gloo's own thread, launched by the constructor (`DDP(model)`) or by the reducer's hooks inside the leaves'
``AccumulateGrad`` on autograd's thread. They are charged to the user's call they serve: the `DDP(...)` line,
the `loss.backward()` line (rules 5 and 6 of `neuron_prof.analysis.sites.callsites`).

The trace is built as a neuron-prof capture of such a job writes it (Kineto's names and args; the capture copies
the `backward()` caller's stack onto the backward spans of autograd's thread).
"""

from __future__ import annotations

from neuron_prof.analysis import Context, analyze, sites_of
from neuron_prof.model import KinetoCat, Trace, TraceBuilder
from tests._workload import MS, T0

DDP_LINE, FORWARD_LINE, BACKWARD_LINE = 8, 10, 12
EVALUATE = "autograd::engine::evaluate_function: "


def _ddp_job(exact: bool = True) -> Trace:
    b = TraceBuilder()
    b.process(1, "host")
    main = b.thread_track(1, 1, "python")
    autograd = b.thread_track(1, 2, "autograd")
    gloo = b.thread_track(1, 3, "pt_gloo_runloop")
    if exact:
        b.metadata["stack_lines"] = "exact"

    def stack(line: int) -> str:
        return f"train.py({line}): <module>"

    # DDP(model): the constructor's broadcast runs on gloo's thread while the main thread is inside the call
    b.add_slice(main, T0, 5 * MS, "aten::empty", KinetoCat.CPU_OP, {"Call stack": stack(DDP_LINE)})
    b.add_slice(gloo, T0 + MS, 2 * MS, "gloo:broadcast", KinetoCat.USER_ANNOTATION, {"Input Dims": [[12]]})
    for step in range(3):
        t = T0 + (10 + 20 * step) * MS
        b.add_slice(main, t, MS, "aten::addmm", KinetoCat.CPU_OP,
                    {"Call stack": stack(FORWARD_LINE), "Sequence number": 7 + step, "Fwd thread id": 0})
        b.add_slice(main, t + 2 * MS, MS, "aten::ones_like", KinetoCat.CPU_OP, {"Call stack": stack(BACKWARD_LINE)})
        b.add_slice(autograd, t + 4 * MS, 2 * MS, EVALUATE + "AddmmBackward0", KinetoCat.CPU_OP,
                    {"Call stack": stack(BACKWARD_LINE), "Sequence number": 7 + step, "Fwd thread id": 1})
        b.add_slice(autograd, t + 4 * MS + 100, MS, "aten::mm", KinetoCat.CPU_OP, {})
        b.add_slice(autograd, t + 7 * MS, 4 * MS, EVALUATE + "torch::autograd::AccumulateGrad", KinetoCat.CPU_OP,
                    {"Call stack": stack(BACKWARD_LINE)})
        b.add_slice(autograd, t + 7 * MS + 100, MS, "aten::add_", KinetoCat.CPU_OP, {})
        # the reducer's hook in AccumulateGrad hands the bucket to gloo's thread
        b.add_slice(gloo, t + 9 * MS, 3 * MS, "gloo:all_reduce", KinetoCat.USER_ANNOTATION, {"Input Dims": [[5286]]})
    return b.build()


def _site_of(trace: Trace, name: str) -> set[str]:
    ctx = Context(trace)
    rows = [r for r in range(len(trace.slices)) if trace.slice_name(r) == name]
    return {s.call_site for s in sites_of(ctx).of_rows(rows)}


def test_collectives_on_gloos_thread_name_the_users_call_they_serve() -> None:
    found = analyze(_ddp_job())
    coll = {f.evidence["op"]: f for f in found if f.kind == "collective"}
    assert coll["allreduce"].call_site == f"train.py:{BACKWARD_LINE}", coll["allreduce"].to_dict()
    assert coll["broadcast"].call_site == f"train.py:{DDP_LINE}", coll["broadcast"].to_dict()


def test_accumulate_grad_is_charged_to_the_backward_call_and_derived_ops_to_their_forward() -> None:
    trace = _ddp_job()
    assert _site_of(trace, "aten::add_") == {f"train.py:{BACKWARD_LINE}"}  # no forward op makes AccumulateGrad
    assert _site_of(trace, "aten::mm") == {f"train.py:{FORWARD_LINE}"}  # AddmmBackward0: its forward's line


def test_without_exact_stacks_no_line_is_borrowed_from_another_thread() -> None:
    """A trace whose stacks are not neuron-prof's exact ones gets no line from what another thread ran."""
    coll = [f for f in analyze(_ddp_job(exact=False)) if f.kind == "collective"]
    assert coll and all(not f.call_site for f in coll), [f.call_site for f in coll]
