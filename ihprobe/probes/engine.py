"""The probe engine: a :class:`Probe`, and the one loop that runs probes.

Every score of ihprobe is read from a forward pass over probe rows: ``scan`` keeps small
slices of attention patterns and ``hook_z``, ablation runs the same rows with heads masked, and
the mean-ablation reference averages ``hook_z``. :func:`run_probe` is the only place that runs
rows through a model: it cuts them into chunks (stacked ``groups`` times when ablation compares
many head sets), adds the caller's hooks, unembeds only the positions the probe reads, scores
each row and concatenates the results along the batch.

What each metric reads and which way is better is :mod:`ihprobe.probes.metrics`'s table.

>>> probe = recall_probe(model, repeated_tokens(model), n=50)             # doctest: +SKIP
>>> run_probe(model, probe)["ar_accuracy"].mean()                        # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from jaxtyping import Bool, Float, Int

from ihprobe.core import checks
from ihprobe.core.errors import IhprobeError
from ihprobe.core.hooks import accumulating, hook_name, replace_with
from ihprobe.core.memory import available_bytes, release_grown
from ihprobe.data.corpus import default_documents
from ihprobe.io.attention import forward_options, pair_pass
from ihprobe.io.validation import require_finite
from ihprobe.probes.metrics import PATTERN
from ihprobe.probes.recall import (
    icl_score_per_row,
    induction_targets,
    query_loss,
    query_positions,
    query_recall,
    token_losses,
)

if TYPE_CHECKING:
    from transformer_lens.model_protocol import TransformerLensModel

Hook = tuple[str, Callable]
# hooks of one chunk, from the flat indices of its rows (group * n_rows + row) and a store
# that the hooks may fill; what they store is concatenated over chunks like the scores
HookFactory = Callable[[Int[torch.Tensor, " chunk"], dict], Sequence[Hook]]
Scorer = Callable[[torch.Tensor, torch.Tensor], dict[str, torch.Tensor]]

UNEMBED_IN = hook_name("unembed_in")
NOTHING = torch.zeros(0, dtype=torch.long, device="cpu")  # positions of a probe unembedding none
DEFAULT_CHUNK = 25  # rows per forward pass: bounds memory, leaves every score unchanged
# Each pass is further bounded by the logits it holds and the tokens it runs. On CPU, time is
# linear in rows once a pass holds a few rows, but one-row passes cost ~3x per row
# (lab/benchmarks/bench_scale.py): 128 MB still gives Pythia's 50k vocabulary 13 rows of 50
# queries a pass (64 MB cost a 160m scan 1.5x for 0.05 GB less peak memory), while small models
# stay at MAX_TOKENS; an accelerator wants large chunks to fill its parallel units (1 GB).
# Either shrinks to the memory there is: float32 logits take at most 1/LOGIT_SHARE of it.
MAX_LOGITS, LOGIT_SHARE = {"cpu": 2**25, "accelerator": 2**28}, 16
MAX_TOKENS = {"cpu": 2**13, "accelerator": 2**18}


# ----------------------------------------------------------------------------- probes


@dataclass
class Probe:
    """Rows to run, the positions to unembed, and the reduction of their logits per row.

    ``positions`` is ``[k]`` (the same positions in every row) or ``[rows, k]`` (per row); None
    unembeds every position, an empty ``[0]`` none. ``score(logits, rows)`` gets the logits at
    those positions, ``[batch, k, vocab]``, and the indices of the batch's rows into ``tokens``,
    and returns ``{metric: [batch]}``. ``valid`` marks real (non-padding) positions; ``task``
    marks a function-style task, whose metrics are averaged over tasks.
    """

    name: str
    tokens: Int[torch.Tensor, "rows pos"]
    score: Scorer | None = None
    positions: Int[torch.Tensor, "*rows k"] | None = None
    valid: Bool[torch.Tensor, "rows pos"] | None = None
    task: bool = False

    @property
    def read(self) -> int:
        """Positions unembedded per row."""
        return self.tokens.shape[1] if self.positions is None else self.positions.shape[-1]


def run_probe(
    model: TransformerLensModel,
    probe: Probe,
    hooks: Sequence[Hook] | HookFactory = (),
    *,
    chunk: int | None = DEFAULT_CHUNK,
    groups: int = 1,
    attention: str = "patterns",
) -> dict[str, torch.Tensor]:
    """Run ``probe``'s rows (stacked ``groups`` times) through ``model``, ``chunk`` rows a pass.

    Only ``probe.positions`` are unembedded (a hook on ``unembed.hook_in`` where the model has
    one; otherwise the logits are sliced afterwards). A pass never holds more rows than
    :func:`budget_rows` allows, whatever ``chunk`` says. Returns ``probe.score``'s per-row values
    and whatever the hooks stored, each concatenated over chunks along the batch:
    ``[groups * rows, ...]``, group-major. Chunking bounds memory; it changes no number.

    Args:
        hooks: fixed ``(name, fn)`` hooks, or ``hooks(index, store)`` giving the hooks of each
            chunk from the flat indices of its rows (``group * rows + row``).
        chunk: most rows per forward pass; None leaves only the memory budget.
        groups: how many times the rows are stacked (one head mask per group in ablation).
        attention: ``"patterns"`` runs the bridge's attention, whose ``hook_pattern`` holds
            every pattern; ``"pairs"`` runs HF's attention with SDPA and hands each
            ``hook_pattern`` hook a lazy :class:`~ihprobe.core.pairs.PairAttention` instead
            (:func:`ihprobe.io.attention.pair_pass`): for hooks that only gather pairs.

    Example:
        >>> out = run_probe(model, recall_probe(model, tokens, n=50), chunk=10)  # doctest: +SKIP
        >>> out["induction_loss"].shape                                       # doctest: +SKIP
        torch.Size([100])
    """
    n_rows = len(probe.tokens)
    total = groups * n_rows
    make = hooks if callable(hooks) else (lambda index, store: list(hooks))
    kept: dict[str, list[torch.Tensor]] = {}
    rows_per_pass = min(chunk or total, budget_rows(model, probe))
    mark = None  # resident memory after the first pass
    for index in torch.arange(total, device="cpu").split(rows_per_pass):  # host bookkeeping
        rows = index % n_rows
        store: dict = {}
        at = _positions_of(probe, rows)
        found, fired = _counted(list(make(index, store)) + _unembed_only(model, at))
        plain, by_layer = _routed(model, found, attention)
        with pair_pass(model, by_layer) if attention == "pairs" else contextlib.nullcontext():
            logits = model.run_with_hooks(
                probe.tokens[rows], fwd_hooks=plain, **forward_options(model)
            )
        _check_fired(found, fired)
        logits = logits.to(probe.tokens.device)  # a device map may end on another device
        if at is not None and logits.shape[1] != at.shape[-1]:
            logits = _select(logits, at)  # a model whose unembedding ignored the slice
        if probe.score is not None:
            require_finite(f"the {probe.name} probe", logits=logits)  # argmax(NaN) looks fine
            store.update(probe.score(accumulating(logits), rows))
        del logits
        mark = release_grown(mark)  # else the heap grows with the passes (draws x rows)
        for key, value in store.items():
            kept.setdefault(key, []).append(value)
    return {key: torch.cat(values) for key, values in kept.items()}


def budget_rows(model: TransformerLensModel, probe: Probe, max_logits: int | None = None) -> int:
    """Most rows one pass may hold: its logits within ``MAX_LOGITS`` and 1/``LOGIT_SHARE`` of the
    device's free memory, its tokens within ``MAX_TOKENS`` (an accelerator's values when the
    model is on one), at least one. Example: 6 rows of 101 tokens for Pythia-70m on the CPU.
    """
    where = "cpu" if torch.device(model.cfg.device).type == "cpu" else "accelerator"
    fits = available_bytes(model.cfg.device) // (4 * LOGIT_SHARE)  # float32 logits
    logits = (max_logits or min(MAX_LOGITS[where], fits)) // max(1, probe.read * model.cfg.d_vocab)
    return max(1, min(logits, MAX_TOKENS[where] // probe.tokens.shape[1]))


def _counted(hooks: list[Hook]) -> tuple[list[Hook], list[int]]:
    """The hooks wrapped to count their calls, and the counts."""
    fired = [0] * len(hooks)

    def counting(i: int, fn: Callable) -> Callable:
        def hook(activation, hook):
            fired[i] += 1
            return fn(activation, hook=hook)

        return hook

    return [(name, counting(i, fn)) for i, (name, fn) in enumerate(hooks)], fired


def _routed(model, found: list[Hook], attention: str) -> tuple[list[Hook], dict[int, list]]:
    """The hooks to register, and (in a pair pass) the ``hook_pattern`` hooks by layer, which
    the pair pass calls with the layer's lazy pattern instead."""
    if attention == "patterns":
        return found, {}
    layer_of = {hook_name(PATTERN, layer): layer for layer in range(model.cfg.n_layers)}
    by_layer: dict[int, list] = {}
    for name, fn in found:
        if name in layer_of:
            by_layer.setdefault(layer_of[name], []).append(fn)
    return [(name, fn) for name, fn in found if name not in layer_of], by_layer


def _check_fired(hooks: list[Hook], fired: list[int]) -> None:
    """Raise when a hook never ran: its slice, mask or patch would silently be missing."""
    silent = sorted({name for (name, _), count in zip(hooks, fired, strict=True) if not count})
    if silent:
        raise IhprobeError(
            f"hook point(s) {', '.join(silent)} did not fire on this model, so its numbers would "
            "be silently wrong; load it with ihprobe.load (a TransformerBridge) and report the "
            "architecture if it still happens."
        )


def _positions_of(probe: Probe, rows: torch.Tensor) -> torch.Tensor | None:
    if probe.positions is None or probe.positions.dim() == 1:
        return probe.positions
    return probe.positions[rows.to(probe.positions.device)]


def _select(x: Float[torch.Tensor, "batch pos d"], at: Int[torch.Tensor, "*batch k"]):
    """``x[:, at]`` for positions shared by all rows; ``x[b, at[b]]`` for per-row ones."""
    at = at.to(x.device)
    if at.dim() == 1:
        return x[:, at]
    return x.gather(1, at.unsqueeze(-1).expand(-1, -1, x.shape[-1]))


def _unembed_only(model, at: torch.Tensor | None) -> list[Hook]:
    """The hook that unembeds only ``at``, where the model has that hook point (bridges)."""
    if at is None or UNEMBED_IN not in getattr(model, "hook_dict", {}):
        return []
    return [(UNEMBED_IN, replace_with(lambda x: _select(x, at)))]


# ----------------------------------------------------------------------------- model-level probes


def recall_probe(
    model: TransformerLensModel,
    tokens: Int[torch.Tensor, "rows pos"],
    n: int,
    bos: bool = False,
    *,
    name: str = "repeated tokens",
) -> Probe:
    """AR accuracy, AR mean rank and induction loss per row of repeated tokens ``[s, s]``.

    Only the ``n`` second-half queries are unembedded.
    """
    queries = query_positions(n, bos)
    targets = induction_targets(tokens, n, bos)

    def score(logits, rows):
        t = targets[rows.to(targets.device)].to(logits.device)
        accuracy, mean_rank = query_recall(logits, t)
        return {
            "ar_accuracy": accuracy,
            "ar_mean_rank": mean_rank,
            "induction_loss": query_loss(logits, t),
        }

    return Probe(name, tokens, score, queries)


def text_probe(
    tokens: Int[torch.Tensor, "rows pos"], early: int, late: int, *, natural_loss: bool = False
) -> Probe:
    """The ICL score (loss of token ``late`` minus loss of token ``early``) per row of text,
    and with ``natural_loss`` the mean next-token loss of every row.

    Without ``natural_loss`` only the two positions that predict ``early`` and ``late`` are
    unembedded (a 2048-token context would otherwise hold ``[rows, 2048, vocab]``).
    """
    if natural_loss:

        def score_all(logits, rows):
            x = tokens[rows.to(tokens.device)]
            return {
                "icl_score": icl_score_per_row(logits, x, early, late),
                "natural_loss": token_losses(logits, x).mean(1),
            }

        return Probe("natural text", tokens, score_all)
    targets = tokens[:, [early, late]]

    def score_icl(logits, rows):
        t = targets[rows.to(targets.device)].to(logits.device)
        return {
            "icl_score": query_loss(logits[:, 1:], t[:, 1:]) - query_loss(logits[:, :1], t[:, :1])
        }

    return Probe("natural text", tokens, score_icl, tokens.new_tensor([early - 1, late - 1]))


def reads_text(tokenizer) -> bool:
    """Whether ``tokenizer`` turns text into ids and back (not the id-only stand-in)."""
    if tokenizer is None:
        return False
    sample = "The cat sat on the mat."
    try:
        return tokenizer.decode(tokenizer(sample, add_special_tokens=False).input_ids) == sample
    except Exception:  # noqa: BLE001 - exotic tokenizers fail in many ways
        return False


def token_rows(
    model: TransformerLensModel,
    text: str | Sequence[str] | torch.Tensor | None,
    *,
    rows: int,
    length: int,
) -> Int[torch.Tensor, "rows length"]:
    """Up to ``rows`` consecutive rows of ``length`` tokens of ``text`` (at least one must fit).

    Documents are tokenized with the model's tokenizer and joined with its EOS token (when it
    has one); token ids ``[rows, pos]`` are cut as given; None is ihprobe's embedded corpus.
    ``model`` is a model from ``ihprobe.load`` (its tokenizer and ``cfg.device`` are read).

    Example:
        >>> token_rows(model, open("book.txt").read(), rows=16, length=501).shape  # doctest: +SKIP
        torch.Size([16, 501])
    """
    rows, length = checks.count("rows", rows), checks.count("length", length)
    if isinstance(text, torch.Tensor):
        given = text if text.ndim == 2 else text.view(1, -1)
        if given.shape[1] < length:
            raise IhprobeError(
                f"text rows hold {given.shape[1]} tokens but rows need at least {length}; "
                "pass longer rows."
            )
        return given[:rows, :length].to(model.cfg.device)
    documents = default_documents() if text is None else [text] if isinstance(text, str) else text
    tok = model.tokenizer
    stream: list[int] = []
    for doc in documents:
        stream += tok(doc, add_special_tokens=False).input_ids
        if tok.eos_token_id is not None:
            stream.append(tok.eos_token_id)
        if len(stream) >= rows * length:
            break
    count = min(rows, len(stream) // length)
    if count == 0:
        raise IhprobeError(
            f"the text holds {len(stream)} tokens, less than one row of {length} (the probe "
            f"needs at least {length}); pass more text."
        )
    return torch.tensor(stream[: count * length], device=model.cfg.device).view(count, length)
