"""A GRU sequence tagger trained in main(): embedding -> nn.GRU -> linear, one tag per token."""
import os

import torch
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self, vocab: int = 50, dim: int = 16, tags: int = 5) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.out = nn.Linear(dim, tags)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h, _ = self.rnn(self.emb(tokens))
        return self.out(h)


def main() -> None:
    dev = os.environ.get("DEVICE", "neuron")
    torch.manual_seed(0)
    model = Tagger().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    tokens = torch.randint(0, 50, (8, 12), device=dev)
    tags = torch.randint(0, 5, (8, 12), device=dev)
    for step in range(6):
        logits = model(tokens)
        loss = nn.functional.cross_entropy(logits.reshape(-1, 5), tags.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        majority = torch.mode(logits.argmax(-1), dim=1).values  # EXPECT: cpu_fallback
        print(f"step {step} loss {loss.item():.3f}")  # EXPECT: sync_point
    print("majority tags", majority)  # ALSO: sync_point


if __name__ == "__main__":
    main()
