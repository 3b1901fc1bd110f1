"""The test suite. ``shape_checks`` is imported here so that jaxtyping's import hook, which runs
``import tests`` and then looks up ``tests.shape_checks.check_shapes``, finds it.

The hook gives an instrumented module's ``.pyc`` a tag of its own, and so does every module first
imported while one runs: without a cached ``.pyc`` of that tag (``PYTHONDONTWRITEBYTECODE``, a
fresh clone) those would be compiled from source in every run, about half a minute of CPU. The
heavy dependencies are therefore imported here first, with their ordinary ``.pyc``.
"""

import pandas  # noqa: F401
import plotly.graph_objects  # noqa: F401
import plotly.subplots  # noqa: F401
import scipy.optimize  # noqa: F401
import scipy.stats  # noqa: F401
import transformer_lens.model_bridge  # noqa: F401
import transformers  # noqa: F401
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer  # noqa: F401

from tests import shape_checks  # noqa: F401
