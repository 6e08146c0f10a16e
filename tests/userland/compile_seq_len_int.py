"""A compiled transformer-ish encoder trained with a sequence-length curriculum (32 tokens, then 48, then 64,
every few steps) and a Python int argument, the number of leading tokens to pool (`n_pool`), that the
schedule changes too. With `dynamic=False` each new length recompiles, and so does each new `n_pool`
(Dynamo guards on the int's value)."""
# BENCH-ONLY: no product fix of its own to guard (the suite's time budget)
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

dev = os.environ.get("DEVICE", "neuron")
backend = "neuron" if dev == "neuron" else "aot_eager"


class Encoder(nn.Module):
    def __init__(self, vocab: int = 256, dim: int = 32) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.mix = nn.Linear(dim, dim)
        self.ff = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.head = nn.Linear(dim, 2)

    def forward(self, tokens: torch.Tensor, n_pool: int) -> torch.Tensor:
        h = self.tok(tokens)
        h = h + torch.tanh(self.mix(h))
        h = h + self.ff(h)
        return self.head(h[:, :n_pool].mean(dim=1))


def curriculum(step: int) -> tuple[int, int]:
    """(sequence length, tokens to pool) of a step."""
    seq_len = (32, 48, 64)[min(step // 3, 2)]
    return seq_len, 4 if step < 7 else 8


def main() -> None:
    torch.manual_seed(0)
    model = Encoder().to(dev)
    cmodel = torch.compile(model, backend=backend, dynamic=False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(9):
        seq_len, n_pool = curriculum(step)
        tokens = torch.randint(0, 256, (8, seq_len), device=dev)  # EXPECT[neuron,cpu]: shape_churn
        labels = torch.randint(0, 2, (8,), device=dev)
        loss = F.cross_entropy(cmodel(tokens, n_pool), labels)  # EXPECT[neuron,cpu]: recompile  # ALSO: first_call_compile
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("done", loss.item())  # ALSO: sync_point


if __name__ == "__main__":
    main()
