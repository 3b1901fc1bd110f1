"""How the trainer computes on its device: the float precision of the forward pass and the
optional ``torch.compile`` of the model (``TrainConfig.precision`` and ``compile``).

``fp32`` computes in float32 throughout. ``tf32`` lets cuda's matmuls use TF32 for the run
(the CPU has no TF32: there it is ``fp32``). ``bf16`` runs the forward pass under bfloat16
autocast; the weights, the optimiser state, the loss (``causal_lm_loss`` casts the logits to
float32) and the gradients' accumulation stay float32.

>>> with autocast("bf16", torch.device("cpu")):
...     (torch.ones(2, 2) @ torch.ones(2, 2)).dtype
torch.bfloat16
>>> with autocast("fp32", torch.device("cpu")):
...     (torch.ones(2, 2) @ torch.ones(2, 2)).dtype
torch.float32
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """The context of one forward pass: bfloat16 autocast for ``bf16``, nothing otherwise."""
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


@contextlib.contextmanager
def matmul_precision(precision: str, device: torch.device) -> Iterator[None]:
    """TF32 matmuls and convolutions on cuda for the block when ``precision`` is ``tf32``;
    the previous settings come back afterwards."""
    if precision != "tf32" or device.type != "cuda":
        yield
        return
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def compiled(module: torch.nn.Module, enabled: bool) -> torch.nn.Module:
    """``module`` compiled with ``torch.compile`` when ``enabled`` (it shares the parameters:
    checkpoints and the optimiser keep using ``module``), else ``module`` itself.

    >>> layer = torch.nn.Linear(2, 2)
    >>> compiled(layer, False) is layer
    True
    """
    return torch.compile(module) if enabled else module
