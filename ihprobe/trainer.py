"""The minimal trainer: a decoder-only HF model from scratch on any producer, checkpoints on a
token schedule, exact resume, live probes, and DDP under ``torchrun``.

>>> run = train(TrainConfig(out="runs/demo", producer="iid", steps=200))   # doctest: +SKIP
>>> [c.tokens for c in ihprobe.checkpoints(run)][:3]                        # doctest: +SKIP
[0, 2048, 4096]

A run directory holds::

    run.json                 the config and what it resolved to (updates, schedule, model, data)
    metrics.jsonl            one line per logged update: step, tokens, loss, lr, grad_norm, data
    probes.jsonl             with live probes: step, tokens, max_prefix_matching, ar_accuracy
    checkpoints/step-NNNNNN/ HF directories (config, safetensors, tokenizer) + ihprobe.json
    state/step-NNNNNN.pt     the latest training state (weights, optimiser, RNG) for --resume,
                             written at every checkpoint and every ``state_every`` updates

Under ``torchrun --nproc_per_node N -m ihprobe train ...`` each rank takes its rows of the same
global batch ``producer.sample(step)``, so ``batch_size`` stays the sequences per update.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int

from ihprobe.errors import IhprobeError
from ihprobe.models import CHECKPOINT_META, RUN_META
from ihprobe.schedule import CHECKPOINT_SCHEDULES, LR_SCHEDULES, checkpoint_steps, learning_rate

log = logging.getLogger(__name__)

DEFAULT_STEPS = 2000  # updates when neither steps nor tokens is given
STATE_DIR = "state"
METRICS = "metrics.jsonl"
PROBES = "probes.jsonl"
# Fields that may change when a run is resumed: they do not change the weights it ends with.
RESUMABLE_CHANGES = (
    "resume",
    "device",
    "live_probes",
    "probe_batch",
    "progress",
    "log_every",
    "state_every",
)


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a training run. Defaults: the tiny model of DESIGN.md's sizing.

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
    d_mlp: int | None = None  # default 4 * d_model
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
    device: str = "auto"  # "auto" (cuda when available) | "cpu" | "cuda" | "cuda:1" ...
    log_every: int = 10  # updates between metrics.jsonl lines
    state_every: int = 1000  # updates between training states for --resume (0: checkpoints only)
    probe_batch: int = 20  # rows of repeated random tokens for the live probes
    progress: bool = True  # tqdm bar on rank 0

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

    def to_json(self) -> dict:
        data = asdict(self)
        if not isinstance(self.checkpoints, str):
            data["checkpoints"] = [int(c) for c in self.checkpoints]
        return data


def load_config(run_dir: str | os.PathLike, **overrides) -> TrainConfig:
    """The config of an existing run (its ``run.json``), with ``overrides`` applied.

    Example:
        >>> train(load_config("runs/demo", resume=True))    # doctest: +SKIP
    """
    path = Path(run_dir) / RUN_META
    if not path.is_file():
        raise IhprobeError(f"{path} does not exist: {run_dir} is not a run directory of ihprobe.")
    data = json.loads(path.read_text())["config"]
    if isinstance(data.get("checkpoints"), list):
        data["checkpoints"] = tuple(data["checkpoints"])
    known = {f.name for f in fields(TrainConfig)}
    return TrainConfig(**{k: v for k, v in {**data, **overrides}.items() if k in known})


# ----------------------------------------------------------------------------- model


@dataclass(frozen=True)
class Architecture:
    """How TrainConfig's sizes map onto one HF config class."""

    config_class: str  # name in `transformers`
    fields: dict[str, str]  # TrainConfig name -> HF config field
    fixed: dict = field(default_factory=dict)  # HF config values every run of this arch gets


_COMMON = {"vocab_size": "vocab_size", "bos": "bos_token_id", "eos": "eos_token_id"}
ARCHITECTURES: dict[str, Architecture] = {
    "gpt-neox": Architecture(
        "GPTNeoXConfig",
        {
            **_COMMON,
            "d_model": "hidden_size",
            "layers": "num_hidden_layers",
            "heads": "num_attention_heads",
            "d_mlp": "intermediate_size",
            "context": "max_position_embeddings",
        },
    ),
    "llama": Architecture(
        "LlamaConfig",  # RoPE, SwiGLU, RMSNorm pre-norm, untied embeddings ([B])
        {
            **_COMMON,
            "d_model": "hidden_size",
            "layers": "num_hidden_layers",
            "heads": "num_attention_heads",
            "kv_heads": "num_key_value_heads",
            "d_mlp": "intermediate_size",
            "context": "max_position_embeddings",
        },
        {"tie_word_embeddings": False},
    ),
    "gpt2": Architecture(
        "GPT2Config",
        {
            **_COMMON,
            "d_model": "n_embd",
            "layers": "n_layer",
            "heads": "n_head",
            "d_mlp": "n_inner",
            "context": "n_positions",
        },
        {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0},  # no dropout: exact resume
    ),
}


def model_sizes(config: TrainConfig, vocab_size: int, special: dict | None = None) -> dict:
    """The architecture-independent description of the model a config trains."""
    eos = (special or {}).get("eos", 0)
    return {
        "arch": config.arch,
        "layers": config.layers,
        "heads": config.heads,
        "kv_heads": config.kv_heads or config.heads,
        "d_model": config.d_model,
        "d_mlp": config.d_mlp or 4 * config.d_model,
        "context": config.context,
        "vocab_size": vocab_size,
        "bos": eos,
        "eos": eos,
    }


def build_model(config: TrainConfig, vocab_size: int, special: dict | None = None):
    """A freshly initialised HF causal LM (seeded by ``config.seed``) with SDPA attention.

    Example:
        >>> m = build_model(TrainConfig(arch="llama", kv_heads=2), vocab_size=128)
        >>> type(m).__name__, m.config.num_key_value_heads
        ('LlamaForCausalLM', 2)
    """
    import transformers
    from transformers import AutoModelForCausalLM

    check_config(config)
    arch = ARCHITECTURES[config.arch]
    sizes = model_sizes(config, vocab_size, special)
    hf_config = getattr(transformers, arch.config_class)(
        **{hf: sizes[name] for name, hf in arch.fields.items()}, **arch.fixed
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        return AutoModelForCausalLM.from_config(hf_config, attn_implementation="sdpa")


def causal_lm_loss(model, tokens: Int[torch.Tensor, "batch pos"]) -> Float[torch.Tensor, ""]:
    """Mean next-token cross-entropy over every position of ``tokens`` but the last.

    Example:
        >>> loss = causal_lm_loss(build_model(TrainConfig(), 64), torch.zeros(2, 8).long())
        >>> loss.shape
        torch.Size([])
    """
    logits = model(input_ids=tokens, use_cache=False).logits
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), tokens[:, 1:].flatten())


# ----------------------------------------------------------------------------- checks


def check_config(config: TrainConfig, world_size: int = 1) -> None:
    """Raise :class:`IhprobeError` for a config that cannot train, before anything runs."""
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
    if config.d_mlp is not None and config.d_mlp < 1:
        problems.append(f"d_mlp={config.d_mlp} must be at least 1")
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


def _divisor_near(n: int, k: int) -> int:
    return min((d for d in range(1, n + 1) if n % d == 0), key=lambda d: abs(d - k))


def make_run_producer(config: TrainConfig):
    """The config's producer, checked to deliver ``[batch_size, context]`` ids in its vocab."""
    from ihprobe.data import make_producer

    producer = make_producer(
        config.producer,
        batch_size=config.batch_size,
        context=config.context,
        seed=config.seed,
        total_steps=config.total_steps,
        **config.producer_options,
    )
    tokens = producer.sample(0).tokens
    if tuple(tokens.shape) != (config.batch_size, config.context):
        raise IhprobeError(
            f"producer {config.producer!r} gives batches of shape {tuple(tokens.shape)}, not "
            f"(batch_size, context) = ({config.batch_size}, {config.context}); lower --context "
            "to what it provides or change its options."
        )
    if tokens.dtype != torch.long or tokens.min() < 0 or tokens.max() >= producer.vocab_size:
        raise IhprobeError(
            f"producer {config.producer!r} gives ids outside 0..{producer.vocab_size - 1}."
        )
    return producer


# ----------------------------------------------------------------------------- processes


@dataclass(frozen=True)
class World:
    """This process's place in a (possibly single-process) DDP job."""

    rank: int = 0
    size: int = 1
    device: torch.device = torch.device("cpu")

    @property
    def main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.size > 1:
            torch.distributed.barrier()

    def mean(self, value: torch.Tensor) -> torch.Tensor:
        if self.size > 1:
            value = value.clone()
            torch.distributed.all_reduce(value)
            value /= self.size
        return value


def _world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def _resolve_device(device: str, local_rank: int) -> torch.device:
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise IhprobeError(f"device={device!r} but no CUDA device is available; use cpu.")
        if dev.index is None and _world_size() > 1:
            dev = torch.device("cuda", local_rank)
    return dev


@contextlib.contextmanager
def _world(device: str):
    """Join the torchrun job when WORLD_SIZE > 1 (gloo on CPU, nccl on GPU); leave it at exit."""
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = _resolve_device(device, local_rank)
    if _world_size() == 1:
        yield World(device=dev)
        return
    import torch.distributed as dist

    owned = not dist.is_initialized()
    if owned:
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    try:
        yield World(dist.get_rank(), dist.get_world_size(), dev)
    finally:
        if owned:
            dist.destroy_process_group()


# ----------------------------------------------------------------------------- run directory


class RunDir:
    """The files of one run: paths, atomic writes, and what a resume finds there."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.checkpoints = self.root / "checkpoints"
        self.state = self.root / STATE_DIR

    def checkpoint(self, step: int) -> Path:
        return self.checkpoints / f"step-{step:06d}"

    def state_file(self, step: int) -> Path:
        return self.state / f"step-{step:06d}.pt"

    def exists(self) -> bool:
        return (self.root / RUN_META).is_file() or self.checkpoints.is_dir()

    def latest_state(self) -> Path | None:
        found = sorted(self.state.glob("step-*.pt")) if self.state.is_dir() else []
        return found[-1] if found else None

    def remove_partial_writes(self) -> None:
        """Temporary directories and files left by a process killed while writing."""
        for parent in (self.checkpoints, self.state):
            for tmp in parent.glob(".tmp-*") if parent.is_dir() else []:
                log.info("removing %s, left by an interrupted write", tmp)
                shutil.rmtree(tmp) if tmp.is_dir() else tmp.unlink()

    def write_json(self, name: str, data: dict) -> None:
        _atomic_text(self.root / name, json.dumps(data, indent=2) + "\n")

    def append(self, name: str, record: dict) -> None:
        with open(self.root / name, "a") as fh:
            fh.write(json.dumps(record) + "\n")

    def records(self, name: str) -> list[dict]:
        """The complete lines of a JSONL file (a line cut by a kill is skipped)."""
        path = self.root / name
        lines = path.read_text().splitlines() if path.is_file() else []
        out = []
        for line in lines:
            with contextlib.suppress(json.JSONDecodeError):
                out.append(json.loads(line))
        return out

    def truncate(self, name: str, step: int) -> None:
        """Keep the lines up to ``step``: a resumed run logs the later updates again."""
        path = self.root / name
        if path.is_file():
            kept = [r for r in self.records(name) if r.get("step", 0) <= step]
            _atomic_text(path, "".join(json.dumps(r) + "\n" for r in kept))


def _atomic_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".tmp-{path.name}")
    tmp.write_text(text)
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- training


def train(config: TrainConfig) -> Path:
    """Train a model from scratch as ``config`` says and return the run directory.

    Writes step-0 and scheduled checkpoints (standard HF directories that
    ``AutoModelForCausalLM.from_pretrained`` and :func:`ihprobe.load` open), ``run.json`` and
    ``metrics.jsonl``; with ``live_probes`` also ``probes.jsonl``. With ``resume`` it continues
    the run in ``config.out`` from its latest training state and ends with the same weights as
    an uninterrupted run; a finished run returns at once.

    Raises:
        IhprobeError: a bad config (before training starts), an existing run without
            ``resume``, or a loss that became NaN/inf (the checkpoints written so far stay).

    Example:
        >>> run = train(TrainConfig(out="runs/x", producer="iid", steps=50))  # doctest: +SKIP
    """
    check_config(config, _world_size())
    producer = make_run_producer(config)
    run = RunDir(config.out)
    _check_run_dir(run, config)
    with _world(config.device) as world:
        return _Trainer(config, producer, run, world).fit()


def _check_run_dir(run: RunDir, config: TrainConfig) -> None:
    if not run.exists():
        return
    if not config.resume:
        raise IhprobeError(
            f"{run.root} already holds a run; pass --resume to continue it, or choose another "
            "--out (checkpoints are never overwritten)."
        )
    if not (run.root / RUN_META).is_file():
        raise IhprobeError(f"{run.root} has checkpoints but no {RUN_META}: cannot resume it.")
    before = json.loads((run.root / RUN_META).read_text())["config"]
    now = config.to_json()
    changed = sorted(
        k for k in now if k not in RESUMABLE_CHANGES and before.get(k, now[k]) != now[k]
    )
    if changed:
        diffs = ", ".join(f"{k}: {before.get(k)!r} -> {now[k]!r}" for k in changed)
        raise IhprobeError(
            f"cannot resume {run.root} with a different config ({diffs}); resume with the same "
            "settings (ihprobe.trainer.load_config reads them) or start a new --out."
        )


class _Trainer:
    """One training run: the model, optimiser and the loop. Rank 0 writes every file."""

    def __init__(self, config: TrainConfig, producer, run: RunDir, world: World):
        self.config, self.producer, self.run, self.world = config, producer, run, world
        self.total = config.total_steps
        self.schedule = checkpoint_steps(
            config.checkpoints,
            total=self.total,
            tokens_per_update=config.tokens_per_update,
            n=config.n_checkpoints,
        )
        self.sizes = model_sizes(config, producer.vocab_size, producer.special)
        self.raw = build_model(config, producer.vocab_size, producer.special).to(world.device)
        self.raw.train()
        self.model = self.raw
        if world.size > 1:
            from torch.nn.parallel import DistributedDataParallel

            ids = [world.device.index] if world.device.type == "cuda" else None
            self.model = DistributedDataParallel(self.raw, device_ids=ids)
        self.optimizer = _adamw(self.raw, config)
        self.last_loss: float | None = None
        self.probe_model = None
        self.probed: set[int] = set()
        self.bad = torch.zeros((), dtype=torch.bool, device=world.device)

    # -- the loop

    def fit(self) -> Path:
        start = self._start()
        if start == self.total and self.run.checkpoint(self.total).is_dir():
            return self.run.root
        saves = set(self.schedule)
        bar = _progress(self.total, start, self.config.progress and self.world.main)
        self.window = _Window(start, self.world.device)
        for step in range(start, self.total):
            if step in saves:
                self.window.pause(self._save(step))
            elif self.config.state_every and step > start and step % self.config.state_every == 0:
                self.window.pause(self._save(step, checkpoint=False))
            lr, norm, info = self._update(step)
            done = step + 1
            if done % self.config.log_every == 0 or done == self.total:
                self._log(done, lr, norm, info, bar)
            bar.update(1)
        self._save(self.total)
        bar.close()
        return self.run.root

    def _update(self, step: int) -> tuple[float, torch.Tensor, dict]:
        """One optimiser update on this rank's rows of the global batch of ``step``."""
        cfg, world = self.config, self.world
        lr = learning_rate(
            step, lr=cfg.lr, total=self.total, warmup=cfg.warmup, schedule=cfg.schedule
        )
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        batch = self.producer.sample(step)
        rows = cfg.batch_size // world.size
        mine = batch.tokens[world.rank * rows : (world.rank + 1) * rows].to(world.device)
        micros = mine.chunk(cfg.grad_accum)  # DDP syncs gradients on the last one only
        for i, micro in enumerate(micros):
            sync = i == len(micros) - 1 or world.size == 1
            with contextlib.nullcontext() if sync else self.model.no_sync():
                loss = causal_lm_loss(self.model, micro)
                (loss / cfg.grad_accum).backward()
            self.window.add(loss.detach() / cfg.grad_accum)
            self.bad |= ~torch.isfinite(loss.detach())
        norm = torch.nn.utils.clip_grad_norm_(
            self.raw.parameters(), cfg.grad_clip or math.inf, foreach=True
        )
        self.bad |= ~torch.isfinite(norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return lr, norm, batch.info

    def _log(self, done: int, lr: float, norm: torch.Tensor, info: dict, bar) -> None:
        """Append the metrics of the updates since the last log; refresh the progress bar."""
        self._check_finite(done)
        loss = self.world.mean(self.window.mean(done)).item()
        speed = self.window.tokens_per_s(done, self.config.tokens_per_update)
        self.last_loss = loss
        if self.world.main:
            record = {
                "step": done,
                "tokens": done * self.config.tokens_per_update,
                "loss": loss,
                "lr": lr,
                "grad_norm": norm.item(),
                "tokens_per_s": speed,
                "data": {k: float(v) for k, v in info.items()},
            }
            self.run.append(METRICS, record)
        bar.set_postfix(self._postfix(loss, speed), refresh=False)
        self.window.reset(done)

    def _check_finite(self, step: int) -> None:
        bad = self.world.mean(self.bad.float()) > 0
        if bad.item():
            kept = sorted(self.run.checkpoints.glob("step-*"))
            last = kept[-1] if kept else "none"
            raise IhprobeError(
                f"the loss or gradient became NaN/inf by update {step}; training stopped. The "
                f"last good checkpoint is {last}. Lower --lr, lengthen the warm-up or clip "
                "gradients, then start a new --out."
            )

    def _postfix(self, loss: float, speed: float) -> dict:
        out = {"loss": f"{loss:.3f}", "tok/s": f"{speed:,.0f}"}
        probes = self.run.records(PROBES) if self.config.live_probes and self.world.main else []
        if probes:
            out["max PS"] = f"{probes[-1]['max_prefix_matching']:.2f}"
        return out

    # -- start and resume

    def _start(self) -> int:
        """The first update to run: 0 for a new run, the saved step for a resumed one."""
        latest = self.run.latest_state() if self.config.resume else None
        if latest is None and any(self.run.checkpoints.glob("step-*")):
            raise IhprobeError(
                f"{self.run.root} has checkpoints but no training state in {self.run.state} to "
                "resume from; start a new --out."
            )
        if self.world.main:
            self.run.root.mkdir(parents=True, exist_ok=True)
            self.run.remove_partial_writes()
            if latest is None:
                self.run.write_json(RUN_META, self._run_meta())
        self.world.barrier()
        if latest is None:
            return 0
        state = torch.load(latest, map_location=self.world.device, weights_only=True)
        self.raw.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng_cpu"].cpu())
        if "rng_cuda" in state and self.world.device.type == "cuda":
            torch.cuda.set_rng_state(state["rng_cuda"].cpu(), self.world.device)
        self.last_loss = state["loss"].item() if state["loss"].numel() else None
        step = int(state["step"])
        if self.world.main:  # the logs continue from the state as if never interrupted
            self.run.truncate(METRICS, step)
            self.run.truncate(PROBES, step)
            self.probed = {r["step"] for r in self.run.records(PROBES)}
        log.info("resuming %s from update %d", self.run.root, step)
        self.world.barrier()
        return step

    def _run_meta(self) -> dict:
        import transformers

        from ihprobe import __version__

        return {
            "config": self.config.to_json(),
            "steps": self.total,
            "tokens": self.total * self.config.tokens_per_update,
            "tokens_per_update": self.config.tokens_per_update,
            "checkpoint_steps": self.schedule,
            "model": self.sizes,
            "hf_config": self.raw.config.to_dict(),
            "data": {"producer": self.config.producer, **self.producer.config()},
            "world_size": self.world.size,
            "versions": {
                "ihprobe": __version__,
                "torch": torch.__version__,
                "transformers": transformers.__version__,
            },
        }

    # -- checkpoints

    def _save(self, step: int, checkpoint: bool = True) -> float:
        """State, checkpoint and live probes for ``step`` (those not there yet); seconds taken.

        The state goes first: a kill between the two leaves a state that the resumed run
        continues from, and it then writes the missing checkpoint.
        """
        begin = time.perf_counter()
        self._check_finite(step)
        if self.world.main:
            if not self.run.state_file(step).is_file():
                self._write_state(step)
            if checkpoint and not self.run.checkpoint(step).is_dir():
                self._write_checkpoint(step)
            if checkpoint and self.config.live_probes and step not in self.probed:
                self._probe(step)
        self.world.barrier()
        return time.perf_counter() - begin

    def _write_state(self, step: int) -> None:
        """Weights, optimiser and RNG as plain tensors (``torch.load(weights_only=True)``)."""
        state = {
            "step": torch.tensor(step),
            "model": self.raw.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "rng_cpu": torch.get_rng_state(),
            "loss": torch.tensor([] if self.last_loss is None else [self.last_loss]),
        }
        if self.world.device.type == "cuda":
            state["rng_cuda"] = torch.cuda.get_rng_state(self.world.device)
        self.run.state.mkdir(parents=True, exist_ok=True)
        tmp = self.run.state / f".tmp-{step:06d}.pt"
        torch.save(state, tmp)
        os.replace(tmp, self.run.state_file(step))
        for old in self.run.state.glob("step-*.pt"):  # only the latest is needed to resume
            if old != self.run.state_file(step):
                old.unlink()

    def _write_checkpoint(self, step: int) -> None:
        """An HF directory written under a temporary name and renamed when complete."""
        final = self.run.checkpoint(step)
        self.run.checkpoints.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=self.run.checkpoints))
        with _quiet_transformers():
            self.raw.save_pretrained(tmp)
        self._save_tokenizer(tmp)
        meta = {
            "step": step,
            "tokens": step * self.config.tokens_per_update,
            "batch_size": self.config.batch_size,
            "context": self.config.context,
            "run": self.run.root.name,
            "model": self.sizes,
            "data": {"producer": self.config.producer, **self.producer.config()},
            "producer_step": step,  # the producer is a pure function of (seed, step)
            "seed": self.config.seed,
            "loss": self.last_loss,  # mean training loss of the last logged updates
            "lr": self.config.lr,
            "world_size": self.world.size,
        }
        (tmp / CHECKPOINT_META).write_text(json.dumps(meta, indent=2) + "\n")
        os.rename(tmp, final)  # fails rather than replace an existing checkpoint

    def _save_tokenizer(self, directory: Path) -> None:
        if self.producer.tokenizer() is not None:
            self.producer.save_tokenizer(directory)
            return
        from ihprobe.data.tokenizer import id_tokenizer

        id_tokenizer(self.producer.vocab_size).save_pretrained(str(directory))

    def _probe(self, step: int) -> None:
        """Max prefix-matching score and AR accuracy of checkpoint ``step``."""
        from ihprobe.models import load, load_weights
        from ihprobe.probes.battery import scan

        ckpt = self.run.checkpoint(step)
        # probing must not move the training RNG
        with torch.random.fork_rng(devices=[]), _quiet_transformers():
            if self.probe_model is None:
                self.probe_model = load(ckpt, device=self.world.device)
            else:
                load_weights(self.probe_model, ckpt)
            scores = scan(
                self.probe_model,
                metrics=["prefix_matching", "ar_accuracy"],
                batch=self.config.probe_batch,
            )
        ps = scores.head["prefix_matching"]
        best = int(ps.argmax())
        record = {
            "step": step,
            "tokens": step * self.config.tokens_per_update,
            "max_prefix_matching": float(ps.max()),
            "top_head": [best // ps.shape[1], best % ps.shape[1]],
            "ar_accuracy": float(scores.model["ar_accuracy"]),
        }
        self.run.append(PROBES, record)
        self.probed.add(step)


class _Window:
    """Loss sum and training time since the last log (time spent saving does not count)."""

    def __init__(self, start: int, device: torch.device):
        self.loss = torch.zeros((), device=device)
        self.reset(start)

    def reset(self, step: int) -> None:
        self.loss.zero_()
        self.start, self.paused, self.tick = step, 0.0, time.perf_counter()

    def add(self, loss: torch.Tensor) -> None:
        self.loss += loss

    def pause(self, seconds: float) -> None:
        self.paused += seconds

    def mean(self, step: int) -> torch.Tensor:
        return self.loss / max(1, step - self.start)

    def tokens_per_s(self, step: int, tokens_per_update: int) -> float:
        elapsed = time.perf_counter() - self.tick - self.paused
        return (step - self.start) * tokens_per_update / max(elapsed, 1e-9)


def _adamw(model, config: TrainConfig) -> torch.optim.AdamW:
    """Fused AdamW (0.9, 0.999); weight decay on matrices only, as in nanoGPT."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": config.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=config.lr, betas=(0.9, 0.999), fused=True)


@contextlib.contextmanager
def _quiet_transformers():
    """Silence transformers' own progress bars (one per saved checkpoint otherwise)."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def _progress(total: int, start: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=start, disable=not enabled, unit="upd", dynamic_ncols=True)
