"""A training function decorated with @neuron_prof.profile(...), stepping through current_session().
A float64 tensor's first use is an operator statement (`*`): its line needs operator_lines=True.
# OPERATOR-LINES
"""
import os

import torch

import neuron_prof
from neuron_prof.capture import current_session

DEV = os.environ.get("DEVICE", "neuron")


@neuron_prof.profile(os.environ.get("TRACE_OUT", "trace.json"), quiet=True, operator_lines=True)
def train(steps: int = 8) -> float:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.Tanh(), torch.nn.Linear(20, 1)).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(32, 10, device=DEV)
    y = torch.randn(32, 1, device=DEV)
    sample_w = torch.rand(32, 1, device=DEV, dtype=torch.float64)  # EXPECT: dtype_demotion
    best = float("inf")
    for step in range(steps):
        err = (model(x) - y).pow(2)
        loss = err.mean()
        weighted = (err.detach() * sample_w).mean()  # EXPECT: dtype_demotion
        opt.zero_grad()
        loss.backward()
        opt.step()
        if DEV != "cpu":
            torch.neuron.synchronize()  # EXPECT: sync_point
        if bool(weighted < best):  # EXPECT: sync_point
            best = weighted.item()  # EXPECT: sync_point
        current_session().step()
    return best


if __name__ == "__main__":
    print("best loss", train())
