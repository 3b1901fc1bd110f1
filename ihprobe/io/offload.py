"""Models larger than one device: accelerate's device maps and disk offload, through
transformers' own ``from_pretrained``.

A device map places each module on a GPU, the CPU or the disk; accelerate's hooks move every
module's inputs to where its weights are and, for an offloaded module, bring its weights in for
its forward pass only. :func:`placement` checks what a caller asks for (accelerate installed, a
map, the memory caps, an offload folder ihprobe may write), :func:`check_capacity` refuses a map
that cannot hold the model by the estimate ihprobe already makes, and :class:`OffloadFolder`
keeps the deletion rule: ihprobe removes only the offload files it wrote, and the folder only
when it created it. A dispatched model is bridged in place (no copy, no move); its inputs go to
the first module's device (:func:`first_device`), and reading its weights outside a forward
pass (``W_O``, ``W_E``...) goes through :func:`readable`.

>>> parse_max_memory("cpu=200MB,0=20GiB")
{'cpu': '200MB', 0: '20GiB'}
>>> placement(None) is None
True
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ihprobe.core.devices import device_map_of
from ihprobe.core.errors import IhprobeError
from ihprobe.core.memory import available_bytes, limits_on
from ihprobe.core.outputs import check_output_folder, mark, recorded

EXTRA = "pip install 'ihprobe[offload]'"  # what brings accelerate
MAPS = ("auto", "balanced", "balanced_low_0", "sequential")  # accelerate's named strategies
HOSTS = ("cpu", "disk")  # map entries that run on the main device, not where they are kept
KIND = "offload"  # the marker kind of an offload folder ihprobe wrote


@dataclass
class Placement:
    """A checked device map, its memory caps and where offloaded weights may go."""

    device_map: str | dict
    max_memory: dict | None = None
    folder: OffloadFolder | None = None

    def from_pretrained(self) -> dict:
        """The keyword arguments of ``from_pretrained`` that place the model."""
        found = {"device_map": self.device_map, "max_memory": self.max_memory}
        if self.folder is not None and self.folder.path is not None:
            found["offload_folder"] = str(self.folder.path)
        return found


@dataclass
class OffloadFolder:
    """A folder for offloaded weights: one ihprobe created, or an empty one the caller gave."""

    path: Path | None  # None: a new temporary folder, made by :meth:`make`
    created: bool
    written: list[str] = field(default_factory=list)

    def make(self) -> None:
        """Create the folder (after every check has passed) unless it exists."""
        if self.path is None:
            self.path = Path(tempfile.mkdtemp(prefix="ihprobe-offload-"))
        else:
            self.path.mkdir(parents=True, exist_ok=True)

    def record(self) -> None:
        """Mark every file now in the folder as ihprobe's (it was new or empty before)."""
        self.written = sorted(p.name for p in self.path.iterdir() if p.is_file())
        if self.written:
            mark(self.path, KIND, self.written)

    def release(self) -> None:
        """Remove the files ihprobe wrote (and the folder when ihprobe created it); nothing
        else, whatever has joined them since."""
        if self.path is None:
            return
        mine = set(recorded(self.path) or ()) & set(self.written)
        for name in mine:
            with contextlib.suppress(OSError):
                (self.path / name).unlink()
        if mine:
            with contextlib.suppress(OSError):
                (self.path / ".ihprobe").unlink()
        if self.created:
            with contextlib.suppress(OSError):  # not empty: something not ours is there
                self.path.rmdir()


def has_accelerate() -> bool:
    """Whether accelerate can be imported (``ihprobe[offload]``)."""
    return importlib.util.find_spec("accelerate") is not None


def placement(
    device_map, max_memory=None, offload_folder: str | os.PathLike | None = None
) -> Placement | None:
    """The checked placement a caller asks for, or None for none (one device).

    Args:
        device_map: ``"auto"`` (or another of :data:`MAPS`) or a dict of module name to
            ``"cpu"``, ``"disk"``, a GPU index or ``"cuda:N"``.
        max_memory: per device the most it may hold (``{"cpu": "200MB", 0: "20GB"}`` or the
            CLI's ``"cpu=200MB,0=20GB"``).
        offload_folder: where weights that fit nowhere go (a new or empty folder; without one
            the map may use no disk).

    Example:
        >>> placement("auto", "cpu=1GB").max_memory
        {'cpu': 1000000000}
        >>> placement("everywhere")                              # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ihprobe.core.errors.IhprobeError: device_map='everywhere' is not one of auto, ...
    """
    if device_map is None:
        if max_memory is not None or offload_folder is not None:
            raise IhprobeError(
                "max_memory and offload_folder place a model by a device map: pass "
                "device_map='auto' (--device-map auto) with them."
            )
        return None
    if isinstance(device_map, str) and device_map not in MAPS:
        raise IhprobeError(
            f"device_map={device_map!r} is not one of {', '.join(MAPS)} or a dict of module "
            "name to device."
        )
    if isinstance(device_map, dict):
        device_map = {str(k): _device(v) for k, v in device_map.items()}
        if not device_map:
            raise IhprobeError("device_map is an empty dict; pass 'auto' or name every module.")
    elif not isinstance(device_map, str):
        kind = type(device_map).__name__
        raise IhprobeError(f"device_map must be 'auto' or a dict (got {kind}).")
    if not has_accelerate():
        raise IhprobeError(f"a device map needs accelerate, which is not installed: {EXTRA}.")
    caps = parse_max_memory(max_memory) if isinstance(max_memory, str) else max_memory
    if caps is not None:
        caps = {_device(k): _size(k, v) for k, v in dict(caps).items()}
    disk = isinstance(device_map, dict) and "disk" in device_map.values()
    folder = None
    if offload_folder is not None or disk:
        folder = offload_folder_for(offload_folder)
    return Placement(device_map, caps, folder)


def parse_max_memory(text: str) -> dict:
    """``"cpu=200MB,0=20GiB"`` as ``{"cpu": "200MB", 0: "20GiB"}`` (sizes checked later)."""
    found = {}
    for part in str(text).split(","):
        name, sep, size = part.strip().partition("=")
        if not sep or not name.strip() or not size.strip():
            raise IhprobeError(
                f"max_memory {text!r}: each entry is DEVICE=SIZE, e.g. cpu=200MB,0=20GB."
            )
        name = name.strip()
        found[int(name) if name.isdigit() else name] = size.strip()
    return found


def _device(value):
    """A device map's device: ``"cpu"``, ``"disk"``, ``"mps"``, a GPU index or ``"cuda:N"``."""
    if isinstance(value, bool) or not isinstance(value, (int, str, torch.device)):
        raise IhprobeError(f"{value!r} is not a device: use cpu, disk, a GPU index or cuda:N.")
    if isinstance(value, int):
        if value < 0:
            raise IhprobeError(f"{value} is not a GPU index: use 0, 1, ...")
        return value
    text = str(value)
    if text in ("cpu", "disk", "mps") or text.startswith("cuda"):
        return text
    raise IhprobeError(f"{text!r} is not a device: use cpu, disk, a GPU index or cuda:N.")


def _size(device, value) -> int:
    """Bytes of a ``max_memory`` entry (an int, or a size such as ``"200MB"``)."""
    from accelerate.utils import convert_file_size_to_int

    try:
        found = value if isinstance(value, int) else convert_file_size_to_int(str(value))
    except (ValueError, TypeError):
        found = -1
    if isinstance(found, bool) or not isinstance(found, int) or found <= 0:
        raise IhprobeError(
            f"max_memory for {device!r} is {value!r}; pass a positive size, e.g. 200MB or 20GB."
        )
    return found


def offload_folder_for(folder: str | os.PathLike | None) -> OffloadFolder:
    """A folder for offloaded weights: a new one in the temporary folder when none is given; a
    given one that holds files ihprobe did not write is refused in one line."""
    if folder is None:
        return OffloadFolder(None, created=True)
    path = check_output_folder(folder, "offload_folder", kind=KIND)
    return OffloadFolder(path, created=not path.exists())


def check_capacity(placed: Placement, need: int, what: str) -> None:
    """Refuse a map that cannot hold ``need`` bytes of weights: its devices' caps (or their
    available memory), with no disk unless an offload folder is given.

    Example:
        >>> check_capacity(Placement("auto", {"cpu": 1000}), 10**6, "a model")
        Traceback (most recent call last):
        ...
        ihprobe.core.errors.IhprobeError: a model needs about 0.001 GB of weights but the device map holds 1e-06 GB (cpu 1e-06 GB); raise max_memory or pass offload_folder to keep the rest on disk.
    """  # noqa: E501
    if placed.folder is not None or not limits_on():
        return
    if isinstance(placed.device_map, dict):
        devices = sorted({d for d in placed.device_map.values()}, key=str)
    else:
        devices = list(placed.max_memory or {}) or ["cpu"] + list(range(_gpus()))
    caps = placed.max_memory or {}
    held = {d: caps.get(d, available_bytes(_torch_device(d))) for d in devices}
    total = sum(held.values())
    if need > total:
        shown = ", ".join(f"{d} {b / 1e9:.3g} GB" for d, b in held.items())
        raise IhprobeError(
            f"{what} needs about {need / 1e9:.3g} GB of weights but the device map holds "
            f"{total / 1e9:.3g} GB ({shown}); raise max_memory or pass offload_folder to keep "
            "the rest on disk."
        )


def _gpus() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _torch_device(device) -> str:
    return f"cuda:{device}" if isinstance(device, int) else str(device)


# ----------------------------------------------------------------------------- a dispatched model


def is_dispatched(model) -> bool:
    """Whether ``model`` runs under a device map (accelerate's hooks place its modules)."""
    return device_map_of(model) is not None


def first_device(model) -> torch.device:
    """Where a dispatched model takes its inputs: the execution device accelerate gave its
    input embedding, else the first module's by the map (a module kept on the CPU or the disk
    runs on the map's first GPU, or on the CPU without one).

    >>> first_device(type("M", (), {"hf_device_map": {"embed": "disk", "h.0": 0}})())
    device(type='cuda', index=0)
    """
    hook = getattr(_input_embedding(model), "_hf_hook", None)
    hooks = [hook, *getattr(hook, "hooks", ())]  # accelerate's SequentialHook holds several
    ran = next((h.execution_device for h in hooks if getattr(h, "execution_device", None)), None)
    if ran is not None:  # where accelerate runs the embedding (a map's own main_device too)
        return torch.device(_torch_device(ran))
    found = device_map_of(model) or {"": "cpu"}
    places = list(found.values())
    main = next((d for d in places if d not in HOSTS), "cpu")
    first = places[0] if places[0] not in HOSTS else main
    return torch.device(_torch_device(first))


def _input_embedding(model):
    """The HF model's input embedding module, or None."""
    hf = getattr(model, "original_model", model)
    try:
        return hf.get_input_embeddings()
    except (AttributeError, NotImplementedError):
        return None


@contextlib.contextmanager
def readable(model):
    """Within it, the weights of a dispatched model's offloaded modules are loaded on their
    execution device (``W_O``, ``W_E``... read real values); elsewhere nothing changes. Costs
    the memory of the weights it loads, until it exits.

    >>> with readable(torch.nn.Linear(2, 2)):
    ...     pass
    """
    if not is_dispatched(model):
        yield
        return
    from accelerate.utils import align_module_device, has_offloaded_params

    with contextlib.ExitStack() as stack:
        for module in getattr(model, "original_model", model).modules():
            if has_offloaded_params(module):
                stack.enter_context(align_module_device(module))
        yield


@contextlib.contextmanager
def refusals():
    """accelerate's and transformers' refusals of a placement (a map that needs a disk it was
    not given, a device that is not there) as one :class:`IhprobeError` line; transformers'
    notice that offloaded parameters sit on the meta device (they are meant to) is not logged."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    except (ValueError, RuntimeError, AssertionError) as err:
        text = " ".join(str(err).split())
        if "offload" in text or "device" in text:
            raise IhprobeError(
                f"the device map cannot place this model ({text[:160]}); raise max_memory, "
                "pass offload_folder, or name devices that exist."
            ) from err
        raise
    finally:
        hf_logging.set_verbosity(level)


def check_bridgeable(model) -> None:
    """One line for a placement TransformerLens's bridge refuses: a map that mixes GPUs with the
    CPU or the disk (its own test, ``is_mixed_offload_gpu``, so a release that lifts the rule
    lifts this line too). All GPUs, or the CPU and the disk alone, are bridged.

    >>> check_bridgeable(type("M", (), {"hf_device_map": {"embed": 0, "h.0": "cpu"}})())
    Traceback (most recent call last):
    ...
    ihprobe.core.errors.IhprobeError: this device map puts 1 module on a GPU and 1 on the CPU or disk, which TransformerLens's bridge does not take; raise the GPUs' max_memory so the model fits on them (several GPUs add up), or place it over the CPU and the disk alone (a dict device_map, or CUDA_VISIBLE_DEVICES='').
    """  # noqa: E501
    from transformer_lens.utilities import multi_gpu

    found = device_map_of(model)
    if not found or not multi_gpu.is_mixed_offload_gpu(found.values()):
        return
    hosts = sum(str(d) in HOSTS for d in found.values())
    gpus = len(found) - hosts
    raise IhprobeError(
        f"this device map puts {gpus} module{'s' * (gpus != 1)} on a GPU and {hosts} on the CPU "
        "or disk, which TransformerLens's bridge does not take; raise the GPUs' max_memory so "
        "the model fits on them (several GPUs add up), or place it over the CPU and the disk "
        "alone (a dict device_map, or CUDA_VISIBLE_DEVICES='')."
    )


def refuse_dispatched(model, what: str) -> None:
    """One line when ``what`` cannot run on a dispatched model."""
    if is_dispatched(model):
        raise IhprobeError(
            f"{what} does not run on a model placed by a device map; load each checkpoint "
            "with ihprobe.load(..., device_map=...) instead."
        )
