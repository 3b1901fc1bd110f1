"""The device job's ``fv`` step in its CPU mode (issue 61, item 6): ``fv_scores``' fast path and
the per-head reference loop on a tiny random model, timed, and equal within the suite's bound."""

from __future__ import annotations

import ast

import pytest

from lab.tests.device_steps import BENCHMARKS, run_step


@pytest.mark.slow
def test_the_fv_step_times_both_methods_and_they_agree(tmp_path):
    text = run_step("fv", tmp_path)
    rows = [line for line in text.splitlines() if line.startswith("| tiny random | cpu |")]
    assert [row.split("|")[3].strip() for row in rows] == ["reference", "fast"], text
    header = next(line for line in text.splitlines() if line.startswith("| model |"))
    cells = dict(zip(header.split("|"), rows[1].split("|"), strict=True))
    assert cells[" result "].strip() == "pass"
    assert float(cells[" x wall "]) > 0 and float(cells[" largest effect "]) > 0


def test_every_row_step_names_a_module_and_function_of_the_folder():
    source = (BENCHMARKS / "device_steps.py").read_text()
    table = next(
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "ROW_STEPS"
    )
    steps = ast.literal_eval(table)
    assert "fv" in steps
    for module, function in steps.values():
        defined = ast.parse((BENCHMARKS / f"{module}.py").read_text())
        names = {n.name for n in defined.body if isinstance(n, ast.FunctionDef)}
        assert function in names, (module, function)
    job = (BENCHMARKS / "device_job.py").read_text()
    assert all(f'("{name}", ' in job for name in steps)  # each is a step of the job
