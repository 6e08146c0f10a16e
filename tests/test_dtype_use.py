"""float64 in use (issue 23, item 4): a float64 device tensor used inside the profile is one finding at its
first use there, saying it reached the device before the profile; one that arrives inside is the arrival's
finding, which names where it is first used (`evidence.first_use`)."""

from __future__ import annotations

import json
import textwrap

from tests.userland import _fork as forked

SCRIPT = textwrap.dedent('''
    import json, sys
    import torch
    from neuron_prof import emulator
    emulator.enable(emulator.EmulatorConfig.fast())
    import neuron_prof
    from neuron_prof.analysis import analyze
    inside = sys.argv[1] == "inside"
    if not inside:
        acc = torch.zeros(3, dtype=torch.float64, device="neuron")  # BEFORE
    with neuron_prof.profile(None, quiet=True, operator_lines=True) as p:  # `acc += y` at its line
        if inside:
            acc = torch.zeros(3, dtype=torch.float64, device="neuron")  # INSIDE
        for _ in range(3):
            y = torch.ones(3, device="neuron") * 2
            acc += y  # USE
            total = acc.sum()  # LATER
    found = [f.to_dict() for f in analyze(p.trace) if f.kind == "dtype_demotion"]
    print("RESULT", json.dumps(found))
''')


def _run(tmp_path, where: str) -> tuple[list[dict], dict[str, int]]:
    script = tmp_path / "work.py"
    script.write_text(SCRIPT)
    lines = {tag: i for i, s in enumerate(SCRIPT.splitlines(), 1) for tag in ("BEFORE", "INSIDE", "USE", "LATER")
             if f"# {tag}" in s}
    # in a process of its own, forked from one that imported torch already (the suite's time)
    out = forked.run([str(script), where], cwd=tmp_path, timeout=240)
    got = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert got is not None, out.stdout + out.stderr
    return json.loads(got[len("RESULT "):]), lines


def test_float64_from_before_the_profile_is_one_finding_at_its_first_use(tmp_path) -> None:
    found, lines = _run(tmp_path, "before")
    (f,) = found
    assert f["call_site"] == f"work.py:{lines['USE']}" and f["severity"] == "warning", f
    assert f["evidence"]["reached_device"] == "before the profile" and f["count"] == 1
    assert "before the profile began" in f["title"]


def test_float64_arriving_inside_is_its_arrival_naming_its_first_use(tmp_path) -> None:
    found, lines = _run(tmp_path, "inside")
    (f,) = found
    assert f["call_site"] == f"work.py:{lines['INSIDE']}" and f["severity"] == "warning", f
    assert f["evidence"]["first_use"] == [{"call_site": f"work.py:{lines['USE']}"}]
