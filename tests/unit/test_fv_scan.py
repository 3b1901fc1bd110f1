"""``fv`` as a metric of ``scan`` (issue 61, item 2): computed only when named, by
``fv_scores`` itself (registered from ``causal/`` into ``probes/``), skipped with a note for a
model without a text tokenizer, carried over checkpoints by ``trajectory`` and fitted by
``emergence``. Known answers come from the hand-written model of ``tests/planted_fv.py``."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
import torch

import ihprobe
from ihprobe.causal.tasks import Task
from ihprobe.cli import main
from ihprobe.core.standin import id_tokenizer
from ihprobe.probes.metrics import METRIC_TABLE, check_metrics
from tests.helpers import cli_refused, save_checkpoint, tiny_hf_model
from tests.planted_fv import FV_HEAD, PAIRS, save_planted
from tests.unit.test_architecture import SOURCES, imports

TASK = Task("planted", PAIRS)
# the FV head's strength at each checkpoint of the planted series: off, then on
SCALES = (0.0, 0.01, 0.02, 0.03, 0.9, 0.95, 1.0)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return ihprobe.load(save_planted(tmp_path_factory.mktemp("planted-fv")))


def test_fv_is_computed_only_when_named():
    assert "fv" not in check_metrics(None) and check_metrics("prefix_matching,fv")[-1] == "fv"
    spec = METRIC_TABLE["fv"]
    assert (spec.level, spec.direction, spec.chance(50_257, 50)) == ("head", "higher", 0.0)


@pytest.mark.slow
def test_scan_ranks_the_planted_fv_head_first_with_fv_scores_numbers(planted):
    scores = ihprobe.scan(planted, ["fv", "prefix_matching"], tasks=[TASK], seed=3)
    direct = ihprobe.fv_scores(planted, [TASK], seed=3)
    assert scores.top_heads("fv", 1)[0][:2] == FV_HEAD
    assert torch.allclose(scores.head["fv"], direct.scores.float(), atol=1e-6)
    assert scores.settings["fv_used"] == ["planted"] and scores.settings["notes"] == []
    assert scores.top_heads("prefix_matching", 1)[0][:2] != FV_HEAD  # the induction head's
    frame = scores.to_frame()
    assert set(frame.metric) == {"fv", "prefix_matching"}


def test_a_model_without_a_text_tokenizer_gets_the_skip_note(tmp_path):
    hf = tiny_hf_model("gpt2", vocab_size=64, context=32)
    model = ihprobe.load(save_checkpoint(hf, tmp_path / "ids", id_tokenizer(64)))
    scores = ihprobe.scan(model, ["fv", "prefix_matching"], batch=4)
    assert list(scores.head) == ["prefix_matching"]
    assert scores.settings["metrics"] == ["prefix_matching"]
    (note,) = scores.settings["notes"]
    assert note.startswith("fv skipped: it needs a tokenizer that reads text")


@pytest.mark.slow  # a fresh interpreter imports torch and transformers: 10-40 s
def test_the_public_scan_registers_fv_and_probes_alone_cannot():
    """In a fresh process: probes/ alone cannot compute fv (one line says what to call), and
    resolving the public name ``ihprobe.scan`` brings its provider."""
    code = (
        "from ihprobe.probes import provided\n"
        "assert 'fv' not in provided.PROVIDERS\n"
        "try:\n    provided.provided(None, 'fv', {})\nexcept Exception as e:\n    print(e)\n"
        "import ihprobe\nihprobe.scan\n"
        "assert 'fv' in provided.PROVIDERS\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "fv: its module is not imported; use ihprobe.scan."


def test_every_caller_of_scan_above_causal_imports_the_fv_provider():
    """trajectory, the scan job and ``ihprobe scan`` reach ihprobe.causal.fv by their imports
    (read from the sources, as the layering test reads them), so fv is registered there."""

    def reached(module: str) -> set[str]:
        seen, todo = set(), [module]
        while todo:
            name = todo.pop()
            if name not in seen and name in SOURCES:
                seen.add(name)
                todo += imports(SOURCES[name], set(SOURCES))
        return seen

    for caller in ("ihprobe.dynamics.trajectories", "ihprobe.jobs.scan"):
        assert "ihprobe.causal.fv" in reached(caller), caller
    assert reached("ihprobe.probes.battery").isdisjoint({"ihprobe.causal.fv"})
    assert "ihprobe.causal.fv" in ihprobe._FILLS[ihprobe._EXPORTS["scan"]]
    assert 'provide("fv", scan_fv)' in SOURCES["ihprobe.causal.fv"]


def planted_run(root):
    """A run folder of planted checkpoints whose FV head grows (:data:`SCALES`); the decoy is
    low enough that every checkpoint does the task, so every one has FV scores."""
    for i, scale in enumerate(SCALES):
        step = 0 if i == 0 else 2 ** (i - 1)
        folder = root / "checkpoints" / f"step-{step:06d}"
        save_planted(folder, fv_scale=scale, decoy=2.0)
        meta = {"step": step, "tokens": step * 1000, "run": "planted"}
        (folder / "ihprobe.json").write_text(json.dumps(meta))
    return root


@pytest.mark.slow
def test_trajectory_carries_fv_and_emergence_fits_it(tmp_path):
    run = planted_run(tmp_path / "run")
    cache = tmp_path / "cache"
    table = ihprobe.trajectory(run, ["fv"], tasks=[TASK], cache=cache, progress=False)
    fv = table[table.metric == "fv"]
    assert sorted(fv.step.unique()) == [0, 1, 2, 4, 8, 16, 32]
    best = fv.loc[fv.groupby("step").value.idxmax()]
    late = best[best.step >= 8]
    assert {(int(r.layer), int(r.head)) for r in late.itertuples()} == {FV_HEAD}
    last = ihprobe.fv_scores(ihprobe.load(run / "checkpoints" / "step-000032"), [TASK])
    at_last = fv[(fv.step == 32) & (fv.layer == FV_HEAD[0]) & (fv["head"] == FV_HEAD[1])]
    assert float(at_last.value.iloc[0]) == pytest.approx(last.top_heads(1)[0][2], abs=1e-6)
    point = ihprobe.emergence(table, "fv")
    assert point.transition and 4_000 <= point.tokens_high <= 8_000, point
    again = ihprobe.run_emergence(run, "fv", tasks=[TASK], cache=cache, progress=False)
    assert again.tokens == pytest.approx(point.tokens)  # the cached fv entries, fitted again


@pytest.mark.slow
def test_the_scan_command_takes_fv_and_its_task_files(tmp_path, capsys, monkeypatch):
    ckpt = save_planted(tmp_path / "planted")
    task = tmp_path / "planted.tsv"
    task.write_text("".join(f"{x}\t{y}\n" for x, y in PAIRS))
    out = tmp_path / "scan"
    assert main(["scan", str(ckpt), "--metrics", "fv", "--task", str(task), "--out", str(out)]) == 0
    assert f"top fv: L{FV_HEAD[0]}H{FV_HEAD[1]}" in capsys.readouterr().out
    table = pd.read_csv(out / "scores.csv")
    assert set(table.metric) == {"fv"} and len(table) == 8  # 2 layers x 4 heads
    argv = ["scan", str(ckpt), "--metrics", "fv", "--task", "missing.tsv"]
    cli_refused(argv, tmp_path, capsys, monkeypatch, "does not exist")
