"""The parameter dtypes ihprobe loads models in, by name: one list for the library
(``ihprobe.io.models.DTYPES`` maps them to torch dtypes) and the command line (which must not
import torch to check a flag).

>>> DTYPE_NAMES
('float32', 'bfloat16', 'float16')
"""

DTYPE_NAMES = ("float32", "bfloat16", "float16")
