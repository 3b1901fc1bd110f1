"""Public checkpoint suites as data: which repositories, which revisions, how many tokens.

Each row of :data:`SUITES` names a family of hub repositories and how its checkpoints are
spelled. A suite with a fixed schedule (Pythia, PolyPythias) lists its revisions from the table
alone; one whose branch names carry the tokens (OLMo's ``step20000-tokens84B``, OLMo-2's
``stage1-step1000-tokens5B``) lists the branches the local HF cache holds (offline) and reads
step and tokens from each name. Nothing here touches the network.

Sources of the spellings: Pythia's and PolyPythias' model cards (``step0``, ``step1``, ...,
``step512``, then ``step1000`` to ``step143000`` every 1000; 1024 x 2048 = 2,097,152 tokens per
step), OLMo's and OLMo-2's branch lists (``stepN-tokensMB``; ``stageK-stepN-tokensMB``,
``stage2-ingredientI-stepN-tokensMB``: tokens rounded to the billion), and timaeus's
``L2W256-s-N`` repositories (2-layer, width-256 attention-only models: files
``checkpoints/checkpoint_NNNNNNN.pth`` on ``main``, not branches).

>>> [c.revision for c in suite_checkpoints("pythia", size="160m", steps=[0, 512, 143000])]
['step0', 'step512', 'step143000']
>>> suite_checkpoints("pythia", size="160m", deduped=True, steps=[1000])[0].tokens
2097152000
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from huggingface_hub import constants

from ihprobe.core.errors import IhprobeError
from ihprobe.io.runs import Checkpoint
from ihprobe.io.suite_table import (  # the table; the steps stay importable from here
    OLMO_BRANCH,
    SUITES,
    TIMAEUS_FILE,
    UNITS,
    Suite,
)
from ihprobe.io.suite_table import (
    PYTHIA_STEPS as PYTHIA_STEPS,
)
from ihprobe.io.suite_table import (
    PYTHIA_TOKENS_PER_STEP as PYTHIA_TOKENS_PER_STEP,
)


def suite_repo(name: str, **options) -> str:
    """The hub repository of suite ``name`` with ``options`` (defaults: the first allowed).

    >>> suite_repo("pythia", size="1.4b", deduped=True), suite_repo("polypythias", seed=3)
    ('EleutherAI/pythia-1.4b-deduped', 'EleutherAI/pythia-160m-seed3')
    >>> suite_repo("pythia", deduped="maybe")
    Traceback (most recent call last):
    ...
    ihprobe.core.errors.IhprobeError: pythia: deduped must be true or false (got 'maybe').
    """
    suite = _suite(name)
    values = {}
    for option, allowed in suite.options.items():
        value = options.pop(option, allowed[0])
        if option == "deduped":  # True or False; anything else is refused, not read as False
            if value not in (True, False, "-deduped", ""):
                raise IhprobeError(f"{name}: deduped must be true or false (got {value!r}).")
            value = "-deduped" if value in (True, "-deduped") else ""
        value = str(value)
        if value not in allowed:
            listed = ", ".join(a or "(none)" for a in allowed)
            raise IhprobeError(f"{name}: {option}={value!r} is not one of {listed}.")
        values[option] = value
    if options:
        raise IhprobeError(
            f"{name} has no option {sorted(options)[0]!r}; it has {sorted(suite.options)}."
        )
    return suite.repo.format(**values)


def suite_checkpoints(
    name: str,
    *,
    steps: Sequence[int] | None = None,
    hub_cache: str | Path | None = None,
    stage: int = 1,
    **options,
) -> list[Checkpoint]:
    """The checkpoints of suite ``name`` (see :data:`SUITES`) in training order, each with its
    revision, step and tokens, resolved offline.

    Args:
        name: a key of :data:`SUITES` (``pythia``, ``polypythias``, ``olmo``, ``olmo2``,
            ``timaeus-l2w256``).
        steps: keep only these steps (all by default); a step the suite does not have is refused.
        hub_cache: the HF hub cache to list branches or files from (default: ``HF_HUB_CACHE``);
            only suites whose names are not a fixed schedule read it.
        stage: OLMo-2's training stage (branches without a stage are stage 1). Stage-2 names
            count tokens from the start of stage 2 and come in ingredients (separate runs):
            they are ordered by ingredient, then step.
        **options: the suite's options (``size="410m"``, ``deduped=True``, ``seed=3``...).

    Example:
        >>> ckpts = suite_checkpoints("olmo", size="1B")                # doctest: +SKIP
        >>> ckpts[0].revision, ckpts[0].tokens                           # doctest: +SKIP
        ('step20000-tokens84B', 84000000000)
    """
    suite, repo = _suite(name), suite_repo(name, **options)
    _check_stage(name, suite, stage)
    if suite.kind == "schedule":
        found = [Checkpoint(repo, f"step{s}", s, s * suite.tokens_per_step) for s in suite.steps]
    elif suite.kind == "branches":
        named = [_olmo_branch(b) for b in cached_names(repo, "refs", hub_cache)]
        found = [
            Checkpoint(repo, match[0], int(match["step"]), _tokens(match))
            for match in sorted(
                (m for m in named if m is not None and int(m["stage"] or 1) == stage),
                key=lambda m: (int(m["ingredient"] or 0), int(m["step"])),
            )
        ]
    else:
        found = [_file_checkpoint(repo, f) for f in cached_names(repo, "checkpoints", hub_cache)]
        found = sorted((c for c in found if c is not None), key=lambda c: c.step)
    if not found:
        where = hub_cache or constants.HF_HUB_CACHE
        raise IhprobeError(
            f"no checkpoints of {repo} in the HF cache at {where}; download its revisions first "
            f"(huggingface-cli download {repo} --revision NAME) or point HF_HUB_CACHE at a cache "
            "that has them."
        )
    if steps is None:
        return found
    by_step = {c.step: c for c in found}
    missing = [s for s in steps if s not in by_step]
    if missing:
        have = ", ".join(str(c.step) for c in found[:5]) + (" ..." if len(found) > 5 else "")
        raise IhprobeError(f"{repo} has no step {missing[0]} (it has {have}).")
    return [by_step[s] for s in sorted(set(steps))]


def cached_names(repo: str, what: str, hub_cache: str | Path | None = None) -> list[str]:
    """Names the local HF cache holds for ``repo``: its branches (``what="refs"``) or the files
    of its ``main`` snapshot under a folder (``what="checkpoints"``); [] when it holds none."""
    folder = Path(hub_cache or constants.HF_HUB_CACHE) / ("models--" + repo.replace("/", "--"))
    if what == "refs":
        refs = folder / "refs"
        return sorted(p.name for p in refs.iterdir() if p.is_file()) if refs.is_dir() else []
    ref = folder / "refs" / "main"
    snapshot = folder / "snapshots" / ref.read_text().strip() / what if ref.is_file() else None
    return sorted(p.name for p in snapshot.iterdir()) if snapshot and snapshot.is_dir() else []


def _olmo_branch(branch: str) -> re.Match | None:
    """The parts of an OLMo branch name (None for ``main`` and other branches that are no
    training step).

    >>> _tokens(_olmo_branch("step20000-tokens84B")), _olmo_branch("main")
    (84000000000, None)
    """
    return OLMO_BRANCH.fullmatch(branch)


def _tokens(match: re.Match) -> int:
    return int(match["tokens"]) * UNITS[match["unit"]]


def _file_checkpoint(repo: str, file: str) -> Checkpoint | None:
    match = TIMAEUS_FILE.fullmatch(file)
    if match is None:
        return None
    return Checkpoint(repo, f"main:checkpoints/{file}", int(match["step"]))


def _check_stage(name: str, suite: Suite, stage) -> None:
    if isinstance(stage, bool) or not isinstance(stage, int) or stage < 1:
        raise IhprobeError(f"stage={stage!r}: pass a training stage 1, 2, ... (OLMo-2's).")
    if stage != 1 and suite.kind != "branches":
        raise IhprobeError(f"{name} has one training stage; stage={stage} is for olmo2.")


def _suite(name: str) -> Suite:
    if name not in SUITES:
        raise IhprobeError(f"no suite named {name!r}; the suites are {', '.join(SUITES)}.")
    return SUITES[name]
