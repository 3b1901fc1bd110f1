"""Bi-Induct ([B]): natural text with forward ``[S, SEP, S]`` and backward
``[S, SEP, reverse(S)]`` copy snippets written over it.

Snippets **replace** background tokens, so every variant sees the same tokens per update. The
injection rate anneals linearly, m(t) = m0 (1 - t / total_steps). Token-level mixing (default):
each row gets whole snippets at random non-overlapping offsets, their number drawn so that the
expected share of snippet tokens is m(t) (stochastic rounding of m C / (2L + 1)). Sequence-level
mixing: a row is, with probability m(t), filled with as many snippets as fit. S is the stretch
of background the snippet starts on (default) or L distinct uniform random tokens; SEP is a
dedicated id. Each batch reports the rate ``m``, its realised ``snippet_fraction`` and, when
it has snippets, the ``forward_fraction``.

>>> p = BiInductProducer(batch_size=8, context=64, total_steps=100, vocab_size=300)
>>> b = p.sample(0)
>>> b.info["m"]
0.5
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch

from ihprobe.core.errors import IhprobeError
from ihprobe.core.standin import id_tokenizer
from ihprobe.data.background import BackgroundOptions, BackgroundProducer
from ihprobe.data.base import Batch, check_probability

DIRECTIONS = {"balanced": 0.5, "forward": 1.0, "backward": 0.0}  # P(forward) per snippet


@dataclass(frozen=True)
class BiInductOptions(BackgroundOptions):
    """Bi-Induct's options, over a background producer (natural text by default).

    Args:
        snippet_length: L, the length of S; a snippet is 2L + 1 tokens.
        m0: the injection rate at step 0; it falls linearly to 0 at ``total_steps``.
        mixing: "token" (snippets inside every row) or "sequence" (whole rows of snippets).
        direction: "balanced" (fair coin per snippet), "forward" or "backward".
        snippet_source: "natural" (S is the background it replaces) or "random" (distinct
            uniform tokens).
        base, base_options: the background producer (for "natural": text, dataset,
            tokenizer, vocab_size, ...), see :class:`BackgroundOptions`.
    """

    snippet_length: int = 20
    m0: float = 0.5
    mixing: Literal["token", "sequence"] = "token"
    direction: Literal["balanced", "forward", "backward"] = "balanced"
    snippet_source: Literal["natural", "random"] = "natural"

    def check(self) -> None:
        check_probability("m0", self.m0)


class BiInductProducer(BackgroundProducer):
    """Copy snippets written over the batches of a background producer.

    Options: :class:`BiInductOptions`. A background without a SEP id (e.g. "iid") gets one
    more id for it, so ``vocab_size`` is the background's plus one.
    """

    name = "bi-induct"
    Options = BiInductOptions
    options: BiInductOptions

    def __init__(self, **settings: Any):
        super().__init__(**settings)
        n = self.options.snippet_length
        if n < 1 or 2 * n + 1 > self.context:
            raise IhprobeError(
                f"a snippet of length L={n} takes 2L+1={2 * n + 1} tokens, which does not "
                f"fit in context={self.context}: use snippet_length <= {(self.context - 1) // 2}."
            )
        if "sep" not in self.special:  # a background without SEP gets a new id for it
            self.special["sep"] = self.vocab_size
            self.vocab_size += 1
        self.drawable = torch.ones(self.vocab_size, dtype=torch.bool)
        self.drawable[list(self.special.values())] = False
        if self.options.snippet_source == "random" and int(self.drawable.sum()) < n:
            raise IhprobeError(
                f"the vocabulary has {int(self.drawable.sum())} usable ids, too few for "
                f"{n} distinct snippet tokens: use a smaller snippet_length."
            )

    def rate(self, step: int) -> float:
        """m(t) = m0 (1 - t / total_steps), never below 0."""
        return self.options.m0 * max(0.0, 1.0 - step / max(self.total_steps, 1))

    def sample(self, step: int) -> Batch:
        tokens = self.base.sample(step).tokens.clone()
        g = self.generator(step)
        b, c, n = self.batch_size, self.context, self.options.snippet_length
        span, m = 2 * n + 1, self.rate(step)
        fit = c // span  # most snippets a row can hold
        if self.options.mixing == "token":
            expected = torch.full((b,), m * c / span)
            k = expected.floor() + (torch.rand(b, generator=g) < expected.frac())
        else:
            k = (torch.rand(b, generator=g) < m) * float(fit)
        k = k.long().clamp(max=fit)
        # k non-overlapping starts: k distinct slots of c - k (span - 1), spread out by span - 1
        slots = c - k * (span - 1)
        scores = torch.rand(b, c, generator=g).masked_fill(torch.arange(c) >= slots[:, None], 2.0)
        chosen = scores.topk(fit, dim=1, largest=False).indices
        live = torch.arange(fit) < k[:, None]  # [b, fit]: snippet i of row is real
        chosen = chosen.masked_fill(~live, c).sort(dim=1).values
        starts = (chosen + torch.arange(fit) * (span - 1))[live]  # [snippets]
        rows = torch.arange(b)[:, None].expand(b, fit)[live]
        s_pos = starts[:, None] + torch.arange(n)  # [snippets, n]
        if self.options.snippet_source == "natural":
            s = tokens[rows[:, None], s_pos]
        else:
            ids = self.drawable.nonzero().squeeze(1)
            perm = torch.rand(len(rows), len(ids), generator=g).argsort(dim=1)[:, :n]
            s = ids[perm]
        forward = torch.rand(len(rows), generator=g) < DIRECTIONS[self.options.direction]
        copy = torch.where(forward[:, None], s, s.flip(1))
        tokens[rows[:, None], s_pos] = s
        tokens[rows, starts + n] = self.special["sep"]
        tokens[rows[:, None], s_pos + n + 1] = copy
        info = {"m": m, "snippet_fraction": len(rows) * span / (b * c)}
        if len(rows):  # undefined without snippets: left out so logs stay strict JSON
            info["forward_fraction"] = float(forward.float().mean())
        return Batch(tokens=tokens, info=info)

    def tokenizer(self):
        if self.vocab_size == self.base.vocab_size:
            return self.base.tokenizer()
        return id_tokenizer(self.vocab_size)
