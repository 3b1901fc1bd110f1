"""The floor every other layer stands on: the error type, atomic files, the torchrun world, the
stand-in tokenizer and TransformerLens hook names and hook functions. Imports nothing above it."""
