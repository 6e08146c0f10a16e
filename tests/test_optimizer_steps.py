"""`run`'s optimizer steps (cli/_optimizer_steps.py): a step is marked once `optimizer.step()` has returned,
outside torch's `Optimizer.step` record_function (a profiler cycle ended inside it crashed the job), for
optimizers made before and during the session, once per outermost step, and never after the session."""

from __future__ import annotations

import sys

import torch

from neuron_prof.cli._optimizer_steps import optimizer_steps


def _inside_torch_step_wrapper() -> bool:
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "wrapper" and f.f_code.co_filename.replace("\\", "/").endswith("optim/optimizer.py"):
            return True
        f = f.f_back
    return False


class Lookahead(torch.optim.SGD):
    """An optimizer whose step steps another one (as wrappers do)."""

    def __init__(self, params: list[torch.nn.Parameter], inner: torch.optim.Optimizer) -> None:
        super().__init__(params, lr=0.1)
        self.inner = inner

    def step(self, closure=None):  # type: ignore[no-untyped-def,override]
        self.inner.step()
        return super().step(closure)


def test_steps_are_marked_after_they_return_once_each_and_only_in_the_session() -> None:
    m = torch.nn.Linear(3, 2)
    before = torch.optim.SGD(m.parameters(), lr=0.1)  # its class wrapped by torch before the session
    marks: list[bool] = []
    with optimizer_steps(lambda: marks.append(_inside_torch_step_wrapper())):
        during = torch.optim.Adam(m.parameters())  # a class wrapped by torch in the session
        nested = Lookahead(list(m.parameters()), torch.optim.RMSprop(m.parameters()))
        m(torch.ones(3)).sum().backward()
        before.step()
        during.step()
        nested.step()  # RMSprop's step inside Lookahead's: one step
    before.step()
    during.step()
    assert marks == [False, False, False]  # three steps, each outside torch's Optimizer.step span
