"""A compiled 1-D conv net whose forward takes a Python int (`depth`, how many residual blocks to run), trained
with gradient accumulation; the schedule deepens the net halfway through, so Dynamo's guard on the int
(`depth == 1`) fails and the frame compiles again."""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

dev = os.environ.get("DEVICE", "neuron")
backend = "neuron" if dev == "neuron" else "aot_eager"


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv1d(4, 16, 5, padding=2)
        self.block = nn.Conv1d(16, 16, 3, padding=1)
        self.head = nn.Linear(16, 2)

    def forward(self, wav: torch.Tensor, depth: int) -> torch.Tensor:
        h = torch.relu(self.stem(wav))
        for _ in range(depth):
            h = h + torch.relu(self.block(h))
        return self.head(h.mean(dim=2))


def main() -> None:
    torch.manual_seed(0)
    model = ConvNet().to(dev)
    cmodel = torch.compile(model, backend=backend, dynamic=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    accum = 2
    for step in range(8):
        depth = 1 if step < 4 else 2
        wav = torch.randn(8, 4, 64, device=dev)
        y = torch.randint(0, 2, (8,), device=dev)
        loss = F.cross_entropy(cmodel(wav, depth), y) / accum  # EXPECT[neuron,cpu]: recompile  # ALSO: first_call_compile
        loss.backward()
        if step % accum == accum - 1:
            opt.step()
            opt.zero_grad()
    print("done", loss.item())  # ALSO: sync_point


if __name__ == "__main__":
    main()
