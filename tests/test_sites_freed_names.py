"""Exact sites when a user function was freed before the profile is read: torch.profiler's tracer keeps only a
view of the code object's name, which then reads back as other bytes. The file (checked) and the line (a
number) still place the call; only the function's name is lost ("?")."""

from __future__ import annotations

from types import SimpleNamespace

from neuron_prof.capture import _sites


class _Freed:
    """A recorded frame (torch's extra_fields.caller / .callsite) whose function name was freed."""

    def __init__(self, file_name: str, line_number: int) -> None:
        self.file_name, self.line_number = file_name, line_number

    @property
    def function_name(self) -> str:
        raise UnicodeDecodeError("utf-8", b"\x90", 0, 1, "invalid start byte")


def test_a_call_from_a_freed_user_function_keeps_its_file_and_line(tmp_path) -> None:
    user = tmp_path / "train.py"
    user.write_text("# the user's script\n")
    callee = SimpleNamespace(file_name=str(user), line_number=10, function_name="helper")
    ev = SimpleNamespace(name=f"{user}(10): helper", start_time_ns=1_000)
    ef = SimpleNamespace(caller=_Freed(str(user), 40), callsite=callee)
    out = _sites.CycleSites()
    root = _sites._Ctx(None, False, None, None, False)
    child = _sites._py_event(ev, ef, False, root, out)
    assert child.call == 1_000 and child.call_name == "helper()"  # a new call of the user's code, at its start
    assert out.visible_py[(1_000, ev.name)].endswith("train.py:40")
    assert child.chain is not None and child.chain[0].endswith("(40): ?")


def test_a_c_call_from_a_freed_user_function_is_a_call_of_its_own(tmp_path) -> None:
    user = tmp_path / "train.py"
    user.write_text("# the user's script\n")
    ev = SimpleNamespace(name="<built-in method tolist of Tensor object at 0x1>", start_time_ns=2_000)
    ef = SimpleNamespace(caller=_Freed(str(user), 40))
    out = _sites.CycleSites()
    child = _sites._py_event(ev, ef, True, _sites._Ctx(None, False, None, None, False), out)
    assert child.call == 2_000 and child.call_name == ".tolist()"


class _FreedEvent:
    """A recorded event (torch's _ProfilerEvent) whose name was freed."""

    start_tid, start_time_ns, end_time_ns = 1, 5_000, 9_000

    @property
    def name(self) -> str:
        raise UnicodeDecodeError("utf-8", b"\xa8", 0, 1, "invalid start byte")


def test_an_event_whose_name_is_freed_neither_adopts_another_threads_ops_nor_stops_the_walk() -> None:
    """The re-parenting of autograd's device-thread ops reads event names: a freed one is skipped, like in
    `_py_event`, instead of failing the whole walk (the probe 'call sites' failed with UnicodeDecodeError)."""
    adopted = _sites._Adopted()
    ctx = _sites._Ctx(None, False, None, None, False)
    run_backward = SimpleNamespace(start_tid=1, name="<built-in method run_backward>", start_time_ns=0,
                                   end_time_ns=10_000)
    op = SimpleNamespace(start_tid=2, name="autograd::engine::evaluate_function: MmBackward0", start_time_ns=6_000)
    assert adopted.defer(run_backward, op, ctx)
    adopted.span(_FreedEvent(), ctx)  # does not raise
    assert not adopted.defer(_FreedEvent(), op, ctx)  # the caller walks the op where it hangs
    assert [c for c, _ in adopted.resolve()] == [op]
