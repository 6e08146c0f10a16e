"""A fixed-shape training loop that clears TorchNeuron's compilation cache between epochs ("to free memory"):
every op of the step compiles again, with the same shapes, in the first step of the next epoch."""
import os

import torch
import torch.nn as nn

dev = os.environ.get("DEVICE", "neuron")


def free_compiled_kernels() -> None:
    if dev == "neuron":
        import torch_neuronx

        torch_neuronx._C._clear_compilation_cache()  # EXPECT: recompile


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 16, device=dev), torch.randn(32, 1, device=dev)
    for epoch in range(4):
        for step in range(6):
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        print("epoch", epoch, "loss", loss.item())  # ALSO: sync_point
        free_compiled_kernels()


if __name__ == "__main__":
    main()
