"""The guide's "Coming from TransformerLens 2/3" example (docs/guide/from-transformerlens.md) runs
as written on what ``ihprobe.load`` returns (a checkpoint written here stands in for the demo's)."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from ihprobe.core.standin import id_tokenizer
from tests.helpers import save_checkpoint, tiny_hf_model

PAGE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "from-transformerlens.md"


def example() -> str:
    """The python block of the guide's TransformerLens page."""
    return re.search(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S).group(1)


def test_the_transformer_lens_example_runs(tmp_path):
    model = tiny_hf_model("gpt-neox", vocab_size=64, heads=4, context=32, seed=1)
    checkpoint = save_checkpoint(model, tmp_path, id_tokenizer(64))
    code = example()
    assert "runs/demo/main/checkpoints/step-000500" in code
    scope: dict = {}
    exec(code.replace("runs/demo/main/checkpoints/step-000500", str(checkpoint)), scope)  # noqa: S102
    loaded = scope["model"]
    assert scope["pattern"].shape == (2, loaded.cfg.n_heads, 16, 16)
    assert scope["z"].shape == (2, 16, loaded.cfg.n_heads, loaded.cfg.d_head)
    # the hook ran: zeroing a layer-0 head changes the logits
    assert not torch.allclose(scope["logits"], scope["ablated"])
