"""Causal tests of heads: masks that ablate heads, head sets, evaluation tasks, ablations against
random baselines and their result types."""
