"""Report sections of the induction circuit: composition, patching, loss by position, viewer.

Each function runs the analysis on a model and returns its tables and the
:class:`~ihprobe.figures.report.Section` s that show them; the CLI writes them, and other
reports can
include the sections as they are.

>>> frame, sections = composition_sections(model)                          # doctest: +SKIP
>>> write_report("composition.html", "Composition", sections)              # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from ihprobe.circuit.pairs import induction_pair
from ihprobe.circuit.patching import attribution_patch, patch, path_patch
from ihprobe.core.errors import IhprobeError
from ihprobe.figures.circuit import (
    attribution_scatter,
    composition_figure,
    patch_figure,
)
from ihprobe.figures.report import Section
from ihprobe.figures.viewer import attention_viewer
from ihprobe.probes.battery import scan
from ihprobe.probes.composition import KINDS, composition

COMPOSITION_NOTE = (
    "Composition score (Elhage et al. 2021): ||W_OV(sender) R(receiver)||_F / (||W_OV||_F "
    "||R||_F) with R = W_QK^T (K), W_QK (Q) or W_OV (V), minus the mean score of random Gaussian "
    "matrices of the same shapes ({draws} draws); colours are in standard deviations of those "
    "draws. Scores beyond about 4 SDs are not chance."
)
PATCH_NOTE = (
    "Clean rows repeat random tokens [s, s]; corrupted rows re-draw the second half. The metric "
    "is the induction target's logit minus the mean logit, over the second half. Fraction "
    "restored = (patched - corrupted) / (clean - corrupted), clean {clean:.3f}, corrupted "
    "{corrupted:.3f}, {rows} rows."
)
PATH_NOTE = (
    "Path patching (Wang et al. 2022) from the previous-token head {sender} into the queries, "
    "keys and values of the induction head {receiver}, on rows whose first half re-draws the "
    "token before each answer (the 'anchors' corruption, which changes what the keys offer)."
)


@dataclass
class CircuitHeads:
    """The induction head (top prefix matching) and the previous-token head that feeds it."""

    receiver: tuple[int, int]
    sender: tuple[int, int] | None


def composition_sections(model, *, draws: int = 50, seed: int = 0):
    """All three composition kinds: ``(frame, [Section])``."""
    results = [composition(model, kind, draws=draws, seed=seed) for kind in KINDS]
    frame = pd.concat([r.to_frame() for r in results], ignore_index=True)
    top = frame.sort_values("value", ascending=False).groupby("kind").head(5)
    blocks = [COMPOSITION_NOTE.format(draws=draws)]
    blocks += [composition_figure(r) for r in results] + ["Strongest pairs of each kind:", top]
    return frame, [Section("Composition scores", blocks)]


def circuit_heads(model, *, n: int | None = None, seed: int = 0) -> CircuitHeads:
    """The top prefix-matching head outside layer 0, and the top previous-token head before it."""
    if model.cfg.n_layers < 2:
        raise IhprobeError("an induction circuit needs at least 2 layers; this model has 1.")
    scores = scan(model, ["prefix_matching", "previous_token"], n=n, batch=32, seed=seed)
    matching = scores.head["prefix_matching"][1:]
    layer, head = divmod(int(matching.argmax()), matching.shape[1])
    previous = scores.head["previous_token"][: layer + 1]
    sender = divmod(int(previous.argmax()), previous.shape[1])
    return CircuitHeads(receiver=(layer + 1, head), sender=sender)


def patch_sections(
    model,
    *,
    heads: CircuitHeads | None = None,
    per: str = "head",
    n: int | None = None,
    batch: int = 20,
    seed: int = 0,
):
    """Activation, attribution and path patching and the viewer: ``(frames, [Section])``."""
    heads = heads or circuit_heads(model, n=n, seed=seed)
    options = {"n": n, "batch": batch, "seed": seed}
    activation = patch(model, per=per, **options)
    attribution = attribution_patch(model, per=per, **options)
    paths = [path_patch(model, [heads.sender], [heads.receiver], i, **options) for i in "qkv"]
    path_frame = pd.DataFrame(
        [
            {
                "sender": _name(p.sender[0]),
                "receiver": _name(p.receivers[0]),
                "input": p.receiver_input,
                "clean": p.clean,
                "corrupted": p.corrupted,
                "patched": p.patched,
                "fraction": p.fraction,
            }
            for p in paths
        ]
    )
    frame = pd.concat([activation.to_frame(), attribution.to_frame()], ignore_index=True)
    agreement = _pearson(activation.fractions, attribution.fractions)
    sections = [
        Section(
            "Activation patching",
            [PATCH_NOTE.format(**_summary(activation)), patch_figure(activation)],
        ),
        Section(
            "Attribution patching",
            [
                "First-order estimate from one forward and one backward pass (Nanda 2023); "
                f"Pearson r with activation patching over heads: {agreement:.3f}.",
                attribution_scatter(activation, attribution),
            ]
            if per == "head"
            else [patch_figure(attribution)],
        ),
        Section(
            "Path patching",
            [
                PATH_NOTE.format(sender=_name(heads.sender), receiver=_name(heads.receiver)),
                path_frame,
            ],
        ),
        viewer_section(model, start=heads.receiver, n=n, seed=seed),
    ]
    return {"patch": frame, "path": path_frame}, sections


def viewer_section(model, *, start=(0, 0), n: int | None = None, seed: int = 0) -> Section:
    """The interactive attention viewer on one clean repeated row."""
    row = induction_pair(model, n=n, batch=1, seed=seed).clean[0]
    return Section(
        "Attention viewer",
        [
            "One repeated random sequence. Choose a layer and head; hover a token (or a heatmap "
            "row) to see where it attends. An induction head attends from each second-half token "
            "to the token after that token's first occurrence.",
            attention_viewer(model, row, start=start),
        ],
    )


def _summary(result) -> dict:
    return {
        "clean": result.clean,
        "corrupted": result.corrupted,
        "rows": result.settings.get("rows"),
    }


def _name(head: tuple[int, int]) -> str:
    return f"L{head[0]}H{head[1]}"


def _pearson(x: torch.Tensor, y: torch.Tensor) -> float:
    return float(torch.corrcoef(torch.stack([x.flatten(), y.flatten()]))[0, 1])
