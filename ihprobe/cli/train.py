"""``ihprobe train --out RUN_DIR [options]``: train a model from scratch and write checkpoints.

Every option has a default (a tiny 2-layer model on semi-natural data), so
``ihprobe train --out runs/x --steps 20`` runs. Producer options go through
``--option KEY=VALUE`` (values are read as JSON when they parse, e.g.
``--option repetition=0.9 --option vocab_size=256``).
``--resume`` with no other flags continues the run with the settings in its ``run.json``;
with a larger ``--steps``/``--tokens`` it extends a finished constant-rate run. ``--resume``
where ``--out`` holds no run is one line (a mistyped folder); ``--resume-or-start`` starts one.
``--live-probes --forecast [--law-from RUN ...]`` forecasts the emergence point as it trains
(``docs/forecast.md``).
Under ``torchrun --nproc_per_node N -m ihprobe train ...`` it trains with DDP.
"""

from __future__ import annotations

import argparse
import dataclasses
import math

from ihprobe.cli._common import (
    INT64,
    SHORTCUTS,
    DefaultsFormatter,
    add_option_flag,
    add_threads,
    device,
    nonnegative_float,
    nonnegative_int,
    positive_float,
    positive_int,
    producer_options,
    seed_int,
    warmup_fraction,
)

SUFFIXES = {"k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9}


def count(text: str) -> int:
    """``"250k"`` -> 250000, ``"0.25M"`` -> 250000, ``"2e6"`` -> 2000000."""
    clean = text.strip().lower().replace("_", "")
    scale = SUFFIXES.get(clean[-1:], 1)
    try:
        number = float(clean[:-1] if scale != 1 else clean)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count such as 250k or 2e6") from None
    if not math.isfinite(number) or number * scale < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive count such as 250k")
    if number * scale > INT64[1]:
        raise argparse.ArgumentTypeError(f"{text[:30]!r} is beyond int64, not a count")
    return int(round(number * scale))


def checkpoints(text: str):
    """``log``, ``linear`` or a comma-separated list of token counts (``250k,500k,1M``)."""
    if text in ("log", "linear"):
        return text
    try:
        found = tuple(count(part) for part in text.split(",") if part.strip())
    except argparse.ArgumentTypeError:
        found = ()
    if not found:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not log, linear or a list of token counts such as 250k,500k,1M"
        )
    return found


def clip(text: str) -> float | None:
    """A max gradient norm, or ``none``/``off``/``0`` for no clipping."""
    if text.lower() in ("none", "0", "off"):
        return None
    return positive_float(text)


MARK = "(default)"  # in a help string: TrainConfig's default, looked up when help is shown


def shown(value) -> str:
    """A default as the help shows it.

    >>> [shown(v) for v in (3e-3, 0.01, 1.0, 0.0, None, (), "log", 2000)]
    ['3e-3', '0.01', '1', '0', 'none', 'none', 'log', '2000']
    """
    if value is None or value == ():
        return "none"
    if isinstance(value, float) and 0 < abs(value) < 0.01:
        mantissa, exponent = f"{value:.0e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def config_default(name: str) -> str:
    """TrainConfig's default of field ``name`` (the updates it trains when steps is None)."""
    from ihprobe.training.config import DEFAULT_STEPS, TrainConfig

    found = {f.name: f for f in dataclasses.fields(TrainConfig)}[name]
    value = found.default_factory() if found.default is dataclasses.MISSING else found.default
    return shown(DEFAULT_STEPS if name == "steps" and value is None else value)


class TrainHelp(DefaultsFormatter):
    """Shows ``(default: X)`` from TrainConfig where a help string says ``(default)``: one
    place for the defaults, imported only when help is printed (``ihprobe --help`` stays fast)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = super()._get_help_string(action)
        if text.endswith(MARK):
            text = f"{text[: -len(MARK)]}(default: {config_default(action.dest)})"
        return text


def register(subparsers) -> None:
    """The ``train`` parser: one ``add_argument`` per TrainConfig field, a flat table of options
    (over 60 lines because there are that many options)."""
    p = subparsers.add_parser(
        "train",
        help="train a small model from scratch, writing HF checkpoints on a token schedule",
        description=(
            "Train a decoder-only model from scratch on a data producer, writing HF checkpoints "
            "on a token schedule. Defaults: semi-natural data (repetition 0.9, reliability 0.9), "
            "gpt-neox, 2 layers, 4 heads, d_model 64, d_mlp 4*d_model, C=64, B=32, 2000 updates, "
            "AdamW lr 3e-3, 1% warm-up then cosine, weight decay 0, grad clip 1, seed 0, 20 "
            "log-spaced checkpoints, device auto."
        ),
        argument_default=argparse.SUPPRESS,  # only flags given override TrainConfig / run.json
        formatter_class=TrainHelp,
    )
    p.add_argument("--out", required=True, help="run directory")
    data = p.add_argument_group("data")
    data.add_argument(
        "--producer",
        help="natural, repeats, bi-induct, semi-natural, markov or iid (default)",
    )
    add_option_flag(data)
    model = p.add_argument_group("model")
    model.add_argument(
        "--arch", choices=("gpt-neox", "llama", "gpt2"), help="architecture (default)"
    )
    model.add_argument("--layers", type=positive_int, help="layers (default)")
    model.add_argument("--heads", type=positive_int, help="attention heads per layer (default)")
    model.add_argument(
        "--kv-heads",
        dest="kv_heads",
        type=positive_int,
        help="llama: key/value heads (default: --heads)",
    )
    model.add_argument(
        "--d-model", dest="d_model", type=positive_int, help="residual width (default)"
    )
    model.add_argument(
        "--d-mlp",
        dest="d_mlp",
        type=nonnegative_int,
        help="MLP width (default: 4 * d_model; 0: attention-only)",
    )
    opt = p.add_argument_group("optimisation")
    opt.add_argument("-C", "--context", type=positive_int, help="tokens per sequence, C (default)")
    opt.add_argument(
        "-B",
        "--batch-size",
        dest="batch_size",
        type=positive_int,
        help="sequences per update, B (default)",
    )
    budget = opt.add_mutually_exclusive_group()
    budget.add_argument("--steps", type=count, help="updates (default)")
    budget.add_argument(
        "--tokens", type=count, help="budget in tokens instead of --steps, e.g. 20M (default)"
    )
    opt.add_argument("--lr", type=positive_float, help="AdamW learning rate (default)")
    opt.add_argument(
        "--warmup",
        type=warmup_fraction,
        help="fraction of updates in linear warm-up (default)",
    )
    opt.add_argument(
        "--schedule",
        choices=("cosine", "constant"),
        help="learning-rate schedule after warm-up (default)",
    )
    opt.add_argument(
        "--weight-decay",
        dest="weight_decay",
        type=nonnegative_float,
        help="AdamW decay of matrices (default)",
    )
    opt.add_argument(
        "--grad-clip", dest="grad_clip", type=clip, help="max gradient norm, or none (default)"
    )
    opt.add_argument(
        "--grad-accum",
        dest="grad_accum",
        type=positive_int,
        help="micro-batches per update (default)",
    )
    opt.add_argument("--seed", type=seed_int, help="seed of model init and data (default)")
    watch = p.add_argument_group("checkpoints and monitoring")
    watch.add_argument(
        "--checkpoints", type=checkpoints, help="log | linear | 250k,500k,1M,... (default)"
    )
    watch.add_argument(
        "--n-checkpoints",
        dest="n_checkpoints",
        type=positive_int,
        help="checkpoints after step 0 for log and linear (default)",
    )
    watch.add_argument(
        "--live-probes",
        dest="live_probes",
        action="store_true",
        help="max PS and AR accuracy at every checkpoint, to probes.jsonl",
    )
    watch.add_argument(
        "--probe-batch",
        dest="probe_batch",
        type=positive_int,
        help="rows of the live probes (default)",
    )
    watch.add_argument(
        "--forecast",
        action="store_true",
        help="forecast the emergence point at every live probe (forecast.jsonl)",
    )
    watch.add_argument(
        "--law-from",
        dest="law_from",
        nargs="+",
        metavar="RUN",
        help="earlier runs to refit the forecast's law on (default)",
    )
    watch.add_argument(
        "--log-every",
        dest="log_every",
        type=positive_int,
        help="updates between metrics.jsonl lines (default)",
    )
    watch.add_argument(
        "--state-every",
        dest="state_every",
        type=nonnegative_int,
        help="updates between resume states, 0: only at checkpoints (default)",
    )
    watch.add_argument(
        "-q",
        "--quiet",
        "--no-progress",
        dest="progress",
        action="store_false",
        help="no progress bar or stage lines",
    )
    watch.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out; with a larger --steps/--tokens, extends a finished "
        "constant-rate run (a cosine one is refused)",
    )
    watch.add_argument(
        "--resume-or-start",
        dest="resume_or_start",
        action="store_true",
        help="--resume, or start a new run when --out holds none (--resume alone refuses)",
    )
    watch.add_argument(
        "--device",
        type=device,
        help="auto (cuda when available, else cpu), cpu, cuda or cuda:N (default)",
    )
    watch.add_argument(
        "--precision",
        help="fp32, tf32 (TF32 matmuls on cuda) or bf16 (bfloat16 autocast) (default)",
    )
    watch.add_argument("--compile", action="store_true", help="torch.compile the model's forward")
    add_threads(watch)
    p.set_defaults(func=run)


def config_from_args(args):
    """The TrainConfig the flags ask for (on top of run.json when resuming an existing run)."""
    from ihprobe.io.runs import run_meta
    from ihprobe.training.config import TrainConfig, load_config

    skip = ("func", "command", "verbose", "threads")  # threads: the process's, not the run's
    options = producer_options(args)
    shortcuts = {flag.replace("-", "_") for flag, _, _ in SHORTCUTS}
    given = {k: v for k, v in vars(args).items() if k not in (*skip, "option", *shortcuts)}
    if "law_from" in given:
        given["law_from"] = tuple(given["law_from"])
    if given.get("resume_or_start"):
        given["resume"] = True
    if given.get("resume") and run_meta(args.out) is not None:
        base = load_config(args.out)
        if options:
            given["producer_options"] = {**base.producer_options, **options}
        if "steps" in given or "tokens" in given:  # a budget flag replaces the stored budget
            given.setdefault("steps", None)
            given.setdefault("tokens", None)
        return load_config(args.out, **given)
    if options:
        given["producer_options"] = options
    return TrainConfig(**given)


def run(args) -> int:
    from ihprobe.training.display import outcome
    from ihprobe.training.trainer import train

    config = config_from_args(args)
    check_budget(config)
    run_dir = train(config)
    print(run_dir)
    if said := outcome(run_dir):  # with live probes: did induction heads form?
        print(said)
    return 0


def check_budget(config) -> None:
    """Refuse a token budget under one update, or a run whose token count leaves int64."""
    from ihprobe.core.errors import IhprobeError

    per_update = config.tokens_per_update
    if config.tokens is not None and config.tokens < per_update:
        raise IhprobeError(
            f"--tokens {config.tokens:,} is less than one update (B x C = {per_update:,} "
            "tokens); pass a larger budget."
        )
    if config.total_steps * per_update > 2**63 - 1:
        raise IhprobeError(
            f"{config.total_steps:,} updates of {per_update:,} tokens overflow the int64 "
            "token counter; pass fewer --steps or --tokens."
        )
