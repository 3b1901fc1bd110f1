"""Scan metrics whose computation a higher layer provides.

``scan`` (this layer) plans every metric of the metric table, but ``fv`` is computed by
:func:`ihprobe.causal.fv.fv_scores`, one layer up, which this layer may not import. So the
metric table declares ``fv`` and the module that computes it fills this registry when it is
imported (``ihprobe.causal.fv`` calls :func:`provide`); ``ihprobe.scan`` (the public name)
imports that module with ``scan``, and so does every caller above ``causal/`` that reaches
``fv`` (``trajectory``, ``ihprobe scan``). A provider returns the ``[layer, head]`` scores, or
None with the note that says why the metric was skipped.

>>> sorted(PROVIDERS) == sorted(set(PROVIDERS) & set(METRIC_TABLE))
True
>>> Provided(None, note="fv skipped: ...").scores is None
True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from jaxtyping import Float

from ihprobe.core.errors import IhprobeError
from ihprobe.probes.metrics import METRIC_TABLE


@dataclass
class Provided:
    """What a provider found: ``scores`` ``[layer, head]`` (None: skipped, ``note`` says why)
    and ``settings`` to record beside the scan's own."""

    scores: Float[torch.Tensor, "layer head"] | None
    settings: dict = field(default_factory=dict)
    note: str | None = None


# metric name -> compute(model, options) -> Provided; options: the scan's keyword arguments
# the metric reads (``tasks``, ``seed``)
PROVIDERS: dict[str, Callable[[object, dict], Provided]] = {}


def provide(metric: str, compute: Callable[[object, dict], Provided]) -> None:
    """Register ``compute`` as the way ``scan`` computes ``metric`` (a head metric of the
    table); called once, by the module that computes it, when that module is imported.

    >>> provide("no_such_metric", lambda model, options: None)
    Traceback (most recent call last):
    ihprobe.core.errors.IhprobeError: no_such_metric is no head metric of the metric table.
    """
    spec = METRIC_TABLE.get(metric)
    if spec is None or spec.level != "head" or not spec.in_scan:
        raise IhprobeError(f"{metric} is no head metric of the metric table.")
    PROVIDERS[metric] = compute


def provided(model, metric: str, options: dict) -> Provided:
    """``metric`` of ``model`` from its registered provider; an error when none is registered
    (this layer was imported without the one above it that computes ``metric``).

    >>> provided(None, "prefix_matching", {})
    Traceback (most recent call last):
    ihprobe.core.errors.IhprobeError: prefix_matching: its module is not imported; use ihprobe.scan.
    """
    if metric not in PROVIDERS:
        raise IhprobeError(f"{metric}: its module is not imported; use ihprobe.scan.")
    return PROVIDERS[metric](model, options)
