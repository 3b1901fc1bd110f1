"""Run-time checks of ihprobe's array annotations in the test suite: beartype on the shapes only.

``pyproject.toml`` passes ``--jaxtyping-packages=ihprobe,tests.shape_checks.check_shapes`` to
pytest, so jaxtyping's import hook decorates every function and dataclass of ihprobe with
``@jaxtyped(typechecker=check_shapes)``. jaxtyping resolves each signature and hands the
typechecker a stand-in function carrying the annotations; :func:`check_shapes` keeps only those
that name an array (``Float[Tensor, "batch pos"]``, also inside ``X | None``) and lets beartype
check them. Dimension names are then bound across a call: a ``"batch pos"`` argument and a
``"batch"`` result must agree. Other hints (``int``, protocols, literals) stay documentation.

The library answers bad input with one :class:`~ihprobe.core.errors.IhprobeError` line, and the
suite tests those lines. So when arguments break an annotation, the function itself is run on
them: if it refuses them with an ``IhprobeError``, that error is raised as it would be outside
the tests; if it accepts them, the shape error stands (the annotation or the check is wrong).

>>> import torch
>>> from jaxtyping import Float, jaxtyped
>>> @jaxtyped(typechecker=check_shapes)
... def total(x: Float[torch.Tensor, "n"], k: int) -> Float[torch.Tensor, ""]:
...     return x.sum()
>>> total(torch.ones(3), k="not an int, not checked")
tensor(3.)
>>> total(torch.ones(3, 2), k=0)  # doctest: +ELLIPSIS
Traceback (most recent call last):
jaxtyping.TypeCheckError: Type-check error whilst checking the parameters of ...total...
"""

from __future__ import annotations

import functools
import inspect
import sys
import typing
from collections.abc import Callable

from beartype import beartype
from beartype.roar import BeartypeCallHintViolation
from jaxtyping import AbstractArray, AnnotationError


def names_an_array(hint: object) -> bool:
    """Whether ``hint`` is a jaxtyping array annotation or a union/generic holding one.

    >>> from jaxtyping import Int
    >>> from torch import Tensor
    >>> names_an_array(Int[Tensor, "b"] | None), names_an_array(int | None)
    (True, False)
    """
    if isinstance(hint, type) and issubclass(hint, AbstractArray):
        return True
    return any(names_an_array(arg) for arg in typing.get_args(hint))


def check_shapes(stand_in: Callable) -> Callable:
    """``stand_in`` type-checked by beartype on its array annotations only (itself when none).

    Only called on jaxtyping's stand-in functions, whose annotations it may rewrite.
    """
    annotations = getattr(stand_in, "__annotations__", {})
    arrays = {name: hint for name, hint in annotations.items() if names_an_array(hint)}
    if not arrays:
        return stand_in
    stand_in.__annotations__ = arrays
    checked = beartype(stand_in)

    @functools.wraps(stand_in)
    def check(*args, **kwargs):
        try:
            return checked(*args, **kwargs)
        except BeartypeCallHintViolation as violation:
            refusal = _own_refusal(stand_in, args, kwargs)
            if refusal is None:
                raise
            raise refusal from violation

    return check


def _own_refusal(stand_in: Callable, args: tuple, kwargs: dict) -> Exception | None:
    """The ``IhprobeError`` the checked function raises on these arguments, or None when it
    accepts them, raises something else, or cannot be found (a nested function, or the stand-in
    that checks a return value). The error returned is also an ``AnnotationError``, the one
    exception that jaxtyping lets through from a typechecker unchanged."""
    # imported here: ihprobe cannot load while this module does (the hook instruments it)
    from ihprobe.core.errors import IhprobeError

    function = _original(stand_in)
    if function is None:
        return None
    if set(inspect.signature(stand_in).parameters) - set(inspect.signature(function).parameters):
        return None  # the return-value stand-in: the function has run already
    try:
        function(*args, **kwargs)
    except IhprobeError as error:
        refusal = type("IhprobeError", (type(error), AnnotationError), {})
        refusal.__module__ = type(error).__module__
        return refusal(*error.args)
    except Exception:
        return None
    return None


def _original(stand_in: Callable) -> Callable | None:
    """The undecorated function that ``stand_in`` describes, found by module and qualified name."""
    found: object = sys.modules.get(stand_in.__module__)
    for part in stand_in.__qualname__.split("."):
        found = getattr(found, part, None)
    return getattr(found, "__wrapped__", None)
