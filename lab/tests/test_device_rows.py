"""The device job's row steps save each row as it is measured (``SavedRows``): the ``offload``
step, stopped after its first row, keeps that row in its result file for the job to report."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "lab" / "benchmarks"


def module(name: str, monkeypatch):
    """A module of lab/benchmarks/ as the job's child imports it (by its bare name)."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    loaded = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, loaded)
    spec.loader.exec_module(loaded)
    return loaded


class Killed(BaseException):
    """The step's end at its time limit (a kill: nothing after it runs)."""


@pytest.mark.slow  # a tiny 12-layer model built, placed over the CPU and disk, and scanned
def test_an_offload_step_stopped_after_its_first_row_keeps_it(tmp_path, monkeypatch):
    job = module("device_job", monkeypatch)
    offload = module("device_offload", monkeypatch)
    steps = module("device_steps", monkeypatch)
    timed, calls = offload.timed, []

    def then_killed(call, model):  # the two calls on one device, then the placed scan: 1 row
        if len(calls) == 3:
            raise Killed
        calls.append(call)
        return timed(call, model)

    monkeypatch.setattr(offload, "timed", then_killed)
    out = tmp_path / "step.json"
    with pytest.raises(Killed):
        steps.step("offload", "cpu", True, 60.0, out)
    (kept,) = job._read(out)["rows"]
    assert kept["call"] == "scan" and kept["max difference"] <= 1e-5, kept
