"""Shared fixtures: tiny checkpoints of each architecture, built offline, and a blocked network.

Every test runs with socket connections refused, so a hidden download fails loudly instead of
hanging or silently succeeding on a developer's machine.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
torch.set_num_threads(1)  # tiny models: one thread is fastest, and xdist runs two workers

ARCHS = ("gpt2", "gpt-neox", "llama")


class NetworkBlocked(RuntimeError):
    pass


@pytest.fixture(autouse=True, scope="session")
def _no_network():
    """Refuse every outgoing connection except to this machine (loopback, for Chromium)."""
    real_connect = socket.socket.connect

    def guarded(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and (host.startswith("127.") or host in ("localhost", "::1")):
            return real_connect(self, address)
        if self.family == socket.AF_UNIX:
            return real_connect(self, address)
        raise NetworkBlocked(f"tests must not use the network (tried {address!r})")

    socket.socket.connect = guarded
    yield
    socket.socket.connect = real_connect


@pytest.fixture(scope="session")
def tokenizer():
    """A byte-level BPE with 512 ids trained on Python's own documentation (EOS=0, SEP=1)."""
    from ihprobe.data.corpus import default_documents
    from ihprobe.data.tokenizer import train_bpe

    return train_bpe(default_documents(), vocab_size=512)


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


def save_checkpoint(model, directory: Path, tokenizer=None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    if tokenizer is not None:
        tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session", params=ARCHS)
def tiny_checkpoint(request, tmp_path_factory, tokenizer) -> tuple[str, Path]:
    """(arch, directory) of a saved tiny random checkpoint with a tokenizer, per architecture."""
    arch = request.param
    directory = tmp_path_factory.mktemp(f"tiny-{arch}")
    save_checkpoint(tiny_hf_model(arch), directory, tokenizer)
    return arch, directory
