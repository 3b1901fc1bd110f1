"""The public checkpoint suites as a table: which repositories, which options, how revisions are
spelled (:mod:`ihprobe.io.suites` says where each spelling comes from and resolves them).

Free of torch and of the hub client, so that ``ihprobe scan --help`` lists the suites at once.

>>> SUITES["pythia"].repo, len(PYTHIA_STEPS)
('EleutherAI/pythia-{size}{deduped}', 154)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PYTHIA_STEPS = (0, *(2**i for i in range(10)), *range(1000, 143_001, 1000))  # 154 branches
PYTHIA_TOKENS_PER_STEP = 1024 * 2048
# step, tokens (with their unit) and the optional stage and ingredient of an OLMo branch name
OLMO_BRANCH = re.compile(
    r"(?:stage(?P<stage>\d+)-)?(?:ingredient(?P<ingredient>\d+)-)?"
    r"step(?P<step>\d+)-tokens(?P<tokens>\d+)(?P<unit>[KMBT]?)"
)
UNITS = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}
TIMAEUS_FILE = re.compile(r"checkpoint_(?P<step>\d+)\.pth")


@dataclass(frozen=True)
class Suite:
    """A family of hub repositories of checkpoints and how its revisions are named."""

    repo: str  # a format string over the suite's options
    options: dict[str, tuple[str, ...]]  # option -> allowed values (the first is the default)
    kind: str  # "schedule": revisions from steps; "branches": cached branch names; "files"
    steps: tuple[int, ...] = ()
    tokens_per_step: int | None = None
    note: str = ""


SUITES: dict[str, Suite] = {
    "pythia": Suite(
        "EleutherAI/pythia-{size}{deduped}",
        {
            "size": ("160m", "14m", "31m", "70m", "410m", "1b", "1.4b", "2.8b", "6.9b", "12b"),
            "deduped": ("", "-deduped"),
        },
        "schedule",
        PYTHIA_STEPS,
        PYTHIA_TOKENS_PER_STEP,
    ),
    "polypythias": Suite(
        "EleutherAI/pythia-{size}-seed{seed}",
        {"size": ("160m", "14m", "31m", "70m", "410m"), "seed": tuple("123456789")},
        "schedule",
        PYTHIA_STEPS,
        PYTHIA_TOKENS_PER_STEP,
        "seed 0 of each size is the original pythia-{size}",
    ),
    "olmo": Suite(
        "allenai/OLMo-{size}-hf",
        {"size": ("1B", "7B")},
        "branches",
        note="branches stepN-tokensMB; tokens are rounded to the billion in the name",
    ),
    "olmo2": Suite(
        "allenai/OLMo-2-{model}",
        {"model": ("1124-7B", "1124-13B", "0425-1B", "0325-32B")},
        "branches",
        note="branches stageK-stepN-tokensMB and stage2-ingredientI-stepN-tokensMB",
    ),
    "timaeus-l2w256": Suite(
        "timaeus/L2W256-s-{seed}",
        {"seed": ("2", "3", "4")},
        "files",
        note="seeds seen published: s-2, s-3, s-4; files checkpoints/checkpoint_NNNNNNN.pth on "
        "main, the authors' own state dicts: named here, not loadable by ihprobe (no config.json)",
    ),
}
