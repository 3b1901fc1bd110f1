"""The result of :func:`~ihprobe.causal.fv.fv_scores`: every head's function-vector score.

A head's FV score (Todd et al.'s *average indirect effect*) is the rise in the probability of
the answer's first token when the head's mean output over clean prompts is patched into the
last position of label-shuffled prompts, averaged over each task's prompts and then over the
tasks the model does above chance. :class:`FVResult` keeps what it takes to recompute any
number: per task the clean and corrupted prompts, the answer ids, the head means, the clean
accuracy and its chance level, and the answer's probability with each head patched.

>>> result = ihprobe.fv_scores(model)                                     # doctest: +SKIP
>>> result.top_heads(3)                                                   # doctest: +SKIP
[(1, 2, 0.41), (1, 0, 0.03), (0, 3, 0.01)]
>>> print(result.summary())                                               # doctest: +SKIP
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from jaxtyping import Float

from ihprobe.causal.tasks import TaskPrompts
from ihprobe.core import checks
from ihprobe.io.provenance import CarriesProvenance, Provenance

SIGNIFICANCE = 0.05  # one-sided level: a task above chance, a head above zero (Bonferroni)
# The effect floor of an FV head. Significance alone counts any head whose tiny rise is steady
# over many prompts (a planted induction head's 0.012 beside its FV head's 0.6): a head must
# also raise the answer's probability by MIN_EFFECT (half a percentage point, absolute: a
# random model's heads move it by about 1e-5) and by RELATIVE_FLOOR of the top head's score
# (the heads that carry the task, not every head that leans its way).
MIN_EFFECT = 0.005
RELATIVE_FLOOR = 0.1


@dataclass
class FVTask:
    """One task's evidence: prompts, head means, baselines and patched probabilities.

    ``probabilities[0]`` is the answer's probability on each corrupted prompt (the baseline);
    ``probabilities[1 + layer * n_heads + head]`` the same with that head's ``z`` at the last
    position set to ``means[layer, head]``.
    """

    name: str
    clean: TaskPrompts
    corrupted: TaskPrompts
    means: Float[torch.Tensor, "layer head d_head"]  # each head's mean z at clean last tokens
    clean_probability: Float[torch.Tensor, " prompt"]  # P(answer | clean prompt)
    clean_hits: Float[torch.Tensor, " prompt"]  # 1 where the answer is the top-1 token
    probabilities: Float[torch.Tensor, "group prompt"]
    chance: float  # accuracy of always guessing the most common answer token
    p_value: float  # one-sided binomial: clean hits@1 no better than ``chance``

    @property
    def accuracy(self) -> float:
        """Clean HITS@1."""
        return float(self.clean_hits.mean())

    @property
    def above_chance(self) -> bool:
        return self.p_value <= SIGNIFICANCE and self.accuracy > self.chance

    def effects(self, shape: tuple[int, int]) -> Float[torch.Tensor, "layer head prompt"]:
        """Each head's indirect effect on each corrupted prompt."""
        return (self.probabilities[1:] - self.probabilities[0]).view(*shape, -1)


@dataclass
class FVResult(CarriesProvenance):
    """Every head's FV score (``scores``, ``[layer, head]``; NaN when no task is above chance)
    and the per-task evidence (``tasks``).

    >>> result.scores.shape, result.used                                   # doctest: +SKIP
    (torch.Size([2, 4]), ['antonym', 'country_capital'])
    """

    provenance: Provenance
    shape: tuple[int, int]
    tasks: list[FVTask]
    settings: dict = field(default_factory=dict)

    @property
    def used(self) -> list[str]:
        """The tasks the model does above chance: the ones the scores average over."""
        return [t.name for t in self.tasks if t.above_chance]

    def task_scores(self, name: str) -> Float[torch.Tensor, "layer head"]:
        """One task's average indirect effect per head (whether or not it is used)."""
        names = [t.name for t in self.tasks]
        checks.choice("task", name, names)
        return self.tasks[names.index(name)].effects(self.shape).mean(-1)

    @property
    def scores(self) -> Float[torch.Tensor, "layer head"]:
        """The FV score: per-task scores averaged over :attr:`used` (NaN when none is)."""
        used = [self.task_scores(t) for t in self.used]
        if not used:
            return torch.full(self.shape, math.nan, dtype=torch.float64, device="cpu")
        return torch.stack(used).mean(0)

    def p_values(self) -> Float[torch.Tensor, "layer head"]:
        """One-sided p of each head's effect being above zero: a t-test over the used tasks'
        prompts (each task's effects centred per prompt count alike); NaN without a used task."""
        used = [t.effects(self.shape) for t in self.tasks if t.above_chance]
        if not used:
            return torch.full(self.shape, math.nan, dtype=torch.float64, device="cpu")
        effects = torch.cat(used, dim=-1)
        n = effects.shape[-1]
        mean, sd = (
            effects.mean(-1),
            effects.std(-1) if n > 1 else torch.zeros(self.shape, device="cpu"),
        )
        t = mean / (sd / math.sqrt(n)).clamp_min(1e-12)
        return torch.from_numpy(_t_tail(t.numpy(), n - 1))

    def fv_heads(
        self, *, min_effect: float = MIN_EFFECT, relative: float = RELATIVE_FLOOR
    ) -> list[tuple[int, int, float]]:
        """Heads whose score is above zero at :data:`SIGNIFICANCE` (Bonferroni over all heads)
        and at least the effect floor, ``max(min_effect, relative * top score)``
        (:data:`MIN_EFFECT`, :data:`RELATIVE_FLOOR`), best first.

        >>> result.fv_heads(), result.fv_heads(min_effect=0, relative=0)  # doctest: +SKIP
        ([(1, 1, 0.598)], [(1, 1, 0.598), (1, 0, 0.012)])
        """
        top = self.top_heads(None)
        if not top:
            return []
        floor = self.effect_floor(min_effect=min_effect, relative=relative)
        level = SIGNIFICANCE / (self.shape[0] * self.shape[1])
        p = self.p_values()
        return [h for h in top if float(p[h[0], h[1]]) <= level and h[2] > 0 and h[2] >= floor]

    def effect_floor(
        self, *, min_effect: float = MIN_EFFECT, relative: float = RELATIVE_FLOOR
    ) -> float:
        """The least score an FV head needs: ``max(min_effect, relative * top score)`` (NaN
        when no task is above chance)."""
        top = self.top_heads(1)
        return max(min_effect, relative * top[0][2]) if top else math.nan

    def top_heads(self, k: int | None = 10) -> list[tuple[int, int, float]]:
        """``(layer, head, score)`` of the ``k`` best heads (all with None), best first; empty
        when no task is above chance."""
        scores = self.scores.flatten()
        if torch.isnan(scores).all():
            return []
        order = torch.sort(-scores, stable=True).indices
        n_heads = self.shape[1]
        found = [(int(i) // n_heads, int(i) % n_heads, float(scores[i])) for i in order]
        return found if k is None else found[:k]

    def to_frame(self) -> pd.DataFrame:
        """The tidy table ``model, revision, step, tokens, layer, head, task, used,
        clean_accuracy, chance, corrupted, score``: one row per head and task, and rows of task
        ``"all"`` with the FV score itself."""
        n_layers, n_heads = self.shape
        layer = np.repeat(np.arange(n_layers), n_heads)
        head = np.tile(np.arange(n_heads), n_layers)
        frames = []
        for t in self.tasks:
            frames.append(
                pd.DataFrame(
                    {
                        "layer": layer,
                        "head": head,
                        "task": t.name,
                        "used": t.above_chance,
                        "clean_accuracy": t.accuracy,
                        "chance": t.chance,
                        "corrupted": float(t.probabilities[0].mean()),
                        "score": self.task_scores(t.name).flatten().numpy(),
                    }
                )
            )
        frames.append(
            pd.DataFrame(
                {"layer": layer, "head": head, "task": "all", "used": bool(self.used)}
                | {"score": self.scores.flatten().numpy()}
            )
        )
        frame = pd.concat(frames, ignore_index=True)
        p = self.provenance
        frame.insert(0, "model", p.model)
        frame.insert(1, "revision", p.revision)
        frame.insert(2, "step", pd.array([p.step] * len(frame), dtype="Int64"))
        frame.insert(3, "tokens", pd.array([p.tokens] * len(frame), dtype="Int64"))
        return frame

    def summary(self) -> str:
        """The verdict in a few lines: which tasks count, the top heads, how many are FV heads.

        >>> print(result.summary())                                        # doctest: +SKIP
        FV scores of run · step 500: 2 of 13 tasks above chance (antonym 0.62, ...)
        top heads: L1H2 0.412, L1H0 0.031, L0H3 0.012
        FV heads (score >= 0.041: max(0.005, 0.1 x top); p <= 0.05 / 8 heads): L1H2
        """
        lines = []
        for t in self.tasks:
            mark = "used" if t.above_chance else "left out"
            lines.append(
                f"  {t.name}: clean accuracy {t.accuracy:.2f} (chance {t.chance:.2f}, "
                f"p = {t.p_value:.2g}), {mark}"
            )
        head = f"FV scores of {self.provenance.label}: {len(self.used)} of {len(self.tasks)} tasks "
        if not self.used:
            return "\n".join(
                [
                    head + "above chance",
                    *lines,
                    "no FV head: no task is above chance, so no "
                    "head can restore it (nothing to score)",
                ]
            )
        top = ", ".join(f"L{a}H{b} {s:.3f}" for a, b, s in self.top_heads(5))
        found = self.fv_heads()
        names = ", ".join(f"L{a}H{b}" for a, b, _ in found) or "none"
        n = self.shape[0] * self.shape[1]
        return "\n".join(
            [
                head + "above chance",
                *lines,
                f"top heads: {top}",
                f"FV heads (score >= {self.effect_floor():.2g}: max({MIN_EFFECT:g}, "
                f"{RELATIVE_FLOOR:g} x top); p <= {SIGNIFICANCE:g} / {n} heads): {names}",
            ]
        )

    def __repr__(self) -> str:
        top = self.top_heads(1)
        best = f"top L{top[0][0]}H{top[0][1]} {top[0][2]:.3f}" if top else "no task above chance"
        used = f"{len(self.used)}/{len(self.tasks)} tasks"
        return f"FVResult({self.provenance.label}, {used}, {best})"


def _t_tail(t: np.ndarray, dof: int) -> np.ndarray:
    """Upper-tail p of Student's t with ``dof`` degrees of freedom."""
    from scipy import stats  # 0.5 s of CPU to import: not on a scan's way (ihprobe scan)

    return stats.t.sf(t, max(dof, 1))


def binomial_tail(hits: int, n: int, p: float) -> float:
    """``P(X >= hits)`` for ``X ~ Binomial(n, p)``.

    >>> round(binomial_tail(3, 3, 0.5), 3)
    0.125
    """
    return float(sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(hits, n + 1)))
