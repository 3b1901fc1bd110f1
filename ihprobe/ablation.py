"""Causal ablation: does the model depend on its top-scoring heads more than on random ones?

SPEC section 4 ([B]): score every head (prefix matching by default), switch off the top
``k_l = max(1, ceil(top * n_heads))`` heads of every layer, and compare each ICL metric's drop
with the drops of ``random`` draws of ``k_l`` other heads per layer. A circuit that is merely
visible (a *signature*) scores high but costs little when removed; a *load-bearing* one costs
far more than random heads.

All groups are evaluated together: the same evaluation rows are stacked once per group (clean,
top, then the random draws), each group with its own ``[layer, head]`` keep-mask applied in the
``hook_z`` hooks (:mod:`ihprobe.masks`), and the stacked batch runs in memory-bounded chunks.

>>> result = ihprobe.ablate(model, by="prefix_matching", top=0.02, random=20)   # doctest: +SKIP
>>> result.summary()[["metric", "top_drop", "random_drop_mean", "p_value"]]     # doctest: +SKIP
>>> result.figure().show()                                                       # doctest: +SKIP
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from jaxtyping import Float, Int

from ihprobe.errors import IhprobeError
from ihprobe.hooks import replace_with
from ihprobe.masks import MODES, ablate_heads, ablation_hooks, keep_mask, mask_hooks, mean_z

__all__ = ["AblationResult", "METRICS", "ablate", "ablate_heads", "ablation_hooks", "head_sets"]

log = logging.getLogger(__name__)

# Metric name -> +1 when a larger value is worse (losses, ranks), -1 when larger is better.
# ``icl_score`` is loss(late) - loss(early): more negative is better in-context learning.
METRICS: dict[str, int] = {
    "ar_accuracy": -1,
    "ar_mean_rank": +1,
    "induction_loss": +1,
    "icl_score": +1,
    "natural_loss": +1,
    "hits@1": -1,
    "hits@3": -1,
}
TEXT_METRICS = ("icl_score", "natural_loss")  # need natural text the model's tokenizer can read
TASK_METRICS = ("hits@1", "hits@3")  # need function-style task prompts (ihprobe.tasks)
TEXT_LENGTH = 512  # tokens per natural-text row (enough for Olsson's tokens 50 and 500)
# Logits held at once, which bounds each chunk of stacked rows. On CPU, time is linear in rows
# and small chunks stay in cache (16 MB measured fastest, benchmarks/bench_ablation.py); an
# accelerator wants large chunks to fill its parallel units (1 GB).
MAX_LOGITS = {"cpu": 2**22, "accelerator": 2**28}
MAX_TOKENS = {"cpu": 2**13, "accelerator": 2**18}  # tokens per chunk when few logits are read


@dataclass
class AblationResult:
    """Clean, top-ablated and random-ablated values of every metric, and the head sets used.

    ``values[metric]`` is a tensor ``[2 + R]``: clean, top set, then the ``R`` random draws.
    Drops are SPEC's ``(ablated - clean) / clean``; the p-value and the ratio compare *harm*
    (the change oriented so that positive is worse, ``METRICS``), which the clean value scales
    away, so they are the same whether computed on absolute or relative changes.
    """

    model: str
    revision: str | None
    step: int | None
    tokens: int | None
    by: str
    scores: Float[torch.Tensor, "layer head"]
    top_heads: list[tuple[int, int]]
    random_heads: list[list[tuple[int, int]]]
    values: dict[str, Float[torch.Tensor, " group"]]
    settings: dict = field(default_factory=dict)

    @property
    def metrics(self) -> list[str]:
        return list(self.values)

    def drops(self, metric: str) -> Float[torch.Tensor, " group"]:
        """Relative change ``(ablated - clean) / clean`` of each group (the clean one is 0)."""
        v = self.values[metric].double()
        return (v - v[0]) / v[0] if v[0] != 0 else torch.full_like(v, math.nan)

    def summary(self) -> pd.DataFrame:
        """One row per metric: clean, top, random statistics, p-value and ratio top/random."""
        return pd.DataFrame([_statistics(m, self.values[m]) for m in self.values])

    def to_frame(self) -> pd.DataFrame:
        """The long table ``model, revision, step, tokens, layer, head, metric, value``.

        Model-level rows (layer and head empty) hold ``{metric}.{statistic}`` for every
        column of :meth:`summary`; head rows hold the score ``by``, ``top_set`` (1 for heads
        in the top set) and ``random_set`` (how many random draws picked the head).
        """
        rows = []
        for stats in self.summary().to_dict("records"):
            metric = stats.pop("metric")
            rows += [(None, None, f"{metric}.{k}", float(v)) for k, v in stats.items()]
        picked = torch.zeros_like(self.scores)
        for draw in self.random_heads:
            for layer, head in draw:
                picked[layer, head] += 1
        top = set(self.top_heads)
        n_layers, n_heads = self.scores.shape
        for layer in range(n_layers):
            for head in range(n_heads):
                rows.append((layer, head, self.by, float(self.scores[layer, head])))
                rows.append((layer, head, "top_set", float((layer, head) in top)))
                rows.append((layer, head, "random_set", float(picked[layer, head])))
        frame = pd.DataFrame(rows, columns=["layer", "head", "metric", "value"])
        frame.insert(0, "tokens", self.tokens)
        frame.insert(0, "step", self.step)
        frame.insert(0, "revision", self.revision)
        frame.insert(0, "model", self.model)
        return frame.astype({"layer": "Int64", "head": "Int64"})

    def figure(self):
        """Plotly figure: each metric's top-set drop against the distribution of random drops."""
        from ihprobe.figures.ablation import drop_figure

        return drop_figure(self)


def _statistics(metric: str, values: torch.Tensor) -> dict:
    v = values.double().numpy()
    clean, top, random = v[0], v[1], v[2:]
    rel = (v - clean) / clean if clean != 0 else np.full_like(v, np.nan)
    harm = METRICS[metric.split(":")[0]] * (v - clean)
    random_harm = harm[2:]
    mean_harm = random_harm.mean()
    return {
        "metric": metric,
        "clean": clean,
        "top": top,
        "random_mean": random.mean(),
        "top_drop": rel[1],
        "random_drop_mean": rel[2:].mean(),
        "random_drop_sd": rel[2:].std(ddof=1) if len(random) > 1 else math.nan,
        "random_drop_lo": np.quantile(rel[2:], 0.025),
        "random_drop_hi": np.quantile(rel[2:], 0.975),
        "p_value": float((random_harm >= harm[1]).mean()),
        "ratio": harm[1] / mean_harm if mean_harm != 0 else math.nan,
    }


# ----------------------------------------------------------------------------- head sets


def heads_per_layer(n_heads: int, top: float) -> int:
    """``k_l = max(1, ceil(top * n_heads))``: at least one head per layer.

    >>> heads_per_layer(12, 0.02), heads_per_layer(4, 0.5), heads_per_layer(100, 0.025)
    (1, 2, 3)
    """
    if not 0 < top <= 1:
        raise IhprobeError(
            f"top={top} is not a fraction in (0, 1]; pass e.g. top=0.02 for the top 2% of "
            "heads per layer."
        )
    return max(1, math.ceil(round(top * n_heads, 9)))


def head_sets(
    scores: Float[torch.Tensor, "layer head"], *, top: float = 0.02, random: int = 20, seed: int = 0
) -> tuple[list[tuple[int, int]], list[list[tuple[int, int]]]]:
    """The top ``k_l`` heads of every layer by ``scores``, and ``random`` draws of as many others.

    Ties go to the lower head index; NaN scores rank last. Each random draw picks ``k_l`` heads
    per layer uniformly among the heads not in that layer's top set (draws may repeat when a
    layer has few heads).

    Example:
        >>> top, rand = head_sets(torch.tensor([[0.1, 0.9, 0.2], [0.5, 0.0, 0.3]]), random=2)
        >>> top
        [(0, 1), (1, 0)]
        >>> all(len(d) == 2 and not set(d) & set(top) for d in rand)
        True
    """
    check_settings(top=top, random=random, mode="zero")
    n_layers, n_heads = scores.shape
    k = heads_per_layer(n_heads, top)
    if n_heads - k < k:
        raise IhprobeError(
            f"top={top} picks {k} of {n_heads} heads per layer, leaving {n_heads - k} for the "
            f"random baseline; pass top <= {(n_heads // 2) / n_heads:.3g} so that at least "
            f"{k} other heads remain."
        )
    s = torch.nan_to_num(scores.double().cpu(), nan=-math.inf)
    order = torch.sort(-s, dim=1, stable=True).indices  # descending, lower index first on ties
    top_idx = order[:, :k]
    top_set = [(layer, int(h)) for layer in range(n_layers) for h in sorted(top_idx[layer])]
    g = torch.Generator().manual_seed(seed)
    keys = torch.rand(random, n_layers, n_heads, generator=g)
    keys.scatter_(2, top_idx.expand(random, -1, -1), -1.0)  # never pick a top head
    drawn = keys.topk(k, dim=2).indices.sort(dim=2).values
    random_sets = [
        [(layer, int(h)) for layer in range(n_layers) for h in drawn[r, layer]]
        for r in range(random)
    ]
    return top_set, random_sets


# ----------------------------------------------------------------------------- evaluation


@dataclass
class Probe:
    """Evaluation rows and how to score them: ``score(logits, rows) -> {metric: [batch]}``.

    ``rows`` are the indices into ``tokens`` of the batch that produced ``logits``, so a scorer
    can look up per-row answers. When ``positions`` is set, only the positions
    ``positions(rows)`` (``[batch, k]``) are unembedded and ``logits`` is ``[batch, k, vocab]``;
    otherwise it covers every position. ``valid`` marks real (non-padding) positions.
    """

    name: str
    tokens: Int[torch.Tensor, "batch pos"]
    score: Callable[[torch.Tensor, torch.Tensor], dict[str, torch.Tensor]]
    positions: Callable[[torch.Tensor], torch.Tensor] | None = None
    valid: torch.Tensor | None = None
    task: bool = False  # a function-style task: its metrics are averaged over tasks


@torch.inference_mode()
def evaluate_groups(
    model,
    probe: Probe,
    keeps: Float[torch.Tensor, "group layer head"],
    replacement: Float[torch.Tensor, "layer head d_head"] | None,
    *,
    max_logits: int | None = None,
) -> dict[str, Float[torch.Tensor, " group"]]:
    """Every metric of ``probe`` for every group's keep-mask, in a few stacked forward passes.

    Group ``g`` runs all rows of ``probe.tokens`` with heads switched off where
    ``keeps[g] == 0``; row scores are averaged per group. Only the positions the probe reads
    are unembedded (a hook on ``unembed.hook_in``), so logits cost memory and time only there.

    Example:
        >>> keeps = torch.stack([keep_mask(model, []), keep_mask(model, [(1, 0)])])
        ... # doctest: +SKIP
        >>> evaluate_groups(model, probe, keeps, None)["induction_loss"]  # doctest: +SKIP
    """
    n_rows, n_pos = probe.tokens.shape
    total = len(keeps) * n_rows
    where = "cpu" if torch.device(model.cfg.device).type == "cpu" else "accelerator"
    max_logits = max_logits or MAX_LOGITS[where]
    read = n_pos if probe.positions is None else probe.positions(torch.arange(1)).shape[1]
    chunk = min(max_logits // (read * model.cfg.d_vocab), MAX_TOKENS[where] // n_pos)
    chunk = max(1, min(total, chunk))
    parts: dict[str, list[torch.Tensor]] = {}
    for start in range(0, total, chunk):
        index = torch.arange(start, min(start + chunk, total))
        rows, groups = index % n_rows, index // n_rows
        hooks = mask_hooks(keeps[groups], replacement)
        if probe.positions is not None:
            at = probe.positions(rows)
            hooks.append(("unembed.hook_in", replace_with(lambda x, at=at: _gather(x, at))))
        logits = model.run_with_hooks(probe.tokens[rows], fwd_hooks=hooks)
        if probe.positions is not None and logits.shape[1] != at.shape[1]:
            logits = _gather(logits, at)  # a model whose unembedding ignored the slice
        for name, value in probe.score(logits, rows).items():
            parts.setdefault(name, []).append(value.double().cpu())
    return {name: torch.cat(v).view(len(keeps), n_rows).mean(1) for name, v in parts.items()}


def _gather(x: Float[torch.Tensor, "batch pos d"], at: Int[torch.Tensor, "batch k"]):
    """``x[b, at[b, j]]`` as ``[batch, k, d]``."""
    at = at.to(x.device)
    return x.gather(1, at.unsqueeze(-1).expand(-1, -1, x.shape[-1]))


def repeated_probe(model, *, n: int | None, batch: int, seed: int, bos: bool) -> Probe:
    """AR accuracy, AR mean rank and induction loss on [A]'s repeated random tokens."""
    from ihprobe.inputs import default_n, repeated_tokens
    from ihprobe.probes.recall import (
        induction_targets,
        query_loss,
        query_positions,
        query_recall,
    )

    tokens = repeated_tokens(model, n=n, batch=batch, seed=seed, bos=bos)
    half = n if n is not None else default_n(model.cfg.n_ctx - int(bos))
    queries = query_positions(half, bos)
    targets = induction_targets(tokens, half, bos)

    def score(logits, rows):
        acc, rank = query_recall(logits, targets[rows].to(logits.device))
        return {
            "ar_accuracy": acc,
            "ar_mean_rank": rank,
            "induction_loss": query_loss(logits, targets[rows].to(logits.device)),
        }

    return Probe("repeated tokens", tokens, score, lambda rows: queries.expand(len(rows), -1))


def text_probe(
    model, *, text: str | Sequence[str] | None, rows: int, natural_loss: bool = True
) -> Probe:
    """ICL score and (when ``natural_loss``) the natural-text loss on rows of natural text.

    Without ``natural_loss`` only the two positions of the ICL score are unembedded.
    """
    from ihprobe.probes.recall import icl_positions, icl_score_per_row, query_loss, token_losses

    tokens = natural_rows(model, text, rows=rows, length=min(model.cfg.n_ctx, TEXT_LENGTH))
    early, late = icl_positions(tokens.shape[1])
    if natural_loss:

        def score(logits, idx):
            x = tokens[idx]
            return {
                "icl_score": icl_score_per_row(logits, x, early, late),
                "natural_loss": token_losses(logits, x).mean(1),
            }

        return Probe("natural text", tokens, score)
    read = torch.tensor([[early - 1, late - 1]])  # logits there predict tokens early and late
    targets = tokens[:, [early, late]]

    def icl_only(logits, idx):
        t = targets[idx].to(logits.device)
        return {
            "icl_score": query_loss(logits[:, 1:], t[:, 1:]) - query_loss(logits[:, :1], t[:, :1])
        }

    return Probe("natural text", tokens, icl_only, lambda idx: read.expand(len(idx), -1))


def natural_rows(
    model, text: str | Sequence[str] | None = None, *, rows: int = 32, length: int = TEXT_LENGTH
) -> Int[torch.Tensor, "batch pos"]:
    """Up to ``rows`` consecutive chunks of ``length`` tokens of ``text``, documents joined by
    EOS (fewer when the text is shorter; at least one must fit).

    ``text`` defaults to ihprobe's embedded corpus (``ihprobe.data.corpus``).

    Example:
        >>> natural_rows(model, rows=4, length=128).shape                   # doctest: +SKIP
        torch.Size([4, 128])
    """
    tok = model.tokenizer
    if not reads_text(tok):
        raise IhprobeError(
            "this model has no text tokenizer (token ids only), so natural-text metrics "
            f"({', '.join(TEXT_METRICS)}) cannot run; load it with tokenizer=... or leave "
            "them out of metrics."
        )
    if text is None:
        from ihprobe.data.corpus import default_documents

        text = default_documents()
    docs = [text] if isinstance(text, str) else list(text)
    eos = tok.eos_token_id
    need = rows * length
    stream: list[int] = []
    for doc in docs:
        stream += tok(doc, add_special_tokens=False).input_ids
        if eos is not None:
            stream.append(eos)
        if len(stream) >= need:
            break
    rows = min(rows, len(stream) // length)
    if rows == 0:
        raise IhprobeError(
            f"the text holds {len(stream)} tokens, less than one row of {length}; pass more text."
        )
    return torch.tensor(stream[: rows * length]).view(rows, length).to(model.cfg.device)


def reads_text(tokenizer) -> bool:
    """Whether ``tokenizer`` turns text into ids and back (not the id-only stand-in)."""
    if tokenizer is None:
        return False
    probe = "The cat sat on the mat."
    try:
        return tokenizer.decode(tokenizer(probe, add_special_tokens=False).input_ids) == probe
    except Exception:  # noqa: BLE001 - exotic tokenizers fail in many ways
        return False


# ----------------------------------------------------------------------------- ablate


def ablate(
    model,
    *,
    by: str = "prefix_matching",
    top: float = 0.02,
    random: int = 20,
    mode: str = "mean",
    metrics: Sequence[str] | None = None,
    seed: int = 0,
    scores: Float[torch.Tensor, "layer head"] | None = None,
    n: int | None = None,
    batch: int = 100,
    bos: bool = False,
    text: str | Sequence[str] | None = None,
    text_rows: int = 32,
    tasks: Sequence | None = None,
    reference: Int[torch.Tensor, "batch pos"] | None = None,
) -> AblationResult:
    """Ablate the top heads of every layer and compare with random heads (SPEC section 4).

    Args:
        model: a hooked model (``ihprobe.load``).
        by: the head score that ranks heads (any per-head metric of ``ihprobe.scan``).
        top: fraction of heads per layer; ``k_l = max(1, ceil(top * n_heads))``.
        random: number of random draws of ``k_l`` non-top heads per layer.
        mode: ``"mean"`` (a head's z is replaced by its mean) or ``"zero"``.
        metrics: subset of ``METRICS``; default all that the model can run (text and task
            metrics need a tokenizer that reads text).
        seed: seeds the probe inputs and the random draws; same seed, same result. Heads
            are ranked on the repeated tokens of ``seed`` and the metrics are measured on
            those of ``seed + 1``, so the top set is not chosen on the rows that judge it.
        scores: ``[layer, head]`` scores to rank by instead of running ``scan``.
        n, batch, bos: the repeated-token probe (as in ``ihprobe.scan``).
        text: natural text for ``icl_score`` and ``natural_loss`` (default: ihprobe's corpus).
        text_rows: rows of natural text.
        tasks: function-style tasks for HITS@k (``ihprobe.tasks``; default: the built-in ones).
        reference: tokens whose per-head mean z replaces ablated heads in every probe. By
            default each probe's own evaluation rows are the reference, so a head is replaced
            by its average output on the same data the metric is measured on.

    Returns:
        An :class:`AblationResult`.

    Raises:
        IhprobeError: ``top`` outside (0, 1], ``random < 1``, an unknown score or metric.

    Example:
        >>> result = ablate(model, random=20, metrics=["ar_accuracy", "induction_loss"])
        ... # doctest: +SKIP
        >>> result.summary().set_index("metric").loc["induction_loss", "p_value"]  # doctest: +SKIP
    """
    from ihprobe.models import provenance

    check_settings(top=top, random=random, mode=mode, metrics=metrics)
    heads_per_layer(model.cfg.n_heads, top)
    wanted = _metrics(model, metrics)
    scores = _scores(model, by, scores, n=n, batch=batch, seed=seed, bos=bos)
    top_set, random_sets = head_sets(scores, top=top, random=random, seed=seed)
    keeps = torch.stack(
        [keep_mask(model, [])] + [keep_mask(model, s) for s in [top_set, *random_sets]]
    )  # [group, layer, head]: clean, top, random draws
    probes = _probes(
        model, wanted, n=n, batch=batch, seed=seed, bos=bos, text=text, rows=text_rows, tasks=tasks
    )
    shared = None if reference is None or mode == "zero" else mean_z(model, reference)
    values: dict[str, torch.Tensor] = {}
    per_task: dict[str, torch.Tensor] = {}
    for probe in probes:
        replacement = None
        if mode == "mean":
            replacement = (
                shared if shared is not None else mean_z(model, probe.tokens, valid=probe.valid)
            )
        found = evaluate_groups(model, probe, keeps, replacement)
        if probe.task:
            per_task.update({f"{k}:{probe.name}": v for k, v in found.items()})
        else:
            values.update(found)
    for k in TASK_METRICS if per_task else ():  # every task weighs the same in the average
        values[k] = torch.stack([v for t, v in per_task.items() if t.startswith(k + ":")]).mean(0)
    ordered = {m: values[m] for m in wanted}
    ordered.update({k: v for k, v in per_task.items() if k.split(":")[0] in wanted})
    prov = provenance(model)
    return AblationResult(
        model=prov.model,
        revision=prov.revision,
        step=prov.step,
        tokens=prov.tokens,
        by=by,
        scores=scores,
        top_heads=top_set,
        random_heads=random_sets,
        values=ordered,
        settings={
            "by": by,
            "top": top,
            "random": random,
            "mode": mode,
            "seed": seed,
            "n": n,
            "batch": batch,
            "bos": bos,
            "heads_per_layer": heads_per_layer(model.cfg.n_heads, top),
            "reference": "given" if reference is not None else "each probe's own rows",
            "probes": {p.name: list(p.tokens.shape) for p in probes},  # rows, positions
        },
    )


def check_settings(
    *, top: float, random: int, mode: str, metrics: Sequence[str] | None = None
) -> None:
    """Raise :class:`IhprobeError` for settings ``ablate`` cannot run, before any model work.

    >>> check_settings(top=0.02, random=20, mode="mean")
    """
    heads_per_layer(1, top)
    if random < 1:
        raise IhprobeError(
            f"random={random}: the baseline needs at least one random draw (SPEC uses 20)."
        )
    if mode not in MODES:
        raise IhprobeError(f"mode={mode!r} is not one of {MODES}.")
    if metrics is not None:
        unknown = [m for m in metrics if m not in METRICS]
        if unknown:
            raise IhprobeError(f"unknown metric(s) {unknown}; choose from {list(METRICS)}.")
        if not metrics:
            raise IhprobeError(f"metrics is empty; choose some of {list(METRICS)}.")


def _metrics(model, metrics: Sequence[str] | None) -> list[str]:
    if metrics is None:
        text_ok = reads_text(getattr(model, "tokenizer", None))
        if not text_ok:
            log.info("no text tokenizer: natural-text and task metrics are left out")
        return [m for m in METRICS if text_ok or m not in TEXT_METRICS + TASK_METRICS]
    return list(dict.fromkeys(metrics))


def _scores(model, by, scores, **scan_kwargs) -> torch.Tensor:
    cfg = model.cfg
    if scores is not None:
        scores = torch.as_tensor(scores)
        if tuple(scores.shape) != (cfg.n_layers, cfg.n_heads):
            raise IhprobeError(
                f"scores have shape {tuple(scores.shape)}; expected ({cfg.n_layers}, "
                f"{cfg.n_heads}) = (layer, head)."
            )
        return scores.detach().float().cpu()
    from ihprobe.probes.battery import HEAD_METRICS, scan

    if by not in HEAD_METRICS:
        raise IhprobeError(f"unknown head score by={by!r}; choose one of {list(HEAD_METRICS)}.")
    return scan(model, metrics=[by], **scan_kwargs).head[by].detach().float().cpu()


def _probes(model, wanted, *, n, batch, seed, bos, text, rows, tasks) -> list[Probe]:
    probes = []
    if any(m in wanted for m in ("ar_accuracy", "ar_mean_rank", "induction_loss")):
        # fresh rows: heads are ranked on scan's batch (seed), metrics measured on another
        probes.append(repeated_probe(model, n=n, batch=batch, seed=seed + 1, bos=bos))
    if any(m in wanted for m in TEXT_METRICS):
        probes.append(
            text_probe(model, text=text, rows=rows, natural_loss="natural_loss" in wanted)
        )
    if any(m in wanted for m in TASK_METRICS):
        from ihprobe.tasks import task_probes

        probes += task_probes(model, tasks, seed=seed)
    return probes
