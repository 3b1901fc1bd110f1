"""Over training: a run's checkpoints, one model swept through them, the results cache keyed by
weights hash, and torchrun sharding. :func:`ihprobe.series.sweep.map_checkpoints` is the one
loop over checkpoints: ``trajectory``, ``ablation_trajectory``, ``llc_trajectory`` and the loss
by position over a run are calls of it (directly, or cached through
:func:`ihprobe.series.cache.cached_map`)."""
