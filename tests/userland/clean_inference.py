"""Batch inference done right: `model.eval()`, `torch.inference_mode()`, equal batches (`drop_last=True`) of
fixed-length inputs, predictions gathered on the device and moved to the host once after the loop.
# CLEAN: fixed shapes, no fallback, no host sync in the loop, no float64
"""
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class ImageClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.classifier = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).flatten(1))


def main() -> None:
    dev = os.environ.get("DEVICE", "neuron")
    torch.manual_seed(0)
    model = ImageClassifier().to(dev)
    model.eval()
    images = TensorDataset(torch.randn(128, 1, 16, 16))
    loader = DataLoader(images, batch_size=32, drop_last=True)
    predictions = []
    with torch.inference_mode():
        for (x,) in loader:
            logits = model(x.to(dev))
            predictions.append(logits.argmax(dim=1))
    preds = torch.cat(predictions).cpu()  # ALSO: sync_point
    print("class histogram", torch.bincount(preds, minlength=10).tolist())


if __name__ == "__main__":
    main()
