"""Does a model have an induction head? A signature at several repeat lengths and a function.

One threshold on one score is not a sound test: a real head's prefix matching falls as the
repeated block grows (the natural-text reference head scores about 0.5 at n = 10 and 0.2 at
n = 128), and a head can attend like an induction head without the model using it. So a model
*has an induction head* when one head passes all three parts of :data:`RULE`, declared before
any data were read:

- **signature:** its prefix matching is at least ``ps`` at every repeat length in ``lengths``
  (chance, attention spread evenly over the earlier tokens, is the metric table's 0.067, 0.027
  and 0.014 at these lengths: below ``ps``, though not below 0.05 at n = 10);
- **use:** at every judged length, the model's loss on the second, repeated half of the rows is
  at least ``drop`` nats below its loss on the first half, beyond chance (the same gap on
  control rows whose second half repeats nothing: :func:`ihprobe.causal.copying.copy_advantage`);
- **this head copies:** zero-ablating that head lowers the copy advantage (first-half minus
  second-half loss) by at least ``copy`` nats more than the largest such fall among the other
  heads of its layer (:func:`ihprobe.causal.copying.copying_costs`). A head whose removal hurts
  every position alike lowers both halves' losses together and fails.

Amendment (2026-12-06, declared before it was applied to any run): the third part was "zero-
ablating the head raises the second-half loss by at least ``cost`` nats", which general damage
passes (14 of 16 natural runs without a head did); *use* was judged at the middle length only and
without its chance level. The old third part is still computed (``ablation_cost``,
``through_head``) and its verdict kept beside the new one (:attr:`HeadCheck.has_head_by_damage`).

The head examined is the one with the highest prefix matching at the middle length. A run's
onset (:func:`ihprobe.emergence` on its live probes) is the third ingredient of the studies'
rule; this module judges one checkpoint.

>>> RULE.ps, RULE.lengths, RULE.drop, RULE.copy, RULE.cost
(0.1, (10, 25, 50), 0.5, 0.1, 0.1)
>>> from ihprobe.probes.metrics import METRIC_TABLE
>>> [round(METRIC_TABLE["prefix_matching"].chance(0, n), 3) for n in RULE.lengths]
[0.067, 0.027, 0.014]
>>> check = head_check("reference/natural-docs")                    # doctest: +SKIP
>>> check.has_head, check.head, check.reason                        # doctest: +SKIP
(True, (1, 0), 'L1H0: PS 0.49 / 0.40 / 0.34 at n = 10 / 25 / 50 (all >= 0.1); ...')
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ihprobe.causal.copying import copy_advantage, copying_costs
from ihprobe.core import checks
from ihprobe.core.errors import IhprobeError
from ihprobe.io.any_model import as_model
from ihprobe.probes.battery import scan
from ihprobe.probes.inputs import repeated_tokens
from ihprobe.probes.metrics import METRIC_TABLE


@dataclass(frozen=True)
class Rule:
    """The thresholds of :func:`head_check` (see the module docstring)."""

    ps: float = 0.1
    lengths: tuple[int, ...] = (10, 25, 50)
    drop: float = 0.5
    copy: float = 0.1  # the copying part's margin M (nats), declared 2026-12-06
    cost: float = 0.1  # the superseded damage part's threshold, still reported

    def __post_init__(self) -> None:
        """Refuse a threshold that would judge nothing (NaN, infinite, out of range) in one line.

        >>> Rule(ps=float("nan"))                                  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ihprobe.core.errors.IhprobeError: Rule(ps=...) must be a finite number from 0.0 to 1.0 (got nan).
        """  # noqa: E501
        checks.real("Rule(ps=...)", self.ps, low=0.0, high=1.0)  # a share of attention
        for name in ("drop", "copy", "cost"):  # nats; a negative threshold passes anything
            checks.real(f"Rule({name}=...)", getattr(self, name), low=0.0)
        lengths = checks.sequence("Rule(lengths=...)", self.lengths)
        if not lengths:
            raise IhprobeError("Rule(lengths=...) must name at least one repeat length.")
        found = tuple(checks.count("Rule(lengths=...)", n, low=2) for n in lengths)
        object.__setattr__(self, "lengths", found)


RULE = Rule()


@dataclass(frozen=True)
class HeadCheck:
    """The outcome of :func:`head_check`: the head examined, the numbers behind each part of the
    rule, which parts passed, and one sentence saying why.

    Example:
        >>> import ihprobe
        >>> model = ihprobe.load(ihprobe.build_model(ihprobe.TrainConfig(d_model=16, heads=2), 128))
        >>> check = head_check(model, batch=4)
        >>> check.signature, sorted(check.prefix_matching)   # an untrained model: no signature
        (False, [10, 25])
    """

    head: tuple[int, int]
    prefix_matching: dict[int, float]  # the head's PS at each repeat length
    first_half_loss: float
    second_half_loss: float
    ablated_second_half_loss: float
    signature: bool
    used: bool
    through_head: bool  # the superseded part: ablating the head costs >= ``cost`` nats
    reason: str
    chance: dict[int, float] = field(default_factory=dict)  # chance PS at each length
    advantage: dict[int, float] = field(default_factory=dict)  # copy advantage beyond chance
    copying_cost: float = float("nan")  # fall of the copy advantage when the head is ablated
    copying_cost_matched: float = float("nan")  # less the largest fall of its layer's others
    copies: bool = False
    skipped: tuple[int, ...] = ()  # the rule's lengths the model's context cannot hold

    @property
    def loss_drop(self) -> float:
        return self.first_half_loss - self.second_half_loss

    @property
    def ablation_cost(self) -> float:
        return self.ablated_second_half_loss - self.second_half_loss

    @property
    def has_head(self) -> bool:
        """The rule as amended: signature, use beyond chance, and the head copies."""
        return self.signature and self.used and self.copies

    @property
    def has_head_by_damage(self) -> bool:
        """The superseded rule's verdict (third part: ablation damage), kept beside."""
        return self.signature and self.used and self.through_head

    def to_dict(self) -> dict:
        out = asdict(self)
        out.update(
            head=list(self.head),
            loss_drop=self.loss_drop,
            ablation_cost=self.ablation_cost,
            has_head=self.has_head,
            has_head_by_damage=self.has_head_by_damage,
        )
        for name in ("prefix_matching", "chance", "advantage"):
            out[name] = {str(k): v for k, v in getattr(self, name).items()}
        return out


def head_check(model, rule: Rule = RULE, *, batch: int = 50, seed: int = 0) -> HeadCheck:
    """Judge whether ``model`` (a hooked model, path or hub id) has an induction head by
    :data:`RULE`, on ``batch`` rows of repeated random tokens per repeat length.

    (Over 60 lines only by its example.)

    Example:
        >>> import ihprobe
        >>> model = ihprobe.load(ihprobe.build_model(ihprobe.TrainConfig(d_model=16, heads=2), 128))
        >>> check = head_check(model, batch=4)
        >>> check.used, check.reason.startswith(f"L{check.head[0]}H{check.head[1]}")
        (False, True)
    """
    if not isinstance(rule, Rule):
        raise IhprobeError(
            f"rule must be an ihprobe.causal.head_check.Rule, e.g. Rule(ps=0.1) "
            f"(got {type(rule).__name__} {rule!r:.40})."
        )
    model = as_model(model)
    lengths = tuple(n for n in rule.lengths if 2 * n <= model.cfg.n_ctx)
    skipped = tuple(n for n in rule.lengths if n not in lengths)
    if not lengths:
        raise IhprobeError(
            f"the model's context ({model.cfg.n_ctx}) holds none of the repeat lengths "
            f"{rule.lengths}; pass a Rule with shorter lengths."
        )
    middle = lengths[len(lengths) // 2]
    tables = {
        n: scan(model, ["prefix_matching"], n=n, batch=batch, seed=seed).head["prefix_matching"]
        for n in lengths
    }
    flat = int(tables[middle].flatten().argmax())
    head = divmod(flat, model.cfg.n_heads)
    ps = {n: float(t[head]) for n, t in tables.items()}
    chance = {n: METRIC_TABLE["prefix_matching"].chance(model.cfg.d_vocab, n) for n in lengths}
    rows = {n: repeated_tokens(model, n=n, batch=batch, seed=seed + 1) for n in lengths}
    advantages = {n: copy_advantage(model, rows[n], n) for n in lengths}
    first, second = advantages[middle].first, advantages[middle].second
    copying = copying_costs(model, head, rows[middle], middle)  # ablates each head of its layer
    ablated = copying.ablated_second
    signature = all(ps[n] >= rule.ps and ps[n] > chance[n] for n in lengths)
    used = all(a.above_chance >= rule.drop for a in advantages.values())
    copies = copying.matched >= rule.copy
    through = ablated - second >= rule.cost
    said = " / ".join(f"{v:.2f}" for v in ps.values())
    at = " / ".join(str(n) for n in ps)
    gaps = " / ".join(f"{a.above_chance:+.2f}" for a in advantages.values())
    reason = (
        f"L{head[0]}H{head[1]}: PS {said} at n = {at} ({'all' if signature else 'not all'} >= "
        f"{rule.ps:g} and above chance {' / '.join(f'{c:.3f}' for c in chance.values())}); "
        f"repeated half {gaps} nats below the first beyond chance "
        f"({'all >=' if used else 'not all >='} {rule.drop:g}); ablating the head lowers the "
        f"copy advantage by {copying.cost:+.2f} nats, {copying.matched:+.2f} more than its "
        f"layer's other heads ({'>=' if copies else '<'} {rule.copy:g})"
    )
    if skipped:  # said, not silently dropped: the verdict rests on fewer lengths
        reason += (
            f"; judged at n = {at} only: {' / '.join(map(str, skipped))} "
            f"{'does' if len(skipped) == 1 else 'do'} not fit twice in the model's "
            f"{model.cfg.n_ctx}-token context"
        )
    return HeadCheck(
        head,
        ps,
        first,
        second,
        ablated,
        signature,
        used,
        through,
        reason,
        chance=chance,
        advantage={n: a.above_chance for n, a in advantages.items()},
        copying_cost=copying.cost,
        copying_cost_matched=copying.matched,
        copies=copies,
        skipped=skipped,
    )
