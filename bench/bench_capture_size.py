"""`python -m bench capture-size`: how big a capture of a Hugging Face GPT-2 run is, with every Python call
recorded (``--full-python-trace``, what a capture wrote before issue 35) and as captured by default (Python
work that launched no op folded, `neuron_prof.capture._prune`), and under ``--max-events``.

The program: ``neuron-prof run --emulate-neuron`` of a script that imports transformers inside the capture
and trains a random-init GPT-2 (2 layers, no download) for 8 steps. One row per mode: events, JSON MB,
.pftrace MB, wall seconds of the whole run, and whether every finding kept its line (the findings' call
sites of each mode against the full trace's).

    python -m bench capture-size                 # full, default, --max-events 20000
    python -m bench.bench_capture_size --modes default
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

PROGRAM = textwrap.dedent("""\
    import torch
    import transformers  # inside the capture: ~2M Python calls, none of them an op

    cfg = transformers.GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=1000, n_positions=64,
                                  bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg).to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, 1000, (4, 32)).to("neuron")
    for step in range(8):
        out = model(input_ids=x, labels=x)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    print(float(out.loss))
    """)

MODES = {"full": ["--full-python-trace"], "default": [], "max-events": ["--max-events", "20000"]}


def _run(folder: Path, mode: str) -> dict[str, object]:
    import neuron_prof

    out = folder / mode / "trace.json"
    cli = str(Path(sys.executable).with_name("neuron-prof"))
    t0 = time.perf_counter()
    r = subprocess.run([cli, "run", "-q", "--emulate-neuron", "-o", str(out), *MODES[mode], str(folder / "gpt2.py")],
                       capture_output=True, text=True, cwd=folder, timeout=1800)
    secs = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{mode}: exit {r.returncode}\n{r.stderr[-3000:]}")
    pf = out.with_suffix(".pftrace")
    tr = neuron_prof.load(out)
    sites = sorted({(f.get("kind"), f.get("call_site")) for f in tr.findings if f.get("call_site")})
    return {"mode": mode, "events": tr.n_events, "json_mb": out.stat().st_size / 1e6,
            "pftrace_mb": pf.stat().st_size / 1e6 if pf.exists() else 0.0, "seconds": secs, "sites": sites,
            "findings": len(tr.findings)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated: " + ", ".join(MODES))
    a = ap.parse_args(argv)
    try:
        import transformers  # noqa: F401
    except ImportError:
        print("capture-size: transformers is not installed (pip install -e .[dev]): skipped")
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="neuron-prof-capsize-") as d:
        folder = Path(d)
        (folder / "gpt2.py").write_text(PROGRAM)
        print(f"{'mode':12} {'events':>10} {'JSON MB':>9} {'pftrace MB':>10} {'seconds':>8} {'findings':>8}  "
              "finding sites as in full")
        for mode in a.modes.split(","):
            row = _run(folder, mode)
            rows.append(row)
            base = rows[0]["sites"] if rows[0]["mode"] == "full" else None
            same = "-" if base is None else ("yes" if row["sites"] == base else
                                              f"no: {sorted(set(base) ^ set(row['sites']))[:4]}")  # type: ignore[arg-type]
            print(f"{mode:12} {row['events']:>10,} {row['json_mb']:>9.1f} {row['pftrace_mb']:>10.1f} "
                  f"{row['seconds']:>8.1f} {row['findings']:>8}  {same}", flush=True)


if __name__ == "__main__":
    main()
