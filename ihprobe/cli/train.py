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
    _number,
    add_option_flag,
    add_threads,
    device,
    finite_float,
    nonnegative_float,
    nonnegative_int,
    positive_float,
    positive_int,
    producer_options,
    seed_int,
    warmup_fraction,
)

integer = _number(int, lambda v: True, "an integer")  # a field's int that names no parser
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


# the parsers a TrainConfig field may name in its metadata's ``parse``
PARSERS = {
    "positive_int": positive_int,
    "nonnegative_int": nonnegative_int,
    "positive_float": positive_float,
    "nonnegative_float": nonnegative_float,
    "warmup_fraction": warmup_fraction,
    "seed_int": seed_int,
    "device": device,
    "count": count,
    "checkpoints": checkpoints,
    "clip": clip,
}
BY_TYPE = {"int": integer, "float": finite_float}  # a field that names no parser; str: as given
GROUPS = ("data", "model", "optimisation", "checkpoints and monitoring")


def flag(spec: dataclasses.Field) -> tuple[list[str], dict]:
    """The option strings and ``add_argument`` keywords of one TrainConfig field, all read from
    the field: its name, annotation, default and metadata (``training.config.option``).

    >>> from ihprobe.training.config import TrainConfig
    >>> specs = {f.name: f for f in dataclasses.fields(TrainConfig)}
    >>> flag(specs["batch_size"])[0], flag(specs["progress"])[1]["action"]
    (['-B', '--batch-size'], 'store_false')
    """
    from ihprobe.training.field_types import annotation

    meta, kind = spec.metadata, annotation(spec).removesuffix(" | None")
    text = meta.get("help") or spec.name.replace("_", " ")
    keywords = {"dest": spec.name, "help": text}
    if kind == "bool":
        on = spec.default is True
        keywords["action"] = "store_false" if on else "store_true"
        name = ("--no-" if on else "--") + spec.name.replace("_", "-")
        return list(meta.get("flags", (name,))), keywords
    if "(default" not in text and not meta.get("required"):
        keywords["help"] = f"{text} {MARK}"
    if kind.startswith("tuple"):
        keywords["nargs"] = "+"
    for key in ("choices", "metavar", "required"):
        if key in meta:
            keywords[key] = meta[key]
    parse = PARSERS[meta["parse"]] if "parse" in meta else BY_TYPE.get(kind)
    if parse is not None:
        keywords["type"] = parse
    return list(meta.get("flags", ("--" + spec.name.replace("_", "-"),))), keywords


def register(subparsers) -> None:
    """The ``train`` parser: one option per TrainConfig field, made from the field (an option
    added to TrainConfig is on the command line with no edit here), plus ``--option`` and its
    shortcuts for the producer's options and ``--threads`` for the process."""
    from ihprobe.training import config

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
    groups = {name: p.add_argument_group(name) for name in GROUPS}
    exclusive: dict[str, argparse._MutuallyExclusiveGroup] = {}
    for spec in dataclasses.fields(config.TrainConfig):
        group = groups.get(spec.metadata.get("group"), p)
        if spec.name == "producer_options":  # a dict: --option KEY=VALUE and its shortcuts
            add_option_flag(groups["data"])
        if spec.metadata.get("flag", True) is False:
            continue
        if "exclusive" in spec.metadata:
            name = spec.metadata["exclusive"]
            if name not in exclusive:
                exclusive[name] = group.add_mutually_exclusive_group()
            group = exclusive[name]
        flags, keywords = flag(spec)
        group.add_argument(*flags, **keywords)
    add_threads(groups["checkpoints and monitoring"])
    p.set_defaults(func=run)


def config_from_args(args):
    """The TrainConfig the flags ask for (on top of run.json when resuming an existing run)."""
    from ihprobe.io.runs import run_meta
    from ihprobe.training.config import TrainConfig, load_config
    from ihprobe.training.field_types import annotation

    skip = ("func", "command", "verbose", "threads")  # threads: the process's, not the run's
    options = producer_options(args)
    shortcuts = {flag.replace("-", "_") for flag, _, _ in SHORTCUTS}
    given = {k: v for k, v in vars(args).items() if k not in (*skip, "option", *shortcuts)}
    for spec in dataclasses.fields(TrainConfig):  # nargs="+" gives a list, the config a tuple
        if spec.name in given and annotation(spec).startswith("tuple"):
            given[spec.name] = tuple(given[spec.name])
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
