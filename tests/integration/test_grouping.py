"""``make test`` runs ``--dist loadgroup`` so that the tests sharing a trained model (an
``xdist_group`` each: the demo's run, the two-layer model, ...) run on one worker, which trains
it once. A pytest on which xdist's grouping silently does nothing (9.2: pytest-xdist issue
1386) would have each worker train its own copy; this test fails there instead."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.xdist_group("grouping-check")


def test_xdist_groups_take_effect_under_loadgroup(request):
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("runs under `pytest -n N --dist loadgroup` (make test)")
    # xdist's grouping works by giving a grouped test the group in its node id
    assert request.node.nodeid.endswith("@grouping-check"), request.node.nodeid
