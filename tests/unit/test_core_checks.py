"""The argument checks of ``ihprobe.core.checks`` beyond their doctests."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from ihprobe.core import checks
from ihprobe.core.errors import IhprobeError


def test_a_read_only_array_becomes_a_tensor_without_a_warning():
    column = pd.DataFrame({"v": [0.25, 0.5]})["v"].to_numpy()
    column.flags.writeable = False  # as pandas hands out views of its blocks
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's "not writable" UserWarning would raise here
        tensor = checks.matrix("values", column, (2,))
    assert tensor.tolist() == [0.25, 0.5] and not column.flags.writeable  # the input untouched
    column_nan = np.array([np.nan])
    column_nan.flags.writeable = False
    with pytest.raises(IhprobeError, match="NaN or inf"):
        checks.matrix("values", column_nan)
