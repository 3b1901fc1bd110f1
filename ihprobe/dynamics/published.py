"""The law of Aoyama et al. that predicts when induction heads emerge, as published.

The number of optimiser updates ``U`` at the emergence point does not depend on model size; it
depends on the batch size ``B`` (sequences per update) and the context ``C`` as a power law::

    U = T / (B**b * C**c)            tokens N = U * B * C

``law="fitted"`` is [A]'s fit (T = 750,000, b = 0.37, c = 0.62). ``law="sqrt"`` is the other
published form ``N = 10**5.7 * sqrt(B * C)`` tokens, which is the same power law with
T = 10**5.7 and b = c = 0.5. Both were fitted to [A]'s optimiser settings;
:mod:`ihprobe.dynamics.law` refits them from a user's own runs.

>>> round(predict_emergence(16, 64).updates, -2)
20400.0
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from ihprobe.core.errors import IhprobeError


@dataclass(frozen=True)
class Law:
    """``U = T / (B**b * C**c)`` updates at the emergence point."""

    T: float
    b: float
    c: float
    name: str = "custom"

    def updates(self, batch_size: float, context: float) -> float:
        return self.T / (batch_size**self.b * context**self.c)


LAWS: dict[str, Law] = {
    "fitted": Law(T=750_000.0, b=0.37, c=0.62, name="fitted"),  # [A]: U = 750k / (B^.37 C^.62)
    "sqrt": Law(T=10**5.7, b=0.5, c=0.5, name="sqrt"),  # [A]: N = 10^5.7 sqrt(B C) tokens
}


@dataclass(frozen=True)
class Prediction:
    """When the law expects induction heads: optimiser updates and training tokens.

    Example:
        >>> from ihprobe.dynamics.law import predict_emergence
        >>> p = predict_emergence(batch_size=16, context=64)
        >>> p.batch_size, p.context, p.tokens == p.updates * 16 * 64
        (16, 64, True)
    """

    updates: float
    tokens: float
    law: Law
    batch_size: int
    context: int

    def to_dict(self) -> dict:
        shape = {key: getattr(self, key) for key in ("batch_size", "context", "updates", "tokens")}
        return {**shape, "law": self.law.name, "T": self.law.T, "b": self.law.b, "c": self.law.c}


def get_law(law: str | Law, *, T: float | None = None, b=None, c=None) -> Law:
    """A law by name (``"fitted"``, ``"sqrt"``) or as given, with constants overridden."""
    if isinstance(law, str):
        if law not in LAWS:
            raise IhprobeError(f"unknown law {law!r}; choose one of {sorted(LAWS)}.")
        law = LAWS[law]
    if not isinstance(law, Law):
        law = law.law  # a LawFit
    overrides = {k: float(v) for k, v in {"T": T, "b": b, "c": c}.items() if v is not None}
    bad = {k: v for k, v in overrides.items() if not math.isfinite(v) or (k == "T" and v <= 0)}
    if bad:
        raise IhprobeError(f"law constants must be finite and T positive (got {bad}).")
    if overrides:
        name = f"{law.name} (" + ", ".join(f"{k}={v:g}" for k, v in overrides.items()) + ")"
        law = Law(**{"T": law.T, "b": law.b, "c": law.c, **overrides, "name": name})
    return law


def predict_emergence(
    batch_size: int,
    context: int,
    law: str | Law = "fitted",
    *,
    T: float | None = None,
    b: float | None = None,
    c: float | None = None,
) -> Prediction:
    """Predict the updates and tokens at which induction heads emerge.

    Args:
        batch_size: sequences per optimiser update, B.
        context: tokens per sequence, C.
        law: ``"fitted"`` (``U = 750000 / (B^0.37 C^0.62)``), ``"sqrt"``
            (``N = 10^5.7 sqrt(B C)`` tokens), a :class:`Law`, or a :class:`LawFit`.
        T, b, c: override the law's constant and exponents.

    Example:
        >>> p = predict_emergence(4, 64)                 # [A]'s synthetic setting
        >>> round(p.updates, -3), round(p.tokens / 1e6, 1)
        (34000.0, 8.7)
    """
    shape_ok = all(
        isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in (batch_size, context)
    )
    if not shape_ok or batch_size < 1 or context < 1:
        raise IhprobeError(
            f"batch size and context must be positive integers (got B={batch_size!r}, "
            f"C={context!r})."
        )
    chosen = get_law(law, T=T, b=b, c=c)
    try:  # an extreme B, C or exponent: one line, never a raw OverflowError or ZeroDivisionError
        updates = chosen.updates(batch_size, context)
        tokens = updates * batch_size * context
    except (OverflowError, ZeroDivisionError) as err:
        updates = tokens = math.nan
        why = err
    else:
        why = None
    if why is not None or not (math.isfinite(updates) and math.isfinite(tokens) and updates > 0):
        raise IhprobeError(
            f"{chosen.name} at B={batch_size}, C={context} gives no finite positive number of "
            f"updates ({why or updates}): the batch size, context or exponents are too extreme."
        )
    return Prediction(updates, tokens, chosen, batch_size, context)
