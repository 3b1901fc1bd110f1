"""No NaN or inf passes silently: the fast finiteness check sees every bad value, eigenvalue code
never receives one, and a score that is undefined is NaN only where the metric allows it."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ihprobe.core.errors import IhprobeError
from ihprobe.io.validation import check_scores
from ihprobe.io.validation.numerics import all_finite
from ihprobe.probes.copying import ov_eigen_score


def test_eigenvalue_code_never_sees_non_finite_input():
    eye = torch.eye(3)
    for bad in (float("nan"), float("inf")):
        W_U = eye.clone()
        W_U[1, 1] = bad
        with pytest.raises(IhprobeError, match="copying: W_U holds 1 NaN/inf"):
            ov_eigen_score(eye, eye.view(1, 1, 3, 3), eye.view(1, 1, 3, 3), W_U)


def test_undefined_correlation_may_be_nan_but_never_inf():
    nan_head = torch.zeros(2, 4)
    nan_head[1, 2] = float("nan")
    check_scores({"ps_la_correlation": nan_head}, {})
    with pytest.raises(IhprobeError, match="copying of head \\(1, 2\\) is nan"):
        check_scores({"copying": nan_head}, {})
    with pytest.raises(IhprobeError, match="ps_la_correlation of head \\(1, 2\\) is inf"):
        check_scores({"ps_la_correlation": nan_head.nan_to_num(nan=float("inf"))}, {})


@settings(max_examples=60, deadline=None)
@given(
    dtype=st.sampled_from([torch.float64, torch.float32, torch.float16, torch.bfloat16]),
    size=st.integers(0, 300),
    planted=st.lists(
        st.tuples(
            st.integers(0, 299), st.sampled_from([float("nan"), float("inf"), -float("inf")])
        ),
        max_size=3,
    ),
)
def test_all_finite_agrees_with_isfinite_wherever_the_bad_value_is(dtype, size, planted):
    """The min/max shortcut of the weight and logits checks must see every NaN and inf."""
    tensor = torch.randn(size, dtype=torch.float64).to(dtype)
    for index, value in planted:
        if index < size:
            tensor[index] = value
    assert all_finite(tensor) == bool(torch.isfinite(tensor).all())
    assert all_finite(tensor.view(-1, 1)) == all_finite(tensor)
