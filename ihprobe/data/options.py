"""Producer options: frozen dataclasses that read the same before and after a JSON round trip.

Every producer declares its options as a subclass of :class:`ProducerOptions`. Construction
normalises each value to its field's declared type: lists become tuples, numbers take the
field's type (int, float or bool), and a ``Literal`` field accepts only its choices. So options
read back from JSON (where ``(8, 32)`` comes back as ``[8, 32]``) compare equal to the original.

>>> import json
>>> from ihprobe.data.text import TextOptions
>>> a = TextOptions(text=["a.txt", "b.txt"], vocab_size=300)
>>> a.text
('a.txt', 'b.txt')
>>> TextOptions.from_json(json.loads(json.dumps(a.to_json()))) == a
True
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import cache
from typing import Any, Literal, Union

from ihprobe.core.errors import IhprobeError

SCALARS = (bool, int, float)  # field types numbers are converted to


@dataclass(frozen=True)
class ProducerOptions:
    """The options of one producer (subclasses add fields; this base has none).

    Example:
        >>> from ihprobe.data import producer_options
        >>> isinstance(producer_options("iid", {"vocab_size": 16}), ProducerOptions)
        True
    """

    def __post_init__(self) -> None:
        hints = _type_hints(type(self))
        for f in fields(self):
            value = normalise(f.name, getattr(self, f.name), hints[f.name])
            object.__setattr__(self, f.name, value)
        self.check()

    def check(self) -> None:
        """Raise an :class:`IhprobeError` for values no producer can use (subclasses extend)."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any], producer: str = "this producer") -> Any:
        """Options from a mapping (e.g. JSON): an unknown key is an error naming the valid ones.

        >>> from ihprobe.data.text import TextOptions
        >>> TextOptions.from_json({"vocab_size": 300, "text": ["a.txt"]}).text
        ('a.txt',)
        """
        valid = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(valid))
        if unknown:
            raise IhprobeError(
                f"producer {producer!r} has no option {', '.join(unknown)}; its options are: "
                f"{', '.join(sorted(valid))}."
            )
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        """The options as a JSON-ready dict (tuples as lists), e.g. for ``Producer.config()``."""
        return {f.name: _jsonable(getattr(self, f.name)) for f in fields(self)}


@cache
def _type_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def normalise(name: str, value: Any, hint: Any) -> Any:
    """``value`` in the canonical form of the type ``hint`` (None passes through unchanged).

    >>> normalise("period", [8, 32], tuple[int, int])
    (8, 32)
    >>> normalise("m0", 1, float)
    1.0
    """
    if value is None:
        return None
    members = (
        typing.get_args(hint) if typing.get_origin(hint) in (Union, types.UnionType) else (hint,)
    )
    for member in members:
        origin = typing.get_origin(member)
        if origin is Literal and value in typing.get_args(member):
            return value
        if origin is tuple and isinstance(value, (list, tuple)):
            element = typing.get_args(member)[0]
            return tuple(normalise(name, v, element) for v in value)
        if member in SCALARS and isinstance(value, (*SCALARS,)):
            if member is int and not float(value).is_integer():
                break
            return member(value)
        if member is Any or (member is str and isinstance(value, str)):
            return value
    choices = [c for m in members if typing.get_origin(m) is Literal for c in typing.get_args(m)]
    if choices:
        none = ["None"] if type(None) in members else []
        raise IhprobeError(f"{name}={value!r}: use one of {', '.join([*none, *choices])}.")
    wanted = hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")
    raise IhprobeError(f"{name}={value!r}: this option takes {wanted}.")


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value
