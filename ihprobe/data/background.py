"""Producers that write over a background producer (Bi-Induct, repeats).

Their options hold the background's name and its options; in JSON (``config()``) the
background's options sit flat next to their own, as they are passed to ``make_producer``.

>>> o = BackgroundOptions.from_json({"base": "iid", "vocab_size": 40})
>>> o.base_options.vocab_size, o.to_json()["vocab_size"]
(40, 40)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ihprobe.data.base import Producer
from ihprobe.data.options import ProducerOptions
from ihprobe.data.registry import make_producer, producer_options


@dataclass(frozen=True)
class BackgroundOptions(ProducerOptions):
    """The background producer's name and options (default: natural text).

    ``base_options`` may be given as a mapping; it is read as that producer's options.
    """

    base: str = "natural"
    base_options: Any = None  # the base producer's ProducerOptions

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.base_options, ProducerOptions):
            object.__setattr__(
                self, "base_options", producer_options(self.base, self.base_options or {})
            )

    @classmethod
    def from_json(cls, data: Mapping[str, Any], producer: str = "this producer") -> Any:
        """Own options by name; every other key is an option of the background producer."""
        own = {f.name for f in fields(cls)} - {"base_options"}
        rest = {k: v for k, v in data.items() if k not in own}
        return cls(**{k: v for k, v in data.items() if k in own}, base_options=rest)

    def to_json(self) -> dict[str, Any]:
        own = {k: v for k, v in super().to_json().items() if k != "base_options"}
        return {**own, **self.base_options.to_json()}


class BackgroundProducer(Producer):
    """A producer whose batches start as the background producer's batches of the same step."""

    Options = BackgroundOptions
    options: BackgroundOptions

    def __init__(self, **settings: Any):
        super().__init__(**settings)
        self.base = make_producer(
            self.options.base,
            batch_size=self.batch_size,
            context=self.context,
            seed=self.seed,
            total_steps=self.total_steps,
            **self.options.base_options.to_json(),
        )
        self.vocab_size, self.special = self.base.vocab_size, dict(self.base.special)

    def tokenizer(self):
        return self.base.tokenizer()
