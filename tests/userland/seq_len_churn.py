"""A one-layer attention classifier on token sequences whose length changes every step (no padding)."""
import math
import os

import torch
import torch.nn as nn


class TinyAttention(nn.Module):
    def __init__(self, vocab: int = 64, dim: int = 32, n_cls: int = 4, max_len: int = 64) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(max_len, dim))
        self.qkv = nn.Linear(dim, 3 * dim)
        self.cls = nn.Linear(dim, n_cls)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.emb(tokens) + self.pos[: tokens.shape[1]]  # ALSO: first_call_compile
        q, k, v = self.qkv(h).chunk(3, dim=-1)  # ALSO: first_call_compile
        att = (q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])).softmax(-1)  # EXPECT: first_call_compile
        return self.cls((att @ v).mean(dim=1))  # ALSO: first_call_compile


def main() -> None:
    dev = os.environ.get("DEVICE", "neuron")
    torch.manual_seed(0)
    model = TinyAttention().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    correct = 0
    for step, seq_len in enumerate([17, 23, 31, 17, 40, 23, 52, 31]):
        tokens = torch.randint(0, 64, (4, seq_len), device=dev)  # EXPECT: shape_churn
        labels = tokens[:, 0] % 4
        logits = model(tokens)
        loss = nn.functional.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()  # ALSO: first_call_compile
        opt.step()
        correct += (logits.argmax(-1).cpu() == labels.cpu()).sum().item()  # EXPECT: sync_point
    print("train accuracy", correct / 32)


if __name__ == "__main__":
    main()
