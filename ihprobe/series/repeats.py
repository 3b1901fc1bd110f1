"""Tensors and shards of a checkpoint that repeat an earlier checkpoint of the series.

A whole checkpoint saved twice is caught by its weights hash (``duplicate_of``); a checkpoint
of which only one shard, or a few tensors, are copies of an earlier checkpoint's (one shard of
a multi-shard checkpoint uploaded from the wrong step) is caught here, from the per-tensor
digests read with the weights (:mod:`ihprobe.io.tensor_reads`). A tensor repeats when it has
the same name, dtype, shape and bytes as in an earlier checkpoint; buffers that never change
(causal masks, rotary frequencies) and non-float tensors are left out. A whole shard is
named only from the digests of every tensor of the checkpoint; from some of its tensors (the
weight-only metrics read a few) the repeated tensors are named.

>>> from ihprobe.io.tensor_reads import Digests
>>> files = {"w": "a.safetensors", "v": "b.safetensors"}
>>> repeats = Repeats()
>>> a = Digests({"w": "1" * 64, "v": "2" * 64}, files, whole="a" * 64)
>>> b = Digests({"w": "1" * 64, "v": "3" * 64}, files, whole="b" * 64)
>>> repeats.check("step1", a), repeats.check("step2", b).describe()
(None, 'shard a.safetensors (1 tensors) repeats step1')
>>> Repeats().check("x", a) is None, Repeat("s", {"w": "r"}, {}, {}).describe()
(True, 'tensors w repeat r')
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from ihprobe.io.runs import Checkpoint
from ihprobe.io.sources import resolve
from ihprobe.io.tensor_reads import Digests, cached_digests
from ihprobe.io.validation.tensors import LEGACY_BUFFERS
from ihprobe.io.weights import has_safetensors, read_checked
from ihprobe.series.sweep import checkpoint_hash, walk

log = logging.getLogger(__name__)


def constant_by_design(name: str) -> bool:
    """Whether tensor ``name`` is a buffer every checkpoint holds unchanged (a causal mask, the
    rotary frequencies), so its repeating says nothing.

    >>> constant_by_design("gpt_neox.layers.0.attention.rotary_emb.inv_freq")
    True
    """
    return name.endswith(LEGACY_BUFFERS)


@dataclass(frozen=True)
class Repeat:
    """The tensors of one checkpoint that repeat an earlier checkpoint's, and where from."""

    label: str
    tensors: dict[str, str]  # tensor name -> the earlier checkpoint it repeats
    shards: dict[str, str]  # weight file all of whose tensors repeat -> the earlier checkpoint
    members: dict[str, tuple[str, ...]]  # weight file -> its tensors that count

    def describe(self) -> str:
        """One line: the whole shards repeated, then the other tensors."""
        parts = [
            f"shard {shard} ({len(self.members[shard])} tensors) repeats {earlier}"
            for shard, earlier in sorted(self.shards.items())
        ]
        whole = {name for shard in self.shards for name in self.members[shard]}
        loose = {name: earlier for name, earlier in self.tensors.items() if name not in whole}
        if loose:
            names = sorted(loose)
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            parts.append(f"tensors {shown} repeat {', '.join(sorted(set(loose.values())))}")
        return "; ".join(parts)

    def rows(self) -> list[tuple[str, str, str, bool, str]]:
        """One ``(checkpoint, tensor, shard, whole_shard, repeats)`` row per repeated tensor."""
        shard_of = {name: shard for shard, names in self.members.items() for name in names}
        return [
            (self.label, name, shard_of[name], shard_of[name] in self.shards, earlier)
            for name, earlier in sorted(self.tensors.items())
        ]


class Repeats:
    """Per tensor digest, the first checkpoint that held it; :meth:`check` flags each later
    checkpoint that holds some of them again without being a whole duplicate."""

    def __init__(self):
        self.first: dict[str, str] = {}  # tensor digest -> label of the first checkpoint

    def check(self, label: str, digests: Digests | None) -> Repeat | None:
        """The repeated tensors and shards of checkpoint ``label`` (None: nothing repeats, or
        every tensor does, which ``duplicate_of`` already says, or no digests are known).
        Whole shards are named only when ``digests`` cover every tensor (``whole`` is set)."""
        if digests is None:
            return None
        counted = {
            name: digest for name, digest in digests.tensors.items() if not constant_by_design(name)
        }
        repeated = {name: self.first[d] for name, d in counted.items() if d in self.first}
        for digest in counted.values():
            self.first.setdefault(digest, label)
        if not repeated or len(repeated) == len(counted):
            return None
        members: dict[str, list[str]] = {}
        for name in sorted(counted):
            members.setdefault(digests.files.get(name, "?"), []).append(name)
        shards = {}
        for shard, names in members.items():
            sources = {repeated.get(name) for name in names}
            whole = digests.whole is not None and len(members) > 1
            if whole and None not in sources and len(sources) == 1:
                shards[shard] = sources.pop()
        found = Repeat(label, repeated, shards, {k: tuple(v) for k, v in members.items()})
        log.warning("%s: %s", label, found.describe())
        return found


def series_label(ckpt: Checkpoint) -> str:
    """How a checkpoint is named in ``duplicate_of`` and ``repeats``: ``source@revision``."""
    return f"{ckpt.source}@{ckpt.revision}" if ckpt.revision else ckpt.source


class Duplicates:
    """Finds checkpoints whose weights equal an earlier one's; logs a warning for each."""

    def __init__(self):
        self.first: dict[str, str] = {}  # weights hash -> label of the first checkpoint

    def check(self, ckpt: Checkpoint, digest: str) -> str | None:
        """The earlier checkpoint with the same weights hash ``digest``, or None."""
        earlier = self.first.get(digest)
        if earlier is not None:
            log.warning("%s has the same weights as %s", ckpt.label, earlier)
        self.first.setdefault(digest, series_label(ckpt))
        return earlier


def series_repeats(labels: Sequence[str], digests: Sequence[Digests | None]) -> list[Repeat]:
    """The checkpoints (by ``labels``, in the series' order) some of whose tensors repeat an
    earlier one's, each as a :class:`Repeat`."""
    repeats = Repeats()
    found = (repeats.check(label, d) for label, d in zip(labels, digests, strict=True))
    return [repeat for repeat in found if repeat is not None]


def repeats_table(labels: Sequence[str], digests: Sequence[Digests | None]) -> pd.DataFrame:
    """One row per repeated tensor: ``checkpoint, tensor, shard, whole_shard, repeats``
    (the earlier checkpoint), in the series' order.

    Example:
        >>> repeats_table(["a"], [None]).columns.tolist()
        ['checkpoint', 'tensor', 'shard', 'whole_shard', 'repeats']
    """
    rows = [row for repeat in series_repeats(labels, digests) for row in repeat.rows()]
    return pd.DataFrame(rows, columns=["checkpoint", "tensor", "shard", "whole_shard", "repeats"])


def checkpoint_digests(ckpt: Checkpoint) -> Digests | None:
    """The per-tensor digests of every tensor of a checkpoint: remembered from an earlier read,
    else read now (once, each tensor checked); None for pickled weights."""
    path = resolve(ckpt.source, revision=ckpt.revision)
    if not has_safetensors(path):
        return None
    known = cached_digests(path)
    return known if known is not None and known.whole is not None else read_checked(path).digests


def repeated_tensors(ckpts: Sequence[Checkpoint], *, progress: bool | None = False) -> pd.DataFrame:
    """:func:`repeats_table` of a series of checkpoints, in the given order: each one's tensors
    hashed as it is read once (or the digests remembered from an earlier read).

    Example:
        >>> repeated_tensors(sources_of("EleutherAI/pythia-12b", ["step1000", "step2000"]))
        ... # doctest: +SKIP
    """
    return repeats_table([series_label(c) for c in ckpts], _digests(ckpts, progress))


def repeated_checkpoints(
    ckpts: Sequence[Checkpoint], *, progress: bool | None = False
) -> pd.DataFrame:
    """One row per checkpoint, in the given order: ``checkpoint, step, tokens, duplicate_of,
    repeats``, where ``duplicate_of`` names an earlier checkpoint of identical weights and
    ``repeats`` says which shards or tensors repeat earlier checkpoints' (:meth:`Repeat.describe`)
    when only some do; each checkpoint read once, as in :func:`repeated_tensors`.

    Example:
        >>> repeated_checkpoints(suite_checkpoints("pythia", size="12b"))   # doctest: +SKIP
    """
    found = _digests(ckpts, progress)
    repeats = {
        r.label: r.describe() for r in series_repeats([series_label(c) for c in ckpts], found)
    }
    duplicates, rows = Duplicates(), []
    for ckpt, digests in zip(ckpts, found, strict=True):
        whole = digests.whole if digests is not None else checkpoint_hash(ckpt)
        label = series_label(ckpt)
        rows.append(
            (label, ckpt.step, ckpt.tokens, duplicates.check(ckpt, whole), repeats.get(label))
        )
    frame = pd.DataFrame(rows, columns=["checkpoint", "step", "tokens", "duplicate_of", "repeats"])
    return frame.astype({"step": "Int64", "tokens": "Int64"})


def _digests(ckpts: Sequence[Checkpoint], progress: bool | None) -> list[Digests | None]:
    return [checkpoint_digests(c) for c in walk(ckpts, progress=progress, desc="hash")]
