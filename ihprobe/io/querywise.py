"""HF attention modules over chunks of query rows in a pair pass, as a KV cache prefills.

Without patterns and with MLPs in chunks (:mod:`ihprobe.io.positionwise`), what a pair pass
holds at its peak is one attention module's own activations: the fused projection of every
position's queries, keys and values, the rotated queries and keys, SDPA's output and its
reshaped copy, the output projection (about nine tensors of the residual's size). Within
:func:`querywise_attention` HF's attention module of each layer runs on chunks of query rows
instead, each chunk writing its keys and values into a one-layer cache (:class:`ChunkCache`,
preallocated, so no chunk copies the keys before it) and attending to every key so far, with
the mask cut to the chunk's rows (the causal one written out: SDPA's own causal flag aligns a
short query to the first keys, not the last).

A layer whose pattern hooks are wanted runs its chunks twice: first for the keys, values and
queries (SDPA skipped), after which the hooks get the whole row's queries and keys, and the
queries are dropped; then for the outputs, reading the cache. So the queries and the output
are never held at once: the module holds three tensors of the residual's size (keys, values,
and the queries or the output) where a whole-row call holds about nine, for a second pass over
the projections. The numbers are a whole-row call's (within float rounding of shorter products).

Modules that take no cache (:data:`CACHE_ARGUMENTS` names what each spelling is), that have a
user's hook inside, or whose output is not ``(output, None)`` run whole rows, as before; so
does a call small enough that it holds no more whole than an MLP's chunk does
(:data:`WHOLE_CHUNKS`, :func:`runs_whole`).

>>> CACHE_ARGUMENTS
('cache', 'layer_past', 'past_key_values')
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch

from ihprobe.io.positionwise import hooked

# what HF attention modules call their KV cache argument, newest spelling first
CACHE_ARGUMENTS = ("cache", "layer_past", "past_key_values")
# a chunk's projections, [batch, rows, 3 * d_model], at most this many elements, by device kind:
# on a CPU 1 MB float32 (its queries, keys, values, SDPA's float mask and output are each a
# fraction of the residual; measured: lab/benchmarks/RESULTS_fastpath.md); on an accelerator 16x
# more, since each chunk is one more call of the module (kernel launches, HF's and the bridge's
# Python on the host), which a fast device would wait on, while the activations of a model
# that fits beside them are seldom its memory limit (Pythia-160m at 2,048 tokens runs in 2
# chunks there, a 4,096-wide model at 8,192 tokens in 25); not yet measured on one
CHUNK_ELEMENTS = {"cpu": 2**18, "accelerator": 2**22}
# a call whose projections are at most this many chunks' worth runs whole. On a CPU 4 (4 MB
# float32): the whole call then holds about three times its projections (12 MB), what an MLP
# chunk holds anyway (positionwise.CHUNK_ELEMENTS, 4 MB of hidden activations, a few alive),
# while its chunks would add calls and, in a layer with pattern hooks, a second pass over the
# projections (a scan of the 2-layer reference checkpoint: about 0.2 s of its 1.9 s of CPU)
WHOLE_CHUNKS = {"cpu": 4, "accelerator": 1}
MAX_CHUNKS = 64  # per layer: a wide batch gets larger chunks, not hundreds of tiny calls
PROJECTIONS = 3


@dataclass
class ChunkCache:
    """One layer's keys and values for one chunked call, in buffers sized for the whole row:
    ``update`` (HF's ``Cache.update``) writes a chunk's and returns views of every key so far
    while ``filling``, and afterwards only returns them (the chunks are read again, in the same
    order). ``queries`` collects the chunks' queries the same way, for the pattern hooks.

    >>> cache = ChunkCache(total=5)
    >>> k, v = cache.update(torch.ones(1, 2, 3, 4), torch.zeros(1, 2, 3, 4), 0)
    >>> k, v = cache.update(torch.ones(1, 2, 2, 4), torch.zeros(1, 2, 2, 4), 0)
    >>> k.shape, cache.end
    (torch.Size([1, 2, 5, 4]), 5)
    >>> cache.read_again()
    >>> cache.update(torch.ones(1, 2, 3, 4), torch.ones(1, 2, 3, 4), 0)[1].sum().item()
    0.0
    """

    total: int  # positions in the whole row
    end: int = 0  # positions written (or, read again, passed) so far
    filling: bool = True
    keys: torch.Tensor | None = None
    values: torch.Tensor | None = None
    queries: torch.Tensor | None = None
    collect: bool = False  # keep the queries (the first of two passes)
    seen: dict = field(default_factory=dict)  # the attention call's scale, softcap

    def update(self, key, value, layer_idx=None, *args, **kwargs):
        rows = key.shape[2]
        if self.filling:
            self.keys = _into(self.keys, key, self.end, self.total)
            self.values = _into(self.values, value, self.end, self.total)
        self.end += rows
        return self.keys[:, :, : self.end], self.values[:, :, : self.end]

    def read_again(self) -> None:
        """From here ``update`` reads the cache from its first position and writes nothing."""
        self.end, self.filling, self.collect, self.queries = 0, False, False, None

    def add_queries(self, query: torch.Tensor) -> None:
        """Keep a chunk's queries (they arrive after its keys: they end at ``end``)."""
        rows = query.shape[2]
        self.queries = _into(self.queries, query, self.end - rows, self.total)


def _into(buffer: torch.Tensor | None, part: torch.Tensor, start: int, total: int):
    """``part`` ``[b, h, rows, d]`` written at ``start`` along positions of a ``total``-row
    buffer (made on the first part)."""
    if buffer is None:
        b, h, _, d = part.shape
        buffer = part.new_empty(b, h, total, d)
    buffer[:, :, start : start + part.shape[2]] = part
    return buffer


_ACTIVE: dict[int, ChunkCache] = {}  # id(HF attention module) -> the cache of its current call


def collecting(module) -> ChunkCache | None:
    """The cache of ``module``'s chunked call under way, if any: the pair pass's attention
    function hands it the chunk's queries instead of calling the pattern hooks."""
    return _ACTIVE.get(id(module))


def cache_argument(module) -> str | None:
    """The name under which ``module``'s forward takes a KV cache, or None.

    >>> cache_argument(torch.nn.Linear(2, 2)) is None
    True
    """
    names = inspect.signature(type(module).forward).parameters
    return next((name for name in CACHE_ARGUMENTS if name in names), None)


def rows_per_chunk(batch: int, n: int, width: int, device: str | torch.device = "cpu") -> int:
    """Query rows per chunk on ``device``: the projections within its kind's
    :data:`CHUNK_ELEMENTS`, at most :data:`MAX_CHUNKS` chunks.

    >>> rows_per_chunk(1, 2048, 768), rows_per_chunk(1, 2048, 768, "cuda")
    (113, 1820)
    """
    most = CHUNK_ELEMENTS[_kind(device)] // (batch * PROJECTIONS * width)
    return max(-(-n // MAX_CHUNKS), most, 1)


def _kind(device: str | torch.device) -> str:
    return "cpu" if torch.device(device).type == "cpu" else "accelerator"


def runs_whole(batch: int, n: int, width: int, device: str | torch.device = "cpu") -> bool:
    """Whether a call of ``batch`` rows of ``n`` positions runs whole on ``device``: its
    projections within :data:`WHOLE_CHUNKS` of its kind's chunks, or a single chunk.

    >>> runs_whole(25, 100, 128), runs_whole(1, 2048, 768)
    (True, False)
    """
    kind = _kind(device)
    small = batch * n * PROJECTIONS * width <= WHOLE_CHUNKS[kind] * CHUNK_ELEMENTS[kind]
    return small or n <= rows_per_chunk(batch, n, width, device)


def _causal(rows: range, end: int, device) -> torch.Tensor:
    """The causal mask of query rows ``rows`` over keys ``[0, end)``: ``[1, 1, rows, end]``."""
    at = torch.arange(rows.start, rows.stop, device=device)[:, None]
    return (torch.arange(end, device=device)[None, :] <= at)[None, None]


def by_query_rows(
    module: torch.nn.Module, on_done: Callable[[ChunkCache, torch.Tensor | None], None] | None
) -> Callable:
    """``module``'s forward over chunks of query rows with a :class:`ChunkCache`. With
    ``on_done``, the chunks run twice, and between the passes ``on_done(cache, mask)`` gets the
    whole row's queries and keys and the mask HF gave (None: causal). A call it cannot chunk
    runs whole (``on_done`` is not called: the whole call feeds the hooks itself)."""
    whole = type(module).forward.__get__(module)
    name = cache_argument(module)
    params = list(inspect.signature(type(module).forward).parameters)[1:]

    def forward(*args, **kwargs):
        bound = dict(zip(params, args, strict=False)) | kwargs
        chunks = _chunks(module, name, bound.get(params[0]) if params else None, bound)
        if chunks is not None:
            cache = ChunkCache(total=chunks[-1].stop, collect=on_done is not None)
            _ACTIVE[id(module)] = cache
            try:
                out = _in_chunks(whole, name, bound, params[0], cache, chunks, on_done)
            finally:
                _ACTIVE.pop(id(module), None)
            if out is not None:
                return (out, None)
        return whole(*args, **kwargs)

    return forward


def _chunks(module, name: str | None, hidden, bound: dict) -> list[range] | None:
    """The chunks of query rows a call runs in, or None where it runs whole: no cache argument,
    a cache given (generation), no ``[batch, pos, d]`` input, a hook inside, a small call
    (:func:`runs_whole`), or a mask that is not ``[.., query, key]`` over the whole row."""
    if name is None or bound.get(name) is not None or hooked(module):
        return None
    if not isinstance(hidden, torch.Tensor) or hidden.dim() != 3:
        return None
    b, n, width = hidden.shape
    mask = bound.get("attention_mask")
    if runs_whole(b, n, width, hidden.device):
        return None
    if mask is not None and (mask.dim() != 4 or mask.shape[-1] != n):
        return None
    step = rows_per_chunk(b, n, width, hidden.device)
    return [range(start, min(start + step, n)) for start in range(0, n, step)]


def _in_chunks(
    whole: Callable, name: str, bound: dict, first: str, cache: ChunkCache, chunks, on_done
) -> torch.Tensor | None:
    """The whole row's attention output ``[batch, pos, d]`` from the chunks (twice, with
    ``on_done`` between, when the cache collects queries), or None if a chunk's output is not
    ``(output, None)`` or the module did not pass its keys through the cache (found on the first
    chunk, before any hook has run)."""
    hidden, mask = bound[first], bound.get("attention_mask")
    b, n = hidden.shape[:2]

    def call(rows: range) -> torch.Tensor | None:
        part = {key: _rows(value, rows, b, n) for key, value in bound.items()}
        part["attention_mask"] = (
            _causal(rows, rows.stop, hidden.device)
            if mask is None
            else mask[..., rows.start : rows.stop, : rows.stop]
        )
        part[name] = cache
        result = whole(**part)
        plain = isinstance(result, tuple) and result[1:] == (None,) * (len(result) - 1)
        return result[0] if plain and cache.end == rows.stop else None  # and it used the cache

    if cache.collect:  # keys, values and queries; no output
        if any(call(rows) is None for rows in chunks):
            return None
        on_done(cache, mask)
        cache.read_again()
    out = None
    for rows in chunks:
        got = call(rows)
        if got is None:
            return None
        if out is None:
            out = got.new_empty(b, n, got.shape[-1])
        out[:, rows.start : rows.stop] = got
    return out


def _rows(value, rows: range, b: int, n: int):
    """An argument cut to the chunk's rows: a tensor (or a tuple of them, as rotary's cos and
    sin) with ``n`` positions in dim 1 and batch ``b`` or 1 in dim 0 (``cache_position``: 1-D of
    length ``n``); anything else as given."""
    if isinstance(value, tuple):
        return tuple(_rows(v, rows, b, n) for v in value)
    if not isinstance(value, torch.Tensor):
        return value
    if value.dim() == 1 and value.shape[0] == n:
        return value[rows.start : rows.stop]
    if value.dim() >= 2 and value.shape[1] == n and value.shape[0] in (1, b) and value.dim() < 4:
        return value[:, rows.start : rows.stop].contiguous()  # a module may .view() it
    return value


@contextlib.contextmanager
def querywise_attention(
    modules: dict[int, torch.nn.Module],
    on_done: Callable[[int, ChunkCache, torch.Tensor | None], None],
    hooked_layers: set[int],
) -> Iterator[None]:
    """Within this block each HF attention module of ``modules`` (by layer) runs
    :func:`by_query_rows`; a layer in ``hooked_layers`` runs its chunks twice and calls
    ``on_done(layer, cache, mask)`` between them. Put back on leaving, even on error."""
    try:
        for layer, module in modules.items():
            wanted = functools.partial(on_done, layer) if layer in hooked_layers else None
            object.__setattr__(module, "forward", by_query_rows(module, wanted))
        yield
    finally:
        for module in modules.values():
            module.__dict__.pop("forward", None)
            _ACTIVE.pop(id(module), None)
