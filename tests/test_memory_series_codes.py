"""Memory series from Kineto's [memory] instants: the numpy numbering of (Device Type, Device Id) used when every
value is an int (what Kineto writes) gives what the general one gives: the same code per event, numbered by
first appearance, and the same series names."""

from __future__ import annotations

import numpy as np

from neuron_prof.analysis.device.memory import _codes, _int_codes


def test_int_codes_match_the_general_numbering() -> None:
    rng = np.random.default_rng(7)
    dts = rng.choice([1, 0, 20, 19, 77], size=5000).tolist()  # 77: a type Kineto may add, named by its number
    devs = rng.choice([3, 0, 1, -1], size=5000).tolist()
    fast = _int_codes(dts, devs)
    assert fast is not None
    code, names = _codes(dts, devs)
    assert fast[1] == names and len(names) == len(set(zip(dts, devs)))
    assert np.array_equal(fast[0], code)


def test_other_types_take_the_general_numbering() -> None:
    assert _int_codes([1, 1.0], [0, 0]) is None  # 1 and 1.0: two series there
    assert _int_codes([True, 1], [0, 0]) is None
    assert _int_codes([1, 1], [0, "0"]) is None
    assert _int_codes([1, 2**70], [0, 0]) is None  # past int64
