"""The one option grammar of every subcommand (not a subcommand: the name starts with '_').

A thing has one flag name everywhere: ``-n/--n`` (half-length of the repeated tokens),
``--batch``, ``--seed``, ``--device``, ``--dtype``, ``--threads``, ``-q/--quiet``, ``--text``,
``--revision``, ``--out``, ``--force``, ``--json``, ``--draws`` (random draws of a baseline),
``--show`` (rows printed; ``--top`` is only ever the size of a top set), ``--suite`` (a public
suite in place of SOURCE, :mod:`ihprobe.cli._suite`); each ``add_*``
function below adds one of them, so a subcommand that has the thing gets the same name, type,
help and default. SOURCE arguments accept a checkpoint, a run directory or a hub id
everywhere (:func:`checkpoints_of`).

The argument types here are the one validation layer for command-line values: each refuses
0, negatives, NaN, inf, integers beyond int64 or a wrong type where they make no sense, so
argparse exits with status 2 and one line before any work starts.

>>> positive_int("3"), fraction("0.5"), key_value("repetition=0.9")
(3, 0.5, ('repetition', 0.9))
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path

from ihprobe.core.dtypes import DTYPE_NAMES as DTYPES
from ihprobe.core.errors import IhprobeError
from ihprobe.core.files import check_local_source, check_writable_dir, check_writable_file
from ihprobe.core.weight_names import weight_files

INT64 = (-(2**63), 2**63 - 1)  # every integer flag lies here (torch and numpy take no more)
DEFAULT_THREADS = 1  # ihprobe.core.threads.DEFAULT_THREADS, kept light here (tests compare)
DEFAULT_DEVICE = "auto"  # every command's --device, as TrainConfig.device (tests compare)


# ----------------------------------------------------------------------------- value types


class DefaultsFormatter(argparse.HelpFormatter):
    """Adds ``(default: X)`` to every option that takes a value, has a real default and does
    not say it (a flag's help says what it switches: ``--no-cache`` is not "default: True")."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        shown = action.default is not None and action.default is not False and action.nargs != 0
        if "default" in text or not shown or action.default in (argparse.SUPPRESS, []):
            return text
        if not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


def _number(kind: type, test: Callable[[float], bool], wanted: str) -> Callable[[str], float]:
    """An argparse type: ``kind(text)``, finite, within int64 for integers, passing ``test``."""

    def parse(text: str):
        try:
            value = kind(text)
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}") from None
        if kind is int and not INT64[0] <= value <= INT64[1]:
            raise argparse.ArgumentTypeError(f"{text[:30]!r}... is beyond int64, not {wanted}")
        if not math.isfinite(value) or not test(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}")
        return value

    parse.__name__ = wanted  # argparse names the type in some messages
    return parse


positive_int = _number(int, lambda v: v >= 1, "a positive integer")
nonnegative_int = _number(int, lambda v: v >= 0, "an integer >= 0")
seed_int = _number(int, lambda v: v >= 0, "a seed from 0 to 2**63-1")
positive_float = _number(float, lambda v: v > 0, "a positive number")
nonnegative_float = _number(float, lambda v: v >= 0, "a number >= 0")
finite_float = _number(float, lambda v: True, "a finite number")
fraction = _number(float, lambda v: 0 < v <= 1, "a fraction in (0, 1]")
probability = _number(float, lambda v: 0 <= v <= 1, "a probability in [0, 1]")
warmup_fraction = _number(float, lambda v: 0 <= v < 1, "a fraction in [0, 1)")


def fraction_or_count(text: str) -> float | int:
    """A count k >= 1 when written as an integer ("1"), else a fraction in (0, 1] ("0.02").

    >>> fraction_or_count("1"), fraction_or_count("0.02")
    (1, 0.02)
    """
    try:
        return positive_int(text) if text.strip().isdigit() else fraction(text)
    except argparse.ArgumentTypeError as err:
        if "int64" in str(err):
            raise
        raise argparse.ArgumentTypeError(
            f"{text[:30]!r} is not a fraction in (0, 1] nor a count k >= 1"
        ) from None


def device(text: str) -> str:
    """``auto``, ``cpu``, ``cuda`` or ``cuda:N``."""
    kind, sep, index = text.partition(":")
    if text == "auto" or (kind in ("cpu", "cuda") and (not sep or index.isdigit())):
        return text
    raise argparse.ArgumentTypeError(f"{text!r} is not a device: use auto, cpu, cuda or cuda:N")


def key_value(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` -> (key, JSON value or the string); the one parser of ``--option``.

    Example:
        >>> key_value("period=[8, 32]")
        ('period', [8, 32])
    """
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE, e.g. repetition=0.9")
    try:
        parsed = json.loads(value)
    except (json.JSONDecodeError, ValueError):  # ValueError: an integer of > 4300 digits
        parsed = value
    if isinstance(parsed, float) and not math.isfinite(parsed):
        raise argparse.ArgumentTypeError(f"{text!r}: the value must be a finite number")
    if isinstance(parsed, int) and not INT64[0] <= parsed <= INT64[1]:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: the value is beyond int64")
    return key.strip().replace("-", "_"), parsed


# ----------------------------------------------------------------------------- the flags


def source(text: str) -> str:
    """A SOURCE argument: not empty (``""`` would name the current directory), and not a local
    path that cannot be a checkpoint (checked here, before any import or hub request)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "an empty SOURCE: pass a checkpoint, run directory or hub id"
        )
    try:
        check_local_source(text)
        folder = Path(text).expanduser()
        if (folder / "config.json").is_file() and not (folder / "checkpoints").is_dir():
            weight_files(folder)  # a checkpoint folder without weights: refused by name
        return text
    except IhprobeError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    except OSError:  # unreadable here: the loader says what is wrong
        return text


def add_sources(
    p: argparse.ArgumentParser, *, out: str | None, many: bool = True, suite: bool = False
) -> None:
    """SOURCE (one or several) and ``--revision`` (repeatable); with ``out``, ``--out`` (that
    default) and ``--force``; with ``suite``, SOURCE may be left out for ``--suite NAME``
    (:func:`ihprobe.cli._suite.add_sources_or_suite` adds both)."""
    p.add_argument(
        "sources",
        nargs="*" if suite else "+" if many else 1,
        type=source,
        metavar="SOURCE",
        help="checkpoint directory, run directory or hub id" + (" (or --suite)" if suite else ""),
    )
    p.add_argument(
        "--revision",
        action="append",
        default=None,
        help="hub revision, repeatable: each is a checkpoint of every hub SOURCE "
        "(default: the hub's main)",
    )
    if out is not None:
        add_out(p, out)
        p.add_argument("--force", action="store_true", help="overwrite existing output files")


def add_out(p: argparse.ArgumentParser, default: str, what: str = "output directory") -> None:
    p.add_argument("--out", default=default, help=what)


def add_all_checkpoints(p: argparse.ArgumentParser) -> None:
    """``--all-checkpoints``: every checkpoint of a run directory instead of its last."""
    p.add_argument(
        "--all-checkpoints",
        action="store_true",
        help="every checkpoint of a run directory (default: its last checkpoint)",
    )


def add_probe_rows(p: argparse.ArgumentParser, *, batch: int = 100, bos: bool = True) -> None:
    """``-n/--n``, ``--batch`` and ``--seed`` of the repeated-token probe rows (and ``--bos``)."""
    p.add_argument(
        "-n",  # the form torchrun passes on: it reads --n as an abbreviation of its own flags
        "--n",
        type=positive_int,
        help="half-length of the repeated tokens (default: min(50, n_ctx/2))",
    )
    p.add_argument("--batch", type=positive_int, default=batch, help="probe rows")
    add_seed(p, "seed of the probe rows (and of any random draws)")
    if bos:
        p.add_argument(
            "--bos", action="store_true", help="prepend the tokenizer's BOS to probe rows"
        )


def add_seed(p, what: str = "seed", default: object = 0) -> None:
    p.add_argument("--seed", type=seed_int, default=default, help=what)


def add_model_flags(p: argparse.ArgumentParser, *, dtype: bool = True) -> None:
    """``--device`` (and ``--dtype``) of the models a command loads, and ``--threads``."""
    p.add_argument(
        "--device",
        type=device,
        default=DEFAULT_DEVICE,
        help="auto (cuda when available, else cpu), cpu, cuda or cuda:N; under torchrun cuda is "
        "each rank's own GPU",
    )
    if dtype:
        p.add_argument("--dtype", choices=DTYPES, default="float32", help="parameter dtype")
    add_threads(p)


def add_placement(p: argparse.ArgumentParser) -> None:
    """``--device-map``, ``--max-memory`` and ``--offload-folder``: a model placed over the
    GPUs, the CPU and the disk by accelerate (``pip install 'ihprobe[offload]'``)."""
    p.add_argument(
        "--device-map",
        choices=("auto", "balanced", "sequential"),
        help="place the model over the GPUs, the CPU and the disk (--device is then unused; "
        "default: none, the whole model on --device)",
    )
    p.add_argument(
        "--max-memory",
        metavar="DEVICE=SIZE,...",
        help="the most each device may hold with --device-map, e.g. cpu=200MB,0=20GB (default: "
        "what accelerate finds free)",
    )
    p.add_argument(
        "--offload-folder",
        metavar="DIR",
        help="a new or empty folder for weights --device-map keeps on disk (default: none, so "
        "no weights on disk)",
    )


def placement(args: argparse.Namespace) -> dict:
    """The ``device_map``, ``max_memory`` and ``offload_folder`` keywords of the flags of
    :func:`add_placement` (empty without ``--device-map``; checked by ``ihprobe.load``)."""
    found = {
        "device_map": getattr(args, "device_map", None),
        "max_memory": getattr(args, "max_memory", None),
        "offload_folder": getattr(args, "offload_folder", None),
    }
    return found if any(v is not None for v in found.values()) else {}


def add_threads(p: argparse.ArgumentParser) -> None:
    """``--threads``: torch's CPU threads for the command (``ihprobe.core.threads``; the
    default is the measured best in tokens per CPU-second, ``lab/benchmarks/bench_threads.py``)."""
    p.add_argument(
        "--threads",
        type=positive_int,
        default=DEFAULT_THREADS,
        help="CPU threads torch may use; more only pays for a large model on idle cores "
        f"(default: {DEFAULT_THREADS}, the most tokens per CPU-second measured)",
    )


def add_quiet(p: argparse.ArgumentParser, what: str = "no progress bars or stage lines") -> None:
    """``-q/--quiet``: no progress bars or stage lines on stderr."""
    p.add_argument("-q", "--quiet", action="store_true", help=what)


def add_draws(p: argparse.ArgumentParser, what: str, default: int | str = 20) -> None:
    """``--draws``: the random draws of a baseline (head sets, matrices), one name everywhere;
    a string ``default`` is only said in the help (the library's own default applies)."""
    if isinstance(default, str):
        p.add_argument("--draws", type=positive_int, help=f"{what} (default: {default})")
    else:
        p.add_argument("--draws", type=positive_int, default=default, help=what)


def add_show(p: argparse.ArgumentParser, what: str, default: int = 3) -> None:
    """``--show``: how many rows a command prints (``--top`` is the size of a top set)."""
    p.add_argument("--show", type=positive_int, default=default, help=what)


def add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON")


# Producer options common enough to get a flag of their own: each is ``--option KEY=VALUE``
# by another name (KEY the flag with ``_`` for ``-``), read by :func:`producer_options`.
SHORTCUTS = (
    ("repetition", probability, "semi-natural/markov: P(A..A) (default: the producer's)"),
    ("reliability", probability, "semi-natural/markov: P(B | AB..A) (default: the producer's)"),
    ("vocab-size", positive_int, "producer vocabulary (default: the producer's)"),
)


def add_option_flag(parser, what: str = "producer option") -> None:
    """``--option KEY=VALUE`` (repeatable), the one flag for producer options, and the
    :data:`SHORTCUTS` beside it."""
    parser.add_argument(
        "--option",
        dest="option",
        action="append",
        type=key_value,
        default=[],
        metavar="KEY=VALUE",
        help=f"{what}, repeatable; VALUE is read as JSON when it parses (--option period=[8,32]) "
        "(default: none)",
    )
    for flag, kind, text in SHORTCUTS:
        key = flag.replace("-", "_")
        parser.add_argument(f"--{flag}", dest=key, type=kind, help=f"{text}; = --option {key}=")


def producer_options(args: argparse.Namespace) -> dict:
    """The producer options ``--option`` and the :data:`SHORTCUTS` ask for; one key given both
    ways is one line (exit 2), not a silent choice.

    >>> producer_options(argparse.Namespace(option=[("period", [8, 32])], repetition=0.5))
    {'period': [8, 32], 'repetition': 0.5}
    """
    options = dict(getattr(args, "option", []))
    for flag, _, _ in SHORTCUTS:
        key = flag.replace("-", "_")
        if getattr(args, key, None) is None:
            continue
        if key in options:
            raise IhprobeError(f"--{flag} and --option {key}=... both given: pass one of them")
        options[key] = getattr(args, key)
    return options


def progress(args: argparse.Namespace) -> bool | None:
    """The ``progress`` argument for the library: None (a bar on a terminal) or False."""
    return False if getattr(args, "quiet", False) else None


# ----------------------------------------------------------------------------- checks


def checkpoints_of(args: argparse.Namespace, source: str):
    """The checkpoints a SOURCE names: a run directory's last one unless
    ``--all-checkpoints``; every ``--revision`` of a hub id."""
    from ihprobe.io.sources import sources_of

    revisions = getattr(args, "revision", None)
    found = sources_of(source, revisions or None)
    return found if revisions or getattr(args, "all_checkpoints", False) else found[-1:]


def one_checkpoint(args: argparse.Namespace):
    """The one checkpoint of a single-model command (its last, for a run directory)."""
    source = args.sources[0]
    if args.revision and len(args.revision) > 1:
        raise IhprobeError("this command reads one checkpoint: pass one --revision.")
    return checkpoints_of(args, source)[-1]


def refuse_overwrite(targets: list[Path], force: bool) -> None:
    """Raise unless none of ``targets`` exists or ``force`` was given; and unless every target
    can be written (checked before any work starts)."""
    existing = [str(t) for t in targets if t.exists()]
    if existing and not force:
        raise IhprobeError(
            f"{', '.join(existing)} already exist; pass --force to overwrite or another --out."
        )
    for target in targets:
        check_writable_dir(target.parent)
        check_writable_file(target)


def chance_text(scores, metric: str, form: str = " (chance {:.3g})") -> str:
    """``form`` filled with the metric's chance level in this scan; empty without one."""
    level = scores.chance(metric)
    return "" if level is None else form.format(level)


def fixed_offset_notes(scores) -> list[str]:
    """One note per head that passes prefix matching but not forward induction on snippets of
    varied length (``HeadScores.fixed_offset_suspects``), for ``scan`` and ``emergence``."""
    return [
        f"L{layer}H{head} passes prefix_matching ({ps:.3f}) but not forward_induction_varied "
        f"({varied:.3f}{chance_text(scores, 'forward_induction_varied', ', chance {:.3g}')}): "
        "it may look a fixed offset back rather than match content"
        for layer, head, ps, varied in scores.fixed_offset_suspects()
    ]
