"""Plotly figures: one module per subject (attention patterns, emergence and the law)."""
