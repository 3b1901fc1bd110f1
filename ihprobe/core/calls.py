"""The checks at a public function's door: its arguments by name (:data:`RULES`), token ids
against the model, and the work its scaling arguments ask for against the memory there is,
before anything is allocated; keyword arguments passed on to another function likewise.

>>> arguments(batch=100, seed=0, bos=False)
>>> arguments(batch=0)
Traceback (most recent call last):
...
ihprobe.core.errors.IhprobeError: batch must be an integer from 1 to 9223372036854775807 (got 0).
"""

from __future__ import annotations

import inspect

import torch

from ihprobe.core import checks
from ihprobe.core.devices import device_map_of, model_device
from ihprobe.core.errors import IhprobeError
from ihprobe.core.memory import LONGEST_ROW, Estimate, check_work, estimate, shape_of

RULES = {
    "batch": lambda v: checks.count("batch", v),
    "rows": lambda v: checks.count("rows", v),
    "text_rows": lambda v: checks.count("text_rows", v),
    "random": lambda v: checks.count("random", v),
    "draws": lambda v: checks.count("draws", v, low=2),
    "segments": lambda v: checks.count("segments", v),
    "seed": checks.seed,
    "n": lambda v: checks.optional_count("n", v),
    "chunk": lambda v: checks.optional_count("chunk", v),
    "snippet_length": lambda v: checks.optional_count("snippet_length", v),
    "batch_size": lambda v: checks.optional_count("batch_size", v),
    "context": lambda v: checks.optional_count("context", v),
    "tokens_per_step": lambda v: checks.optional_count("tokens_per_step", v),
    "total_steps": lambda v: checks.count("total_steps", v),
    "bos": lambda v: checks.flag("bos", v),
    "threshold": lambda v: None if v is None else checks.real("threshold", v),
    "min_rise": lambda v: None if v is None else checks.real("min_rise", v, low=0),
}


TOKEN_ARGUMENTS = ("tokens", "reference", "clean", "corrupted", "text")  # ids of the model, or None
MEMORY = ("batch", "rows", "random", "draws", "groups")  # the scaling arguments: estimated first


def arguments(**values) -> None:
    """Check a public function's arguments by name (:data:`RULES`; ``model`` by :func:`~ihprobe.core.checks.model`),
    and, given a model, token ids (:data:`TOKEN_ARGUMENTS`, None allowed) against its
    vocabulary and context, and that the scaling ones (:data:`MEMORY`) fit in memory before
    anything is allocated.

    Example:
        >>> arguments(batch=100, seed=0, bos=False)
        >>> arguments(batch=100, seed=1.5)
        Traceback (most recent call last):
        ...
        ihprobe.core.errors.IhprobeError: seed must be an integer from 0 to 4611686018427387904 (got 1.5).
    """  # noqa: E501
    hooked = checks.model(values.pop("model")) if "model" in values else None
    groups = values.pop("groups", 0)  # ablated head groups, set by the caller, not the user
    patterns = values.pop("patterns", True)  # passes hold whole patterns: set by the caller
    for name, value in values.items():
        if name not in TOKEN_ARGUMENTS:
            RULES[name](value)
        elif value is None or hooked is None:
            continue
        elif name != "text" or checks.documents(value):
            checks.tokens(name, value, hooked)
    scaling = {k: values[k] for k in MEMORY if values.get(k) is not None}
    if hooked is None or not scaling:
        return
    passed = [values.get(name) for name in TOKEN_ARGUMENTS]
    longest = max([LONGEST_ROW, *(t.shape[-1] for t in passed if isinstance(t, torch.Tensor))])
    others = ("text_rows", *TOKEN_ARGUMENTS)  # rows of their own length
    if values.get("n") and all(values.get(k) is None for k in others):
        longest = 2 * values["n"] + 2  # rows of n repeated tokens, a separator and a BOS only
    shape = shape_of(hooked.cfg, longest)
    found = estimate(
        shape,
        rows=max(values.get("batch") or 0, values.get("rows") or 0),
        chunk=values.get("chunk"),
        groups=(values.get("random") or 0) + groups,
        draws=values.get("draws") or 0,
        patterns=patterns,
    )
    if device_map_of(hooked) is not None:  # a device map's weights are not held here at once
        found = Estimate(max(found.bytes - 4 * shape.parameters, 0.0), found.flops)
    shown = ", ".join(f"{k}={v}" for k, v in scaling.items())
    check_work(
        f"{shown} on this model",
        found,
        shrink=f"pass a smaller {' or '.join(scaling)}",
        device=str(model_device(hooked)),
    )


def keywords(caller: str, passed: dict, target, **values) -> None:
    """Check keyword arguments ``passed`` on to ``target`` (unknown names refused, known ones
    by :data:`RULES`) and ``values`` of ``caller``'s own, before any work.

    >>> keywords("trajectory", {"batch": 0}, lambda batch=1: None)
    Traceback (most recent call last):
    ...
    ihprobe.core.errors.IhprobeError: batch must be an integer from 1 to 9223372036854775807 (got 0).
    """  # noqa: E501
    accepted = inspect.signature(inspect.unwrap(target)).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())
    unknown = [] if takes_any else sorted(set(passed) - set(accepted))
    if unknown:
        raise IhprobeError(
            f"{caller} got unknown keyword(s) {', '.join(unknown)}; it passes on only "
            f"{', '.join(k for k in accepted if k != 'model')}."
        )
    arguments(**{k: v for k, v in passed.items() if k in RULES}, **values)
