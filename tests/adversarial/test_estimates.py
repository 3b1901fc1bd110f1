"""Estimates that refuse before allocating (issue 59, item 10): ``corpus build --vocab-size 1e9``
ended in SIGABRT from the tokenizers library, which reserves a hash table for the whole
vocabulary at once (70.9 GB). ``core.memory.bpe_bytes`` estimates it; the trainer refuses past
the available memory in one line, and the estimate is checked against the library itself: under
an address-space limit of twice the estimate it trains, under half of it the process dies."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ihprobe.core.memory import bpe_bytes
from ihprobe.data.tokenizer import train_bpe
from tests.helpers import one_line

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UNDER_LIMIT = """
import resource, sys
from ihprobe.core.memory import _status_bytes, bpe_bytes
from ihprobe.data.tokenizer import train_bpe
vocab, factor = int(sys.argv[1]), float(sys.argv[2])
limit = int(_status_bytes("VmSize:") + factor * bpe_bytes(vocab) + 256e6)  # 256 MB: the rest
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
train_bpe(["hello world " * 50], vocab_size=vocab)
print("trained")
"""


def test_a_vocabulary_past_memory_is_one_line_not_an_abort():
    message = one_line(lambda: train_bpe(["hello world"], vocab_size=10**9))
    assert "vocab_size=1000000000 needs about 70.9 GB" in message
    assert "pass a smaller vocab_size" in message


@pytest.mark.slow
@pytest.mark.parametrize("vocab", [2 * 10**7, 5 * 10**7])
def test_the_bpe_estimate_is_within_2x_of_what_the_library_reserves(vocab):
    env = {**os.environ, "IHPROBE_NO_SIZE_LIMITS": "1"}  # the library's own appetite, unchecked
    runs = {
        factor: subprocess.run(
            [sys.executable, "-c", UNDER_LIMIT, str(vocab), str(factor)],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=300,
        )
        for factor in (2.0, 0.5)
    }
    assert runs[2.0].returncode == 0 and "trained" in runs[2.0].stdout, runs[2.0].stderr[-500:]
    assert runs[0.5].returncode != 0 and "trained" not in runs[0.5].stdout
    assert bpe_bytes(vocab) > 256e6  # the reservation dominates the headroom: the test has teeth
