"""How many CPU threads torch may use: one, unless told otherwise.

The models this toolkit trains and scans on a CPU are small (``d_model`` 64 to a few hundred),
and their matrix products are too small to split across threads: every extra intra-op thread
mostly spin-waits, and on a shared machine it waits for a core. Measured on the 2-core machine
this project is developed on (``lab/benchmarks/bench_threads.py``,
``lab/benchmarks/RESULTS_threads.md``):
training the demo model gives the most tokens per CPU-second with one thread, and
``ihprobe scan`` of the demo's 21 checkpoints cost 110 s of CPU with torch's default of two
threads against 11 s with one. Pass ``--threads N`` (or ``torch_threads(N)``) for a large model
on idle cores, where more threads buy wall time for CPU.

>>> with torch_threads(1):
...     torch.get_num_threads()
1
>>> with torch_threads(None):       # None leaves torch's setting alone
...     pass
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

DEFAULT_THREADS = 1  # the best tokens per CPU-second measured (module docstring)


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` torch intra-op threads, then restore the previous number;
    ``None`` changes nothing."""
    if n is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
