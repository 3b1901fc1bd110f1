"""The results of patching: the metric after each patch, with where the model came from.

Both result types carry a :class:`~ihprobe.io.provenance.Provenance` and write the long table
every result writes (``model, revision, step, tokens, layer, head, metric, value``), with a
packed ``metric.statistic`` for the fraction restored (see
:func:`~ihprobe.io.provenance.csv_table`), so patching tables of many checkpoints concatenate
with scans and ablations.

>>> result = PathPatchResult([(0, 3)], [(1, 2)], "k", clean=2.0, corrupted=0.0, patched=1.5)
>>> result.fraction
0.75
>>> from ihprobe.io.provenance import COLUMNS
>>> frame = result.to_frame()
>>> frame.columns.tolist()[:8] == list(COLUMNS)
True
>>> frame[["layer", "head", "metric", "value"]].values.tolist()[:2]
[[1, 2, 'path_patch', 1.5], [1, 2, 'path_patch.fraction', 0.75]]
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
import torch
from jaxtyping import Float

from ihprobe.core import checks
from ihprobe.core.errors import IhprobeError
from ihprobe.io.provenance import CarriesProvenance, Provenance, with_provenance

Head = tuple[int, int]
UNKNOWN = Provenance("")  # a result built by hand, not from a loaded model


@dataclass
class PatchResult(CarriesProvenance):
    """The metric after each patch: ``values[layer, head]`` or ``values[layer, head, pos]``.

    Example:
        >>> import ihprobe
        >>> model = ihprobe.load(ihprobe.build_model(ihprobe.TrainConfig(d_model=16, heads=2), 128))
        >>> result = ihprobe.patch(model)
        >>> result.per, tuple(result.values.shape)      # [layer, head]
        ('head', (2, 2))
    """

    per: str
    values: Float[torch.Tensor, "layer head *pos"]
    clean: float
    corrupted: float
    method: str = "activation"
    provenance: Provenance = UNKNOWN
    settings: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        checks.finite_fields("patch", self, "values", "clean", "corrupted")

    @property
    def fractions(self) -> Float[torch.Tensor, "layer head *pos"]:
        """``(patched - corrupted) / (clean - corrupted)``; undefined (an :class:`IhprobeError`
        saying why, never a tensor of NaN) when clean equals corrupted."""
        return (self.values - self.corrupted) / effect(self.clean, self.corrupted)

    def to_frame(self) -> pd.DataFrame:
        """``model, revision, step, tokens, method, layer, head, position, value, fraction``
        (position empty per head), one row per patch."""
        index = torch.ones_like(self.values, dtype=torch.bool).nonzero().tolist()
        frame = pd.DataFrame(index, columns=["layer", "head", "position"][: self.values.ndim])
        if "position" not in frame:
            frame["position"] = pd.NA
        frame["value"] = self.values.flatten().tolist()
        frame["fraction"] = self.fractions.flatten().tolist()
        frame.insert(0, "method", self.method)
        for i, column in enumerate(("model", "revision", "step", "tokens")):
            frame.insert(i, column, getattr(self.provenance, column))
        return frame.astype({"position": "Int64", "step": "Int64", "tokens": "Int64"})


@dataclass
class PathPatchResult(CarriesProvenance):
    """The metric with only the sender -> receivers' ``receiver_input`` path patched.

    Example:
        >>> import ihprobe
        >>> model = ihprobe.load(ihprobe.build_model(ihprobe.TrainConfig(d_model=16, heads=2), 128))
        >>> result = ihprobe.path_patch(model, [(0, 0)], [(1, 1)], "k")
        >>> result.sender, result.receivers, result.receiver_input
        ([(0, 0)], [(1, 1)], 'k')
    """

    sender: list[Head]
    receivers: list[Head]
    receiver_input: str
    clean: float
    corrupted: float
    patched: float
    provenance: Provenance = UNKNOWN

    def __post_init__(self) -> None:
        checks.finite_fields("path_patch", self, "clean", "corrupted", "patched")

    @property
    def fraction(self) -> float:
        """``(patched - corrupted) / (clean - corrupted)``; undefined (an :class:`IhprobeError`
        saying why) when clean equals corrupted."""
        return (self.patched - self.corrupted) / effect(self.clean, self.corrupted)

    def to_frame(self) -> pd.DataFrame:
        """The long table, one block per (receiver, sender) pair: ``path_patch`` (the patched
        metric), ``path_patch.fraction``, ``.clean`` and ``.corrupted`` at the receiver's
        ``layer, head``, with ``sender_layer, sender_head, input`` beside them."""
        stats = {
            "": self.patched,
            ".fraction": self.fraction,
            ".clean": self.clean,
            ".corrupted": self.corrupted,
        }
        rows = [
            (layer, head, f"path_patch{name}", value, s_layer, s_head)
            for layer, head in self.receivers
            for s_layer, s_head in self.sender
            for name, value in stats.items()
        ]
        columns = ["layer", "head", "metric", "value", "sender_layer", "sender_head"]
        frame = pd.DataFrame(rows, columns=columns)
        extra = frame[["sender_layer", "sender_head"]].astype("Int64")
        long = with_provenance(frame[columns[:4]], self.provenance)
        return long.join(extra).assign(input=self.receiver_input)


def effect(clean: float, corrupted: float) -> float:
    """The clean-minus-corrupted difference a fraction divides by; when there is none the
    fraction restored is 0/0, undefined, and this says so.

    >>> effect(2.0, 0.5)
    1.5
    >>> effect(1.0, 1.0)                                                # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ihprobe.core.errors.IhprobeError: the fraction restored is undefined: clean and corrupted ...
    """
    if clean == corrupted:
        raise IhprobeError(
            f"the fraction restored is undefined: clean and corrupted inputs give the same "
            f"metric ({clean:.4g}), so there is no effect to restore (0/0); pass corrupted inputs "
            "that change the metric (the patched values themselves are defined)."
        )
    return clean - corrupted
