"""Checkpoints in and out: resolving a source, the run folder, the HF cache, reading and checking
weights, building the TransformerLens bridge, and the provenance every result carries."""
