"""Head and model scores for induction circuits .

``attention`` reduces attention patterns inside hooks (prefix matching, previous and duplicate
token, the snippet pairs), ``snippets`` scores forward induction on fixed- and varied-length
snippets, [B]'s anti-induction and backward copying, ``copying`` scores OV circuits from
weights, ``attribution`` projects per-head outputs on the unembedding (LA, DLA), ``recall``
turns logits into model-level scores, and ``battery`` runs them all in one forward pass per
input family: :func:`ihprobe.scan`.
"""
