"""The reference for function-vector scores: one patched forward pass per head.

Each head's patched run takes all of a task's corrupted prompts in one batch (chunked only by
the probe engine's memory budget) with the head's ``z`` (``hook_z``) at each prompt's last
position set to its clean mean; the answer's probability is read at that position. This is the
definition, with nothing shared between heads: :mod:`ihprobe.causal.fv_fast` must equal it
within float tolerance, and the benchmark (``lab/benchmarks/bench_fv.py``) times both.

>>> probs = patched_probabilities(model, prompts.corrupted, means)       # doctest: +SKIP
>>> probs.shape                        # [1 + layers * heads, prompts]     # doctest: +SKIP
torch.Size([9, 25])
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from jaxtyping import Float

from ihprobe.causal.tasks import TaskPrompts
from ihprobe.core.hooks import hook_name
from ihprobe.probes.engine import Probe, run_probe

if TYPE_CHECKING:
    from transformer_lens.model_protocol import TransformerLensModel


def answer_probability(
    logits: Float[torch.Tensor, "batch vocab"], answer: torch.Tensor
) -> Float[torch.Tensor, " batch"]:
    """The softmax probability (full vocabulary, float32) of ``answer`` per row.

    >>> answer_probability(torch.zeros(2, 4), torch.tensor([0, 3])).tolist()
    [0.25, 0.25]
    """
    probs = logits.float().softmax(-1)
    return probs.gather(-1, answer.to(logits.device).unsqueeze(-1)).squeeze(-1)


def last_token_probe(prompts: TaskPrompts, device) -> Probe:
    """A probe reading the answer's probability and HITS@1 at each prompt's last position."""
    answer = prompts.answer

    def score(logits, rows):
        at = logits[:, 0]
        a = answer[rows].to(at.device)
        target = at.gather(-1, a.unsqueeze(-1))
        return {
            "probability": answer_probability(at, a).cpu(),
            "hits": ((at > target).sum(-1) < 1).float().cpu(),
        }

    return Probe(
        prompts.task,
        prompts.tokens.to(device),
        score,
        prompts.last.unsqueeze(1).to(device),
        prompts.valid.to(device),
        True,
    )


@torch.inference_mode()
def patched_probabilities(
    model: TransformerLensModel,
    prompts: TaskPrompts,
    means: Float[torch.Tensor, "layer head d_head"],
) -> Float[torch.Tensor, "group prompt"]:
    """Row 0: the answer's probability on each prompt; row ``1 + layer * n_heads + head``: the
    same with that head's ``z`` at the last position set to ``means[layer, head]``, one forward
    pass per head.

    Example:
        >>> patched_probabilities(model, corrupted, means)[1:].shape     # doctest: +SKIP
        torch.Size([8, 25])
    """
    cfg = model.cfg
    probe = last_token_probe(prompts, cfg.device)
    last = prompts.last.to(cfg.device)
    found = [run_probe(model, probe, chunk=None)["probability"]]
    for layer in range(cfg.n_layers):
        for head in range(cfg.n_heads):
            found.append(
                run_probe(model, probe, _patch(layer, head, last, means), chunk=None)["probability"]
            )
    return torch.stack(found).double()


def _patch(layer: int, head: int, last: torch.Tensor, means: torch.Tensor):
    """The hook factory that sets one head's ``z`` at each row's last position to its mean."""

    def hooks(index, store):
        rows = index.to(last.device) % len(last)

        def hook(z, hook):
            z = z.clone()
            z[torch.arange(len(rows), device=z.device), last[rows].to(z.device), head] = means[
                layer, head
            ].to(z.device, z.dtype)
            return z

        return [(hook_name("z", layer), hook)]

    return hooks
