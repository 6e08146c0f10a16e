"""Shape churn at its source, with a plan for every varying dimension (issue 23, item 5): a batch padded to
its longest sentence with pad_sequence, and a last smaller batch. Following the plan (pad the length to its
bucket and the last batch to the full batch) leaves `diff` no new compiles and the run no churn."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from neuron_prof.analysis import analyze, diff
from neuron_prof.loaders import load

SCRIPT = textwrap.dedent('''
    import json, os, random, sys
    import torch
    from neuron_prof import emulator
    emulator.enable(emulator.EmulatorConfig.fast(eager_compile_base_ms=5.0))
    import neuron_prof
    from torch.nn.utils.rnn import pad_sequence
    plan = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None

    def bucket(n, dim):
        return next(b for b in plan[str(dim)] if b >= n) if plan and str(dim) in plan else n

    random.seed(0)
    torch.manual_seed(0)
    sents = [torch.randint(1, 50, (random.randint(4, 40),)) for _ in range(100)]
    emb = torch.nn.Embedding(50, 16).to("neuron")
    head = torch.nn.Linear(16, 2).to("neuron")
    opt = torch.optim.SGD([*emb.parameters(), *head.parameters()], lr=0.1)
    with neuron_prof.profile(sys.argv[1], quiet=True, pftrace=False):
        for start in range(0, len(sents), 16):
            x = pad_sequence(sents[start:start + 16], batch_first=True)  # MADE
            b, n = bucket(x.shape[0], 0), bucket(x.shape[1], 1)
            x = torch.nn.functional.pad(x, (0, n - x.shape[1], 0, b - x.shape[0]))
            x = x.to("neuron")
            loss = head(torch.tanh(emb(x)).mean(dim=1)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
''')


def _run(tmp_path, name: str, plan: dict[str, list[int]] | None = None):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    out = tmp_path / f"{name}.json"
    args = [sys.executable, str(script), str(out)] + ([json.dumps(plan)] if plan else [])
    p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return load(out)


def test_the_plan_covers_every_dimension_and_leaves_no_new_compiles(tmp_path) -> None:
    base = _run(tmp_path, "base")
    made = next(i for i, s in enumerate(SCRIPT.splitlines(), 1) if "# MADE" in s)
    [churn] = [f for f in analyze(base) if f.kind == "shape_churn"]
    assert churn.call_site == f"train.py:{made}"  # where the varying tensor is made, not the model's line
    sp = churn.evidence["shape_plan"]
    dims = {d["index"]: d for d in sp["dims"]}
    assert set(dims) == {0, 1}  # the batch (16, 16, 16, 4) and the length both vary
    assert dims[0]["last_batch"] and dims[0]["buckets"] == [16]
    assert "dim 0 to [16]" in churn.advice and "drop_last=True" in churn.advice
    plan = {str(i): d["buckets"] for i, d in dims.items()}
    padded = _run(tmp_path, "padded", plan)
    assert not [f for f in analyze(padded) if f.kind == "shape_churn"]
    d = diff(base, padded)
    assert d["compiles"]["appeared"] == [], d["compiles"]["appeared"]
