"""Batch inference over variable-length reviews: `model.eval()`, `torch.inference_mode()`, and a DataLoader
whose collate_fn pads each batch to its longest review, so every batch has its own length (and the last one
its own size); predictions are moved to the host batch by batch."""
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

PAD = 0


class Reviews(Dataset):
    def __init__(self, n: int = 100) -> None:
        g = torch.Generator().manual_seed(3)
        lengths = torch.randint(5, 60, (n,), generator=g)
        self.reviews = [torch.randint(1, 2000, (int(n_tok),), generator=g) for n_tok in lengths]

    def __len__(self) -> int:
        return len(self.reviews)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.reviews[i]


def pad_collate(batch: list[torch.Tensor]) -> dict[str, torch.Tensor]:
    longest = max(len(r) for r in batch)
    ids = torch.full((len(batch), longest), PAD, dtype=torch.long)  # EXPECT: shape_churn
    for i, r in enumerate(batch):
        ids[i, :len(r)] = r
    return {"input_ids": ids, "attention_mask": ids != PAD}  # ALSO: shape_churn


class SentimentModel(nn.Module):
    def __init__(self, vocab: int = 2000, dim: int = 48) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim, padding_idx=PAD)
        self.proj = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, 3)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.proj(self.emb(input_ids)))  # ALSO: first_call_compile
        mask = attention_mask.unsqueeze(-1).float()  # ALSO: first_call_compile
        pooled = (h * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)  # ALSO: first_call_compile
        return self.out(pooled)  # ALSO: first_call_compile


def main() -> None:
    dev = os.environ.get("DEVICE", "neuron")
    torch.manual_seed(0)
    model = SentimentModel().to(dev)
    model.eval()
    loader = DataLoader(Reviews(), batch_size=16, collate_fn=pad_collate)
    predictions: list[torch.Tensor] = []
    with torch.inference_mode():
        for batch in loader:  # ALSO: shape_churn
            batch = {k: v.to(dev) for k, v in batch.items()}  # ALSO: shape_churn
            logits = model(**batch)  # ALSO: first_call_compile
            predictions.append(logits.argmax(dim=-1).cpu())  # EXPECT: sync_point  # ALSO: first_call_compile
    preds = torch.cat(predictions)
    print("positive share", (preds == 2).float().mean().item())


if __name__ == "__main__":
    main()
