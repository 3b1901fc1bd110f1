"""Whether the heads behind a run's rise match content or look a fixed offset back.

Prefix matching on repeats of one length n is passed as well by a head that attends n - 1 tokens
back whatever the tokens are; forward induction on snippets whose length varies per row is not
(docs/science.md, section 2). :func:`mechanism_scores` scores one checkpoint of a run on both, so
that an emergence point can say what rose (:meth:`HeadScores.fixed_offset_suspects`).

>>> mechanism_scores("runs/demo", step=420).fixed_offset_suspects()  # doctest: +SKIP
[]
"""

from __future__ import annotations

import os

from ihprobe.core.errors import IhprobeError
from ihprobe.dynamics.trajectories import scan_checkpoints
from ihprobe.io.runs import checkpoints
from ihprobe.probes.scores import VARIED, HeadScores


def mechanism_scores(
    run_dir: str | os.PathLike, step: int | None = None, *, device: str = "cpu", **scan_kwargs
) -> HeadScores:
    """Prefix matching and forward induction on snippets of varied length at the run's
    checkpoint of ``step`` (None: the last); ``scan_kwargs`` as :func:`ihprobe.scan` takes
    them (``n``, ``batch``, ``seed``), so PS is read on the emergence probe's own rows."""
    found = checkpoints(run_dir)
    chosen = found[-1:] if step is None else [c for c in found if c.step == step][:1]
    if not chosen:
        raise IhprobeError(f"{run_dir} has no checkpoint at step {step}; see its checkpoints/.")
    [(scores, *_)] = scan_checkpoints(
        chosen, ["prefix_matching", VARIED], device=device, **scan_kwargs
    )
    return scores
