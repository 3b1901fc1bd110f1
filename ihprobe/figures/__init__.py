"""Plotly figures and self-contained HTML reports: one module per subject; views only call
results, never the other way round."""
