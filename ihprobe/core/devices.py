"""Where tensors live: the device of a model, tensors moved onto it, and the check that every
parameter and buffer of a model is where it was asked to be.

Every function of ihprobe runs on the model's device: the tensors it creates are created there
(``tests/test_devices.py`` checks every tensor factory call of the package statically), tokens a
caller passes on another device are moved there, and results come back as CPU numbers.

>>> model = torch.nn.Linear(2, 2)
>>> model_device(model), stray_tensors(model, "cpu")
(device(type='cpu'), [])
"""

from __future__ import annotations

import torch


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of ``model``: TransformerLens's ``cfg.device`` where it has one (bridges record
    the device they run on), else that of its first parameter (CPU for a model with none)."""
    cfg = getattr(model, "cfg", None)
    if getattr(cfg, "device", None) is not None:
        return torch.device(cfg.device)
    first = next(iter(model.parameters()), None)
    return torch.device("cpu") if first is None else first.device


def device_map_of(model) -> dict | None:
    """The device map a HF model (or the HF model under a bridge) was dispatched with by
    accelerate (:mod:`ihprobe.io.offload`), or None for a model in one place.

    >>> device_map_of(torch.nn.Linear(2, 2)) is None
    True
    """
    hf = getattr(model, "original_model", model)
    found = getattr(hf, "hf_device_map", None)
    return dict(found) if isinstance(found, dict) and found else None


def gathered(tensors, device: str | torch.device | None = None) -> list[torch.Tensor]:
    """``tensors`` on one device: ``device``, or else the first tensor's. A model placed by a
    device map hands back each layer's activations where that layer runs, and ops across
    layers (a stack, a product with a weight of the unembedding's GPU) need one device; a
    tensor already there is returned as it is (no copy).

    >>> [t.device.type for t in gathered([torch.ones(1), torch.ones(1)], "meta")]
    ['meta', 'meta']
    """
    tensors = list(tensors)
    if not tensors:
        return tensors
    home = tensors[0].device if device is None else torch.device(device)
    return [t.to(home) for t in tensors]


def stack_layers(tensors, dim: int = 0, device: str | torch.device | None = None) -> torch.Tensor:
    """``torch.stack`` of per-layer tensors, gathered first onto one device (:func:`gathered`):
    ``device``, or the first layer's.

    >>> stack_layers([torch.zeros(2), torch.ones(2)]).tolist()
    [[0.0, 0.0], [1.0, 1.0]]
    """
    return torch.stack(gathered(tensors, device), dim=dim)


def stray_tensors(model: torch.nn.Module, device: str | torch.device) -> list[str]:
    """Names of the parameters and buffers of ``model`` that are not on ``device``.

    >>> stray_tensors(torch.nn.Linear(2, 2), "meta")
    ['weight', 'bias']
    """
    device = torch.device(device)
    tensors = [*model.named_parameters(), *model.named_buffers()]
    return [name for name, t in tensors if not same_device(t.device, device)]


def same_device(a: str | torch.device, b: str | torch.device) -> bool:
    """Whether ``a`` and ``b`` name one device (``cuda`` without an index is the current one).

    >>> same_device("cuda", "cuda:0"), same_device("cpu", "meta")
    (True, False)
    """
    a, b = torch.device(a), torch.device(b)
    if a.type != b.type:
        return False
    return a.index is None or b.index is None or a.index == b.index


def describe(device: str | torch.device) -> str:
    """The device in words for a record: cuda's adapter by name, else the device's type.

    >>> describe("cpu")
    'cpu'
    """
    device = torch.device(device)
    if device.type == "cuda" and torch.cuda.is_available():
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return device.type
