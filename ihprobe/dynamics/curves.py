"""A trajectory table as one value per checkpoint: the curve whose change point
:func:`~ihprobe.dynamics.changepoint.emergence` finds, and that the emergence and forecast
figures draw. Per-head metrics are reduced over heads (:data:`REDUCERS`) or one head is picked.

>>> REDUCERS
('max', 'mean', 'min')
"""

from __future__ import annotations

import pandas as pd

from ihprobe.core.errors import IhprobeError

REDUCERS = ("max", "mean", "min")


def curve(
    table: pd.DataFrame, metric: str = "prefix_matching", reduce: str | tuple[int, int] = "max"
) -> pd.DataFrame:
    """One value per checkpoint: ``step, tokens, value, duplicate`` ordered by training
    progress (``duplicate``: the table's ``duplicate_of`` names an earlier checkpoint).

    Per-head metrics are reduced over heads (``"max"``, ``"mean"``, ``"min"``) or picked for
    one ``(layer, head)``; model-level metrics are taken as they are.

    Example:
        >>> t = pd.DataFrame({"model": "m", "revision": None, "step": [0, 0, 10, 10],
        ...     "tokens": [0, 0, 640, 640], "layer": 0, "head": [0, 1, 0, 1],
        ...     "metric": "prefix_matching", "value": [0.01, 0.02, 0.5, 0.1]})
        >>> curve(t).value.tolist()
        [0.02, 0.5]
    """
    missing = {"step", "tokens", "metric", "value"} - set(table.columns)
    if missing:
        raise IhprobeError(
            f"the table lacks columns {sorted(missing)}; pass a table from ihprobe.trajectory()."
        )
    rows = table[table["metric"] == metric]
    if rows.empty:
        found = sorted(table["metric"].unique())
        raise IhprobeError(f"the table has no {metric!r} rows; it holds {found}.")
    per_head = "layer" in rows and rows["layer"].notna().any()
    if isinstance(reduce, tuple):
        if not per_head:
            raise IhprobeError(f"{metric} is a model-level metric; a (layer, head) makes no sense.")
        layer, head = reduce
        rows = rows[(rows["layer"] == layer) & (rows["head"] == head)]
        if rows.empty:
            raise IhprobeError(f"the table has no {metric} rows for head ({layer}, {head}).")
        how = "max"  # one row per checkpoint already
    elif reduce in REDUCERS:
        how = reduce
    else:
        raise IhprobeError(f"reduce={reduce!r}: use one of {REDUCERS} or a (layer, head) tuple.")
    keys = ["step", "tokens"]
    grouped = rows.groupby(keys, dropna=False, sort=False)
    out = grouped["value"].agg(how).reset_index()
    # a checkpoint whose weights repeat an earlier one's (trajectory's duplicate_of column)
    out["duplicate"] = (
        grouped["duplicate_of"].agg(lambda d: d.notna().any()).to_numpy(bool)
        if "duplicate_of" in rows
        else False
    )
    if "model" in rows and rows["model"].nunique() > 1 and out["tokens"].duplicated().any():
        raise IhprobeError(
            f"the table mixes runs {sorted(rows['model'].unique())[:4]} with overlapping "
            "checkpoints; pass one run at a time, e.g. table[table.model == name]."
        )
    order = "tokens" if out["tokens"].notna().all() else "step"
    if out[order].isna().any():
        raise IhprobeError("every checkpoint needs its step or its token count to be ordered.")
    return out.sort_values(order, kind="stable").reset_index(drop=True)
