"""Tokenizers: a byte-level BPE trained locally, and a stand-in for checkpoints that have none.

>>> from ihprobe.data.corpus import default_documents
>>> tok = train_bpe(default_documents(), vocab_size=300)
>>> tok.decode(tok("Induction heads copy.").input_ids)
'Induction heads copy.'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from ihprobe.core.errors import IhprobeError
from ihprobe.core.memory import bpe_bytes, check_memory

EOS = "<|endoftext|>"  # document break; also BOS and PAD, as in GPT-2 and Pythia
SEP = "<|sep|>"  # separator of Bi-Induct snippets [S, SEP, S]
# BPE training costs the square of a word's length: a run of non-space characters longer than
# this (a one-line file of letters, a data URI) is cut into pieces of it for training only
LONGEST_RUN = 2048
_LONG_RUN = re.compile(rf"\S{{{LONGEST_RUN + 1},}}")


def train_bpe(texts: Iterable[str], vocab_size: int = 512) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE (GPT-2 style) on ``texts``; ids 0 and 1 are EOS and SEP.

    The result is an ordinary HF tokenizer: ``save_pretrained`` writes files that
    ``AutoTokenizer.from_pretrained`` reads back, so trainer checkpoints stay standard.
    """
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if vocab_size < len(alphabet) + 2:
        raise IhprobeError(
            f"vocab_size={vocab_size} is too small for a byte-level BPE: it needs at least "
            f"{len(alphabet) + 2} (256 bytes + EOS + SEP)."
        )
    check_memory(  # the trainer reserves it at once, and aborts the process where it cannot
        f"a byte-level BPE of vocab_size={vocab_size}",
        bpe_bytes(vocab_size),
        shrink="pass a smaller vocab_size",
    )
    texts = list(texts)
    if not any(t.strip() for t in texts):
        raise IhprobeError("cannot train a tokenizer on an empty corpus: pass non-empty text.")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS, SEP],
        initial_alphabet=alphabet,
        show_progress=False,
    )
    tok.train_from_iterator(_short_runs(texts), trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=EOS,
        eos_token=EOS,
        pad_token=EOS,
        additional_special_tokens=[SEP],
    )


def _short_runs(texts: list[str]) -> Iterator[str]:
    """``texts`` as the trainer reads them, each run of more than :data:`LONGEST_RUN`
    non-space characters cut into texts of that length (text without such runs is unchanged,
    and so is the tokenizer trained on it).

    >>> [len(t) for t in _short_runs(["ab " + "x" * 5000 + " cd"])]
    [3, 2048, 2048, 904, 3]
    """
    for text in texts:
        start = 0
        for run in _LONG_RUN.finditer(text):
            if run.start() > start:
                yield text[start : run.start()]
            for cut in range(run.start(), run.end(), LONGEST_RUN):
                yield text[cut : min(cut + LONGEST_RUN, run.end())]
            start = run.end()
        if start < len(text) or not text:
            yield text[start:]
