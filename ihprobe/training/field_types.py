"""The type checks of :class:`~ihprobe.training.config.TrainConfig`'s fields, read from their
annotations: a config is never built from values that would fail later, deep in training
(``layers="2"``, ``seed=1.5``, ``checkpoints=("a",)``); their ranges are ``check_config``'s.

>>> from ihprobe.training.config import TrainConfig
>>> TrainConfig(law_from="runs/a")
Traceback (most recent call last):
...
ihprobe.core.errors.IhprobeError: law_from must be a tuple of str values (got 'runs/a').
"""

from __future__ import annotations

import math
from dataclasses import fields

from ihprobe.core.errors import IhprobeError

# A field's annotation -> the check of its type (ranges are check_config's), by checks' name.
TYPE_CHECKS = {"int": "integer", "bool": "flag", "str": "text"}  # float: _finite


def _finite(name: str, value) -> float:
    from ihprobe.core import checks

    if not math.isfinite(checks.number(name, value)):
        raise IhprobeError(f"bad training config: {name}={value} must be a finite number.")
    return float(value)


def check_types(config) -> None:
    """Refuse a field of another type than its annotation (``layers="2"``, ``arch=None``,
    ``seed=1.5``), so a config is never built from values that fail later, deep in training.

    >>> from ihprobe.training.config import TrainConfig
    >>> TrainConfig(batch_size=1.5)
    Traceback (most recent call last):
    ...
    ihprobe.core.errors.IhprobeError: batch_size must be an integer (got 1.5).
    """
    from ihprobe.core import checks  # torch: imported when a config is made, not with the module

    for spec in fields(config):
        value, kind = getattr(config, spec.name), annotation(spec)
        base = kind.removesuffix(" | None")
        if spec.name == "seed":
            checks.seed(value)
        elif value is None and base != kind:
            continue
        elif base == "float":
            _finite(spec.name, value)  # weight_decay=inf: refused here, not in training
        elif base in TYPE_CHECKS:
            getattr(checks, TYPE_CHECKS[base])(spec.name, value)
        elif kind == "dict" and not isinstance(value, dict):
            raise IhprobeError(f"{spec.name} must be a dict of options (got {value!r}).")
        elif "tuple[" in kind and not (isinstance(value, str) and kind.startswith("str |")):
            _items(spec.name, value, kind)


def _items(name: str, value, kind: str) -> None:
    """A tuple field's items by its annotation (``law_from=("runs/a",)``, ``checkpoints=(10,)``):
    a bare string is not a tuple of names, and ``("a",)`` is no list of token counts.

    >>> _items("checkpoints", ("a",), "str | tuple[int, ...]")
    Traceback (most recent call last):
    ...
    ihprobe.core.errors.IhprobeError: checkpoints must be an integer (got 'a').
    """
    from ihprobe.core import checks

    item = kind.split("tuple[", 1)[1].split(",", 1)[0]  # "int" or "str"
    if isinstance(value, str) or not isinstance(value, (tuple, list)):
        also = "a name or " if kind.startswith("str |") else ""
        raise IhprobeError(f"{name} must be {also}a tuple of {item} values (got {value!r}).")
    for each in value:
        getattr(checks, TYPE_CHECKS[item])(name, each)


def annotation(spec) -> str:
    """A field's annotation as written, also for one given as a type (``make_dataclass``).

    >>> from ihprobe.training.config import TrainConfig
    >>> [annotation(f) for f in fields(TrainConfig)][7:9]
    ['int', 'int | None']
    """
    return spec.type if isinstance(spec.type, str) else getattr(spec.type, "__name__", "")
