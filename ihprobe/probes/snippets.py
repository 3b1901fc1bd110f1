"""Snippet scores: forward induction, [B]'s anti-induction, and backward copying by behaviour.

Two kinds of rows (:mod:`ihprobe.probes.inputs`):

* **fixed length** (``snippets``, ``|S| = L`` in every row, [B]'s protocol): every scored pair
  sits at the same offset, so one list of (query, key) pairs serves all rows
  (:func:`ihprobe.probes.attention.forward_pairs`, ``backward_pairs``). They give
  ``forward_induction_fixed`` and [B]'s ``anti_induction``. A head that always looks ``L``
  tokens back scores 1 on ``forward_induction_fixed`` without reading any content.
* **varied length** (``varied_snippets``, ``|S|`` drawn per row from ``VARIED_LENGTHS``): the
  pairs of each row depend on its length (``attention.varied_pairs``, ``[rows, pair]`` with a
  mask), so no single offset fits. Forward rows give ``forward_induction_varied``; backward rows
  ``[S, SEP, reverse(S)]`` give what a backward-copying circuit does: the copy's ``s_k``
  attends to its earlier occurrence at ``k`` (``backward_duplicate``), where a previous-token
  head has stored ``s_{k-1}`` (``backward_previous_token``: ``k -> k - 1`` inside ``S``), and
  the model predicts ``s_{k-1}`` (``backward_copy_loss``, ``backward_copy_accuracy``). Two
  contrasts say the loss comes from copying in reverse order: the first half's own next-token
  loss (``backward_copy_vs_first_half``) and the loss on a shuffled copy of the same ``S``
  (``backward_copy_vs_shuffled``), both minus ``backward_copy_loss``.

[B]'s anti-induction score reads attention from the copy's ``s_k`` to ``k - 1``. In a causal
model the key at ``k - 1`` holds ``s_{k-1}`` and what came before it, never ``s_k``; the query
knows ``s_k`` and the copy so far, not ``s_{k-1}`` (the token it is about to predict). No
content the two share can select that key until another head has already retrieved the answer,
so a model that copies backward need not raise it (docs/science.md).

>>> scores = scan(model, ["forward_induction_varied", "backward_copy_accuracy"])  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from jaxtyping import Float

from ihprobe.core import hooks
from ihprobe.core.devices import stack_layers
from ihprobe.core.pairs import gather_pairs
from ihprobe.probes import attention, inputs
from ihprobe.probes.engine import NOTHING, Probe, run_probe
from ihprobe.probes.metrics import PATTERN

FIXED_SCORES = {"forward_induction_fixed": "forward", "anti_induction": "backward"}
# behaviour on the varied rows: the logits read, as positions predicting the next token
PREDICTIONS = {
    "copy": lambda j, L: L + 1 + j,  # the copy's tokens but its last predict the next copy token
    "first_half": lambda j, L: j,  # S's tokens but its last predict the next token of S
}
BEHAVIOUR = (
    "backward_copy_loss",
    "backward_copy_accuracy",
    "backward_copy_vs_first_half",
    "backward_copy_vs_shuffled",
)
COPIES = ("forward", "backward", "shuffled")  # the varied rows, stacked in this order


def copies_needed(wanted: list[str]) -> list[str]:
    """The kinds of varied rows the ``wanted`` scores read, in :data:`COPIES` order.

    >>> copies_needed(["forward_induction_varied"]), copies_needed(["backward_copy_vs_shuffled"])
    (['forward'], ['backward', 'shuffled'])
    """
    reads = {attention.VARIED_PAIRS[m][0] for m in wanted if m in attention.VARIED_PAIRS}
    reads |= {"backward"} if any(m in BEHAVIOUR for m in wanted) else set()
    reads |= {"shuffled"} if "backward_copy_vs_shuffled" in wanted else set()
    return [c for c in COPIES if c in reads]


def snippet_scores(
    model,
    wanted: list[str],
    *,
    length: int,
    lengths: tuple[int, int],
    batch: int,
    seed: int,
    bos: bool,
    chunk: int | None,
    mode: str = "patterns",
) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """Every snippet score in ``wanted``: ``(head scores [layer, head], model scores)``.

    Fixed-length rows of ``|S| = length`` and varied-length rows of ``|S|`` in ``lengths`` run
    in separate passes, each only when one of its scores is wanted; ``mode`` is
    :func:`~ihprobe.probes.engine.run_probe`'s ``attention``.
    """
    head: dict[str, torch.Tensor] = {}
    fixed = [m for m in FIXED_SCORES if m in wanted]
    if fixed:
        head.update(_fixed_pass(model, fixed, length, batch, seed, bos, chunk, mode))
    varied = [m for m in (*attention.VARIED_PAIRS, *BEHAVIOUR) if m in wanted]
    if not varied:
        return head, {}
    varied_head, behaviour = _varied_pass(model, varied, lengths, batch, seed, bos, chunk, mode)
    return {**head, **varied_head}, behaviour


def _pattern_hooks(n_layers: int, select: Callable) -> Callable:
    """Hooks that keep ``select(pattern, rows)`` of every layer, per chunk."""

    def make_hooks(index, store: dict) -> list:
        return [
            (hooks.hook_name(PATTERN, layer), hooks.keep(store, layer, lambda a: select(a, index)))
            for layer in range(n_layers)
        ]

    return make_hooks


def _fixed_pass(model, wanted, length: int, batch: int, seed: int, bos: bool, chunk, mode):
    """Forward and backward fixed-length rows stacked into one pass; attention pairs only."""
    pairs = {
        "forward_induction_fixed": attention.forward_pairs(length, bos),
        "anti_induction": attention.backward_pairs(length, bos),
    }
    draw = {"length": length, "batch": batch, "seed": seed, "bos": bos}
    rows = torch.cat(
        [inputs.snippets(model, backward=FIXED_SCORES[m] == "backward", **draw) for m in wanted]
    )
    (queries, keys), where = attention.concat_pairs({m: pairs[m] for m in wanted})
    gather = hooks.pattern_pairs(queries, keys)
    make_hooks = _pattern_hooks(model.cfg.n_layers, lambda pattern, index: gather(pattern))
    probe = Probe("snippets", rows, positions=NOTHING)
    kept = run_probe(model, probe, make_hooks, chunk=chunk, attention=mode)
    stacked = stack_layers([kept[layer] for layer in range(model.cfg.n_layers)])
    return {
        m: attention.pair_mean(stacked[:, i * batch : (i + 1) * batch, :, where[m]])
        for i, m in enumerate(wanted)
    }


def _varied_pass(model, wanted, lengths, batch: int, seed: int, bos: bool, chunk, mode):
    """The varied-length rows the scores need (forward, backward, shuffled; paired: the same
    ``S`` per row index) in one pass: the attention pairs of the head scores and, when a
    behaviour score is wanted, the logits at the copy's and the first half's predicting
    positions."""
    copies = copies_needed(wanted)
    made = [
        inputs.varied_snippets(model, copy=c, lengths=lengths, batch=batch, seed=seed, bos=bos)
        for c in copies
    ]
    rows = torch.cat([tokens for tokens, _ in made])
    length = torch.cat([n for _, n in made])
    heads = [m for m in attention.VARIED_PAIRS if m in wanted]
    laid = [attention.varied_pairs(m, length, bos) for m in heads]
    # no head score wanted (a behaviour score alone): no pairs, and no hook reads them
    queries = torch.cat([q for q, _, _ in laid], dim=1) if heads else None
    keys = torch.cat([k for _, k, _ in laid], dim=1) if heads else None

    def gather(pattern, index):  # [batch, head, q, k] -> [batch, head, pair], per row
        at = index % len(rows)
        return gather_pairs(pattern, queries[at.to(queries.device)], keys[at.to(keys.device)])

    make_hooks = _pattern_hooks(model.cfg.n_layers, gather) if heads else ()
    behaviour = [m for m in BEHAVIOUR if m in wanted]
    unembed_none = Probe("varied snippets", rows, positions=NOTHING)
    probe = _behaviour_probe(rows, length, bos) if behaviour else unembed_none
    kept = run_probe(model, probe, make_hooks, chunk=chunk, attention=mode)
    head = {}
    if heads:
        stacked = stack_layers([kept[layer] for layer in range(model.cfg.n_layers)])
        start = 0
        for m, (q, _, valid) in zip(heads, laid, strict=True):
            part = stacked[..., start : start + q.shape[1]]
            start += q.shape[1]
            group = copies.index(attention.VARIED_PAIRS[m][0])
            head[m] = _masked_mean(part, valid, group, batch)
    return head, _behaviour_scores(kept, copies, batch, behaviour) if behaviour else {}


def _masked_mean(
    part: Float[torch.Tensor, "layer rows head pair"], valid, group: int, batch: int
) -> Float[torch.Tensor, "layer head"]:
    """Mean over the valid pairs of one group of rows (forward, backward or shuffled)."""
    rows = slice(group * batch, (group + 1) * batch)
    mask = valid[rows].to(part.device, part.dtype)[None, :, None, :]
    return (part[:, rows] * mask).sum(dim=(1, 3)) / mask.sum(dim=(1, 3))


def _behaviour_probe(rows, length, bos: bool) -> Probe:
    """Per row: next-token loss and top-1 hits at the copy's predicting positions, and the loss
    at the first half's; only those positions are unembedded."""
    copy, valid = attention.row_positions(PREDICTIONS["copy"], length, bos)
    first_half, _ = attention.row_positions(PREDICTIONS["first_half"], length, bos)
    positions = torch.cat([copy, first_half], dim=1)
    targets = rows.gather(1, (positions + 1).to(rows.device)).to(positions.device)
    width = copy.shape[1]

    def score(logits, index):
        at = index.to(targets.device)
        mask = valid[at].to(logits.device).float()
        t = targets[at].to(logits.device)
        losses = torch.nn.functional.cross_entropy(
            logits.float().transpose(1, 2), t, reduction="none"
        )
        hits = (logits.argmax(-1) == t).float()
        mean = lambda x: (x * mask).sum(1) / mask.sum(1)  # noqa: E731
        return {
            "copy_loss": mean(losses[:, :width]),
            "copy_hits": mean(hits[:, :width]),
            "first_half_loss": mean(losses[:, width:]),
        }

    return Probe("varied snippets", rows, score, positions)


def _behaviour_scores(kept: dict, copies: list[str], batch: int, wanted: list[str]):
    """The backward-copying scores from the per-row losses of the backward and shuffled rows
    (``copies``: the kinds of rows stacked, in order)."""

    def group(key: str, copy: str) -> float:
        start = copies.index(copy) * batch
        return float(kept[key][start : start + batch].mean())

    loss = group("copy_loss", "backward")
    found = {
        "backward_copy_loss": lambda: loss,
        "backward_copy_accuracy": lambda: group("copy_hits", "backward"),
        "backward_copy_vs_first_half": lambda: group("first_half_loss", "backward") - loss,
        "backward_copy_vs_shuffled": lambda: group("copy_loss", "shuffled") - loss,
    }
    return {m: found[m]() for m in wanted}
