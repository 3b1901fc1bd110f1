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
# the default top set of `ihprobe ablate` and the demo, one rule: the model's 3 heads that score
# highest on the ranking score, none at chance (ablation.ablate), against layer-matched draws;
# [B]'s per-layer protocol is the named option scope="layer", top=0.02
DEFAULT_SCOPE: Scope = "global"
DEFAULT_TOP = 3
DEFAULT_BASELINE: Baseline = "layer-matched"


def analysis(settings: dict, by: str, draws: int) -> str:
    """Which analysis an ablation ran, in words, from its settings.

    >>> analysis({"scope": "global", "top": 3, "baseline": "layer-matched"}, "prefix_matching", 20)
    "the model's top 3 heads by prefix_matching against 20 layer-matched random draws"
    >>> analysis({"scope": "layer", "top": 0.02, "baseline": "layer-matched"}, "ps", 20)
    "[B]'s per-layer top 2% by ps against 20 layer-matched random draws"
    """
    top, baseline = settings.get("top"), settings.get("baseline", DEFAULT_BASELINE)
    if top == "given":
        chosen = "the given heads"
    elif settings.get("scope") == "layer":
        size = f"{top:.0%}" if isinstance(top, float) else f"{top} heads"
        chosen = f"[B]'s per-layer top {size} by {by}"
    else:
        size = f"{top:.0%} of heads" if isinstance(top, float) else f"{top} heads"
        chosen = f"the model's top {size} by {by}"
    return f"{chosen} against {draws} {baseline} random draws"


# the analyses beside the default, and the flags that run them (docs/science.md compares them)
OTHER_ANALYSES = {
    "score-matched": "--baseline score-matched",
    "per-layer ([B]'s)": "--scope layer --top 0.02",
}
