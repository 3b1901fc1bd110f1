"""What an update changes: the weights (``ddp`` wraps ``model`` under DDP and, with
``compile``, is compiled; both share ``model``'s parameters), the optimiser, and the running
loss (:class:`~ihprobe.training.tally.Tally`), built once a session by :func:`make_learner`.

>>> optimizer = adamw(torch.nn.Linear(4, 2), TrainConfig(producer="iid", weight_decay=0.1))
>>> [group["weight_decay"] for group in optimizer.param_groups]   # matrices, then biases
[0.1, 0.0]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn.parallel import DistributedDataParallel

from ihprobe.core.world import World
from ihprobe.io.architectures import build_model
from ihprobe.training.config import TrainConfig
from ihprobe.training.precision import compiled
from ihprobe.training.tally import Tally


@dataclass
class Learner:
    """The model, its DDP/compiled wrapper ``ddp``, the optimiser and the tally."""

    model: torch.nn.Module
    ddp: torch.nn.Module
    optimizer: torch.optim.Optimizer
    tally: Tally


def make_learner(config: TrainConfig, producer, world: World) -> Learner:
    """A fresh model for ``producer``'s vocab on this rank's device, in training mode, wrapped
    in DDP when there are several processes, with its optimiser and an empty tally."""
    model = build_model(config, producer.vocab_size, producer.special).to(world.device)
    model.train()
    ids = [world.device.index] if world.device.type == "cuda" else None
    ddp = DistributedDataParallel(model, device_ids=ids) if world.size > 1 else model
    ddp = compiled(ddp, config.compile)
    return Learner(model, ddp, adamw(model, config), Tally(world.device))


def adamw(model, config: TrainConfig) -> torch.optim.AdamW:
    """Fused AdamW (0.9, 0.999); weight decay on matrices only, as in nanoGPT."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": config.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=config.lr, betas=(0.9, 0.999), fused=True)
