"""The worked examples in the probe modules' docstrings run and give what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "ihprobe.core.hooks",
    "ihprobe.probes.attention",
    "ihprobe.probes.attribution",
    "ihprobe.probes.copying",
    "ihprobe.probes.recall",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
