"""What defines a training run (:class:`TrainConfig`), its checks, and reading it back.

>>> TrainConfig(out="runs/x", producer="iid", layers=1, steps=100).total_steps
100
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field, fields

from ihprobe.core import checks
from ihprobe.core.errors import IhprobeError
from ihprobe.core.memory import Shape, check_work, estimate
from ihprobe.core.world import resolve_device
from ihprobe.io.architectures import ARCHITECTURES
from ihprobe.io.runs import RUN_META, run_meta
from ihprobe.training.schedule import CHECKPOINT_SCHEDULES, LR_SCHEDULES

DEFAULT_STEPS = 2000  # updates when neither steps nor tokens is given
# float32 throughout; float32 with TF32 matmuls on cuda (the CPU has none: same as fp32);
# bfloat16 autocast of the forward pass (master weights, optimiser and loss stay float32)
PRECISIONS = ("fp32", "tf32", "bf16")
# Fields that may change when a run is resumed: they do not change the weights it ends with.
RESUMABLE_CHANGES = (
    "resume",
    "resume_or_start",
    "device",
    "compile",
    "live_probes",
    "probe_batch",
    "forecast",
    "law_from",
    "progress",
    "log_every",
    "state_every",
)


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a training run. Defaults: a tiny 2-layer model.

    ``batch_size`` (B, sequences per update, the global batch under DDP) and ``context`` (C)
    are first-class because the emergence law is written in them. The budget is ``steps``
    (updates) or ``tokens`` (rounded up to whole updates of B*C tokens), not both.

    Example:
        >>> TrainConfig(out="runs/x", producer="iid", layers=1, steps=100).tokens_per_update
        2048
    """

    out: str = "runs/train"  # run directory
    producer: str = "semi-natural"  # a name in ihprobe.data.PRODUCERS
    producer_options: dict = field(default_factory=dict)  # e.g. {"repetition": 0.9}
    arch: str = "gpt-neox"  # "gpt-neox" | "llama" | "gpt2"
    layers: int = 2
    heads: int = 4
    kv_heads: int | None = None  # llama only: key/value heads (grouped-query attention)
    d_model: int = 64
    d_mlp: int | None = None  # default 4 * d_model; 0: attention-only (gpt-neox, llama)
    context: int = 64  # C: tokens per sequence
    batch_size: int = 32  # B: sequences per update
    steps: int | None = None  # updates; default DEFAULT_STEPS when tokens is None too
    tokens: int | None = None  # budget in tokens instead of steps
    lr: float = 3e-3
    warmup: float = 0.01  # fraction of the updates spent in linear warm-up
    schedule: str = "cosine"  # "cosine" (to 0) | "constant"
    weight_decay: float = 0.0  # AdamW decay of matrices (not of biases and norms)
    grad_clip: float | None = 1.0  # max global gradient norm; None = no clipping
    grad_accum: int = 1  # micro-batches per update; B is split between them
    seed: int = 0  # model init and data
    checkpoints: str | tuple[int, ...] = "log"  # "log" | "linear" | token counts
    n_checkpoints: int = 20  # checkpoints after step 0 for "log" and "linear"
    live_probes: bool = False  # max PS and AR accuracy at every checkpoint -> probes.jsonl
    resume: bool = False  # continue the run in `out` from its latest training state
    resume_or_start: bool = False  # with resume: start a new run when `out` holds none
    device: str = "auto"  # "auto" (cuda when available) | "cpu" | "cuda" | "cuda:1" ...
    precision: str = "fp32"  # one of PRECISIONS
    compile: bool = False  # torch.compile the model's forward (same math, fused kernels)
    log_every: int = 10  # updates between metrics.jsonl lines
    state_every: int = 1000  # updates between training states for --resume (0: checkpoints only)
    probe_batch: int = 20  # rows of repeated random tokens for the live probes
    forecast: bool = False  # forecast the emergence point at every live probe -> forecast.jsonl
    law_from: tuple[str, ...] = ()  # earlier runs to refit the forecast's law on
    progress: bool = True  # tqdm bar on rank 0

    def __post_init__(self) -> None:
        check_types(self)

    @property
    def total_steps(self) -> int:
        """Updates in the run."""
        if self.steps is not None:
            return self.steps
        if self.tokens is not None:
            return math.ceil(self.tokens / self.tokens_per_update)
        return DEFAULT_STEPS

    @property
    def tokens_per_update(self) -> int:
        return self.batch_size * self.context

    @property
    def mlp_width(self) -> int:
        """The MLP width the model gets: ``d_mlp``, or ``4 * d_model`` when it is None (0:
        attention-only).

        Example:
            >>> TrainConfig(d_model=64).mlp_width, TrainConfig(d_model=64, d_mlp=0).mlp_width
            (256, 0)
        """
        return 4 * self.d_model if self.d_mlp is None else self.d_mlp

    def to_json(self) -> dict:
        data = asdict(self)
        if not isinstance(self.checkpoints, str):
            data["checkpoints"] = [int(c) for c in self.checkpoints]
        return data


def load_config(run_dir: str | os.PathLike, **overrides) -> TrainConfig:
    """The config of an existing run (its ``run.json``), with ``overrides`` applied; ``out`` is
    ``run_dir`` as given, so a run that was moved or is spelled differently resumes where it is.

    Example:
        >>> train(load_config("runs/demo", resume=True))    # doctest: +SKIP
    """
    meta = run_meta(run_dir)
    if meta is None:
        raise IhprobeError(
            f"{os.path.join(run_dir, RUN_META)} does not exist: {run_dir} is not a run "
            "directory of ihprobe."
        )
    data = dict(meta["config"])
    if isinstance(data.get("checkpoints"), list):
        data["checkpoints"] = tuple(data["checkpoints"])
    data["law_from"] = tuple(data.get("law_from", ()))  # JSON has lists, the config tuples
    data["out"] = os.fspath(run_dir)
    known = {f.name for f in fields(TrainConfig)}
    return TrainConfig(**{k: v for k, v in {**data, **overrides}.items() if k in known})


def check_config(config: TrainConfig, world_size: int = 1) -> None:
    """Raise :class:`IhprobeError` for a config that cannot train, before anything runs.
    (Over 60 lines: one flat check per field, every problem listed at once.)"""
    problems = []
    if config.arch not in ARCHITECTURES:
        problems.append(f"arch={config.arch!r} is not one of {', '.join(ARCHITECTURES)}")
    for name in ("layers", "heads", "d_model", "context", "batch_size", "grad_accum"):
        if getattr(config, name) < 1:
            problems.append(f"{name}={getattr(config, name)} must be at least 1")
    if config.heads >= 1 and config.d_model % config.heads:
        problems.append(
            f"heads={config.heads} does not divide d_model={config.d_model} "
            f"(try heads={_divisor_near(config.d_model, config.heads)})"
        )
    if config.kv_heads is not None:
        if config.arch != "llama":
            problems.append("kv_heads is only for arch='llama' (grouped-query attention)")
        elif config.kv_heads < 1 or config.heads % config.kv_heads:
            problems.append(f"kv_heads={config.kv_heads} must divide heads={config.heads}")
    if config.d_mlp is not None and config.d_mlp < 0:
        problems.append(f"d_mlp={config.d_mlp} must be >= 0 (0: attention-only)")
    if config.d_mlp == 0 and config.arch == "gpt2":
        problems.append("d_mlp=0 (attention-only) needs arch 'gpt-neox' or 'llama', not 'gpt2'")
    if config.context < 2:
        problems.append("context must be at least 2 (one token predicts the next)")
    if config.steps is not None and config.tokens is not None:
        problems.append("give the budget as steps or as tokens, not both")
    if config.steps is not None and config.steps < 1:
        problems.append(f"steps={config.steps}: the budget is empty, pass at least 1")
    if config.tokens is not None and config.tokens < 1:
        problems.append(f"tokens={config.tokens}: the budget is empty, pass at least 1")
    if not config.lr > 0 or not math.isfinite(config.lr):
        problems.append(f"lr={config.lr} must be a positive number")
    if not 0 <= config.warmup < 1:
        problems.append(f"warmup={config.warmup} is a fraction of the updates, in [0, 1)")
    if config.schedule not in LR_SCHEDULES:
        problems.append(f"schedule={config.schedule!r} is not one of {', '.join(LR_SCHEDULES)}")
    if isinstance(config.checkpoints, str) and config.checkpoints not in CHECKPOINT_SCHEDULES:
        problems.append(f"checkpoints={config.checkpoints!r}: pass 'log', 'linear' or token counts")
    if config.weight_decay < 0:
        problems.append(f"weight_decay={config.weight_decay} must be >= 0")
    if config.grad_clip is not None and not config.grad_clip > 0:
        problems.append(f"grad_clip={config.grad_clip} must be positive (or None for no clipping)")
    if config.precision not in PRECISIONS:
        problems.append(f"precision={config.precision!r} is not one of {', '.join(PRECISIONS)}")
    if config.probe_batch < 1:
        problems.append(f"probe_batch={config.probe_batch} must be at least 1")
    if config.forecast and not config.live_probes:
        problems.append("forecast needs live_probes (--live-probes): it is updated from them")
    if config.law_from and not config.forecast:
        problems.append("law_from refits the forecast's law: add forecast (--forecast)")
    if config.log_every < 1:
        problems.append(f"log_every={config.log_every} must be at least 1")
    if config.state_every < 0:
        problems.append(f"state_every={config.state_every} must be >= 0 (0: only at checkpoints)")
    split = world_size * config.grad_accum
    if config.batch_size >= 1 and config.batch_size % split:
        problems.append(
            f"batch_size={config.batch_size} does not split into {world_size} process(es) x "
            f"{config.grad_accum} micro-batch(es): make it a multiple of {split}"
        )
    if problems:
        raise IhprobeError("bad training config: " + "; ".join(problems) + ".")


def check_training_size(config: TrainConfig) -> None:
    """Refuse a model and batch that cannot fit in memory before any tensor is made (the
    estimate of :mod:`ihprobe.core.memory`, with the producer's vocabulary or 512), and say so
    before more than a minute of estimated training."""
    vocab = config.producer_options.get("vocab_size")
    vocab = vocab if isinstance(vocab, int) and vocab > 0 else 512
    shape = Shape(
        config.layers, config.heads, config.d_model, config.mlp_width, vocab, config.context
    )
    found = estimate(
        shape, train_batch=config.batch_size // config.grad_accum, steps=config.total_steps
    )
    check_work(
        f"training {shape.parameters:.3g} parameters at B={config.batch_size}, C={config.context}",
        found,
        shrink="pass a smaller --d-model, --d-mlp, --layers, -C or -B (or --grad-accum)",
        device=_estimated_on(config.device),
    )


def _estimated_on(device: str) -> str:
    """The device whose speed the estimate uses (``"auto"`` resolved as training resolves it)."""
    return resolve_device(device).type if device == "auto" else device


# A field's annotation -> the check of its type (ranges are check_config's).
TYPE_CHECKS = {
    "int": checks.integer,
    "int | None": lambda name, v: None if v is None else checks.integer(name, v),
    "float": lambda name, v: _finite(name, v),  # weight_decay=inf: refused here, not in training
    "float | None": lambda name, v: None if v is None else _finite(name, v),
    "bool": checks.flag,
    "str": checks.text,
}


def _finite(name: str, value) -> float:
    if not math.isfinite(checks.number(name, value)):
        raise IhprobeError(f"bad training config: {name}={value} must be a finite number.")
    return float(value)


def check_types(config: TrainConfig) -> None:
    """Refuse a field of another type than its annotation (``layers="2"``, ``arch=None``,
    ``seed=1.5``), so a config is never built from values that fail later, deep in training.

    >>> TrainConfig(batch_size=1.5)
    Traceback (most recent call last):
    ...
    ihprobe.core.errors.IhprobeError: batch_size must be an integer (got 1.5).
    """
    for spec in fields(config):
        value = getattr(config, spec.name)
        if spec.name == "seed":
            checks.seed(value)
        elif spec.type in TYPE_CHECKS:
            TYPE_CHECKS[spec.type](spec.name, value)
        elif spec.type == "dict" and not isinstance(value, dict):
            raise IhprobeError(f"{spec.name} must be a dict of options (got {value!r}).")


def _divisor_near(n: int, k: int) -> int:
    return min((d for d in range(1, n + 1) if n % d == 0), key=lambda d: abs(d - k))
