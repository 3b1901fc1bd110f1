"""Loss by token position, on natural text and on repeated random tokens, across a run.

Olsson et al. (2022) saw induction heads form as a "bump": the loss on late tokens of a context
drops below the loss on early ones within a short stretch of training. On repeated random tokens
``[s, s]`` the second half becomes predictable exactly when an induction head copies from the
first: its loss falls from about ``ln(vocab)`` to near 0, while the first half stays at
``ln(vocab)``.

``position`` is the index of the predicted token (1 .. pos - 1): the loss there is that of the
prediction made at ``position - 1`` from the tokens before it.

>>> frame = loss_by_position(model)                                        # doctest: +SKIP
>>> frame.groupby("input").loss.mean()                                     # doctest: +SKIP
>>> sweep = loss_by_position_trajectory("runs/demo/main")                    # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pandas as pd
import torch
from jaxtyping import Float, Int

from ihprobe.core import calls, checks
from ihprobe.io.any_model import as_model
from ihprobe.io.models import provenance
from ihprobe.io.sources import sources_of
from ihprobe.probes import inputs
from ihprobe.probes.engine import Probe, reads_text, run_probe, token_rows
from ihprobe.probes.recall import token_losses
from ihprobe.series.sweep import map_checkpoints

log = logging.getLogger(__name__)

INPUTS = ("natural", "repeated")
ROWS = 16
CHUNK = 8  # rows per forward pass: every logit of a row is read


def position_losses(
    model, rows: Int[torch.Tensor, "batch pos"], chunk: int = CHUNK
) -> Float[torch.Tensor, " predicted"]:
    """Mean next-token loss over rows at every predicted position ``1 .. pos - 1``.

    Example:
        >>> position_losses(model, rows).shape                              # doctest: +SKIP
        torch.Size([63])
    """

    def score(logits, index):
        return {"losses": token_losses(logits, rows[index.to(rows.device)]).double()}

    with torch.no_grad():
        losses = run_probe(model, Probe("loss by position", rows, score), chunk=chunk)["losses"]
    return losses.mean(0).float().cpu()


def loss_by_position(
    model,
    *,
    text: str | Sequence[str] | Int[torch.Tensor, "batch pos"] | None = None,
    rows: int = ROWS,
    seed: int = 0,
) -> pd.DataFrame:
    """Loss at every position of natural text and of repeated random tokens.

    Args:
        text: natural text (documents, or token ids ``[rows, pos]``); default ihprobe's
            embedded corpus. Skipped, with a log line, for a model without a text tokenizer.
        rows: rows of each input.
        seed: seeds the repeated tokens.

    Returns:
        ``model, revision, step, tokens, input, position, loss``.

    Example:
        >>> import ihprobe
        >>> model = ihprobe.load(ihprobe.build_model(ihprobe.TrainConfig(d_model=16, heads=2), 128))
        >>> frame = loss_by_position(model, rows=2)
        >>> sorted(frame.input.unique()), "loss" in frame.columns  # no tokenizer: no natural text
        (['repeated'], True)
    """
    model = as_model(model)
    calls.arguments(model=model, rows=rows, seed=seed)
    if isinstance(text, torch.Tensor):
        checks.tokens("text", text, model)
    found = {"repeated": inputs.repeated_tokens(model, batch=rows, seed=seed)}
    if text is not None or reads_text(getattr(model, "tokenizer", None)):
        length = text.shape[-1] if isinstance(text, torch.Tensor) else model.cfg.n_ctx
        found["natural"] = token_rows(model, text, rows=rows, length=length)
    else:
        log.info("natural text skipped: the model has no text tokenizer")
    source = provenance(model)
    frames = []
    for name in INPUTS:
        if name in found:
            losses = position_losses(model, found[name])
            frames.append(
                pd.DataFrame(
                    {"input": name, "position": range(1, len(losses) + 1), "loss": losses.tolist()}
                )
            )
    frame = pd.concat(frames, ignore_index=True)
    checks.finite_result("loss_by_position", loss=frame["loss"].to_numpy())
    for column in ("tokens", "step", "revision", "model"):
        frame.insert(0, column, getattr(source, column))
    return frame


def loss_by_position_trajectory(
    source_or_sources,
    *,
    revisions: Sequence[str] | None = None,
    progress: bool = False,
    **kwargs,
) -> pd.DataFrame:
    """:func:`loss_by_position` at every checkpoint of a run, one skeleton reused throughout.

    Example:
        >>> table = loss_by_position_trajectory("runs/demo/main")            # doctest: +SKIP
    """

    def at(checkpoint, model) -> pd.DataFrame:
        frame = loss_by_position(model, **kwargs)
        frame["step"] = checkpoint.step if checkpoint.step is not None else frame["step"]
        frame["tokens"] = checkpoint.tokens if checkpoint.tokens is not None else frame["tokens"]
        return frame

    ckpts = sources_of(source_or_sources, revisions)
    swept = map_checkpoints(ckpts, at, progress=progress, desc="loss by position")
    frames = [frame for _, frame in swept]
    return pd.concat(frames, ignore_index=True)
