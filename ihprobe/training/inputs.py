"""What :func:`~ihprobe.training.trainer.train` takes, checked before anything is built: the
config (a :class:`~ihprobe.training.config.TrainConfig` or a dict of its fields) and the
producer it names, which must deliver ``[batch_size, context]`` ids within its vocab.

>>> config = as_config({"producer": "iid", "batch_size": 2, "context": 16})
>>> make_run_producer(config).sample(0).tokens.shape
torch.Size([2, 16])
"""

from __future__ import annotations

import torch

from ihprobe.core.errors import IhprobeError
from ihprobe.data import make_producer
from ihprobe.training.config import TrainConfig


def as_config(config) -> TrainConfig:
    """``config`` itself, or a :class:`TrainConfig` of a dict's fields; else one line.

    >>> as_config({"producer": "iid", "steps": 5}).steps
    5
    """
    fields = TrainConfig.__dataclass_fields__
    if isinstance(config, dict) and all(k in fields for k in config):
        return TrainConfig(**config)
    if not isinstance(config, (TrainConfig, dict)):
        raise IhprobeError(f"config must be a TrainConfig or a dict (got {type(config).__name__}).")
    unknown = sorted(str(k) for k in config if k not in fields) if isinstance(config, dict) else []
    if unknown:
        raise IhprobeError(
            f"TrainConfig has no field {', '.join(unknown)}: its fields are {', '.join(fields)}."
        )
    return config


def make_run_producer(config: TrainConfig, total_steps: int | None = None):
    """The config's producer, checked to deliver ``[batch_size, context]`` ids in its vocab.
    ``total_steps`` (default the config's) is the length annealing producers plan for.

    >>> make_run_producer(TrainConfig(producer="iid", batch_size=2, context=16)).vocab_size
    128
    """
    producer = make_producer(
        config.producer,
        batch_size=config.batch_size,
        context=config.context,
        seed=config.seed,
        total_steps=total_steps or config.total_steps,
        **config.producer_options,
    )
    tokens = producer.sample(0).tokens
    if tuple(tokens.shape) != (config.batch_size, config.context):
        raise IhprobeError(
            f"producer {config.producer!r} gives batches of shape {tuple(tokens.shape)}, not "
            f"(batch_size, context) = ({config.batch_size}, {config.context}); lower --context "
            "to what it provides or change its options."
        )
    if tokens.dtype != torch.long or tokens.min() < 0 or tokens.max() >= producer.vocab_size:
        raise IhprobeError(
            f"producer {config.producer!r} gives ids outside 0..{producer.vocab_size - 1}."
        )
    return producer
