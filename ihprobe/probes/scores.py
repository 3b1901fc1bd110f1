"""``HeadScores``: every head score and model score of one model, with its provenance.

``ihprobe.scan(model)`` returns one; here one is made by hand for a 2-layer, 2-head model:

>>> scores = HeadScores(head={"prefix_matching": torch.tensor([[0.125, 0.25], [0.875, 0.0]])},
...                     model={"ar_accuracy": 0.5}, provenance=Provenance("tiny", step=100))
>>> scores.head["prefix_matching"].shape          # [n_layers, n_heads]
torch.Size([2, 2])
>>> scores.top_heads("prefix_matching", k=2)      # [(layer, head, value), ...]
[(1, 0, 0.875), (0, 1, 0.25)]
>>> scores.to_frame()[["step", "layer", "head", "metric", "value"]].tail(2)
   step  layer  head           metric  value
3   100      1     1  prefix_matching    0.0
4   100   <NA>  <NA>      ar_accuracy    0.5
>>> HeadScores.from_frame(scores.to_frame()).top_heads("prefix_matching", 1)
[(1, 0, 0.875)]
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import pandas as pd
import torch
from jaxtyping import Float

from ihprobe.core.errors import IhprobeError
from ihprobe.io.provenance import COLUMNS, CarriesProvenance, Provenance, with_provenance
from ihprobe.probes.attention import VARIED_PAIRS, varied_chance
from ihprobe.probes.metrics import METRIC_TABLE

VARIED = "forward_induction_varied"  # the content match a fixed-offset head cannot pass


@dataclass
class HeadScores(CarriesProvenance):
    """Scores of one model (one checkpoint).

    Attributes:
        head: per-head scores, metric name -> ``[n_layers, n_heads]`` float tensor.
        model: per-model scores, metric name -> float.
        provenance: model name, revision, step and training tokens of the checkpoint.
        settings: the probe settings (n, batch, seed, bos, ...) and notes on skipped metrics.

    ``revision``, ``step`` and ``tokens`` read through to ``provenance``; ``model_name`` is
    ``provenance.model`` (``model`` holds the model-level scores).

    Example:
        >>> import ihprobe
        >>> model = ihprobe.load(ihprobe.build_model(ihprobe.TrainConfig(d_model=16, heads=2), 128))
        >>> scores = ihprobe.scan(model, ["prefix_matching"], batch=4)
        >>> tuple(scores.head["prefix_matching"].shape)   # [layer, head]
        (2, 2)
    """

    head: dict[str, Float[torch.Tensor, "layer head"]]
    model: dict[str, float]
    provenance: Provenance
    settings: dict = field(default_factory=dict)

    @property
    def metrics(self) -> list[str]:
        """Names of the metrics held, head metrics first."""
        return [*self.head, *self.model]

    def __repr__(self) -> str:
        """One line: where from, the head grid, the metrics held (no tensors)."""
        grid = next(iter(self.head.values())).shape if self.head else None
        heads = f", {grid[0]} layers x {grid[1]} heads" if grid is not None else ""
        model = ", ".join(f"{k}={v:.4g}" for k, v in self.model.items())
        return (
            f"HeadScores({self.provenance.label}{heads}; head metrics: "
            f"{', '.join(self.head) or 'none'}; model metrics: {model or 'none'})"
        )

    def to_frame(self) -> pd.DataFrame:
        """The long table ``model, revision, step, tokens, layer, head, metric, value``.

        One row per head and head metric, then one per model metric with empty (``<NA>``)
        layer and head. ``step``, ``tokens``, ``layer`` and ``head`` are nullable integers, so
        tables of many checkpoints concatenate without turning into floats.

        Example:
            >>> frame = scores.to_frame()                             # doctest: +SKIP
            >>> frame.query("metric == 'prefix_matching'").nlargest(3, "value")  # doctest: +SKIP
        """
        rows = []
        for metric, values in self.head.items():
            n_layers, n_heads = values.shape
            layer = torch.arange(n_layers, device="cpu").repeat_interleave(n_heads)
            head = torch.arange(n_heads, device="cpu").repeat(n_layers)
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
        return with_provenance(frame, self.provenance)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, settings: dict | None = None) -> HeadScores:
        """The scores of one checkpoint back from its long table (the inverse of ``to_frame``).

        Example:
            >>> again = HeadScores.from_frame(scores.to_frame())           # doctest: +SKIP
            >>> again.top_heads("prefix_matching", 1) == scores.top_heads("prefix_matching", 1)
            ... # doctest: +SKIP
        """
        missing = set(COLUMNS) - set(frame.columns)
        keys = ["model", "revision", "step", "tokens"]
        if missing or frame.empty or len(frame[keys].astype(str).drop_duplicates()) > 1:
            raise IhprobeError(
                "from_frame needs the long table of one checkpoint (columns "
                f"{', '.join(COLUMNS)}); filter a trajectory first, e.g. table[table.step == s]."
            )
        first = frame.iloc[0]
        provenance = Provenance(
            str(first["model"]),
            None if pd.isna(first["revision"]) else str(first["revision"]),
            *(None if pd.isna(first[k]) else int(first[k]) for k in ("step", "tokens")),
        )
        heads = frame[frame["layer"].notna()]
        head = {}
        for metric, rows in heads.groupby("metric", sort=False):
            shape = (int(rows["layer"].max()) + 1, int(rows["head"].max()) + 1)
            values = torch.full(shape, float("nan"), device="cpu")
            at = [
                torch.as_tensor(rows[k].to_numpy(dtype=int, copy=True), device="cpu")
                for k in ("layer", "head")
            ]
            values[at[0], at[1]] = torch.tensor(
                rows["value"].to_numpy(dtype=float, copy=True), dtype=torch.float32, device="cpu"
            )
            head[metric] = values
        model_rows = frame[frame["layer"].isna()]
        model = dict(zip(model_rows["metric"], model_rows["value"].astype(float), strict=True))
        return cls(head, model, provenance, dict(settings or {}))

    def head_metric(self, metric: str) -> Float[torch.Tensor, "layer head"]:
        """The ``[layer, head]`` values of one head metric (an error names those held)."""
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
        if not isinstance(k, numbers.Integral) or isinstance(k, bool) or k < 1:
            raise IhprobeError(f"k={k!r}: pass how many heads to list, an integer >= 1.")
        values = self.head_metric(metric)
        n_heads = values.shape[1]
        flat = values.flatten().nan_to_num(nan=-float("inf"))
        order = flat.argsort(descending=True, stable=True)[:k]
        return [(int(i) // n_heads, int(i) % n_heads, float(values.flatten()[i])) for i in order]

    def chance(self, metric: str) -> float | None:
        """What a model without induction scores on ``metric`` in this scan: the metric table's
        chance level at the model's vocabulary and the probe's length (the snippet length for
        snippet scores, the scan's own range of lengths for varied-length ones); None where the
        metric has none or the scan did not record them. A task score's (``fv``) chance needs
        neither, so it is there in any scan.

        Example:
            >>> plain = HeadScores(head={}, model={}, provenance=Provenance("m"),
            ...                    settings={"d_vocab": 64, "n": 32})
            >>> round(plain.chance("ar_accuracy"), 4), plain.chance("prefix_matching_sd")
            (0.0156, None)
            >>> HeadScores(head={}, model={}, provenance=Provenance("m")).chance("fv")
            0.0
            >>> short = HeadScores(head={}, model={}, provenance=Provenance("m"),
            ...                    settings={"snippet_lengths": [4, 6]})
            >>> round(short.chance("forward_induction_varied"), 4)  # 0.033 at the default 10-30
            0.1187
        """
        spec, found = METRIC_TABLE.get(metric), self.settings
        if metric in VARIED_PAIRS and found.get("snippet_lengths"):
            return varied_chance(metric, tuple(found["snippet_lengths"]))
        if spec is not None and spec.family == "tasks" and spec.level == "head" and spec.chance:
            # a head's task score (fv) is a change in probability: its chance is a constant of
            # the table, needing neither the vocabulary nor a probe length
            return spec.chance(found.get("d_vocab", 0), 0)
        length = found.get("snippet_length" if spec and spec.family == "snippets" else "n")
        if spec is None or spec.chance is None or "d_vocab" not in found or length is None:
            return None
        return spec.chance(found["d_vocab"], length)

    def fixed_offset_suspects(self) -> list[tuple[int, int, float, float]]:
        """Heads that pass prefix matching (at or above the level that counts as formed) but
        score below twice chance on forward induction over snippets of varied length, as
        ``(layer, head, PS, varied)``: the mark of a head that looks a fixed offset back
        instead of matching content (docs/science.md, section 2). Empty without both scores.

        Example:
            >>> both = {"prefix_matching": torch.tensor([[0.875, 0.5]]),
            ...         "forward_induction_varied": torch.tensor([[0.75, 0.03125]])}
            >>> HeadScores(head=both, model={}, provenance=Provenance("m")).fixed_offset_suspects()
            [(0, 1, 0.5, 0.03125)]
        """
        if "prefix_matching" not in self.head or VARIED not in self.head:
            return []
        formed = METRIC_TABLE["prefix_matching"].threshold
        # twice a uniform head's score at the scan's varied lengths (the default range where the
        # scan did not record them): a varied score's chance needs no vocabulary or n
        low = 2 * (self.chance(VARIED) or METRIC_TABLE[VARIED].chance(0, 0))
        ps, varied = self.head["prefix_matching"], self.head[VARIED]
        suspects = ((ps >= formed) & (varied < low)).nonzero().tolist()
        return [
            (layer, head, float(ps[layer, head]), float(varied[layer, head]))
            for layer, head in suspects
        ]
