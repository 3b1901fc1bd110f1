"""Builders the test modules share: tiny random checkpoints, fake runs, a model trained on
periodic rows, the check that the CLI refuses with one line, a law-study results frame. Fixtures
that wrap them live in ``conftest.py``; test modules import from here, never from one another."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch

from ihprobe.core.standin import id_tokenizer

ARCHS = ("gpt2", "gpt-neox", "llama")


class NetworkBlocked(RuntimeError):
    """Raised by the suite's socket guard (conftest.py) when a test tries to go online."""


def tiny_hf_model(
    arch: str,
    *,
    vocab_size: int = 512,
    layers: int = 2,
    heads: int = 4,
    d_model: int = 64,
    context: int = 128,
    seed: int = 0,
):
    """A randomly initialised HF causal LM of one of ``ARCHS`` (llama with grouped KV heads)."""
    from transformers import (
        GPT2Config,
        GPT2LMHeadModel,
        GPTNeoXConfig,
        GPTNeoXForCausalLM,
        LlamaConfig,
        LlamaForCausalLM,
    )

    torch.manual_seed(seed)
    if arch == "gpt2":
        cfg = GPT2Config(
            vocab_size=vocab_size,
            n_embd=d_model,
            n_layer=layers,
            n_head=heads,
            n_positions=context,
            bos_token_id=0,
            eos_token_id=0,
        )
        return GPT2LMHeadModel(cfg).eval()
    if arch == "gpt-neox":
        cfg = GPTNeoXConfig(
            vocab_size=vocab_size,
            hidden_size=d_model,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=4 * d_model,
            max_position_embeddings=context,
            bos_token_id=0,
            eos_token_id=0,
        )
        return GPTNeoXForCausalLM(cfg).eval()
    if arch == "llama":
        cfg = LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=d_model,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=max(1, heads // 2),
            intermediate_size=2 * d_model,
            max_position_embeddings=context,
            bos_token_id=0,
            eos_token_id=0,
            pad_token_id=0,
        )
        return LlamaForCausalLM(cfg).eval()
    raise ValueError(arch)


def hf_prefix_matching(hf_model, tokens: torch.Tensor) -> torch.Tensor:
    """[layer, head] prefix matching of ``[s, s]`` rows from HF's own eager attention weights:
    the mean attention from each second-half token to the token after its first occurrence."""
    n = tokens.shape[1] // 2
    hf_model.set_attn_implementation("eager")
    with torch.no_grad():
        attentions = torch.stack(hf_model(tokens, output_attentions=True).attentions)
    query = torch.arange(n, 2 * n)
    return attentions[:, :, :, query, query - n + 1].mean(dim=(1, 3))


def save_checkpoint(model, directory: Path, tokenizer=None) -> Path:
    """``model`` (and ``tokenizer``) saved as an HF checkpoint directory."""
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    if tokenizer is not None:
        tokenizer.save_pretrained(directory)
    return directory


def run_checkpoint(run: Path, step: int, seed: int, tokenizer) -> Path:
    """One small random checkpoint of the run ``tiny-run`` (64 tokens per update) at ``step``."""
    directory = save_checkpoint(
        tiny_hf_model("gpt-neox", seed=seed, d_model=32, context=32),
        run / "checkpoints" / f"step-{step:06d}",
        tokenizer,
    )
    meta = {"step": step, "tokens": step * 64, "run": "tiny-run", "batch_size": 2, "context": 32}
    (directory / "ihprobe.json").write_text(json.dumps(meta))
    return directory


def fake_run(root: Path, steps) -> Path:
    """A run directory as ``ihprobe train`` leaves it, with a random checkpoint per step."""
    for i, step in enumerate(steps):
        directory = save_checkpoint(
            tiny_hf_model("gpt-neox", vocab_size=64, context=64, seed=i),
            root / "checkpoints" / f"step-{step:06d}",
            id_tokenizer(64),
        )
        meta = {"step": step, "tokens": step * 1024, "run": "fake"}
        (directory / "ihprobe.json").write_text(json.dumps(meta))
    (root / "run.json").write_text("{}")
    return root


# A 2-layer GPT-NeoX trained on periodic rows grows an induction head (tests/test_probes_trained.py)
VOCAB, CONTEXT, BATCH = 128, 64, 32


def periodic_rows(generator: torch.Generator) -> torch.Tensor:
    """Random tokens repeating with a period drawn per row from 8..32: only induction (copy
    what followed the earlier occurrence) solves every row; fixed offsets do not."""
    period = torch.randint(8, 33, (BATCH, 1), generator=generator)
    base = torch.randint(0, VOCAB, (BATCH, 32), generator=generator)
    return base.gather(1, torch.arange(CONTEXT) % period)


def train_two_layer(max_updates=2500, target_loss=2.8, *, model=None, seed=0):
    """Train ``model`` (default: a fresh 2-layer GPT-NeoX) on periodic rows drawn with ``seed``."""
    if model is None:
        model = tiny_hf_model("gpt-neox", vocab_size=VOCAB, context=CONTEXT)
    model.train()
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(seed)
    recent = []
    for _ in range(max_updates):
        rows = periodic_rows(generator)
        loss = model(rows, labels=rows).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        recent = (recent + [loss.item()])[-50:]
        if len(recent) == 50 and sum(recent) / 50 < target_loss:  # past the phase change
            break
    return model.eval()


DEVICES = ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)  # cuda joins where present


# calls that move or copy between devices, which CUDA allows too
INDEXING = {"__getitem__", "__setitem__"}
MOVES = {"to", "copy_", "set_", "_has_compatible_shallow_copy_type", "__set__", "__get__"}


class SameDevice(torch.overrides.TorchFunctionMode):
    """CUDA's rule on any device: an op whose tensors sit on two devices raises, as on a GPU
    (a 0-dim CPU tensor may join any device, as torch allows). The ``meta`` device is lenient
    about CPU tensors; under this mode it stands in for a GPU on a machine without one."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") in MOVES:
            return func(*args, **kwargs)
        if getattr(func, "__name__", "") in INDEXING:  # CPU indices may index any device
            target, index, *value = args
            leaves = [target, *value] + [
                t
                for t in torch.utils._pytree.tree_leaves(index)
                if isinstance(t, torch.Tensor) and t.device.type != "cpu"
            ]
        else:
            leaves = torch.utils._pytree.tree_leaves((args, kwargs))
        found = {
            str(t.device)
            for t in leaves
            if isinstance(t, torch.Tensor) and not (t.device.type == "cpu" and t.dim() == 0)
        }
        if len(found) > 1:
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but {func.__name__} got "
                f"{sorted(found)}"
            )
        return func(*args, **kwargs)


def one_line(call) -> str:
    """The message of the :class:`IhprobeError` that ``call()`` raises, checked to be one line."""
    from ihprobe.core.errors import IhprobeError

    with pytest.raises(IhprobeError) as err:
        call()
    message = str(err.value)
    assert message and "\n" not in message, message
    return message


# A training config that trains in well under a second: 1 layer, d_model 16, B=4, C=16.
TINY_TRAIN = dict(
    producer="iid",
    producer_options={"vocab_size": 64},
    layers=1,
    heads=2,
    d_model=16,
    context=16,
    batch_size=4,
    steps=8,
    checkpoints="linear",
    n_checkpoints=2,
    log_every=2,
    progress=False,
    device="cpu",
)


def valid_checkpoint(directory: Path, vocab: int = 64) -> Path:
    """A valid tiny GPT-NeoX checkpoint with a tokenizer (so loading prints no warning): the
    intact copy that the hostile-input tests break one way each."""
    hf = tiny_hf_model("gpt-neox", vocab_size=vocab, d_model=32, context=64)
    return save_checkpoint(hf, directory, id_tokenizer(vocab))


def edit_config(ckpt: Path, **changes) -> None:
    """Update ``ckpt/config.json`` with ``changes``."""
    config = json.loads((ckpt / "config.json").read_text())
    config.update(changes)
    (ckpt / "config.json").write_text(json.dumps(config))


def raw_safetensors(file: Path, header, data: bytes = b"", length: int | None = None) -> None:
    """Write ``file`` as safetensors with this ``header`` (a dict, or raw bytes) and ``data``;
    ``length`` overrides the header length the file claims."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    file.write_bytes(struct.pack("<Q", len(text) if length is None else length) + text + data)


def file_times(root: Path) -> dict[str, int]:
    """Every path under ``root`` and its modification time (what ``cli_refused`` compares)."""
    return {str(p.relative_to(root)): p.lstat().st_mtime_ns for p in sorted(root.rglob("*"))}


def cli_refused(argv: list[str], tmp_path: Path, capsys, monkeypatch, match: str) -> str:
    """Run the CLI in ``tmp_path/cwd``; check exit 2, one clean stderr line, no stray files."""
    from ihprobe.cli import main

    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    monkeypatch.chdir(cwd)
    out = tmp_path / "out"
    before = {k: v for k, v in file_times(tmp_path).items() if not k.startswith("out")}
    capsys.readouterr()
    try:
        code = main([*argv, "--out", str(out)] if argv[0] in ("scan", "ablate") else argv)
    except SystemExit as exit_:  # argparse
        code = exit_.code
    captured = capsys.readouterr()
    after = {k: v for k, v in file_times(tmp_path).items() if not k.startswith("out")}
    lines = captured.err.strip().splitlines()
    assert code == 2, captured.err
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert match.lower() in lines[0].lower(), lines[0]
    assert after == before, "files written or changed outside the output directory"
    assert not [p for p in tmp_path.rglob(".tmp-*")], "temporary files left behind"
    return lines[0]


def blank_gpt2(layers: int, heads: int, d_head: int, vocab: int, context: int) -> tuple:
    """A GPT-2 (d_model ``4 * d_head``) for planting circuits by hand, and its state dict with
    every weight zero but: the token one-hot in residual dims ``0..d_head``, the position in
    the next ``d_head``, unit LayerNorm gains (one-hot: ``vocab == context == d_head``). Load
    the state once the circuit is written.

    >>> model, state = blank_gpt2(1, 2, 4, vocab=4, context=4)
    >>> state["transformer.wte.weight"][2, :8].tolist()
    [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    """
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(
        vocab_size=vocab,
        n_embd=4 * d_head,
        n_layer=layers,
        n_head=heads,
        n_positions=context,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=0,
    )
    model = GPT2LMHeadModel(cfg).eval()
    state = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    eye = torch.eye(d_head)
    state["transformer.wte.weight"][:, :d_head] = eye
    state["transformer.wpe.weight"][:, d_head : 2 * d_head] = eye
    for name in state:
        if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
            state[name].fill_(1.0)
    return model, state
