"""A stand-in tokenizer for checkpoints and producers that have none: token ``i`` is ``"<i>"``.

>>> tok = id_tokenizer(8)
>>> tok("<3><5>").input_ids
[3, 5]
"""

from __future__ import annotations

from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast


def id_tokenizer(vocab_size: int) -> PreTrainedTokenizerFast:
    """A tokenizer whose token ``i`` is the string ``<i>``: for checkpoints saved without one.

    The model then works on token ids and decodes to readable ids; no text meaning is implied.
    """
    vocab = {f"<{i}>": i for i in range(vocab_size)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<0>"))
    tok.pre_tokenizer = pre_tokenizers.Split(pattern=">", behavior="merged_with_previous")
    return PreTrainedTokenizerFast(tokenizer_object=tok)
