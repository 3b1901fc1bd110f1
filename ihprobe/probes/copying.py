"""Copying score of each head's OV circuit, from weights alone (Elhage et al. 2021).

The full OV circuit ``W_E W_V W_O W_U`` (vocab x vocab) maps the token a head attends to onto
the logits it raises. Its non-zero eigenvalues are those of the ``d_head x d_head`` product
``W_O (W_U W_E) W_V`` (``eig(AB) = eig(BA)``), so the score never builds a vocab-sized matrix:
``sum(lambda) / sum(|lambda|)`` in [-1, 1], +1 for a head that copies, -1 for one that
suppresses what it attends to.

The weights are used as loaded: with ``ihprobe.load(..., processing="none")`` LayerNorm is not
folded into ``W_V`` (the ln1 scale and the final norm are left out of the circuit), with
``processing="tl"`` it is. Models with grouped KV heads (Llama) share ``W_V`` between the
query heads of a group.

>>> copying_scores(model).shape                                       # doctest: +SKIP
torch.Size([2, 4])
"""

from __future__ import annotations

import torch
from jaxtyping import Float

from ihprobe.core.devices import gathered
from ihprobe.io.offload import readable
from ihprobe.io.validation import require_finite

VOCAB_CHUNK = 4096  # tokens of W_U W_E multiplied at a time (50 MB of float64 at d_model 768)


def ov_eigen_score(
    W_E: Float[torch.Tensor, "vocab d_model"],
    W_V: Float[torch.Tensor, "layer head d_model d_head"],
    W_O: Float[torch.Tensor, "layer head d_head d_model"],
    W_U: Float[torch.Tensor, "d_model vocab"],
) -> Float[torch.Tensor, "layer head"]:
    """``sum(lambda) / sum(|lambda|)`` over the eigenvalues of ``W_E W_V W_O W_U`` per head.

    Computed in float64 on ``W_O (W_U W_E) W_V``; 0 for a head whose circuit is zero.
    ``W_U W_E`` is summed over ``VOCAB_CHUNK`` tokens at a time, so a 50k vocabulary never
    holds a float64 copy of the embeddings (600 MB at Pythia-160m).

    Example:
        >>> eye = torch.eye(3)
        >>> ov_eigen_score(eye, -eye.view(1, 1, 3, 3), eye.view(1, 1, 3, 3), eye)
        tensor([[-1.]])
    """
    require_finite("copying", W_E=W_E, W_V=W_V, W_O=W_O, W_U=W_U)  # LAPACK crashes on NaN/inf
    ue = sum(  # [d_model, d_model]
        u.double() @ e.double()
        for u, e in zip(W_U.split(VOCAB_CHUNK, 1), W_E.split(VOCAB_CHUNK), strict=True)
    )
    small = W_O.double() @ ue @ W_V.double()  # [layer, head, d_head, d_head]
    eig = torch.linalg.eigvals(small)
    total = eig.abs().sum(-1)
    score = eig.real.sum(-1) / total.where(total > 0, torch.ones_like(total))
    return score.where(total > 0, torch.zeros_like(score)).float()


def copying_scores(model) -> Float[torch.Tensor, "layer head"]:
    """The copying score of every head of a hooked model (``W_E, W_V, W_O, W_U``).

    Example:
        >>> scores = copying_scores(model); float(scores.max()) <= 1.0   # doctest: +SKIP
        True
    """
    with torch.no_grad(), readable(model):  # a dispatched model's offloaded weights loaded
        # a device map may keep the embedding and the unembedding on two GPUs: one device
        W_E, W_V, W_O, W_U = gathered([model.W_E, model.W_V, model.W_O, model.W_U])
        group = model.cfg.n_heads // W_V.shape[1]  # query heads per KV head (1 without GQA)
        return ov_eigen_score(W_E, W_V.repeat_interleave(group, dim=1), W_O, W_U).cpu()
