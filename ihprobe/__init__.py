"""ihprobe: find, time and test induction heads.

>>> import ihprobe
>>> model = ihprobe.load("path/to/checkpoint")       # any HF causal LM, hub id or ihprobe run
>>> scores = ihprobe.scan(model)                       # every head score in one forward pass
>>> scores.to_frame().query("metric == 'prefix_matching'").nlargest(3, "value")

Public names are imported lazily (``import ihprobe`` stays fast for the CLI); the table below
says where each one lives.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# Public name -> module. No module may be named like a public name: importing the submodule
# ihprobe.X sets the attribute ihprobe.X to the module, hiding the function of that name.
_EXPORTS: dict[str, str] = {
    # loading and checkpoints
    "load": "ihprobe.models",
    "checkpoints": "ihprobe.runs",
    "Checkpoint": "ihprobe.runs",
    # probes
    "scan": "ihprobe.probes.battery",
    "HeadScores": "ihprobe.scores",
    # training and data
    "train": "ihprobe.trainer",
    "TrainConfig": "ihprobe.trainer",
    "make_producer": "ihprobe.data",
    # emergence and the law
    "trajectory": "ihprobe.trajectories",
    "emergence": "ihprobe.changepoint",
    "EmergencePoint": "ihprobe.changepoint",
    "predict_emergence": "ihprobe.law",
    "fit_law": "ihprobe.law",
    "LawFit": "ihprobe.law",
    "Prediction": "ihprobe.law",
    # causal ablation
    "ablate": "ihprobe.ablation",
    "ablate_heads": "ihprobe.ablation",
    "AblationResult": "ihprobe.ablation",
    "head_effects": "ihprobe.ablation",
    "HeadEffects": "ihprobe.ablation",
    "ablation_trajectory": "ihprobe.ablation_series",
    # errors
    "IhprobeError": "ihprobe.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'ihprobe' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
