"""MLPs over chunks of positions in a pair pass, so a scan's own activations stay small too.

Once the attention holds no pattern, the largest tensors of a forward pass are an MLP's hidden
activations, ``[batch, n, d_mlp]``, several alive at once (68 MB per row for Pythia-410m at
2,048 tokens). An MLP reads each position alone, so within :func:`positionwise_chunks` each
bridge MLP of a class in :data:`POSITIONWISE` runs on chunks of at most :data:`CHUNK_ELEMENTS`
hidden activations and concatenates them: the same numbers (up to the rounding of a shorter
matrix product), a fraction of the memory. An MLP with a hook on any of its hook points runs
whole (a hook sees whole rows, as it would outside), and so does one called any other way.

>>> POSITIONWISE[:2], CHUNK_ELEMENTS
(('MLPBridge', 'GatedMLPBridge'), 1048576)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch
from transformer_lens.hook_points import HookPoint

# TransformerLens MLP bridges that map each position alone (mixture-of-experts routing is left
# out); Bloom's also takes the residual, chunked alike
POSITIONWISE = ("MLPBridge", "GatedMLPBridge", "JointGateUpMLPBridge", "BloomMLPBridge")
CHUNK_ELEMENTS = 2**20  # hidden activations per chunk, [batch, positions, d_mlp]: 4 MB float32
MAX_CHUNKS = 32  # per call: a wide batch gets larger chunks, not hundreds of tiny products


def hooked(module: torch.nn.Module) -> bool:
    return any(
        isinstance(m, HookPoint) and (m._forward_hooks or m._forward_pre_hooks)
        for m in module.modules()
    )


def by_positions(module: torch.nn.Module, width: int) -> Callable:
    """``module``'s forward on chunks of positions of its ``[batch, pos, d]`` input (and of any
    argument with the same leading shape), at most :data:`CHUNK_ELEMENTS` ``width``-wide hidden
    activations each (or :data:`MAX_CHUNKS` chunks, if more), concatenated along the positions.

    >>> mlp = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    >>> x = torch.randn(2, 9, 4)
    >>> torch.allclose(by_positions(mlp, width=2**19)(x), mlp(x), atol=1e-6)
    True
    """
    whole = type(module).forward.__get__(module)

    def forward(hidden, *args, **kwargs):
        if not isinstance(hidden, torch.Tensor) or hidden.dim() != 3 or hooked(module):
            return whole(hidden, *args, **kwargs)
        lead = hidden.shape[:2]
        step = max(-(-lead[1] // MAX_CHUNKS), CHUNK_ELEMENTS // (lead[0] * width))
        if lead[1] <= step:
            return whole(hidden, *args, **kwargs)

        def part(value, start: int):
            alike = isinstance(value, torch.Tensor) and value.shape[:2] == lead
            # contiguous: GPT-2's Conv1D views its input flat, which a slice of rows cannot be
            return value[:, start : start + step].contiguous() if alike else value

        parts = []
        for start in range(0, lead[1], step):
            chunk_args = (part(a, start) for a in args)
            chunk_kwargs = {key: part(v, start) for key, v in kwargs.items()}
            out = whole(part(hidden, start), *chunk_args, **chunk_kwargs)
            if not isinstance(out, torch.Tensor):  # not a plain MLP after all: run it whole
                return whole(hidden, *args, **kwargs)
            parts.append(out)
        return torch.cat(parts, dim=1)

    return forward


@contextlib.contextmanager
def positionwise_chunks(model) -> Iterator[None]:
    """Within this block the bridge MLPs of ``model``'s blocks in :data:`POSITIONWISE` run
    :func:`by_positions`; put back on leaving, even on error."""
    mlps = [getattr(block, "mlp", None) for block in getattr(model, "blocks", ())]
    mlps = [m for m in mlps if type(m).__name__ in POSITIONWISE]
    width = getattr(getattr(model, "cfg", None), "d_mlp", None) or 1
    try:
        for mlp in mlps:  # in the instance's dict: the bridge's __setattr__ would pass it on
            object.__setattr__(mlp, "forward", by_positions(mlp, width))
        yield
    finally:
        for mlp in mlps:
            mlp.__dict__.pop("forward", None)
