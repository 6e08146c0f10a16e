"""torch.compile on a model fed batches whose size changes every step (static shapes: each one recompiles)."""
import os

import torch
import torch.nn as nn

dev = os.environ.get("DEVICE", "neuron")
backend = "neuron" if dev == "neuron" else "aot_eager"


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


torch.manual_seed(0)
model = MLP().to(dev)
cmodel = torch.compile(model, backend=backend, dynamic=False)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step, bs in enumerate([8, 12, 8, 20, 12]):
    x = torch.randn(bs, 16, device=dev)  # EXPECT[neuron,cpu]: shape_churn
    out = cmodel(x)  # EXPECT[neuron,cpu]: recompile  # ALSO[neuron]: first_call_compile
    loss = out.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done", loss.detach().cpu().item())  # ALSO: sync_point
