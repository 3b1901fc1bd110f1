"""The argument checks of the public API: types, ranges, shapes, vocabulary and context bounds
(applied by name at each public function's door by :mod:`ihprobe.core.calls`).

Every public entry point calls these on its arguments before any work, so a wrong type, an
out-of-range count, a NaN threshold, a token outside the vocabulary or a head index past the
last head is one :class:`IhprobeError` naming the argument and what it accepts, never a raw
``IndexError`` from torch or a silently wrong answer (``strongest_into(1, -1)`` is not head 3).
Results go through :func:`finite_result` before they are returned.

>>> count("batch", 8)
8
>>> count("batch", 0)
Traceback (most recent call last):
...
ihprobe.core.errors.IhprobeError: batch must be an integer from 1 to 9223372036854775807 (got 0).
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Sequence

import numpy as np
import torch

from ihprobe.core.errors import IhprobeError

INT64_MAX = 2**63 - 1
SEED_MAX = 2**62  # below int64 with room for the seeds derived from it (seed + 1, ...)


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _integral(value) -> int | None:
    """``value`` as an int when it is an integer (not a bool, a float or a string), else None."""
    if isinstance(value, torch.Tensor) and value.ndim == 0 and value.dtype != torch.bool:
        value = value.item()
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return None


def count(name: str, value, *, low: int = 1, high: int = INT64_MAX) -> int:
    """``value`` as an ``int`` in ``[low, high]``; bools, floats and strings are refused.

    Example:
        >>> count("random", 1.5, low=0)
        Traceback (most recent call last):
        ...
        ihprobe.core.errors.IhprobeError: random must be an integer from 0 to 9223372036854775807 (got 1.5).
    """  # noqa: E501
    found = _integral(value)
    if found is None or not low <= found <= high:
        raise IhprobeError(f"{name} must be an integer from {low} to {high} (got {_shown(value)}).")
    return found


def integer(name: str, value) -> int:
    """``value`` as an ``int`` within int64, any sign (its range is checked elsewhere).

    >>> integer("layers", "2")
    Traceback (most recent call last):
    ...
    ihprobe.core.errors.IhprobeError: layers must be an integer (got '2').
    """
    found = _integral(value)
    if found is None or not -INT64_MAX <= found <= INT64_MAX:
        raise IhprobeError(f"{name} must be an integer (got {_shown(value)}).")
    return found


def number(name: str, value) -> float:
    """``value`` as a ``float`` when it is a real number (its range is checked elsewhere)."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise IhprobeError(f"{name} must be a number (got {_shown(value)}).")
    return float(value)


def text(name: str, value) -> str:
    """``value`` when it is a string."""
    if not isinstance(value, str):
        raise IhprobeError(f"{name} must be a string (got {_shown(value)}).")
    return value


def optional_count(name: str, value, *, low: int = 1, high: int = INT64_MAX) -> int | None:
    """None, or :func:`count`."""
    return None if value is None else count(name, value, low=low, high=high)


def seed(value, name: str = "seed") -> int:
    """A seed: an integer from 0 to :data:`SEED_MAX` (torch and numpy take int64 seeds).

    >>> seed(3)
    3
    """
    return count(name, value, low=0, high=SEED_MAX)


def real(name: str, value, *, low: float = -math.inf, high: float = math.inf) -> float:
    """``value`` as a finite ``float`` in ``[low, high]`` (NaN, inf, bools and strings refused).

    >>> real("threshold", 0.5, low=0, high=1)
    0.5
    """
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not ok or not math.isfinite(float(value)) or not low <= float(value) <= high:
        raise IhprobeError(
            f"{name} must be a finite number from {low} to {high} (got {_shown(value)})."
        )
    return float(value)


def sequence(name: str, value) -> list:
    """``value`` as a list when it is a list, tuple or range (not a string, a number or None)."""
    if not isinstance(value, (list, tuple, range)):
        raise IhprobeError(f"{name} must be a list (got {_shown(value)}).")
    return list(value)


def flag(name: str, value) -> bool:
    """``value`` when it is a bool (``"yes"`` or 1 is refused: it may mean something else)."""
    if not isinstance(value, bool):
        raise IhprobeError(f"{name} must be True or False (got {_shown(value)}).")
    return value


def positive(name: str, value) -> float:
    """``value`` as a finite ``float`` above 0 (a step size, a scale).

    >>> positive("lr", 0)
    Traceback (most recent call last):
    ...
    ihprobe.core.errors.IhprobeError: lr must be a positive finite number (got 0).
    """
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not ok or not math.isfinite(float(value)) or not float(value) > 0:
        raise IhprobeError(f"{name} must be a positive finite number (got {_shown(value)}).")
    return float(value)


def choice(name: str, value, options: Sequence[str]) -> str:
    """``value`` when it is one of ``options``."""
    if not isinstance(value, str) or value not in options:
        raise IhprobeError(f"{name} must be one of {', '.join(options)} (got {_shown(value)}).")
    return value


def model(value, name: str = "model"):
    """A hooked model (``ihprobe.load``'s TransformerLens bridge, or any model with ``cfg``)."""
    cfg = getattr(value, "cfg", None)
    if not isinstance(value, torch.nn.Module) or not hasattr(cfg, "n_layers"):
        raise IhprobeError(
            f"{name} must be a hooked model from ihprobe.load(...) (got {type(value).__name__}); "
            "load the checkpoint first."
        )
    return value


def tokens(name: str, value, model, *, dims: tuple[int, ...] = (2,)) -> torch.Tensor:
    """Integer token ids of ``model``'s vocabulary, ``dims`` dimensions, at most ``n_ctx`` long.

    Example:
        >>> from types import SimpleNamespace
        >>> toy = SimpleNamespace(cfg=SimpleNamespace(d_vocab=16, n_ctx=8))
        >>> tokens("clean", torch.tensor([[1, 2]]), toy)
        tensor([[1, 2]])
        >>> tokens("clean", torch.tensor([[1, 99]]), toy)
        Traceback (most recent call last):
        ...
        ihprobe.core.errors.IhprobeError: clean holds ids from 1 to 99; the vocabulary is 0 to 15.
    """
    vocab, context = model.cfg.d_vocab, model.cfg.n_ctx
    shape = " or ".join(f"{d}-d" for d in dims)
    if not isinstance(value, torch.Tensor) or value.is_floating_point() or value.is_complex():
        raise IhprobeError(f"{name} must be an integer tensor of token ids (got {_shown(value)}).")
    if value.dtype == torch.bool or value.ndim not in dims or 0 in value.shape:
        raise IhprobeError(
            f"{name} must be a non-empty {shape} tensor of token ids (got shape "
            f"{tuple(value.shape)}, dtype {value.dtype})."
        )
    if value.shape[-1] > context:
        raise IhprobeError(
            f"{name} has {value.shape[-1]} positions, more than the model's context of {context}."
        )
    low, high = int(value.min()), int(value.max())
    if low < 0 or high >= vocab:
        raise IhprobeError(
            f"{name} holds ids from {low} to {high}; the vocabulary is 0 to {vocab - 1}."
        )
    return value


def documents(value, name: str = "text") -> bool:
    """Whether natural text ``value`` is token ids (checked as :func:`tokens`); a string or a
    non-empty list of strings is text; anything else is refused naming ``name``."""
    strings = isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value)
    if not isinstance(value, (str, torch.Tensor)) and not strings:
        raise IhprobeError(
            f"{name} must be a string, a list of strings or token ids (got {_shown(value)})."
        )
    return isinstance(value, torch.Tensor)


def head(layer, head_index, n_layers: int, n_heads: int, name: str = "") -> tuple[int, int]:
    """``(layer, head)`` of a model of ``n_layers x n_heads``; negative indices are refused.

    >>> head(1, -1, 2, 4)
    Traceback (most recent call last):
    ...
    ihprobe.core.errors.IhprobeError: head must be an integer from 0 to 3 (got -1).
    """
    return (
        count(f"{name} layer".strip(), layer, low=0, high=n_layers - 1),
        count(f"{name} head".strip(), head_index, low=0, high=n_heads - 1),
    )


def mask(name: str, value, shape: tuple[int, ...]) -> torch.Tensor:
    """A bool tensor of ``shape`` (``[layer, head]`` masks of heads)."""
    if not isinstance(value, torch.Tensor) or value.dtype != torch.bool or value.shape != shape:
        got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
        raise IhprobeError(f"{name} must be a bool tensor of shape {tuple(shape)} (got {got}).")
    return value


def heads(name: str, value, n_layers: int, n_heads: int) -> list[tuple[int, int]]:
    """A non-empty collection of ``(layer, head)`` pairs of a model of ``n_layers x n_heads``.

    >>> heads("sender", [(0, 1)], 2, 4)
    [(0, 1)]
    """
    try:
        pairs = [(layer, index) for layer, index in value]
    except (TypeError, ValueError) as err:
        msg = f"{name} must be a list of (layer, head) pairs (got {_shown(value)})."
        raise IhprobeError(msg) from err
    if not pairs:
        raise IhprobeError(f"{name}: name at least one head as (layer, head).")
    return [head(layer, index, n_layers, n_heads, name) for layer, index in pairs]


def matrix(name: str, value, shape: tuple[int, ...] | None = None) -> torch.Tensor:
    """``value`` (a tensor or nested lists) as a finite float tensor of ``shape``.

    >>> matrix("scores", [[0.1, 0.2]], (1, 2))
    tensor([[0.1000, 0.2000]])
    """
    if isinstance(value, np.ndarray) and not value.flags.writeable:
        value = value.copy()  # torch warns on read-only arrays (a pandas column's, say)
    try:
        tensor = torch.as_tensor(value, dtype=torch.float32, device="cpu")
    except (TypeError, ValueError, RuntimeError) as err:
        raise IhprobeError(
            f"{name} must be a rectangular array of numbers (got {type(value).__name__})."
        ) from err
    if shape is not None and tuple(tensor.shape) != tuple(shape):
        raise IhprobeError(f"{name} must have shape {tuple(shape)} (got {tuple(tensor.shape)}).")
    if not bool(torch.isfinite(tensor).all()):
        raise IhprobeError(f"{name} holds NaN or inf values; pass finite numbers.")
    return tensor


def finite_result(what: str, **values) -> None:
    """Refuse to return a result whose numbers are NaN or inf (``values``: floats or tensors).

    >>> finite_result("patch", clean=1.0, corrupted=float("nan"))
    Traceback (most recent call last):
    ...
    ihprobe.core.errors.IhprobeError: patch: corrupted is NaN or inf: the model's activations are not finite (broken weights or inputs), so no result is reported.
    """  # noqa: E501
    for name, value in values.items():
        if isinstance(value, torch.Tensor):
            finite = bool(torch.isfinite(value).all())
        else:  # floats and arrays (a read-only array is read, never copied into a tensor)
            finite = bool(np.isfinite(np.asarray(value, dtype=np.float64)).all())
        if not finite:
            raise IhprobeError(
                f"{what}: {name} is NaN or inf: the model's activations are not finite (broken "
                "weights or inputs), so no result is reported."
            )


# Arguments that mean the same in every entry point, by name: the check each one passes.
def finite_fields(what: str, result, *names: str) -> None:
    """:func:`finite_result` on the fields ``names`` of ``result``, for ``__post_init__``."""
    finite_result(what, **{name: getattr(result, name) for name in names})


def checkpoint_fields(ckpt) -> None:
    """A :class:`~ihprobe.io.runs.Checkpoint`'s fields: a source, a string revision and run or
    None, and step and tokens as counts from 0 or None."""
    source(ckpt.source)
    for name in ("revision", "run"):
        if getattr(ckpt, name) is not None:
            text(name, getattr(ckpt, name))
    for name in ("step", "tokens"):
        optional_count(name, getattr(ckpt, name), low=0)


def source(value, name: str = "source") -> str | os.PathLike:
    """A checkpoint, run directory or hub id: a non-empty string or path."""
    if not isinstance(value, (str, os.PathLike)) or not str(value).strip():
        raise IhprobeError(
            f"{name} must be a checkpoint or run directory or a hub id (got {_shown(value)})."
        )
    return value
