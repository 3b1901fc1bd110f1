"""ihprobe: find, time and test induction heads.

>>> import ihprobe
>>> model = ihprobe.load("EleutherAI/pythia-70m")  # HF causal LM, hub id or run  # doctest: +SKIP
>>> scores = ihprobe.scan(model)                # every head score in one pass  # doctest: +SKIP
>>> scores.to_frame().query("metric == 'prefix_matching'").nlargest(3, "value")  # doctest: +SKIP

Public names are imported lazily (``import ihprobe`` stays fast for the CLI); the table below
says where each one lives. With ``ihprobe.data``'s ``__all__`` (the producers and the text
corpus) they are the public surface (docs/architecture.md, "Public names"); every other
module is internal.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.2.0"

# Public name -> module. No module may be named like a public name: importing the submodule
# ihprobe.X sets the attribute ihprobe.X to the module, hiding the function of that name.
_EXPORTS: dict[str, str] = {
    # loading and checkpoints
    "load": "ihprobe.io.any_model",  # a path, a hub id or a HF object (models.load for paths)
    "load_hf": "ihprobe.io.models",  # the plain HF model, no bridge (same checks)
    "checkpoints": "ihprobe.io.runs",
    "Checkpoint": "ihprobe.io.runs",
    "suite_checkpoints": "ihprobe.io.suites",
    "repeated_tensors": "ihprobe.series.repeats",
    # what a run folder says: its run.json, whether it wrote its final checkpoint, its losses
    "run_meta": "ihprobe.io.runs",
    "is_finished": "ihprobe.io.runs",
    "losses": "ihprobe.io.runs",
    # probes
    "scan": "ihprobe.probes.battery",
    "HeadScores": "ihprobe.probes.scores",
    "METRIC_TABLE": "ihprobe.probes.metrics",
    # probe inputs and per-token losses, for measures of one's own
    "repeated_tokens": "ihprobe.probes.inputs",
    "token_rows": "ihprobe.probes.engine",
    "token_losses": "ihprobe.probes.recall",
    "induction_loss_per_row": "ihprobe.probes.recall",
    # training and data
    "train": "ihprobe.training.trainer",
    "TrainConfig": "ihprobe.training.trainer",
    "build_model": "ihprobe.io.architectures",  # a TrainConfig's model, freshly initialised
    "causal_lm_loss": "ihprobe.io.architectures",  # the training loss of a HF causal LM
    "make_producer": "ihprobe.data",
    # emergence and the law
    "trajectory": "ihprobe.dynamics.trajectories",
    "weight_trajectory": "ihprobe.dynamics.weight_series",
    "emergence": "ihprobe.dynamics.changepoint",
    "run_emergence": "ihprobe.dynamics.changepoint",
    "EmergencePoint": "ihprobe.dynamics.changepoint",
    "predict_emergence": "ihprobe.dynamics.law",
    "fit_law": "ihprobe.dynamics.law",
    "LawFit": "ihprobe.dynamics.law",
    "Prediction": "ihprobe.dynamics.law",
    # live forecast and the local learning coefficient
    "forecast_emergence": "ihprobe.dynamics.forecast",
    "law_prior": "ihprobe.dynamics.prior",
    "Forecast": "ihprobe.dynamics.forecast",
    "forecast_records": "ihprobe.dynamics.forecast",
    "Prior": "ihprobe.dynamics.prior",
    "llc_trajectory": "ihprobe.dynamics.llc",
    "llc_stages": "ihprobe.dynamics.llc",
    "SGLDSettings": "ihprobe.dynamics.llc",
    # causal ablation
    "ablate": "ihprobe.causal.ablation",
    "ablate_heads": "ihprobe.causal.masks",
    "AblationResult": "ihprobe.causal.results",
    # the induction circuit
    "composition": "ihprobe.probes.composition",
    "Composition": "ihprobe.probes.composition",
    "patch": "ihprobe.circuit.patching",
    "path_patch": "ihprobe.circuit.patching",
    "attribution_patch": "ihprobe.circuit.patching",
    "PatchResult": "ihprobe.circuit.patching",
    "PathPatchResult": "ihprobe.circuit.patching",
    "loss_by_position": "ihprobe.circuit.positions",
    "loss_by_position_trajectory": "ihprobe.circuit.positions",
    "attention_viewer": "ihprobe.figures.viewer",
    "head_effects": "ihprobe.causal.per_head",
    "HeadEffects": "ihprobe.causal.results",
    "head_check": "ihprobe.causal.head_check",
    "HeadCheck": "ihprobe.causal.head_check",
    # function-vector heads (Todd et al.): every head's average indirect effect
    "fv_scores": "ihprobe.causal.fv",
    "FVResult": "ihprobe.causal.fv_result",
    "builtin_tasks": "ihprobe.causal.tasks",  # the tasks' pairs, e.g. for the few-shot producer
    "word_tasks": "ihprobe.causal.word_tasks",
    "kind_table": "ihprobe.causal.kinds",  # [B]'s question asked of FV and induction heads
    "KindTable": "ihprobe.causal.kinds",
    "ablation_trajectory": "ihprobe.dynamics.ablation_series",
    # figures (ihprobe.figures) and the demo's run, as the notebooks use them
    "head_heatmap": "ihprobe.figures.heads",
    "checkpoint_slider": "ihprobe.figures.heads",
    "attention_figure": "ihprobe.figures.attention",
    "trajectory_figure": "ihprobe.figures.emergence",
    "head_strip_figure": "ihprobe.figures.emergence",
    "drop_figure": "ihprobe.figures.ablation",
    "head_effects_figure": "ihprobe.figures.ablation",
    "composition_figure": "ihprobe.figures.circuit",
    "patch_figure": "ihprobe.figures.circuit",
    "loss_by_position_figure": "ihprobe.figures.circuit",
    "forecast_figure": "ihprobe.figures.forecast",
    "llc_figure": "ihprobe.figures.forecast",
    "use_static_images": "ihprobe.figures.notebook",  # a PNG beside each figure, for GitHub
    "demo_run": "ihprobe.jobs.demo",
    "run_demo": "ihprobe.jobs.demo",
    "DemoConfig": "ihprobe.jobs.demo",
    # errors
    "IhprobeError": "ihprobe.core.errors",
}

__all__ = sorted(_EXPORTS)

# Modules imported with a public name's module: they fill in a table of a lower layer. scan
# (probes/) computes fv by a function that ihprobe.causal.fv, a layer up, registers
# (ihprobe/probes/provided.py).
_FILLS: dict[str, tuple[str, ...]] = {"ihprobe.probes.battery": ("ihprobe.causal.fv",)}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'ihprobe' has no attribute {name!r}")
    for module in _FILLS.get(_EXPORTS[name], ()):
        importlib.import_module(module)
    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
