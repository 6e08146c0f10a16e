"""Variable-length examples through a DataLoader whose collate_fn pads each batch to its longest example
(the usual NLP recipe); 90 examples in batches of 16 leave a last batch of 10."""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class Clicks(Dataset):
    """Sessions of item ids, each of its own length, labelled by whether the session ended in a purchase."""

    def __init__(self, n: int = 90) -> None:
        g = torch.Generator().manual_seed(1)
        self.items = [torch.randint(1, 500, (int(torch.randint(3, 30, (1,), generator=g)),), generator=g)
                      for _ in range(n)]
        self.labels = torch.randint(0, 2, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.items[i], self.labels[i]


def collate(batch: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    longest = max(len(seq) for seq, _ in batch)
    seqs = torch.stack([F.pad(seq, (0, longest - len(seq))) for seq, _ in batch])  # EXPECT: shape_churn
    return seqs, torch.stack([label for _, label in batch])  # ALSO: shape_churn


def main() -> None:
    dev = os.environ.get("DEVICE", "neuron")
    torch.manual_seed(0)
    loader = DataLoader(Clicks(), batch_size=16, shuffle=True, collate_fn=collate)
    emb = nn.Embedding(500, 24, padding_idx=0).to(dev)
    head = nn.Linear(24, 2).to(dev)
    opt = torch.optim.SGD([*emb.parameters(), *head.parameters()], lr=0.1)
    for epoch in range(1):
        for seqs, labels in loader:  # ALSO: shape_churn
            seqs, labels = seqs.to(dev), labels.to(dev)  # ALSO: shape_churn
            loss = F.cross_entropy(head(emb(seqs).mean(dim=1)), labels)  # ALSO: first_call_compile
            opt.zero_grad()
            loss.backward()  # ALSO: first_call_compile
            opt.step()


if __name__ == "__main__":
    main()
