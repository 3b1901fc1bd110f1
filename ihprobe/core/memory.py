"""Memory and work estimates checked before allocating: a request that cannot fit is one line,
not a kill, and one that will take more than a minute says so before it starts.

Anything whose size scales with a config or a flag (a model built from ``config.json``, a probe
batch, random draws, a producer's tables) estimates its bytes first and calls
:func:`check_memory`, which refuses an estimate above the memory available now (``MemAvailable``
of ``/proc/meminfo``, lowered by the process's address-space limit (``ulimit -v``) and its
cgroup's ``memory.max``) with the estimate and the available memory. :func:`estimate` is the one
estimate of what a model shape and the flags cost (parameters, optimiser state, activations,
probe rows, ablation groups, random draws), in bytes and in floating-point operations;
:func:`check_work` refuses it past the available memory and logs a warning past
:data:`ANNOUNCE_SECONDS` of estimated work. ``IHPROBE_NO_SIZE_LIMITS=1`` lifts these checks
together with the size limits of checkpoint configs, for users who know better (swap, or an
estimate that is too cautious).

>>> check_memory("a probe batch of 10 rows", 1_000)
>>> check_memory("a probe batch", 10**30)                     # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ihprobe.core.errors.IhprobeError: a probe batch needs about 1e+21 GB but ... GB of memory ...
"""

from __future__ import annotations

import ctypes
import functools
import logging
import math
import os
import resource
import shutil
from dataclasses import dataclass

from ihprobe.core.errors import IhprobeError

log = logging.getLogger(__name__)
SIZE_LIMIT_ENV = "IHPROBE_NO_SIZE_LIMITS"  # set to 1 to lift size limits and memory checks
MEMINFO = "/proc/meminfo"
CGROUP = "/sys/fs/cgroup"  # cgroup v2: memory.max and memory.current
ANNOUNCE_SECONDS = 60  # estimated work past this is announced before it starts
FLOPS_PER_SECOND = {"cpu": 2e10, "cuda": 2e13}  # a cautious guess of sustained float32 speed


def limits_on() -> bool:
    """Whether size limits and memory checks apply (unless ``IHPROBE_NO_SIZE_LIMITS`` is set)."""
    return os.environ.get(SIZE_LIMIT_ENV, "0") in ("0", "", "false")


def available_bytes(device="cpu") -> int:
    """Memory available to a new allocation on ``device`` now, in bytes: the host's for the
    CPU, the free memory of the GPU for cuda.

    >>> available_bytes() > 0
    True
    """
    kind = getattr(device, "type", None) or str(device).split(":")[0]
    if kind == "cuda":  # torch only here: the host's checks stay free of the heavy import
        import torch

        if torch.cuda.is_available():  # else the device check that follows says so
            return int(torch.cuda.mem_get_info(torch.device(device))[0])
    # any other device (meta has no memory of its own): the host's stands in
    found = [_meminfo() or os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")]
    limit, _ = resource.getrlimit(resource.RLIMIT_AS)  # ulimit -v: the address space left
    if limit != resource.RLIM_INFINITY:
        found.append(max(limit - _status_bytes("VmSize:"), 0))
    cap, used = _read_int(f"{CGROUP}/memory.max"), _read_int(f"{CGROUP}/memory.current")
    if cap is not None and used is not None:
        found.append(max(cap - used, 0))
    return min(found)


def _meminfo() -> int | None:
    return _status_bytes("MemAvailable:", MEMINFO) or None


def _status_bytes(field: str, file: str = "/proc/self/status") -> int:
    """A ``kB`` field of a /proc file in bytes (0 when it cannot be read)."""
    try:
        with open(file) as handle:
            for line in handle:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _read_int(file: str) -> int | None:
    try:
        with open(file) as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):  # absent, or "max"
        return None


def check_memory(
    what: str,
    estimate: float,
    *,
    limits: bool | None = None,
    shrink: str = "make it smaller",
    device: str = "cpu",
) -> None:
    """Refuse ``what`` when its ``estimate`` in bytes exceeds the memory available on ``device``
    (the GPU's free memory for cuda, the host's otherwise).

    Args:
        what: the allocation, for the message (``"scan with batch=1000000"``).
        estimate: its bytes.
        limits: check (default: unless ``IHPROBE_NO_SIZE_LIMITS=1``).
        shrink: how to make it smaller, for the message (``"pass a smaller --batch"``).
    """
    if limits is None:
        limits = limits_on()
    if not limits:
        return
    available = available_bytes(device)
    if estimate > available:
        raise IhprobeError(
            f"{what} needs about {estimate / 1e9:.3g} GB but {available / 1e9:.3g} GB of memory "
            f"is available; {shrink}, or set {SIZE_LIMIT_ENV}=1 if you know it fits."
        )


@dataclass(frozen=True)
class Shape:
    """What sizes a decoder-only model: ``layers x heads``, widths, vocabulary and context."""

    layers: int
    heads: int
    d_model: int
    d_mlp: int
    vocab: int
    context: int

    @property
    def parameters(self) -> int:
        """Embedding, unembedding, positions, attention and MLP weights (norms and biases are
        a rounding error).

        >>> Shape(2, 4, 64, 256, 512, 64).parameters
        167936
        """
        block = 4 * self.d_model**2 + 2 * self.d_model * self.d_mlp
        return 2 * self.vocab * self.d_model + self.context * self.d_model + self.layers * block


LONGEST_ROW = 512  # tokens: the longest row ihprobe's own probes run (natural-text rows)


def shape_of(cfg, longest: int = LONGEST_ROW) -> Shape:
    """The :class:`Shape` of a loaded model's config (TransformerLens names), its context the
    rows a call will run: ``longest`` tokens, or the model's context where that is shorter
    (the probes' rows, not ``n_ctx``: a 2,048-token model scans rows of at most 512).

    >>> from types import SimpleNamespace
    >>> cfg = SimpleNamespace(n_layers=2, n_heads=4, d_model=64, d_mlp=256, d_vocab=512, n_ctx=2048)
    >>> shape_of(cfg).context, shape_of(cfg, longest=4096).context
    (512, 2048)
    """
    d_mlp = getattr(cfg, "d_mlp", None)
    d_mlp = d_mlp if isinstance(d_mlp, int) else 4 * cfg.d_model
    context = min(cfg.n_ctx, longest)
    return Shape(cfg.n_layers, cfg.n_heads, cfg.d_model, d_mlp, cfg.d_vocab, context)


@dataclass(frozen=True)
class Estimate:
    """Bytes held at once, and floating-point operations in all."""

    bytes: float
    flops: float

    def seconds(self, device: str = "cpu") -> float:
        return self.flops / FLOPS_PER_SECOND["cuda" if device.startswith("cuda") else "cpu"]


# Measured terms (tests/adversarial/test_estimates.py checks each against the peak RSS of a
# run, within 2x, on a grid of shapes): what a layer costs in training beyond its weights (its
# modules, its parameters' four tensors, the autograd graph of its ops), the copies of the
# logits a training step holds (logits, log-softmax, and their gradients at the backward's
# peak), and what a probe row and an ablated group hold on the host.
LAYER_BYTES = 150_000
TRAIN_LOGIT_COPIES = 3
ROW_BYTES = (4, 16)  # a probe row: a float key per vocabulary id (distinct ids), 16 per position
GROUP_BYTES = 2_048  # an ablated group: its draw, keep-mask and per-row values, beyond L x H
PASS_TOKENS = 2**13  # most tokens one ablation pass stacks on the CPU (probes.engine MAX_TOKENS)


def _activations(shape: Shape, rows: float, *, training: bool, patterns: bool = True) -> float:
    """Bytes of the activations of ``rows`` sequences in one pass (kept for backward when
    ``training``, with the logits' copies of the loss): residual stream, MLP, attention scores
    (none held whole in a pair pass, ``patterns=False``, nor by SDPA in training), logits."""
    per_token = shape.layers * (8 * shape.d_model + 2 * shape.d_mlp)
    per_token += (TRAIN_LOGIT_COPIES if training else 1) * shape.vocab
    attention = shape.layers * shape.heads * shape.context * 2 if patterns else 0
    return 4 * rows * shape.context * (per_token + attention)


def estimate(
    shape: Shape,
    *,
    train_batch: int = 0,
    steps: int = 0,
    rows: int = 0,
    chunk: int | None = None,
    groups: int = 0,
    draws: int = 0,
    bytes_per: int = 4,
    patterns: bool = True,
) -> Estimate:
    """The one estimate of what a model of ``shape`` costs with these flags.

    Args:
        train_batch: sequences per update when training (weights, gradients and AdamW's two
            moments, :data:`LAYER_BYTES` a layer, activations kept for backward and
            :data:`TRAIN_LOGIT_COPIES` of the ``B x C x vocab`` logits); ``steps`` updates.
        rows: probe rows evaluated (each held as token ids and a key per vocabulary id), in
            passes of ``chunk`` rows (at most :data:`PASS_TOKENS` tokens); ``groups`` ablated
            head groups each re-run them, stacked into the same passes.
        draws: random weight draws (composition baselines), each a few ``d_model x d_head``
            matrices.
        patterns: whether the probe passes hold attention patterns (False: pair passes,
            ``ihprobe.io.attention``).

    Example:
        >>> tiny = Shape(2, 4, 64, 256, 512, 64)
        >>> estimate(tiny, rows=100).bytes < estimate(tiny, rows=10**6).bytes
        True
    """
    params, d_head = shape.parameters, shape.d_model // max(shape.heads, 1)
    held = params * bytes_per
    per_row_flops = 2 * params * shape.context + 4 * shape.layers * shape.context**2 * shape.d_model
    flops = 0.0
    if train_batch:
        held += 3 * params * 4 + shape.layers * LAYER_BYTES  # gradients, AdamW's two moments
        held += _activations(shape, train_batch, training=True, patterns=False)
        flops += 3 * per_row_flops * train_batch * max(steps, 1)
    if rows:
        held += rows * (ROW_BYTES[0] * shape.vocab + ROW_BYTES[1] * shape.context)
        stacked = rows * (1 + groups)  # an ablation stacks its groups' rows in a pass
        per_pass = min(stacked, chunk or stacked, max(PASS_TOKENS // shape.context, 1))
        held += _activations(shape, per_pass, training=False, patterns=patterns)
        flops += per_row_flops * rows * (1 + groups)
    held += groups * (GROUP_BYTES + 8 * shape.layers * shape.heads + 16 * rows)
    held += draws * 8 * (4 * shape.d_model * d_head + 8 * d_head**2)
    flops += draws * 8 * shape.d_model * d_head**2
    return Estimate(float(held), float(flops))


CHECKPOINT_EXTRA_BYTES = 1_000_000  # a checkpoint's config, tokenizer and metadata, at most


def checkpoint_disk(parameters: int, checkpoints: int) -> float:
    """Bytes a training run writes: ``checkpoints`` float32 checkpoints (weights and
    :data:`CHECKPOINT_EXTRA_BYTES` of config and tokenizer each), and its resume state
    (weights and AdamW's two moments) twice, while a new one replaces the old.

    >>> checkpoint_disk(1_000_000, 21) / 1e6
    129.0
    """
    return float(checkpoints * (4 * parameters + CHECKPOINT_EXTRA_BYTES) + 2 * 12 * parameters)


def check_disk(what: str, estimate: float, folder: str | os.PathLike, *, shrink: str) -> None:
    """Refuse ``what`` when its ``estimate`` in bytes exceeds the free space of the disk that
    holds ``folder`` (or its nearest existing parent), unless ``IHPROBE_NO_SIZE_LIMITS=1``.

    >>> check_disk("a run", 1_000, ".", shrink="pass a smaller --n-checkpoints")
    """
    if not limits_on():
        return
    where = os.path.abspath(folder)
    while not os.path.isdir(where) and os.path.dirname(where) != where:
        where = os.path.dirname(where)
    free = shutil.disk_usage(where).free
    if estimate > free:
        raise IhprobeError(
            f"{what} needs about {estimate / 1e9:.3g} GB of disk but {free / 1e9:.3g} GB is free "
            f"under {where}; {shrink}, or set {SIZE_LIMIT_ENV}=1 if you know it fits."
        )


BPE_BUCKET_BYTES = 33  # one (token, id) entry of the BPE trainer's hash table and its control byte


def bpe_bytes(vocab_size: int) -> float:
    """What the tokenizers library's BPE trainer reserves for a vocabulary of ``vocab_size``
    at once, before it reads a word: a hash table of the next power of two above 8/7 of it,
    :data:`BPE_BUCKET_BYTES` a bucket (``vocab_size=1e9`` asks for 70.9 GB and aborts the
    process where that cannot be had).

    >>> round(bpe_bytes(10**9) / 1e9, 1)
    70.9
    """
    buckets = 1 << max(3, math.ceil(math.log2(max(vocab_size, 1) * 8 / 7)))
    return float(BPE_BUCKET_BYTES * buckets)


def release_freed() -> None:
    """Hand memory freed on the host back to the system (glibc's ``malloc_trim``; nothing
    elsewhere). Between the passes of a long call, freed activations otherwise stay in the
    allocator's heap in pieces, and the process grows with the passes, not with one pass.

    >>> release_freed()
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


TRIM_GROWTH = 2**25  # 32 MB: resident growth past the first pass that a long call hands back


def release_grown(mark: int | None, growth: int = TRIM_GROWTH) -> int | None:
    """After a pass of a long call: :func:`release_freed` once the process's resident memory
    has grown ``growth`` past ``mark`` (what this returned after the previous pass; None after
    the first, which sets it). Returns the new mark. Freed memory that the next pass reuses
    stays mapped, so a call of small passes does not hand back and fault in the same pages
    each pass (0.2 s of a 1.9 s scan of the 2-layer reference checkpoint); where the
    resident size cannot be read (not Linux), every pass releases.

    >>> mark = release_grown(None)
    >>> release_grown(mark) == mark
    True
    """
    found = _status_bytes("VmRSS:")  # 0: not readable here
    if not found:
        release_freed()
        return None
    if mark is None or found <= mark + growth:
        return found if mark is None else mark
    release_freed()
    return _status_bytes("VmRSS:")


@functools.cache
def _malloc_trim():
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


def check_work(what: str, found: Estimate, *, shrink: str, device: str = "cpu") -> None:
    """Refuse ``found`` past the available memory (one line: the estimate and ``shrink``), and
    log a warning before work estimated to take more than :data:`ANNOUNCE_SECONDS`.

    >>> check_work("a scan", Estimate(1e3, 1e6), shrink="pass a smaller --batch")
    """
    check_memory(what, found.bytes, shrink=shrink, device=device)
    seconds = found.seconds(device)
    if seconds > ANNOUNCE_SECONDS:
        log.warning(
            "%s: about %s of work by a rough estimate (%.2g floating-point operations)",
            what,
            duration(seconds),
            found.flops,
        )


def duration(seconds: float) -> str:
    """``"40 s"``, ``"3 min"``, ``"2.5 h"``, ``"46 days"``: how every estimate of time is said.

    >>> duration(40), duration(200), duration(9000), duration(4e6)
    ('40 s', '3 min', '2.5 h', '46 days')
    """
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 86400 * 2:
        return f"{seconds / 3600:.2g} h"
    return f"{seconds / 86400:.0f} days"
