"""Continuing a run: what ``resume`` finds in the run directory, extending a finished run's
budget, and the training state, checked before any of it is loaded.

A run is identified by its directory, wherever it now is: the ``out`` recorded in ``run.json``
is never compared, so a moved or differently spelled directory resumes.

An extension keeps everything its first budget laid out: the warm-up length, and the data of a
producer that anneals over training (Bi-Induct's injection reaches 0 at the first budget and
stays there), so the updates already made stay exactly as they were.

>>> plan = plan_run(RunDir("no/such/run"), TrainConfig(out="no/such/run", steps=10))
>>> plan.total, plan.first_total, plan.extension
(10, 10, None)
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch

from ihprobe.core.errors import IhprobeError
from ihprobe.core.outputs import check_output_folder
from ihprobe.io.runs import LOCK, RUN_KIND, RUN_META, RunDir, config_changes, run_meta
from ihprobe.training.checkpoints import OPTIONAL_STATE_FIELDS, STATE_FIELDS
from ihprobe.training.config import RESUMABLE_CHANGES, TrainConfig
from ihprobe.training.schedule import checkpoint_steps

BUDGET = ("steps", "tokens")  # may grow on resume: an extension
REQUIRED = [name for name in STATE_FIELDS if name not in OPTIONAL_STATE_FIELDS]


@dataclass(frozen=True)
class Plan:
    """Where a run goes: its last update, the budget its schedules were laid out for (the first
    one, for an extended run), its checkpoint updates, and the extension it makes, if any."""

    total: int
    first_total: int
    schedule: list[int]
    extension: dict | None = None


def check_run_folder(config: TrainConfig) -> None:
    """Refuse an ``out`` that is not a new folder or an ihprobe run (a user's folder, a copy of
    a checkpoint, ``''``, ``.``, ``~``), and ``resume`` when ``out`` holds no run to resume
    (unless ``resume_or_start``), before anything is written.

    >>> check_run_folder(TrainConfig(out="no/such/run", resume=True))   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ihprobe.core.errors.IhprobeError: nothing to resume in no/such/run: ...
    """
    run = RunDir(check_output_folder(config.out, kind=RUN_KIND, ours=lambda f: RunDir(f).exists()))
    if not (run.root / LOCK).exists():  # a run being started: its lock says by whom
        _check_something_to_resume(run, config)


def _check_something_to_resume(run: RunDir, config: TrainConfig) -> None:
    if config.resume and not config.resume_or_start and not run.exists():
        raise IhprobeError(
            f"nothing to resume in {config.out}: it holds no run ({RUN_META} or checkpoints/); "
            "check the folder's name, or pass --resume-or-start to start a new run there."
        )


def plan_run(run: RunDir, config: TrainConfig) -> Plan:
    """The plan for training ``config`` in ``run``: a new run, a resume, or an extension.

    Raises:
        IhprobeError: an existing run without ``resume``; a config that differs from the run's
            in anything but the budget and :data:`RESUMABLE_CHANGES`; a shorter budget; a longer
            one under a cosine schedule.
    """
    per_update = config.tokens_per_update
    _check_something_to_resume(run, config)  # again, holding the lock
    if not run.exists():
        total = config.total_steps
        schedule = checkpoint_steps(
            config.checkpoints, total=total, tokens_per_update=per_update, n=config.n_checkpoints
        )
        return Plan(total, total, schedule)
    if not config.resume:
        raise IhprobeError(
            f"{run.root} already holds a run; pass --resume to continue it, or choose another "
            "--out (checkpoints are never overwritten)."
        )
    meta = run_meta(run.root)
    if meta is None:
        raise IhprobeError(f"{run.root} has checkpoints but no {RUN_META}: cannot resume it.")
    ignore = (*RESUMABLE_CHANGES, "out", *BUDGET)
    changed = config_changes(run.root, config.to_json(), ignore=ignore)
    if changed:
        diffs = ", ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in sorted(changed.items()))
        raise IhprobeError(
            f"cannot resume {run.root} with a different config ({diffs}); resume with the same "
            "settings (ihprobe.training.config.load_config reads them) or start a new --out."
        )
    saved = int(meta["steps"])
    extensions = meta.get("extensions") or []
    first = int(extensions[0]["from_steps"]) if extensions else saved
    schedule = [int(s) for s in meta["checkpoint_steps"]]
    total = config.total_steps
    if total == saved:
        return Plan(saved, first, schedule)
    _check_extension(run, config, saved, total)
    more = checkpoint_steps(
        config.checkpoints,
        total=first,
        tokens_per_update=per_update,
        n=config.n_checkpoints,
        extended_to=total,
    )
    extension = {
        "from_steps": saved,
        "to_steps": total,
        "from_tokens": saved * per_update,
        "to_tokens": total * per_update,
    }
    return Plan(total, first, sorted(set(schedule) | set(more)), extension)


def _check_extension(run: RunDir, config: TrainConfig, saved: int, total: int) -> None:
    if total < saved:
        raise IhprobeError(
            f"cannot shorten {run.root} from {saved} to {total} updates; resume it with its own "
            "budget, or start a new --out."
        )
    if config.schedule != "constant":
        raise IhprobeError(
            f"cannot extend {run.root} from {saved} to {total} updates: its {config.schedule} "
            f"learning rate decays to 0 at update {saved}, so a longer budget would change the "
            "rates it already trained with; start a new --out (with --schedule constant to "
            "allow extending later)."
        )


def record_extension(run: RunDir, config: TrainConfig, plan: Plan) -> None:
    """Write an extension into ``run.json``: the new budget and checkpoint updates, and an
    ``extensions`` entry (from/to updates and tokens)."""
    meta = run_meta(run.root)
    meta["config"] = {**meta["config"], "steps": config.steps, "tokens": config.tokens}
    meta["steps"] = plan.total
    meta["tokens"] = plan.total * config.tokens_per_update
    meta["checkpoint_steps"] = plan.schedule
    meta["extensions"] = [*meta.get("extensions", []), plan.extension]
    run.write_json(RUN_META, meta)


# ----------------------------------------------------------------------------- the state


def read_state(path: Path, *, model, optimizer, device, last_step: int) -> dict:
    """The training state at ``path``, checked against the model and optimiser it goes into
    (fields, step, shapes) before anything is loaded; tensors only (``weights_only``).

    Raises:
        IhprobeError: an empty, truncated, garbage or pickled-object file, or a state that
            does not fit this run; one line that says how to start over.
    """
    restart = f"start over with a new --out (or delete {path.parent.parent} and train it again)"
    if path.stat().st_size == 0:
        raise IhprobeError(f"{path} is empty: cannot resume from it; {restart}.")
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive
        raise IhprobeError(
            f"{path} cannot be resumed from: it is not a complete torch file (cut short, or "
            f"something else); {restart}."
        )
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except Exception as err:  # torch raises several types for damaged files
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        why = (
            "it holds Python objects other than tensors (refused unread; nothing in it ran)"
            if "Weights only load failed" in first
            else f"it is not a readable torch file ({first[:120]})"
        )
        raise IhprobeError(f"{path} cannot be resumed from: {why}; {restart}.") from None
    problem = _state_problem(state, path, model, optimizer, last_step)
    if problem:
        raise IhprobeError(f"{path} cannot be resumed from: {problem}; {restart}.")
    return state


def _state_problem(state, path: Path, model, optimizer, last_step: int) -> str | None:
    """What is wrong with a loaded state, or None."""
    if not isinstance(state, dict):
        return f"it holds a {type(state).__name__}, not a training state"
    missing = [k for k in REQUIRED if k not in state]
    if missing:
        return f"it is not a training state of ihprobe (no {', '.join(missing)})"
    step = _integer(state["step"])
    if step is None or not 0 <= step <= last_step:
        return f"its step {state['step']!r} is not an update of this run (0..{last_step})"
    if path.name != f"step-{step:06d}.pt":
        return f"it says update {step} but is named {path.name}"
    start = _integer(state.get("window_start", torch.tensor(step, device="cpu")))
    if start is None or not 0 <= start <= step:
        return f"its window_start {state.get('window_start')!r} is not in 0..{step}"
    seconds = state.get("train_seconds", torch.tensor(0.0, device="cpu"))
    if not (
        isinstance(seconds, torch.Tensor)
        and seconds.numel() == 1
        and 0 <= float(seconds) < float("inf")
    ):
        return f"its train_seconds {seconds!r} is not a count of seconds"
    rng, like = state["rng_cpu"], torch.get_rng_state()
    if not isinstance(rng, torch.Tensor) or (rng.dtype, rng.shape) != (like.dtype, like.shape):
        return "its rng_cpu is not a generator state"
    return _weights_problem(state["model"], model) or _optimizer_problem(
        state["optimizer"], optimizer
    )


def _integer(value) -> int | None:
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_floating_point():
        return int(value)
    return None


def _weights_problem(saved, model) -> str | None:
    if not isinstance(saved, dict):
        return "its model field is not a state dict"
    wanted = {k: tuple(t.shape) for k, t in model.state_dict().items()}
    got = {k: tuple(t.shape) for k, t in saved.items() if isinstance(t, torch.Tensor)}
    if got != wanted:
        differ = sorted(k for k in set(got) | set(wanted) if got.get(k) != wanted.get(k))
        shown = ", ".join(
            f"{k} {got.get(k, 'missing')} vs {wanted.get(k, 'extra')}" for k in differ[:3]
        )
        return f"its weights do not fit the model this config builds ({shown})"
    if not all(torch.isfinite(t).all() for t in saved.values() if t.is_floating_point()):
        return "its weights hold NaN or inf"
    return None


def _optimizer_problem(saved, optimizer) -> str | None:
    groups = saved.get("param_groups") if isinstance(saved, dict) else None
    if not isinstance(groups, list) or not isinstance(saved.get("state"), dict):
        return "its optimizer field is not an optimiser state"
    params = [p for group in optimizer.param_groups for p in group["params"]]
    sizes = [len(g.get("params", ())) for g in groups if isinstance(g, dict)]
    if sizes != [len(g["params"]) for g in optimizer.param_groups]:
        return f"its optimiser has parameter groups of sizes {sizes}, not the model's"
    for index, moments in saved["state"].items():
        if not isinstance(index, int) or not 0 <= index < len(params):
            return f"its optimiser state names parameter {index!r}, which the model lacks"
        for name, value in moments.items() if isinstance(moments, dict) else ():
            if (
                isinstance(value, torch.Tensor)
                and value.dim()
                and value.shape != params[index].shape
            ):
                return f"its optimiser's {name} of parameter {index} has another shape"
    return None


def restore(state: dict, *, model, optimizer, device: torch.device) -> None:
    """Load a checked state's weights, optimiser and random generators."""
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng_cpu"].cpu())
    if "rng_cuda" in state and device.type == "cuda":
        torch.cuda.set_rng_state(state["rng_cuda"].cpu(), device)
