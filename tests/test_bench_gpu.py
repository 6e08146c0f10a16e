"""`python -m bench gpu`, the prepared script for a lent GPU (issue 32 item 5): its workload's planted problems are
tagged where they are, and without a GPU it says so and exits 2 instead of measuring something else."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import gpu_check
from tests.userland import _harness as h


def _line(src: list[str], statement: str) -> int:
    return next(i for i, s in enumerate(src, 1) if s.strip().startswith(statement))


def test_the_planted_problems_are_tagged_at_their_statements() -> None:
    src = Path(gpu_check.WORKLOAD).read_text().splitlines()
    prog = h.load_program(gpu_check.WORKLOAD)
    copy, call = _line(src, "mask = torch.from_numpy("), _line(src, "logits = m(idx)")
    nonzero, item = _line(src, "n_rare = torch.nonzero("), _line(src, "return loss.item()")
    assert prog.expected("cuda") == [("sync_point", copy), ("recompile", call), ("sync_point", nonzero),
                                     ("sync_point", item)]
    assert not prog.clean and prog.expected("cpu") == []


def test_without_a_gpu_it_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the script would measure it")
    assert gpu_check.main(["--device", "cuda"]) == 2
    assert "no GPU here" in capsys.readouterr().out
