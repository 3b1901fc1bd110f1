"""The entries of the series results cache (:mod:`ihprobe.series.cache`), checked when read:
a checkpoint's rows ``[layer, head, metric, value]``, or, for a series kept with its settings
(``records``), ``{"rows": [...], "settings": {...}}``.

>>> rows, settings = checked_entry({"rows": [[0, 0, "m", 0.5]], "settings": {"n": 8}})
>>> rows.shape, settings
((1, 4), {'n': 8})
"""

from __future__ import annotations

import pandas as pd

from ihprobe import __version__
from ihprobe.core import cache

ROW_COLUMNS = ["layer", "head", "metric", "value"]  # one cached row
CACHE_VERSION = 3  # bump when the cached rows change meaning (2: checked; 3: one per metric)


def checked_entry(value, finite: bool = True) -> tuple[pd.DataFrame, dict]:
    """A cached ``{"rows", "settings"}`` entry as ``(rows table, settings)``, or ValueError
    when it is not one (the rows as :func:`checked_rows` checks them, or none: every metric
    was skipped, and the settings' notes say why; settings a mapping).

    Example:
        >>> checked_entry({"rows": [[0, 0, "m", 0.5]]})
        Traceback (most recent call last):
        ValueError: not a {rows, settings} entry
    """
    if not isinstance(value, dict) or set(value) != {"rows", "settings"}:
        raise ValueError("not a {rows, settings} entry")
    if not isinstance(value["settings"], dict):
        raise ValueError("its settings are not a mapping")
    if value["rows"] == []:  # every metric skipped; the settings' notes say why
        return no_rows(), dict(value["settings"])
    return checked_rows(value["rows"], finite), dict(value["settings"])


def no_rows() -> pd.DataFrame:
    """An empty table of cached rows, typed as :func:`checked_rows` types them.

    >>> no_rows().dtypes["layer"], list(no_rows())
    (Int64Dtype(), ['layer', 'head', 'metric', 'value'])
    """
    empty = {"layer": pd.array([], dtype="Int64"), "head": pd.array([], dtype="Int64")}
    return pd.DataFrame(
        {**empty, "metric": pd.Series(dtype=object), "value": pd.Series(dtype=float)}
    )


def checked_rows(value, finite: bool = True) -> pd.DataFrame:
    """Cached rows ``[[layer, head, metric, value], ...]`` as a table, or ValueError when they
    are not rows of that schema, repeat a ``(layer, head, metric)``, cover a different grid of
    heads for different metrics, or hold a non-finite value (with ``finite``).

    Example:
        >>> checked_rows([[0, 0, "m", 0.5], [0, 1, "m", 0.25], [None, None, "loss", 2.0]]).shape
        (3, 4)
        >>> checked_rows([[0, 0, "m", float("nan")]])
        Traceback (most recent call last):
        ValueError: nan is not finite
    """
    if not isinstance(value, list) or not value:
        raise ValueError("no rows")
    rows = []
    for row in value:
        if not isinstance(row, list) or len(row) != 4 or not isinstance(row[2], str):
            raise ValueError(f"{row!r} is not a [layer, head, metric, value] row")
        layer, head = cache.index(row[0]), cache.index(row[1])
        if (layer is None) != (head is None):
            raise ValueError(f"{row!r} names a layer without a head or a head without a layer")
        rows.append((layer, head, row[2], cache.number(row[3], finite=finite)))
    if len({row[:3] for row in rows}) != len(rows):
        raise ValueError("a (layer, head, metric) appears twice")
    grids = {}
    for layer, head, metric, _ in rows:
        if layer is not None:
            grids.setdefault(metric, set()).add((layer, head))
    shapes = {frozenset(grid) for grid in grids.values()}
    if len(shapes) > 1 or any(_holes(grid) for grid in shapes):
        raise ValueError("the head rows do not cover one full grid of layers and heads")
    frame = pd.DataFrame(rows, columns=ROW_COLUMNS)
    frame[["layer", "head"]] = frame[["layer", "head"]].astype("Int64")
    return frame


def _holes(grid: frozenset) -> bool:
    """Whether ``grid`` misses some (layer, head) of ``range(layers) x range(heads)``."""
    layers, heads = max(layer for layer, _ in grid) + 1, max(head for _, head in grid) + 1
    return len(grid) != layers * heads


def as_records(rows: pd.DataFrame) -> list[list]:
    """The rows as JSON lists ``[layer or None, head or None, metric, value]``."""
    return [
        [None if pd.isna(layer) else int(layer), None if pd.isna(head) else int(head), m, float(v)]
        for layer, head, m, v in rows.itertuples(index=False)
    ]


def settings_key(metrics, scan_kwargs: dict) -> str:
    """A short hash of everything besides the weights that changes a scan's numbers."""

    def plain(value):
        if hasattr(value, "tolist"):  # tensors of user tokens
            return value.tolist()
        return value if isinstance(value, (int, float, str, bool, type(None))) else repr(value)

    key = {
        "version": [__version__, CACHE_VERSION],
        "metrics": sorted(metrics) if metrics is not None else None,
        "scan": {k: plain(v) for k, v in sorted(scan_kwargs.items())},
    }
    return cache.key(key)
