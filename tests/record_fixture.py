"""A tiny registered experiment for tests/test_records.py: a few random draws and a small fit."""

import torch

from attnbook.records import EXPERIMENTS, Experiment, register


def tiny_run(arm: str, seed: int, steps: int = 3) -> dict:
    weight = torch.nn.Parameter(torch.randn(4))
    optimizer = torch.optim.SGD([weight], lr=0.1)
    target = torch.randn(4) * (2.0 if arm == "wide" else 1.0)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = (weight - target).square().sum()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return dict(loss=losses, count=seed + len(arm))


if "tiny" not in EXPERIMENTS:
    register(
        Experiment(
            name="tiny",
            run=tiny_run,
            arms=("narrow", "wide"),
            seeds=tuple(range(5)),
            replay=dict(arm="narrow", seed=0, steps=1),
        )
    )
