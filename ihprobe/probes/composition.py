"""Composition scores (Elhage et al. 2021): how much a later head reads what an earlier one writes.

A head ``h1`` writes into the residual stream through its OV circuit ``W_OV = W_V W_O``
(``[d_model, d_model]`` in TransformerLens's row-vector convention). A later head ``h2`` reads
the stream through its queries, keys or values; the composition score of the pair is

    ``||W_OV^{h1} R^{h2}||_F / (||W_OV^{h1}||_F ||R^{h2}||_F)``

with ``R = W_QK^T = W_K W_Q^T`` for K-composition, ``R = W_QK = W_Q W_K^T`` for Q-composition
and ``R = W_OV^{h2}`` for V-composition -- the same products as TransformerLens's
``all_composition_scores`` (``tests/test_circuit.py`` compares the numbers).

Even unrelated matrices have a positive score (a product of random low-rank matrices is not
zero), so the score of random Gaussian matrices of the same shapes is the baseline: it is
averaged over ``draws`` draws and subtracted, and its standard deviation over the draws is the
noise a score must clear. The scores use the weights as the model holds them; a model loaded with
``processing="tl"`` has its norms' weights folded in first, as in TransformerLens's models.

No ``[d_model, d_model]`` product is ever formed: with ``M = A1 B1 A2 B2`` (inner dimension
``d_head``), ``||M||_F^2 = tr((A1^T A1) (B1 A2) (B2 B2^T) (B1 A2)^T)``, all ``d_head``-sized.

>>> scores = composition(model, kind="k")                                    # doctest: +SKIP
>>> scores.to_frame().nlargest(3, "value")                                   # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
import torch
from jaxtyping import Float

from ihprobe.core import calls, checks
from ihprobe.core.errors import IhprobeError
from ihprobe.io.any_model import as_model
from ihprobe.io.models import provenance
from ihprobe.io.offload import readable
from ihprobe.io.provenance import CarriesProvenance, Provenance

KINDS = ("q", "k", "v")
BASELINE_DRAWS = 50
PREVIOUS_TOKEN_HEAD = 0.3  # previous-token score from which a head counts as a previous-token head

Factors = tuple[torch.Tensor, torch.Tensor]  # (A [..., d_model, d_head], B [..., d_head, d_model])


@dataclass
class Composition(CarriesProvenance):
    """Composition scores of every (earlier head, later head) pair, baseline subtracted.

    ``raw[l1, h1, l2, h2]`` is the score of sender ``(l1, h1)`` into receiver ``(l2, h2)``
    (NaN unless ``l1 < l2``); ``values = raw - baseline``. ``baseline_sd`` is the spread of
    the random-matrix score over the draws: the noise level.

    Example:
        >>> import ihprobe
        >>> model = ihprobe.load(ihprobe.build_model(ihprobe.TrainConfig(d_model=16, heads=2), 128))
        >>> k = ihprobe.composition(model, "k")
        >>> k.kind, tuple(k.raw.shape)                 # [layer_from, head_from, layer_to, head_to]
        ('k', (2, 2, 2, 2))
    """

    kind: str
    raw: Float[torch.Tensor, "layer_from head_from layer_to head_to"]
    baseline: float
    baseline_sd: float
    provenance: Provenance = Provenance("")
    settings: dict = field(default_factory=dict)

    @property
    def values(self) -> Float[torch.Tensor, "layer_from head_from layer_to head_to"]:
        return self.raw - self.baseline

    def __repr__(self) -> str:
        """One line: the kind, the grid, the baseline and the strongest pair (no tensors)."""
        layers, heads = self.raw.shape[:2]
        values = self.values.nan_to_num(-torch.inf)
        if torch.isfinite(values).any():
            best = divmod(int(values.argmax()), layers * heads)
            sender, receiver = divmod(best[0], heads), divmod(best[1], heads)
            top = (
                f"; strongest L{sender[0]}H{sender[1]} -> L{receiver[0]}H{receiver[1]} "
                f"{float(values.max()):+.3g}"
            )
        else:
            top = ""
        return (
            f"Composition({self.kind}, {self.model_name or 'model'}, "
            f"{layers} layers x {heads} heads, "
            f"baseline {self.baseline:.3g} ± {self.baseline_sd:.2g}{top})"
        )

    def to_frame(self) -> pd.DataFrame:
        """One row per pair: ``model, revision, step, tokens, layer_from, head_from, layer_to,
        head_to, kind, value, raw, baseline_sd`` (value = raw - baseline)."""
        index = (~self.raw.isnan()).nonzero().tolist()
        frame = pd.DataFrame(index, columns=["layer_from", "head_from", "layer_to", "head_to"])
        frame["kind"] = self.kind
        frame["raw"] = [float(self.raw[tuple(i)]) for i in index]
        frame["value"] = frame["raw"] - self.baseline
        frame["baseline_sd"] = self.baseline_sd
        frame = frame[
            [
                "layer_from",
                "head_from",
                "layer_to",
                "head_to",
                "kind",
                "value",
                "raw",
                "baseline_sd",
            ]
        ]
        for i, column in enumerate(("model", "revision", "step", "tokens")):
            frame.insert(i, column, getattr(self.provenance, column))
        return frame.astype({"step": "Int64", "tokens": "Int64"})

    def strongest_into(self, layer: int, head: int) -> tuple[int, int, float]:
        """The sender with the largest score into ``(layer, head)``: ``(layer, head, value)``."""
        layer, head = checks.head(layer, head, *self.raw.shape[:2])
        into = self.values[:, :, layer, head]
        if into.isnan().all():
            raise IhprobeError(f"head ({layer}, {head}) has no earlier layer to compose with.")
        best = int(into.nan_to_num(-torch.inf).flatten().argmax())
        sender = divmod(best, into.shape[1])
        return sender[0], sender[1], float(into[sender])


def composition(
    model,
    kind: str = "k",
    *,
    draws: int = BASELINE_DRAWS,
    seed: int = 0,
    senders: torch.Tensor | None = None,
) -> Composition:
    """Elhage et al.'s ``kind``-composition score of every pair of heads in different layers.

    Args:
        model: a hooked model (``W_Q, W_K, W_V, W_O`` of shape ``[layer, head, ...]``; grouped
            key/value heads are repeated for the query heads that share them).
        kind: ``"q"``, ``"k"`` or ``"v"``: which input of the later head.
        draws: random-matrix draws for the baseline and its spread.
        seed: seeds the baseline draws.
        senders: a ``[layer, head]`` bool mask of the earlier heads to score from (all by
            default); the others' rows stay NaN. The cost is one ``d_head``-sized product per
            pair, so restricting senders pays on large models.

    Example:
        >>> k = composition(model, "k")                                      # doctest: +SKIP
        >>> k.strongest_into(1, 2)      # (layer, head, value) of the top sender  # doctest: +SKIP
        (0, 3, 0.41)
    """
    model = as_model(model)
    calls.arguments(model=model, draws=draws, seed=seed)
    kind = checks.choice("kind", kind.lower() if isinstance(kind, str) else kind, KINDS)
    with torch.no_grad():
        weights = _weights(model)
        checks.finite_result("composition", **weights)  # NaN weights would score 0, not fail
        n_layers, n_heads = weights["W_Q"].shape[:2]
        shape = (n_layers, n_heads)
        raw = torch.full(shape * 2, torch.nan, dtype=torch.float64, device="cpu")  # the table
        chosen = torch.ones(shape, dtype=torch.bool, device="cpu") if senders is None else senders
        checks.mask("senders", chosen, shape)
        chosen = chosen.cpu()  # indexes the table
        reader = _reader(weights, kind)
        for sender, receiver in torch.combinations(torch.arange(n_layers, device="cpu")).tolist():
            heads = chosen[sender].nonzero().flatten()  # one layer pair at a time bounds memory
            left = (weights["W_V"][sender, heads, None], weights["W_O"][sender, heads, None])
            right = (reader[0][receiver][None], reader[1][receiver][None])
            raw[sender, heads, receiver] = pair_scores(left, right).cpu()
        baseline = random_baseline(weights, kind, draws, seed)
    earlier = torch.ones(n_layers, n_layers, dtype=torch.bool, device="cpu").triu(1)
    defined = raw[(chosen[:, :, None, None] & earlier[:, None, :, None]).expand_as(raw)]
    checks.finite_result("composition", scores=defined, baseline=baseline)
    return Composition(
        kind=kind,
        raw=raw.float(),
        baseline=float(baseline.mean()),
        baseline_sd=float(baseline.std()),
        provenance=provenance(model),
        settings={"draws": draws, "seed": seed},
    )


def previous_token_composition(
    model,
    previous_token: Float[torch.Tensor, "layer head"],
    *,
    threshold: float = PREVIOUS_TOKEN_HEAD,
    draws: int = BASELINE_DRAWS,
) -> Float[torch.Tensor, "layer head"]:
    """Per head, the strongest K-composition (minus the baseline) from an earlier-layer head
    whose previous-token score is at least ``threshold``; NaN where there is no such head.

    This is ``scan``'s ``k_composition`` metric: an induction head reads, through its keys, what
    a previous-token head wrote.

    Example:
        >>> scores = ihprobe.scan(model, ["previous_token"])                 # doctest: +SKIP
        >>> previous_token_composition(model, scores.head["previous_token"]) # doctest: +SKIP
    """
    senders = previous_token.cpu() >= threshold
    values = composition(model, "k", draws=draws, senders=senders).values  # [l1, h1, l2, h2]
    best = values.nan_to_num(-torch.inf).flatten(0, 1).max(0).values
    return best.where(best > -torch.inf, torch.tensor(torch.nan, device=best.device))


def pair_scores(left: Factors, right: Factors) -> torch.Tensor:
    """``||A1 B1 A2 B2||_F / (||A1 B1||_F ||A2 B2||_F)`` over broadcast leading dimensions;
    0 where either factor product is zero (a head whose ``W_O`` is zero writes nothing).

    Example:
        >>> eye = torch.eye(2)
        >>> pair_scores((eye, eye), (eye, eye))        # ||I|| / (||I|| ||I||) = 1 / sqrt(2)
        tensor(0.7071, dtype=torch.float64)
    """
    a1, b1, a2, b2 = (w.double() for w in (*left, *right))
    gram_left = a1.transpose(-1, -2) @ a1  # [.., e1, e1]
    gram_right = b2 @ b2.transpose(-1, -2)  # [.., e2, e2]
    middle = b1 @ a2  # [.., e1, e2]
    product = ((gram_left @ middle @ gram_right) * middle).sum((-1, -2))
    left_norm = (gram_left * (b1 @ b1.transpose(-1, -2))).sum((-1, -2))
    right_norm = ((a2.transpose(-1, -2) @ a2) * gram_right).sum((-1, -2))
    norms = left_norm * right_norm
    ratio = product.clamp(min=0) / norms.where(norms > 0, torch.ones_like(norms))
    return ratio.where(
        norms > 0, torch.zeros_like(ratio)
    ).sqrt()  # a silent head composes with none


def random_baseline(weights: dict, kind: str, draws: int, seed: int) -> torch.Tensor:
    """The score of ``draws`` pairs of random Gaussian matrices shaped like the model's heads."""
    generator = torch.Generator().manual_seed(seed)

    def like(w: torch.Tensor) -> torch.Tensor:
        return torch.randn(
            draws, *w.shape[2:], generator=generator, dtype=torch.float64, device="cpu"
        )

    sender = (like(weights["W_V"]), like(weights["W_O"]))
    reader = tuple(like(w) for w in _reader(weights, kind))
    return pair_scores(sender, reader)


def _reader(weights: dict, kind: str) -> Factors:
    """The factors ``(A, B)`` of what the later head applies to the stream, ``[l, h, ...]``."""
    if kind == "k":  # W_QK^T = W_K W_Q^T
        return weights["W_K"], weights["W_Q"].transpose(-1, -2)
    if kind == "q":  # W_QK = W_Q W_K^T
        return weights["W_Q"], weights["W_K"].transpose(-1, -2)
    return weights["W_V"], weights["W_O"]


def _weights(model) -> dict[str, torch.Tensor]:
    """``W_Q, W_K, W_V, W_O`` per query head (grouped K/V heads repeated), on the CPU."""
    with readable(model):  # a dispatched model's offloaded weights, loaded while read
        found = {n: getattr(model, n).detach().cpu() for n in ("W_Q", "W_K", "W_V", "W_O")}
    n_heads = found["W_Q"].shape[1]
    for name in ("W_K", "W_V"):
        shared = found[name].shape[1]
        if shared != n_heads:
            found[name] = found[name].repeat_interleave(n_heads // shared, dim=1)
    return found
