"""Function-vector (FV) head scores (Todd et al. 2024), as Yin & Steinhardt (2025) rank heads.

For each task (a list of ``(x, y)`` pairs, :mod:`ihprobe.causal.tasks`), ``prompts`` clean
``shots``-shot prompts and as many corrupted ones (the same examples and query, the examples'
labels shuffled among them, so no mapping can be read) are built. Each head's mean ``z`` at the
clean prompts' last position is patched into the same position of each corrupted prompt; the
head's indirect effect is the rise in the probability (softmax over the whole vocabulary) of the
answer's first token. A head's FV score is that rise averaged over a task's prompts, then over
the tasks whose clean accuracy (HITS@1) is above chance: a one-sided binomial test against the
accuracy of always guessing the task's most common answer token. The other tasks are reported
with their accuracy and left out (a head cannot restore what the model never did).

Every head is scored from one cached corrupted pass per prompt length and one last-token pass
per head (:mod:`ihprobe.causal.fv_fast`); ``method="reference"`` runs one whole patched pass per
head instead (:mod:`ihprobe.causal.fv_reference`), which the fast path equals within float
tolerance.

>>> result = ihprobe.fv_scores(model, shots=10, prompts=25)              # doctest: +SKIP
>>> result.top_heads(3)                                                   # doctest: +SKIP
>>> print(result.summary())                                               # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ihprobe.causal.fv_fast import fast_probabilities, fast_reason
from ihprobe.causal.fv_reference import last_token_probe, patched_probabilities
from ihprobe.causal.fv_result import FVResult, FVTask, binomial_tail
from ihprobe.causal.tasks import Task, TaskPrompts, make_prompts, read_tasks
from ihprobe.causal.word_tasks import default_tasks
from ihprobe.core import checks
from ihprobe.core.errors import IhprobeError
from ihprobe.core.hooks import hook_name
from ihprobe.core.stages import announce_call, rough_seconds
from ihprobe.io.any_model import as_model
from ihprobe.io.models import provenance
from ihprobe.probes.engine import reads_text, run_probe
from ihprobe.probes.provided import Provided, provide

if TYPE_CHECKING:
    from transformer_lens.model_protocol import TransformerLensModel

log = logging.getLogger(__name__)

SHOTS = 10  # Todd et al.'s examples per prompt
PROMPTS = 25  # prompts per task
METHODS = ("fast", "reference")
NO_TEXT = (
    "this model has token ids only. Load it with tokenizer=... (e.g. the checkpoint's own "
    "tokenizer folder)"
)


def fv_scores(
    model: TransformerLensModel,
    tasks: Sequence[Task | str | Path] | None = None,
    *,
    shots: int = SHOTS,
    prompts: int = PROMPTS,
    seed: int = 0,
    method: str = "fast",
) -> FVResult:
    """Every head's function-vector score (average indirect effect) over ``tasks``; a call
    that a rough estimate (the model's size, the tasks, prompts and heads) puts at minutes
    warns before it starts.

    Args:
        model: a model ``ihprobe.load`` takes (a bridge, a HF model, a path) with a tokenizer
            that reads text.
        tasks: :class:`~ihprobe.causal.tasks.Task` objects or task files (the formats of
            ``ablate --task``); None: the built-in tasks and the word tasks
            (:mod:`ihprobe.causal.word_tasks`: antonyms and synonyms where WordNet is
            installed, present-past, singular-plural, country-capital, number-digit).
        shots: solved examples per prompt (fewer where a prompt would not fit the context).
        prompts: clean and corrupted prompts per task.
        seed: draws the examples, the queries and the shuffles.
        method: ``"fast"`` (cached corrupted passes, last-token passes per head) or
            ``"reference"`` (one whole patched pass per head); the numbers agree.

    Returns:
        An :class:`~ihprobe.causal.fv_result.FVResult`: ``scores`` ``[layer, head]``,
        ``top_heads``, ``to_frame``, ``summary`` and the per-task evidence.

    Example:
        >>> result = ihprobe.fv_scores(model, ["antonyms.tsv"], prompts=10)  # doctest: +SKIP
        >>> result.top_heads(1)                                          # doctest: +SKIP
        [(1, 2, 0.41)]
    """
    model = as_model(model)
    shots = checks.count("shots", shots)
    prompts = checks.count("prompts", prompts, low=2)
    seed = checks.seed(seed)
    checks.choice("method", method, METHODS)
    if not reads_text(getattr(model, "tokenizer", None)):
        raise IhprobeError(f"FV scores need a tokenizer that reads text; {NO_TEXT}.")
    chosen = _tasks(tasks, seed)
    used = method
    if method == "fast":
        reason = fast_reason(model)
        if reason is not None:
            log.info("FV scores by the reference loop: %s", reason)
            used = "reference"
    announce_call(log, "fv_scores", _rough_seconds(model, len(chosen), shots, prompts, used))
    found = [_task(model, t, shots, prompts, seed, used) for t in chosen]
    cfg = model.cfg
    settings = {"shots": shots, "prompts": prompts, "seed": seed, "method": used}
    return FVResult(provenance(model), (cfg.n_layers, cfg.n_heads), found, settings)


def _rough_seconds(model, tasks: int, shots: int, prompts: int, method: str) -> float:
    """Rough seconds of the scores: per task, a clean and a corrupted pass over prompts of
    ``shots + 1`` pairs (a few tokens each, at most the context) and, per head, a last-token
    row of each prompt (``fast``) or a whole patched pass (``reference``)."""
    cfg = model.cfg
    length = min(cfg.n_ctx, 4 * (shots + 1))
    heads = cfg.n_layers * cfg.n_heads
    rows = prompts * (2 * length + heads * (1 if method == "fast" else length))
    parameters = sum(p.numel() for p in model.parameters())
    return rough_seconds(2.0 * parameters * rows * tasks, str(cfg.device))


def _tasks(tasks, seed: int) -> list[Task]:
    if tasks is None:
        return default_tasks(seed=seed)  # the set a results cache keys by its digest
    chosen = read_tasks(tasks)
    if not chosen:
        raise IhprobeError("tasks is empty; pass task files or leave tasks=None for the built-ins.")
    names = [t.name for t in chosen]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise IhprobeError(f"tasks named {', '.join(twice)} are given twice; name them apart.")
    return chosen


def _task(model, task: Task, shots: int, prompts: int, seed: int, method: str) -> FVTask:
    """One task's prompts, clean pass (head means, accuracy) and patched probabilities."""
    tokenizer, n_ctx = model.tokenizer, model.cfg.n_ctx
    kwargs = {"shots": shots, "prompts": prompts, "max_length": n_ctx, "seed": seed}
    clean = make_prompts(task, tokenizer, **kwargs)
    corrupted = make_prompts(task, tokenizer, shuffled=True, **kwargs)
    means, probability, hits = clean_pass(model, clean)
    run = fast_probabilities if method == "fast" else patched_probabilities
    probabilities = run(model, corrupted, means)
    chance = chance_accuracy(clean.answer)
    p = binomial_tail(int(hits.sum()), len(hits), chance)
    return FVTask(task.name, clean, corrupted, means, probability, hits, probabilities, chance, p)


def chance_accuracy(answers: torch.Tensor) -> float:
    """HITS@1 of always guessing the most common answer token: what no mapping reaches.

    >>> chance_accuracy(torch.tensor([5, 5, 7, 9]))
    0.5
    """
    counts = Counter(answers.tolist())
    return max(counts.values()) / len(answers)


@torch.inference_mode()
def clean_pass(model, prompts: TaskPrompts) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each head's mean ``z`` at the prompts' last position ``[layer, head, d_head]``, and per
    prompt the answer's probability and HITS@1, from one pass over the clean prompts.

    Example:
        >>> means, probability, hits = clean_pass(model, clean)          # doctest: +SKIP
    """
    cfg = model.cfg
    last = prompts.last.to(cfg.device)
    sums = torch.zeros(cfg.n_layers, cfg.n_heads, cfg.d_head, dtype=torch.float64, device="cpu")

    def hooks(index, store):
        at = last[index.to(last.device) % len(last)]

        def grab(z, hook, layer):
            picked = z[torch.arange(len(at), device=z.device), at.to(z.device)]
            sums[layer] += picked.double().sum(0).cpu()
            return z

        return [
            (hook_name("z", layer), lambda z, hook, layer=layer: grab(z, hook, layer))
            for layer in range(cfg.n_layers)
        ]

    found = run_probe(model, last_token_probe(prompts, cfg.device), hooks)
    means = (sums / len(last)).to(cfg.dtype)
    return means, found["probability"].double(), found["hits"].double()


def fv_ranking(model, tasks=None, *, seed: int = 0) -> torch.Tensor:
    """Every head's FV score on ``tasks`` (``fv_scores``' defaults), ``[layer, head]`` on the CPU,
    to rank heads by (``ablate(by="fv")``); raises when no task is done above chance.

    >>> fv_ranking(model, seed=0).shape                                  # doctest: +SKIP
    torch.Size([2, 4])
    """
    result = fv_scores(model, tasks, seed=seed)
    if not result.used:
        raise IhprobeError(
            "no task is done above chance, so no head has an FV score to rank by; pass tasks= "
            "the model does (see fv_scores(...).summary()) or scores=..."
        )
    return result.scores.detach().float().cpu()


def scan_fv(model, options: dict) -> Provided:
    """``scan``'s ``fv``: :func:`fv_scores` at its defaults with the scan's ``tasks`` and
    ``seed`` (``options``), or why it is skipped (no text tokenizer, no task above chance);
    its settings name the tasks used and every task's clean accuracy (``fv_accuracy``).

    >>> scan_fv(model, {"tasks": None, "seed": 0}).settings["fv_used"]   # doctest: +SKIP
    ['antonym', 'country_capital']
    """
    if not reads_text(getattr(model, "tokenizer", None)):
        return Provided(None, note=f"fv skipped: it needs a tokenizer that reads text; {NO_TEXT}")
    result = fv_scores(model, options["tasks"], seed=options["seed"])
    settings = {"fv_used": result.used, "fv_tasks": len(result.tasks)}
    settings["fv_accuracy"] = {t.name: t.accuracy for t in result.tasks}  # clean HITS@1
    settings |= {f"fv_{k}": v for k, v in result.settings.items() if k != "seed"}
    if not result.used:
        note = (
            f"fv skipped: no task is done above chance ({len(result.tasks)} tried), so no head "
            "has a score (ihprobe.fv_scores(model).summary() lists their accuracies)"
        )
        return Provided(None, settings, note)
    return Provided(result.scores.float(), settings)


provide("fv", scan_fv)  # scan (probes/, below this layer) computes fv by this
