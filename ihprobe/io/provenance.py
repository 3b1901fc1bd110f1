"""Where a result came from (model, revision, step, tokens) and the long table every result writes.

>>> with_provenance(pd.DataFrame({"layer": [0], "head": [1], "metric": ["m"], "value": [2]}),
...                 Provenance("gpt2", step=5)).columns.tolist()[:4]
['model', 'revision', 'step', 'tokens']
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

# the long table every result writes: provenance, then one value per (head or model, metric)
COLUMNS = ("model", "revision", "step", "tokens", "layer", "head", "metric", "value")


@dataclass(frozen=True)
class Provenance:
    """Where a loaded model came from; carried into every result table."""

    model: str
    revision: str | None = None
    step: int | None = None
    tokens: int | None = None


class CarriesProvenance:
    """Read-through ``model_name, revision, step, tokens`` of a result's ``provenance``."""

    provenance: Provenance

    @property
    def model_name(self) -> str:
        return self.provenance.model

    @property
    def revision(self) -> str | None:
        return self.provenance.revision

    @property
    def step(self) -> int | None:
        return self.provenance.step

    @property
    def tokens(self) -> int | None:
        return self.provenance.tokens


def with_provenance(frame: pd.DataFrame, provenance: Provenance) -> pd.DataFrame:
    """``frame`` (``layer, head, metric, value``) as the long table :data:`COLUMNS`.

    ``step``, ``tokens``, ``layer`` and ``head`` are nullable integers, so tables of many
    checkpoints concatenate without turning into floats.

    >>> with_provenance(pd.DataFrame({"layer": [0], "head": [1], "metric": ["m"], "value": [2]}),
    ...                 Provenance("gpt2", step=5)).iloc[0].tolist()
    ['gpt2', None, 5, <NA>, 0, 1, 'm', 2.0]
    """
    frame = frame.copy()
    p = provenance
    frame.insert(0, "model", p.model)
    frame.insert(1, "revision", p.revision)
    frame.insert(2, "step", pd.array([p.step] * len(frame), dtype="Int64"))
    frame.insert(3, "tokens", pd.array([p.tokens] * len(frame), dtype="Int64"))
    frame["layer"] = frame["layer"].astype("Int64")
    frame["head"] = frame["head"].astype("Int64")
    frame["value"] = frame["value"].astype(float)
    return frame[list(COLUMNS)]
