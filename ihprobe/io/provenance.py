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

    @property
    def label(self) -> str:
        """``model · revision · step S · N tokens``, the parts that are known.

        >>> Provenance("run", step=60, tokens=15360).label
        'run · step 60 · 15,360 tokens'
        """
        step = None if self.step is None else f"step {self.step}"
        tokens = None if self.tokens is None else f"{self.tokens:,} tokens"
        return " · ".join(str(x) for x in (self.model, self.revision, step, tokens) if x)


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

    >>> scores = pd.DataFrame({"layer": [0], "head": [1], "metric": ["m"], "value": [2]})
    >>> frame = with_provenance(scores, Provenance("gpt2", step=5))
    >>> frame.to_dict("records")  # doctest: +NORMALIZE_WHITESPACE
    [{'model': 'gpt2', 'revision': None, 'step': 5, 'tokens': None,
      'layer': 0, 'head': 1, 'metric': 'm', 'value': 2.0}]
    >>> frame["step"].dtype
    Int64Dtype()
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


# what a CSV row may say beside COLUMNS; every CSV ihprobe writes has all of them, in this order
QUALIFIERS = (
    "statistic",
    "sender_layer",
    "sender_head",
    "input",
    "position",
    "duplicate_of",
    "repeats",
)
CSV_COLUMNS = COLUMNS + QUALIFIERS


def csv_table(
    frame: pd.DataFrame,
    provenance: Provenance | None = None,
    *,
    statistics: tuple[str, ...] = (),
) -> pd.DataFrame:
    """Any result table in the one CSV shape every command writes: :data:`CSV_COLUMNS`, one
    value per row.

    A packed ``metric`` such as ``ar_accuracy.p_value`` is split into ``metric`` and
    ``statistic``; each column named in ``statistics`` becomes rows of its own with that
    ``statistic`` (``value`` itself keeps an empty one); ``provenance`` fills the first four
    columns of a table that has none. Qualifiers that do not apply stay empty.

    >>> packed = pd.DataFrame({"layer": [None], "head": [None], "metric": ["ar_accuracy.clean"],
    ...                        "value": [0.5]})
    >>> row = csv_table(with_provenance(packed, Provenance("m"))).iloc[0]
    >>> row["metric"], row["statistic"], len(row) == len(CSV_COLUMNS)
    ('ar_accuracy', 'clean', True)
    """
    frame = frame.drop(columns=[c for c in COLUMNS[:4] if provenance is not None and c in frame])
    if statistics:
        keep = [c for c in frame.columns if c not in statistics and c != "value"]
        parts = [frame[keep].assign(value=frame["value"], statistic=None)]
        parts += [frame[keep].assign(value=frame[c], statistic=c) for c in statistics]
        frame = pd.concat(parts, ignore_index=True)
    if provenance is not None:
        extra = frame[[c for c in frame if c not in COLUMNS]]
        frame = with_provenance(frame, provenance).join(extra)
    frame = frame.copy()
    if "statistic" not in frame:
        packed = frame["metric"].astype(str).str.partition(".")
        frame["metric"] = packed[0]
        frame["statistic"] = packed[2].where(packed[2] != "", None)
    for column in QUALIFIERS:
        if column not in frame:
            frame[column] = None
    for column in ("sender_layer", "sender_head", "position"):
        frame[column] = frame[column].astype("Int64")
    return frame[list(CSV_COLUMNS)]
