"""Rows of issue 33's table that are statements, not behaviour: each checked against its document.

* "~5 GB HBM per NeuronCore": how-to-profile-pytorch.rst and troubleshooting.rst: ``ProfileMode.DEVICE`` "reserves
  approximately 5 GB of HBM on Trn2" (not per NeuronCore): what ``neuron-prof run --help`` says.
* "tested on Python 3.11 only": TorchNeuron supports Python 3.12, 3.13 and 3.14 (torch-neuronx-facts, header):
  the Makefile's ``test-pythons`` runs the suite on 3.12 and 3.13 (3.14: when pyenv has it).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from neuron_prof.cli import main

REPO = Path(__file__).resolve().parents[1]


def test_the_device_profile_reserve_is_stated_as_documented(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "about 5 GB of HBM on Trn2" in text
    assert not re.search(r"5 GB[^.]*per NeuronCore", text)


def test_the_pythons_torchneuron_supports_are_tested() -> None:
    m = re.search(r"^PYTHONS \?= (.+)$", (REPO / "Makefile").read_text(), re.M)
    assert m is not None and {"3.12", "3.13"} <= set(m.group(1).split())
