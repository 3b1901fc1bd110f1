"""The named choices of an ablation, each written once: which heads count as the top set
(scope), which random heads it is compared with (baseline) and what ablated heads output (mode).

The tuples are read from the ``Literal`` types, so the type checker and the argument checks
(and the CLI's ``choices``, which import this torch-free module) agree by construction.

>>> SCOPES, MODES
(('layer', 'global'), ('mean', 'zero', 'resample', 'pattern'))
"""

from __future__ import annotations

from typing import Literal, get_args

Scope = Literal["layer", "global"]  # top heads per layer, or over the whole model
Baseline = Literal["layer-matched", "global", "score-matched"]
Mode = Literal["mean", "zero", "resample", "pattern"]  # what an ablated head outputs
SCOPES: tuple[str, ...] = get_args(Scope)
BASELINES: tuple[str, ...] = get_args(Baseline)
MODES: tuple[str, ...] = get_args(Mode)
HOOK_MODES = ("zero", "mean")  # the modes that need no evaluation rows (ablation_hooks)
