"""Attention weights at a few (query, key) pairs, from the queries and keys, without the pattern.

A head's weight from query ``i`` to key ``j`` is ``exp(s_ij - lse_i)``: its score
``s_ij = cap(scale * q_i . k_j) + bias_j + mask_ij`` minus the log-sum-exp of row ``i``'s
scores. The pattern scores read a few pairs per row, so :class:`PairAttention` keeps the
queries and keys of one layer (what SDPA is handed: after rotary and QK norms, before grouped K
heads are repeated) and computes the pairs' scores and, for the rows they sit in, the
log-sum-exp: in chunks of query rows of at most :data:`CHUNK_ELEMENTS` scores, so memory is
``O(chunk * keys * heads)`` instead of ``O(n^2 * heads)``.
:func:`gather_pairs` reads pairs from a full pattern or from a :class:`PairAttention` alike.

>>> q, k = torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
>>> full = ((q @ k.transpose(-1, -2)) / 2).masked_fill(torch.ones(5, 5).triu(1).bool(), -torch.inf)
>>> pairs = torch.tensor([4, 3]), torch.tensor([1, 3])
>>> torch.allclose(gather_pairs(PairAttention(q, k, scale=0.5), *pairs),
...                gather_pairs(full.softmax(-1), *pairs), atol=1e-6)
True
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float, Int

CHUNK_ELEMENTS = 2**19  # scores per chunk of query rows (2 MB in float32): [b, h, rows, keys]


@dataclass
class PairAttention:
    """One layer's attention, held as its queries and keys (a lazy ``hook_pattern``).

    ``mask`` is what HF hands its attention function: None for plain causal attention, else a
    boolean (True: attend) or additive float mask broadcastable to ``[batch, head, query, key]``
    (padding, sliding windows). ``softcap`` is Gemma-2's ``cap * tanh(s / cap)`` of the scaled
    scores. ``bias`` is an additive bias per key, ``[batch|1, head, 1, key]``: ALiBi as Bloom,
    MPT and Falcon lay it out (``slope_h * j``; a row-constant shift of ``slope_h * (j - i)``,
    which the softmax does not see), so it costs ``O(n * heads)``, not ``O(n^2 * heads)``.
    """

    query: Float[torch.Tensor, "batch head query d_head"]
    key: Float[torch.Tensor, "batch kv_head key d_head"]
    scale: float
    mask: torch.Tensor | None = None
    softcap: float | None = None
    chunk: int | None = None  # query rows per chunk; None: as many as CHUNK_ELEMENTS allow
    bias: torch.Tensor | None = None  # per key: [batch|1, head, 1, key]

    def detach(self) -> PairAttention:  # hooks detach what they keep
        return self

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """The shape of the pattern this stands for: ``[batch, head, query, key]``."""
        b, h, n, _ = self.query.shape
        return b, h, n, self.key.shape[2]

    def _rows_per_chunk(self) -> int:
        b, h, _, keys = self.shape
        return self.chunk or max(1, CHUNK_ELEMENTS // (b * h * keys))

    def _keys(self) -> torch.Tensor:
        """Keys with grouped heads repeated to one per query head: ``[batch, head, key, d]``."""
        groups = self.query.shape[1] // self.key.shape[1]
        return self.key.repeat_interleave(groups, dim=1) if groups > 1 else self.key

    def _scores(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """``cap(scale * q . k)`` in float32 (the softmax runs in float32 too)."""
        s = (q.float() @ k.float().transpose(-1, -2)).mul_(self.scale)  # in place: one chunk
        if self.softcap is None:
            return s
        return s.div_(self.softcap).tanh_().mul_(self.softcap)

    def _masked(self, s: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """``s`` ``[batch, head, len(rows), len(cols)]`` plus the bias, with the causal mask or
        the given one."""
        if self.bias is not None:
            s += self.bias[..., cols].float()
        if self.mask is None:
            return s.masked_fill_(cols[None, :] > rows[:, None], -torch.inf)
        m = self.mask[..., rows, :][..., cols]
        return s.masked_fill_(~m, -torch.inf) if m.dtype == torch.bool else s.add_(m.float())

    def output(self, value: Float[torch.Tensor, "batch kv_head key d_head"]) -> torch.Tensor:
        """The attention output ``[batch, query, head, d_head]`` (HF's layout), computed
        ``chunk`` query rows at a time: exact attention where SDPA cannot run (a softcap)."""
        groups = self.query.shape[1] // value.shape[1]
        value = value.repeat_interleave(groups, dim=1) if groups > 1 else value
        keys, cols = self._keys(), torch.arange(self.key.shape[2], device=self.key.device)
        rows = torch.arange(self.query.shape[2], device=self.query.device)
        parts = []
        for part in rows.split(self._rows_per_chunk()):
            s = self._masked(self._scores(self.query[:, :, part], keys), part, cols)
            parts.append(s.softmax(-1).to(value.dtype) @ value)
        return torch.cat(parts, dim=2).transpose(1, 2).contiguous()

    def pairs(
        self, queries: Int[torch.Tensor, "*batch pair"], keys: Int[torch.Tensor, "*batch pair"]
    ) -> Float[torch.Tensor, "batch head pair"]:
        """Weights at ``(queries[i], keys[i])``: the same pairs in every row (``[pair]``) or
        each row's own (``[batch, pair]``); ``[batch, head, pair]`` like the full gather.

        Each pair's log-weight is read from its row's own scores, ``s_ij - lse_i`` with both
        from one chunk of rows (a chunk of a log-softmax), so a pair and its normaliser round
        alike even where the scores are large."""
        b, h, _, _ = self.shape
        device = self.query.device
        rows, where = torch.unique(queries.cpu(), return_inverse=True)  # host bookkeeping
        where, keys = (t.to(device).expand(b, -1) for t in (where, keys))  # [b, pair]
        key, cols = self._keys(), torch.arange(self.key.shape[2], device=device)
        out = torch.zeros(b, h, keys.shape[1], device=device)
        start = 0
        for part in rows.to(device).split(self._rows_per_chunk()):
            s = self._masked(self._scores(self.query[:, :, part], key), part, cols)
            log_weights = s.sub_(torch.logsumexp(s, dim=-1, keepdim=True))  # [b, h, part, key]
            at, pair = ((where >= start) & (where < start + len(part))).nonzero(as_tuple=True)
            rows_at = where[at, pair] - start
            out[at, :, pair] = log_weights[at, :, rows_at, keys[at, pair]].exp()
            start += len(part)
            del s, log_weights  # before the next chunk is made: one chunk alive at a time
        return out


def gather_pairs(
    pattern: Float[torch.Tensor, "batch head query key"] | PairAttention,
    queries: Int[torch.Tensor, "*batch pair"],
    keys: Int[torch.Tensor, "*batch pair"],
) -> Float[torch.Tensor, "batch head pair"]:
    """``pattern[b, h, queries[.., i], keys[.., i]]`` as ``[batch, head, pair]``, from a full
    pattern or a :class:`PairAttention`; pairs are shared (``[pair]``) or per row.

    >>> gather_pairs(torch.eye(3).expand(2, 1, 3, 3), torch.tensor([[1, 2], [0, 0]]),
    ...              torch.tensor([[1, 0], [0, 0]])).tolist()
    [[[1.0, 0.0]], [[1.0, 1.0]]]
    """
    if isinstance(pattern, PairAttention):
        return pattern.pairs(queries, keys)
    queries, keys = queries.to(pattern.device), keys.to(pattern.device)
    if queries.dim() == 1:
        return pattern[:, :, queries, keys]
    batch = torch.arange(queries.shape[0], device=pattern.device)[:, None]
    return pattern[batch, :, queries, keys].transpose(1, 2)
