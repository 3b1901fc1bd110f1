"""The tokenizer a loaded model carries: the checkpoint's own, or a stand-in on token ids.

>>> tokenizer_for(Path("runs/demo/checkpoints/step-000000"), config)       # doctest: +SKIP
"""

from __future__ import annotations

import warnings
from pathlib import Path

from transformers import AutoTokenizer

from ihprobe.core.errors import IhprobeError
from ihprobe.core.standin import id_tokenizer

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")


def on_disk(tokenizer, tmp: str):
    """A tokenizer built in memory, saved to ``tmp`` and re-read, so that it has a path
    (TransformerLens re-opens tokenizers by path)."""
    if tokenizer.init_kwargs.get("name_or_path") or tokenizer.bos_token is None:
        return tokenizer
    tokenizer.save_pretrained(tmp)
    return AutoTokenizer.from_pretrained(tmp)


def has_tokenizer(path: Path) -> bool:
    """Whether the directory ``path`` holds tokenizer files."""
    return any((path / f).is_file() for f in TOKENIZER_FILES)


def tokenizer_for(path: Path, config, trust_remote_code: bool = False):
    """The tokenizer saved in ``path``, or (with a warning) a stand-in mapping id ``i`` to
    ``"<i>"`` when there is none."""
    if not has_tokenizer(path):
        warnings.warn(  # one warning (the command line prints it as one line)
            f"{path} has no tokenizer files; the model works on token ids and a stand-in "
            "tokenizer maps id i to '<i>'. Load it with ihprobe.load(path, tokenizer=...) to use a "
            "real one.",
            stacklevel=3,
        )
        return id_tokenizer(config.vocab_size)
    try:
        return AutoTokenizer.from_pretrained(
            str(path), trust_remote_code=trust_remote_code, local_files_only=True
        )
    except Exception as err:  # noqa: BLE001 - tokenizer formats fail in many ways
        raise IhprobeError(
            f"could not read the tokenizer in {path} ({err}); load it with "
            "ihprobe.load(path, tokenizer=...) and a tokenizer of your own."
        ) from err
