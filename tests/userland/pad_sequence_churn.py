"""A sentence classifier fed variable-length token sequences: each batch is padded to its own longest sentence
with pad_sequence, and the data does not divide evenly into batches of 16 (the last has 4)."""
import os
import random

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pad_sequence


class BagClassifier(nn.Module):
    def __init__(self, vocab: int = 100, dim: int = 32, n_cls: int = 3) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim, padding_idx=0)
        self.proj = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, n_cls)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.proj(self.emb(x)))
        return self.out(h.mean(dim=1))


def main() -> None:
    dev = os.environ.get("DEVICE", "neuron")
    random.seed(0)
    torch.manual_seed(0)
    sentences = [torch.randint(1, 100, (random.randint(5, 40),)) for _ in range(100)]
    labels = torch.randint(0, 3, (100,))
    model = BagClassifier().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for start in range(0, len(sentences), 16):
        chunk = sentences[start:start + 16]
        x = pad_sequence(chunk, batch_first=True).to(dev)  # EXPECT: shape_churn
        y = labels[start:start + 16].to(dev)  # ALSO: shape_churn
        loss = nn.functional.cross_entropy(model(x), y)  # ALSO: first_call_compile
        opt.zero_grad()
        loss.backward()  # ALSO: first_call_compile
        opt.step()


if __name__ == "__main__":
    main()
