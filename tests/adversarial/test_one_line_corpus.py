"""A corpus of one long line (issue 59, item 12: a 5 MB one-line file took over 150 s): BPE
training costs the square of a word's length, and a line of letters is one word. Runs of
non-space characters are cut for training only, so ordinary text trains the same tokenizer."""

from __future__ import annotations

import random
import time

from ihprobe.data.corpus import default_documents
from ihprobe.data.tokenizer import LONGEST_RUN, _short_runs, train_bpe


def test_ordinary_text_reaches_the_trainer_unchanged():
    docs = default_documents()
    assert list(_short_runs(docs)) == docs
    assert max(len(w) for d in docs for w in d.split()) <= LONGEST_RUN  # so the test has teeth


def test_long_runs_are_cut_and_nothing_is_lost():
    text = "head " + "x" * (2 * LONGEST_RUN + 7) + " tail\n" + "y" * (LONGEST_RUN + 1)
    pieces = list(_short_runs([text, ""]))
    assert "".join(pieces) == text
    assert max(len(p) for p in pieces) == LONGEST_RUN and "" in pieces


def test_a_long_line_of_letters_trains_in_linear_time():
    """200,000 letters without a space: about 35 s of CPU before (80,000 took 5.5 s, growing
    with the square), about 1 s now."""
    rng = random.Random(0)
    line = "".join(rng.choice("abcdefghijklmnop") for _ in range(200_000))
    start = time.process_time()
    tok = train_bpe([line], vocab_size=300)
    ids = tok(line, add_special_tokens=False).input_ids
    assert time.process_time() - start < 10
    assert tok.decode(ids) == line and len(ids) < len(line)  # merges were learned
