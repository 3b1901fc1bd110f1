"""FV heads beside induction heads over training (issue 61, item 5), declared before any run.

Question: when a model of this project's natural-text recipe is trained on natural text with
few-shot function prompts mixed in, when do induction heads and function-vector (FV) heads
appear, which heads carry each, does a head move from one kind to the other (Yin & Steinhardt
2025 saw many FV heads in Pythia act first as induction heads), and what does [B]'s ablation
question say of both kinds at the end (``ihprobe.kind_table``)?

Declared design (2026-12-06, before the first run):

- Recipe: the natural grid's (``lab/studies/natural_law``: GPT-NeoX, 2 layers x 4 heads,
  d_model 128, the documentation corpus under its 512-id BPE, AdamW at a constant 3e-3 after a
  1% warm-up, grad clip 1, live probes at 32 evenly spaced checkpoints), with the ``few-shot``
  producer: a quarter of the rows (``SHARE``) are few-shot prompts in ``fv_scores``' own format
  (episodes of 11 solved pairs, ``SHOTS + 1``), the rest natural-text windows.
- Tasks (``TRAIN_TASKS``): the 7 built-in tasks and the 4 word tasks written for ihprobe
  (present-past, singular-plural, country-capital, number-digit), 60 pairs each, seed 0; the
  WordNet tasks are left out so the pairs are the same on every machine. FV scores are
  computed on the same pairs (so a task's clean accuracy can come from remembered pairs as
  well as from the context; the corrupted prompts still show no mapping).
- Cell ``B4-C256``: B = 4, C = 256, ``STEPS`` updates (8.2M tokens; 1.5x the onset the natural
  grid measured in this cell without prompts, 5,275 updates): a 300-update timing run gave
  3.7k tokens/s on the shared 2-core machine (load 11), about 37 minutes a seed, sized to the
  1.5 core-hours this study had. Seeds 0, 1, 2 (>= 3 by the issue), more where time
  allows; every seed counts.
- Read on each run: the induction onset (the grid's rule: the change point of the live probes'
  max prefix matching; censored when there is none); at every ``FV_EVERY``-th checkpoint and
  the last, every head's prefix matching (``ihprobe.scan``) and FV score (``ihprobe.fv_scores``,
  10 shots, 25 prompts per task), the tasks done above chance with their clean accuracy, and the
  FV heads (``FVResult.fv_heads``: score above 0 at p <= 0.05 Bonferroni over heads, and, by
  the amendment below, at least its effect floor); at the
  last checkpoint ``ihprobe.kind_table`` (the top head of each kind, mean ablation, 20 random
  draws, 95% intervals), ranked on the built-in tasks and judged on the 4 word tasks.
- Verdict rules (``lab/studies/fv_training/verdicts.py``, each tested against both outcomes):
  an induction head per seed by the grid's onset rule; an induction head at a checkpoint is a
  head with prefix matching >= ``INDUCTION_PS``; FV heads per seed from the first checkpoint
  with a Bonferroni-significant head, or "no task above chance, so no FV head at this scale";
  a head *moves* when it is an induction head and not an FV head at one checkpoint, and an FV
  head and not an induction head at a later one; each cell of the 2 x 2 table is read per seed
  by ``kind_table``'s own verdict and counted over seeds.

Amendment (2026-12-06, after the runs started, before any finished or was measured):
``FVResult.fv_heads`` gained an effect floor in the library (``max(MIN_EFFECT, RELATIVE_FLOOR
x the top score)``: by significance alone a planted induction head's steady 0.012 beside an FV
head's 0.6 counted as an FV head). The verdicts use ``fv_heads`` with the floor; each
checkpoint's record keeps the heads significant without it (``fv_heads_significant``) beside.
"""

from __future__ import annotations

from pathlib import Path

from ihprobe import TrainConfig
from ihprobe.jobs.grid import Grid
from lab.studies.study import ROOT, STUDIES, Study

SHARE = 0.25  # share of rows that are few-shot prompts
SHOTS = 10  # solved pairs a probe shows (an episode holds one more)
STEPS = 8_000
CELLS = {"B4-C256": {"batch_size": 4, "context": 256, "steps": STEPS}}
SEEDS = (0, 1, 2)
FV_EVERY = 4  # FV-score every 4th of the 32 checkpoints, and the last
INDUCTION_PS = 0.1  # prefix matching that makes a head an induction head at a checkpoint
WORD_TASKS = ("present_past", "singular_plural", "country_capital", "number_digit")
RUNS = ROOT / "runs" / "studies" / "fv-training"


def train_tasks() -> list:
    """The tasks whose pairs are mixed in: the 7 built-ins, then the 4 word tasks (no WordNet).

    >>> [t.name for t in train_tasks()][-4:] == list(WORD_TASKS)
    True
    """
    import ihprobe

    words = ihprobe.word_tasks(wordnet=Path("/nonexistent"))
    return ihprobe.builtin_tasks() + [t for t in words if t.name in WORD_TASKS]


def _base() -> TrainConfig:
    from ihprobe.data import default_directory
    from lab.studies.natural_law.cells import RECIPE, VOCAB

    pairs = [[t.name, x, y] for t in train_tasks() for x, y in t.pairs]
    options = {"text": str(default_directory() / "train"), "vocab_size": VOCAB}
    options |= {"pairs": pairs, "share": SHARE, "shots": SHOTS}
    return TrainConfig(
        out=str(RUNS), producer_options=options, **{**RECIPE, "producer": "few-shot"}
    )


def _measure(folder: Path, cell: str, seed: int) -> dict:
    from lab.studies.fv_training.measure import measure

    return measure(folder, cell, seed)


def _report(frame, provenance: list[str]) -> str:
    from lab.studies.fv_training.report import report

    return report(frame, provenance)


STUDY = Study(
    name="fv_training",
    question=STUDIES["fv_training"][1],
    folder=Path(__file__).resolve().parent,
    results=("RESULTS.md", "results.csv"),
    grid=Grid(RUNS, _base(), CELLS, seeds=SEEDS),
    measure=_measure,
    report=_report,
)
