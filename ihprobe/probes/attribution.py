"""What each head writes towards the correct next token: LA and DLA.

Both start from the head's value-weighted output at the query positions, ``z`` from
``blocks.{l}.attn.hook_z`` (``[batch, query, head, d_head]``), and the model's ``W_O`` and
``W_U``; the head's direct output ``o = z @ W_O[l, h]`` (no output bias) is never materialised
for all heads at once: the unembedding directions are pulled back through ``W_O`` instead, one
layer at a time, so memory stays at ``[batch, query, head, n]``. ``hook_result`` is not used
(TransformerLens does not implement it on every bridge).

* **LA** ([A]): ``o`` projected on the unembedding columns of the row's ``n`` distinct tokens,
  ``s_j = o . W_U[:, s_j]``, ``m = mean_j s_j``, target ``t = s_{j*}`` of the correct next
  token; ``LA = relu(t - m) / sum_j relu(s_j - m)`` (0 when the denominator is 0). No final
  norm. Range [0, 1]; chance 1/n.
* **DLA** (TransformerLens's ``cache.logit_attrs`` convention): ``o`` through the final norm
  with the cached scale of the full residual stream -- centred for LayerNorm, divided by
  ``ln_final.hook_scale``, times the norm's weight -- dotted with ``W_U[:, y]``. The heads'
  DLAs plus the other components' (embeddings, MLPs, biases) sum to the logit of ``y``.

>>> la = logit_attribution(z, model.W_O, model.W_U, first_half, target_index)  # doctest: +SKIP
"""

from __future__ import annotations

import torch
from einops import rearrange
from jaxtyping import Float, Int


def logit_attribution(
    z: Float[torch.Tensor, "layer batch query head d_head"],
    W_O: Float[torch.Tensor, "layer head d_head d_model"],
    W_U: Float[torch.Tensor, "d_model vocab"],
    row_tokens: Int[torch.Tensor, "batch n"],
    target_index: Int[torch.Tensor, " query"],
) -> Float[torch.Tensor, "layer batch head query"]:
    """[A]'s logit attribution of every head at every query.

    Args:
        z: ``hook_z`` at the query positions, stacked over layers.
        W_O, W_U: the model's output and unembedding matrices.
        row_tokens: the ``n`` distinct tokens of each row (the first half of the probe).
        target_index: for each query, the index into ``row_tokens`` of the correct next token.

    Example:
        >>> z = torch.ones(1, 1, 1, 1, 1); W_O = torch.ones(1, 1, 1, 2)
        >>> W_U = torch.tensor([[1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 0.0, 0.0]])  # s = 1, 2, 3, 4
        >>> logit_attribution(z, W_O, W_U, torch.tensor([[0, 1, 2, 3]]), torch.tensor([2]))
        tensor([[[[0.2500]]]])
    """
    directions = W_U[:, row_tokens].to(z.dtype)  # [d_model, batch, n]
    out = []
    for layer in range(z.shape[0]):  # one layer at a time keeps memory at [b, q, h, n]
        pulled = torch.einsum("hed,dbn->bhen", W_O[layer].to(z.dtype), directions)
        s = torch.einsum("bqhe,bhen->bhqn", z[layer], pulled)  # o . W_U[:, s_j]
        centred = s - s.mean(-1, keepdim=True)
        index = target_index.to(s.device).view(1, 1, -1, 1).expand(*s.shape[:3], 1)
        t = centred.gather(-1, index).squeeze(-1)
        denominator = centred.clamp(min=0).sum(-1)
        la = t.clamp(min=0) / denominator.where(denominator > 0, torch.ones_like(denominator))
        out.append(la.where(denominator > 0, torch.zeros_like(la)))
    return torch.stack(out)


def direct_logit_attribution(
    z: Float[torch.Tensor, "layer batch query head d_head"],
    W_O: Float[torch.Tensor, "layer head d_head d_model"],
    W_U: Float[torch.Tensor, "d_model vocab"],
    targets: Int[torch.Tensor, "batch query"],
    scale: Float[torch.Tensor, "batch query 1"],
    norm_weight: Float[torch.Tensor, " d_model"] | None = None,
    centre: bool = True,
) -> Float[torch.Tensor, "layer batch head query"]:
    """Direct logit attribution of every head to the token ``targets[b, q]``.

    ``(centre(o) / scale * norm_weight) . W_U[:, y]``, computed as ``z . (W_O @ v)`` with
    ``v = centre(norm_weight * W_U[:, y])`` (centring commutes with the dot product).

    Args:
        scale: ``ln_final.hook_scale`` at the query positions.
        norm_weight: the final norm's weight; None when it is folded into ``W_U``.
        centre: True for LayerNorm (subtract the mean over ``d_model``), False for RMSNorm.

    Example:
        >>> z = torch.ones(1, 1, 1, 1, 1); W_O = torch.ones(1, 1, 1, 2)
        >>> W_U = torch.tensor([[1.0, 0.0], [3.0, 0.0]])
        >>> direct_logit_attribution(z, W_O, W_U, torch.tensor([[0]]), torch.full((1, 1, 1), 2.0),
        ...                          centre=False)
        tensor([[[[2.]]]])
    """
    v = W_U[:, targets].to(z.dtype)  # [d_model, batch, query]
    if norm_weight is not None:
        v = v * norm_weight.to(z.dtype).view(-1, 1, 1)
    if centre:
        v = v - v.mean(0, keepdim=True)
    v = v / scale.squeeze(-1).to(z.dtype)
    out = []
    for layer in range(z.shape[0]):
        pulled = torch.einsum("hed,dbq->bqhe", W_O[layer].to(z.dtype), v)
        out.append((z[layer] * pulled).sum(-1).transpose(1, 2))
    return torch.stack(out)


def pearson(
    x: Float[torch.Tensor, "layer batch head query"],
    y: Float[torch.Tensor, "layer batch head query"],
) -> Float[torch.Tensor, "layer head"]:
    """Per-head Pearson correlation over all (row, query) pairs; NaN where either is constant.

    >>> x = torch.arange(4.0).view(1, 2, 1, 2)
    >>> pearson(x, 2 * x + 1), pearson(x, -x)
    (tensor([[1.]]), tensor([[-1.]]))
    """
    x = rearrange(x, "layer batch head query -> layer head (batch query)").double()
    y = rearrange(y, "layer batch head query -> layer head (batch query)").double()
    x = x - x.mean(-1, keepdim=True)
    y = y - y.mean(-1, keepdim=True)
    r = (x * y).sum(-1) / (x.norm(dim=-1) * y.norm(dim=-1))
    return r.clamp(-1, 1).float()
