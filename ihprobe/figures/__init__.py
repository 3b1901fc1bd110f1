"""Plotly figures and self-contained HTML reports: one module per subject; views only call
results, never the other way round.

The figures the notebooks and reports draw are public, each also as ``ihprobe.<name>``:
``head_heatmap`` and ``checkpoint_slider`` (:mod:`~ihprobe.figures.heads`), ``attention_figure``
(:mod:`~ihprobe.figures.attention`), ``attention_viewer`` (:mod:`~ihprobe.figures.viewer`),
``trajectory_figure`` and ``head_strip_figure`` (:mod:`~ihprobe.figures.emergence`),
``drop_figure`` and ``head_effects_figure`` (:mod:`~ihprobe.figures.ablation`),
``composition_figure``, ``patch_figure`` and ``loss_by_position_figure``
(:mod:`~ihprobe.figures.circuit`). Each takes a result (``HeadScores``, ``AblationResult``,
a trajectory table, ...) and returns a ``plotly.graph_objects.Figure``.

>>> import pandas as pd, torch
>>> import ihprobe
>>> from ihprobe.io.provenance import Provenance
>>> from ihprobe.probes.scores import HeadScores
>>> scores = HeadScores({"prefix_matching": torch.tensor([[0.02, 0.05], [0.9, 0.1]])}, {},
...                    Provenance("demo", step=500))
>>> [[round(float(v), 2) for v in row] for row in ihprobe.head_heatmap(scores).data[0].z]
[[0.02, 0.05], [0.9, 0.1]]
>>> table = pd.DataFrame({"step": [0, 100, 200], "tokens": [0, 2048, 4096], "layer": 1,
...                       "head": 0, "metric": "prefix_matching", "value": [0.02, 0.3, 0.9]})
>>> ihprobe.head_strip_figure(table).data[0].type
'heatmap'
"""
