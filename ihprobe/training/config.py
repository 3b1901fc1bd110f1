"""What defines a training run (:class:`TrainConfig`), its checks, and reading it back.

>>> TrainConfig(out="runs/x", producer="iid", layers=1, steps=100).total_steps
100
"""

from __future__ import annotations

import math
import os
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from ihprobe.core.errors import IhprobeError
from ihprobe.core.memory import Shape, check_disk, check_work, checkpoint_disk, estimate
from ihprobe.training.field_types import check_types
from ihprobe.training.schedule import CHECKPOINT_SCHEDULES, LR_SCHEDULES

# Importing this module imports no torch (``ihprobe train --help`` reads the fields below): the
# checks that need torch or the model code are imported inside the functions that run them.

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


# The groups of ``ihprobe train --help``, in order; a field without one is listed under "options".
DATA, MODEL, OPT, WATCH = "data", "model", "optimisation", "checkpoints and monitoring"
ARCH_NAMES = ("gpt-neox", "llama", "gpt2")  # ihprobe.io.architectures.ARCHITECTURES' keys


def option(default: Any = MISSING, help: str = "", *, factory: Any = None, **cli: Any) -> Any:
    """A :class:`TrainConfig` field with its ``ihprobe train`` option, the one place for both.

    ``help`` says what the field does; ``cli`` may give ``group`` (a help section), ``flags``
    (the option strings; default ``--field-name``, ``--no-field-name`` for a bool that is on),
    ``parse`` (a parser's name in ``ihprobe.cli.train.PARSERS``; default from the annotation),
    ``choices``, ``exclusive`` (a mutually exclusive group), ``metavar``, ``required``, or
    ``flag=False`` (no option of its own). The flag's type and default are the field's.

    Example:
        >>> spec = {f.name: f for f in fields(TrainConfig)}["lr"]
        >>> spec.default, spec.metadata["help"], spec.metadata["parse"]
        (0.003, 'AdamW learning rate', 'positive_float')
    """
    metadata = {"help": help, **cli}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


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

    out: str = option("runs/train", "run directory", required=True)
    producer: str = option(
        "semi-natural", "natural, repeats, bi-induct, semi-natural, markov or iid", group=DATA
    )  # a name in ihprobe.data.PRODUCERS
    # e.g. {"repetition": 0.9}; on the command line --option KEY=VALUE and its shortcuts
    producer_options: dict = option(factory=dict, help="producer options", flag=False)
    arch: str = option("gpt-neox", "architecture", group=MODEL, choices=ARCH_NAMES)
    layers: int = option(2, "layers", group=MODEL, parse="positive_int")
    heads: int = option(4, "attention heads per layer", group=MODEL, parse="positive_int")
    kv_heads: int | None = option(  # grouped-query attention
        None, "llama: key/value heads (default: --heads)", group=MODEL, parse="positive_int"
    )
    d_model: int = option(64, "residual width", group=MODEL, parse="positive_int")
    d_mlp: int | None = option(
        None,
        "MLP width (default: 4 * d_model; 0: attention-only)",
        group=MODEL,
        parse="nonnegative_int",
    )  # 0: attention-only (gpt-neox, llama)
    context: int = option(
        64, "tokens per sequence, C", group=OPT, flags=("-C", "--context"), parse="positive_int"
    )
    batch_size: int = option(
        32,
        "sequences per update, B",
        group=OPT,
        flags=("-B", "--batch-size"),
        parse="positive_int",
    )
    steps: int | None = option(  # DEFAULT_STEPS when tokens is None too
        None, "updates", group=OPT, parse="count", exclusive="budget"
    )
    tokens: int | None = option(
        None,
        "budget in tokens instead of --steps, e.g. 20M",
        group=OPT,
        parse="count",
        exclusive="budget",
    )
    lr: float = option(3e-3, "AdamW learning rate", group=OPT, parse="positive_float")
    warmup: float = option(
        0.01, "fraction of updates in linear warm-up", group=OPT, parse="warmup_fraction"
    )
    schedule: str = option(  # cosine decays to 0
        "cosine", "learning-rate schedule after warm-up", group=OPT, choices=("cosine", "constant")
    )
    weight_decay: float = option(  # not of biases and norms
        0.0, "AdamW decay of matrices", group=OPT, parse="nonnegative_float"
    )
    grad_clip: float | None = option(
        1.0, "max gradient norm, or none", group=OPT, parse="clip"
    )  # global norm; None = no clipping
    grad_accum: int = option(  # B is split between them
        1, "micro-batches per update", group=OPT, parse="positive_int"
    )
    seed: int = option(0, "seed of model init and data", group=OPT, parse="seed_int")
    checkpoints: str | tuple[int, ...] = option(
        "log", "log | linear | 250k,500k,1M,...", group=WATCH, parse="checkpoints"
    )
    n_checkpoints: int = option(
        20, "checkpoints after step 0 for log and linear", group=WATCH, parse="positive_int"
    )
    live_probes: bool = option(
        False, "max PS and AR accuracy at every checkpoint, to probes.jsonl", group=WATCH
    )
    resume: bool = option(  # from the latest training state in `out`
        False,
        "continue the run in --out; with a larger --steps/--tokens, extends a finished "
        "constant-rate run (a cosine one is refused)",
        group=WATCH,
    )
    resume_or_start: bool = option(
        False,
        "--resume, or start a new run when --out holds none (--resume alone refuses)",
        group=WATCH,
    )
    device: str = option(
        "auto",
        "auto (cuda when available, else cpu), cpu, cuda or cuda:N",
        group=WATCH,
        parse="device",
    )
    precision: str = option(  # one of PRECISIONS
        "fp32", "fp32, tf32 (TF32 matmuls on cuda) or bf16 (bfloat16 autocast)", group=WATCH
    )
    compile: bool = option(  # same math, fused kernels
        False, "torch.compile the model's forward", group=WATCH
    )
    log_every: int = option(
        10, "updates between metrics.jsonl lines", group=WATCH, parse="positive_int"
    )
    state_every: int = option(  # training states for --resume
        1000,
        "updates between resume states, 0: only at checkpoints",
        group=WATCH,
        parse="nonnegative_int",
    )
    probe_batch: int = option(  # rows of repeated random tokens
        20, "rows of the live probes", group=WATCH, parse="positive_int"
    )
    forecast: bool = option(
        False, "forecast the emergence point at every live probe (forecast.jsonl)", group=WATCH
    )
    law_from: tuple[str, ...] = option(
        (), "earlier runs to refit the forecast's law on", group=WATCH, metavar="RUN"
    )
    progress: bool = option(  # tqdm bar on rank 0
        True,
        "no progress bar or stage lines",
        group=WATCH,
        flags=("-q", "--quiet", "--no-progress"),
    )

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
    from ihprobe.io.runs import RUN_META, run_meta

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
    from ihprobe.io.architectures import ARCHITECTURES

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
    estimate of :mod:`ihprobe.core.memory`, with the producer's vocabulary or 512), or whose
    checkpoints cannot fit on the disk of ``out``, and say so before more than a minute of
    estimated training (for a resumed run, of the updates it has left)."""
    vocab = config.producer_options.get("vocab_size")
    vocab = vocab if isinstance(vocab, int) and vocab > 0 else 512
    shape = Shape(
        config.layers, config.heads, config.d_model, config.mlp_width, vocab, config.context
    )
    done = _saved_updates(config)
    found = estimate(
        shape, train_batch=config.batch_size // config.grad_accum, steps=config.total_steps - done
    )
    resumed = f", updates {done:,} to {config.total_steps:,}" if done else ""
    check_work(
        f"training {shape.parameters:.3g} parameters at B={config.batch_size}, C={config.context}"
        + resumed,
        found,
        shrink="pass a smaller --d-model, --d-mlp, --layers, -C or -B (or --grad-accum)",
        device=_estimated_on(config.device),
    )
    count = len(_new_checkpoints(config))
    check_disk(
        f"{count} checkpoints of {shape.parameters:.3g} parameters",
        checkpoint_disk(shape.parameters, count),
        config.out,
        shrink="pass a smaller --n-checkpoints or model, or free disk space",
    )


def _saved_updates(config: TrainConfig) -> int:
    """Updates a run resumed from ``out`` has done already (its latest training state's): 0 for
    a new run, or one not resumed.

    >>> _saved_updates(TrainConfig(out="no/such/run", resume=True))
    0
    """
    from ihprobe.io.run_dir import RunDir

    if not (config.resume or config.resume_or_start):
        return 0
    return min(RunDir(config.out).latest_state_step() or 0, config.total_steps)


def _new_checkpoints(config: TrainConfig) -> list[int]:
    """The steps of the checkpoints this run will write that ``out`` does not hold yet."""
    from ihprobe.io.run_dir import RunDir
    from ihprobe.training.schedule import checkpoint_steps

    steps = checkpoint_steps(
        config.checkpoints,
        total=config.total_steps,
        tokens_per_update=config.tokens_per_update,
        n=config.n_checkpoints,
    )
    run = RunDir(config.out)
    return [s for s in steps if not run.checkpoint(s).is_dir()]


def _estimated_on(device: str) -> str:
    """The device whose speed the estimate uses (``"auto"`` resolved as training resolves it)."""
    from ihprobe.core.world import resolve_device

    return resolve_device(device).type if device == "auto" else device


def _divisor_near(n: int, k: int) -> int:
    return min((d for d in range(1, n + 1) if n % d == 0), key=lambda d: abs(d - k))
