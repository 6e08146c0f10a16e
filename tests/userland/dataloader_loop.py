"""A DataLoader over a TensorDataset, as in most tutorials; the last batch is smaller than the others."""
import os

import torch
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    dev = os.environ.get("DEVICE", "neuron")
    torch.manual_seed(0)
    xs = torch.randn(100, 10)
    ys = torch.randint(0, 3, (100,))
    loader = DataLoader(TensorDataset(xs, ys), batch_size=16, shuffle=True, num_workers=0)
    model = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    seen_classes = 0
    for xb, yb in loader:
        xb, yb = xb.to(dev), yb.to(dev)
        logits = model(xb)  # EXPECT: first_call_compile
        loss = torch.nn.functional.cross_entropy(logits, yb)  # ALSO: first_call_compile
        seen_classes += len(torch.unique(yb))  # EXPECT: cpu_fallback
        if loss > 5.0:  # EXPECT: sync_point
            print("loss exploded")
            break
        opt.zero_grad()
        loss.backward()  # ALSO: first_call_compile
        opt.step()
    print("classes seen per batch", seen_classes / len(loader))


if __name__ == "__main__":
    main()
