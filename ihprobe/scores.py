"""``HeadScores``: every head score and model score of one model, with its provenance.

>>> scores = ihprobe.scan(model)                                      # doctest: +SKIP
>>> scores.head["prefix_matching"].shape          # [n_layers, n_heads]  # doctest: +SKIP
>>> scores.top_heads("prefix_matching", k=3)      # [(layer, head, value), ...]  # doctest: +SKIP
>>> scores.to_frame().head()                                          # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from jaxtyping import Float

from ihprobe.errors import IhprobeError
from ihprobe.models import Provenance

COLUMNS = ("model", "revision", "step", "tokens", "layer", "head", "metric", "value")


@dataclass
class HeadScores:
    """Scores of one model (one checkpoint).

    Attributes:
        head: per-head scores, metric name -> ``[n_layers, n_heads]`` float tensor.
        model: per-model scores, metric name -> float.
        provenance: model name, revision, step and training tokens of the checkpoint.
        settings: the probe settings (n, batch, seed, bos, ...) and notes on skipped metrics.

    ``revision``, ``step`` and ``tokens`` read through to ``provenance``; ``model_name`` is
    ``provenance.model`` (``model`` holds the model-level scores).
    """

    head: dict[str, Float[torch.Tensor, "layer head"]]
    model: dict[str, float]
    provenance: Provenance
    settings: dict = field(default_factory=dict)

    @property
    def model_name(self) -> str:
        return self.provenance.model

    @property
    def revision(self) -> str | None:
        return self.provenance.revision

    @property
    def step(self) -> int | None:
        return self.provenance.step

    @property
    def tokens(self) -> int | None:
        return self.provenance.tokens

    @property
    def metrics(self) -> list[str]:
        """Names of the metrics held, head metrics first."""
        return [*self.head, *self.model]

    def to_frame(self):
        """The long table ``model, revision, step, tokens, layer, head, metric, value``.

        One row per head and head metric, then one per model metric with empty (``<NA>``)
        layer and head. ``step``, ``tokens``, ``layer`` and ``head`` are nullable integers, so
        tables of many checkpoints concatenate without turning into floats.

        Example:
            >>> frame = scores.to_frame()                             # doctest: +SKIP
            >>> frame.query("metric == 'prefix_matching'").nlargest(3, "value")  # doctest: +SKIP
        """
        import pandas as pd

        rows = []
        for metric, values in self.head.items():
            n_layers, n_heads = values.shape
            layer = torch.arange(n_layers).repeat_interleave(n_heads)
            head = torch.arange(n_heads).repeat(n_layers)
            rows.append(
                pd.DataFrame(
                    {
                        "layer": layer.numpy(),
                        "head": head.numpy(),
                        "metric": metric,
                        "value": values.flatten().double().numpy(),
                    }
                )
            )
        if self.model:
            rows.append(
                pd.DataFrame(
                    {
                        "layer": [None] * len(self.model),
                        "head": [None] * len(self.model),
                        "metric": list(self.model),
                        "value": [float(v) for v in self.model.values()],
                    }
                )
            )
        frame = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=COLUMNS[4:])
        p = self.provenance
        frame.insert(0, "model", p.model)
        frame.insert(1, "revision", p.revision)
        frame.insert(2, "step", pd.array([p.step] * len(frame), dtype="Int64"))
        frame.insert(3, "tokens", pd.array([p.tokens] * len(frame), dtype="Int64"))
        frame["layer"] = frame["layer"].astype("Int64")
        frame["head"] = frame["head"].astype("Int64")
        frame["value"] = frame["value"].astype(float)
        return frame[list(COLUMNS)]

    def _head_metric(self, metric: str) -> torch.Tensor:
        if metric not in self.head:
            raise IhprobeError(
                f"{metric!r} is not a head metric of these scores; they hold "
                f"{', '.join(self.head) or 'none'}."
            )
        return self.head[metric]

    def top_heads(
        self, metric: str = "prefix_matching", k: int = 5
    ) -> list[tuple[int, int, float]]:
        """The ``k`` heads with the highest ``metric``, as ``(layer, head, value)``, best first.

        NaN values (e.g. an undefined correlation) are ranked last.

        Example:
            >>> scores.top_heads("prefix_matching", k=1)               # doctest: +SKIP
            [(1, 3, 0.93)]
        """
        values = self._head_metric(metric)
        n_heads = values.shape[1]
        flat = values.flatten().nan_to_num(nan=-float("inf"))
        order = flat.argsort(descending=True, stable=True)[:k]
        return [(int(i) // n_heads, int(i) % n_heads, float(values.flatten()[i])) for i in order]

    def heatmap(self, metric: str = "prefix_matching"):
        """A plotly heatmap of ``metric``, layer (rows) x head (columns); hover shows the value.

        Example:
            >>> scores.heatmap("prefix_matching").write_html("ps.html")  # doctest: +SKIP
        """
        import plotly.graph_objects as go

        values = self._head_metric(metric).double()
        n_layers, n_heads = values.shape
        p = self.provenance
        where = ", ".join(
            str(x)
            for x in (p.model, p.revision, None if p.step is None else f"step {p.step}")
            if x is not None
        )
        fig = go.Figure(
            go.Heatmap(
                z=values.numpy(),
                x=list(range(n_heads)),
                y=list(range(n_layers)),
                colorscale="Viridis",
                colorbar={"title": metric},
                hovertemplate="layer %{y}, head %{x}<br>" + metric + " = %{z:.4f}<extra></extra>",
            )
        )
        fig.update_layout(
            title=f"{metric} — {where}",
            xaxis={"title": "head", "dtick": 1},
            yaxis={"title": "layer", "dtick": 1, "autorange": "reversed"},
        )
        return fig
