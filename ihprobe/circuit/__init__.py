"""The induction circuit, not only the head: how heads compose and which paths carry the effect.

* :mod:`ihprobe.probes.composition` -- Elhage et al.'s Q/K/V composition scores from weights.
* :mod:`ihprobe.circuit.pairs` -- clean/corrupted token pairs and the logit-difference metric.
* :mod:`ihprobe.circuit.patching` -- activation, path and attribution patching of heads.
* :mod:`ihprobe.circuit.positions` -- loss by token position, over the checkpoints of a run.

The methods are described in ``docs/circuit.md``.
"""
