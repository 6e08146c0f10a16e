"""The prepared workload of `python -m bench gpu` (issue 32 item 5): a tiny GPT trained eagerly, then under
`torch.compile` on three sequence lengths, with problems planted at known lines (tagged as tests/userland's
programs are: an EXPECT comment naming the devices and the kind). Written as users write it; run it alone with

    DEVICE=cuda MODE=none python bench/gpu_workload.py

MODE: ``none``, ``torch`` (torch.profiler with the options neuron_prof gives it; then `export_chrome_trace`) or
``neuron_prof`` (``neuron_prof.profile(TRACE_OUT)``). Prints one JSON line: each step's wall time (synchronized
at the step's end, outside the step's time), which phase it was in, and the clock when the last step ended (the
parent times the end of the capture from it to the process's exit).
"""
import json
import os
import time

import numpy as np
import torch
import torch.nn as nn

dev = os.environ.get("DEVICE", "cuda")
mode = os.environ.get("MODE", "none")
if dev == "neuron":  # the dry run on a machine without a GPU: the emulated device
    import neuron_prof.emulator as emu

    emu.enable(emu.EmulatorConfig.from_env())
backend = {"cuda": "inductor", "neuron": "neuron"}.get(dev, "aot_eager")
sync = getattr(torch, dev).synchronize if dev != "cpu" else (lambda: None)


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int = 256, d: int = 128, layers: int = 2) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.Sequential(*[Block(d) for _ in range(layers)])
        self.head = nn.Linear(d, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.emb(idx)))


torch.manual_seed(0)
model = TinyGPT().to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
np_mask = np.ones((8, 64), dtype=np.float32)
times: list[float] = []
phases: list[str] = []


def train_step(m: nn.Module, seq: int) -> float:
    idx = torch.randint(0, 256, (8, seq), device=dev)
    targets = torch.roll(idx, -1, dims=1)
    mask = torch.from_numpy(np_mask[:, :seq]).to(dev)  # EXPECT[cuda]: sync_point
    logits = m(idx)  # EXPECT[neuron,cuda]: recompile  # ALSO[neuron]: first_call_compile  # ALSO[neuron]: shape_churn
    loss = (nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")
            * mask.flatten()).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    n_rare = torch.nonzero(targets > 250)  # EXPECT[neuron,cuda]: sync_point
    return loss.item() + 0 * len(n_rare)  # EXPECT[neuron,cuda]: sync_point


def run(step_mark) -> None:  # type: ignore[no-untyped-def]
    for _ in range(12):
        t0 = time.perf_counter()
        train_step(model, 64)
        sync()
        times.append(time.perf_counter() - t0)
        phases.append("eager")
        step_mark()
    cmodel = torch.compile(model, backend=backend, dynamic=False)
    for seq in [32, 48, 64, 32, 48, 64, 32, 48, 64]:
        t0 = time.perf_counter()
        train_step(cmodel, seq)
        sync()
        times.append(time.perf_counter() - t0)
        phases.append(f"compiled {seq}")
        step_mark()


out = os.environ.get("TRACE_OUT", "")
if mode == "torch":
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
    with profile(activities=acts, record_shapes=True, with_stack=True, with_modules=True,
                 profile_memory=True) as p:
        run(p.step)
        t_last = time.time()
    if out:
        p.export_chrome_trace(out)
elif mode == "neuron_prof":
    import neuron_prof

    with neuron_prof.profile(out or None, quiet=True) as s:
        run(s.step)
        t_last = time.time()
else:
    run(lambda: None)
    t_last = time.time()
print(json.dumps({"mode": mode, "device": dev, "times": times, "phases": phases, "t_last": t_last}))
