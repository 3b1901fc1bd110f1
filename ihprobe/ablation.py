"""Causal ablation of attention heads (SPEC section 4)."""

from __future__ import annotations

from ihprobe.masks import ablate_heads, ablation_hooks

__all__ = ["ablate_heads", "ablation_hooks"]
