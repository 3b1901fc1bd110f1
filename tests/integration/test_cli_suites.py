"""A public suite from the command line: ``--suite NAME`` in place of SOURCE on ``scan``,
``weight-trajectory`` and ``repeated-tensors``, against a PolyPythias suite laid out by hand as
an offline HF cache, one of whose checkpoints carries an earlier checkpoint's shard (the case
of Pythia issue #206), which each table's ``repeats`` column names."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from ihprobe.cli import main
from ihprobe.io.suites import suite_checkpoints, suite_repo
from ihprobe.series.repeats import constant_by_design, repeated_tensors
from tests import hub_layout
from tests.helpers import save_checkpoint
from tests.hub_layout import lay_out
from tests.integration.test_series_repeats import SHARD, trained_looking

offline_hub = hub_layout.offline_hub  # the fixture

SUITE = ["--suite", "polypythias", "--suite-option", "size=14m", "--suite-option", "seed=3"]
STEPS = [0, 1, 2, 4, 8]  # the suite's first five checkpoints, the ones laid out
LAID_OUT = ["--steps", ",".join(map(str, STEPS))]
REPO = suite_repo("polypythias", size="14m", seed=3)
TOKENS_PER_STEP = 1024 * 2048


@pytest.fixture
def suite(tmp_path, offline_hub, tokenizer):
    """Steps 0, 1, 2, 4, 8 of a 4-shard GPT-NeoX; step 8 carries step 2's second shard."""
    made = {}
    for step in STEPS:
        directory = save_checkpoint(trained_looking(step), tmp_path / "made" / str(step), tokenizer)
        for old in directory.glob("model*.safetensors*"):
            old.unlink()
        trained_looking(step).save_pretrained(directory, max_shard_size="200KB")
        made[f"step{step}"] = directory
    shutil.copyfile(made["step2"] / SHARD, made["step8"] / SHARD)  # the planted repeat
    lay_out(offline_hub, REPO, made)
    return tmp_path


def run(argv, capsys) -> tuple[int, str, str]:
    code = main(argv)
    said = capsys.readouterr()
    return code, said.out, said.err


def planted(table: pd.DataFrame) -> dict:
    """Revision -> its ``repeats`` entry, for the checkpoints the column flags."""
    flagged = table.dropna(subset=["repeats"])
    return flagged.groupby("revision")["repeats"].first().to_dict()


def test_scan_of_a_suite_every_second_checkpoint_names_the_repeated_shard(suite, capsys):
    out = suite / "scan"
    argv = ["scan", *SUITE, *LAID_OUT, "--every", "2", "--metrics", "prefix_matching"]
    code, said, err = run([*argv, "--batch", "4", "-n", "8", "--out", str(out), "-q"], capsys)
    assert code == 0, err
    table = pd.read_csv(out / "scores.csv")
    # every second of steps 0, 1, 2, 4, 8 from the first, and the last: 0, 2, 8
    assert sorted(table["revision"].unique()) == ["step0", "step2", "step8"]
    assert table.groupby("revision")["tokens"].first().to_dict() == {
        f"step{s}": s * TOKENS_PER_STEP for s in (0, 2, 8)
    }
    repeats = planted(table)
    assert list(repeats) == ["step8"]
    assert repeats["step8"].startswith(f"shard {SHARD} (") and repeats["step8"].endswith(
        f"repeats {REPO}@step2"
    )
    assert f"note: step8: {repeats['step8']} (column repeats)" in said
    assert table["duplicate_of"].isna().all()
    page = (out / "heatmaps.html").read_text()  # the page says it too, above the heatmaps
    assert (
        "Repeated weights" in page and "step8 · step 8" in page and f": {repeats['step8']}." in page
    )


def test_the_repeats_column_is_absent_where_the_shard_s_source_was_not_read(suite, capsys):
    argv = ["scan", *SUITE, "--steps", "0,4,8", "--metrics", "prefix_matching", "--batch", "4"]
    code, _, err = run([*argv, "-n", "8", "--out", str(suite / "s"), "-q"], capsys)
    assert code == 0, err
    table = pd.read_csv(suite / "s" / "scores.csv")
    assert table["repeats"].isna().all()  # step 2, whose shard step 8 repeats, was not scanned
    assert "Repeated weights" not in (suite / "s" / "heatmaps.html").read_text()


def test_weight_trajectory_of_a_suite_reads_its_tensors_and_flags_the_repeat(suite, capsys):
    out = suite / "weights"
    argv = ["weight-trajectory", *SUITE, *LAID_OUT, "--metrics", "copying,k_composition_max"]
    code, said, err = run([*argv, "--draws", "4", "--out", str(out), "--no-cache", "-q"], capsys)
    assert code == 0, err
    table = pd.read_csv(out / "weights.csv")
    assert sorted(table["revision"].unique()) == [f"step{s}" for s in STEPS]
    assert set(table["metric"]) == {"copying", "k_composition_max"}
    assert table.groupby("revision")["tokens"].first()["step8"] == 8 * TOKENS_PER_STEP
    # the weight-only read holds some of each checkpoint's tensors: the repeated ones are named
    repeats = planted(table)
    assert list(repeats) == ["step8"] and repeats["step8"].endswith(f"repeat {REPO}@step2")
    assert "step8" in said and "top copying: L" in said and "(column repeats)" in said
    ckpts = suite_checkpoints("polypythias", size="14m", seed=3, steps=STEPS)
    whole = repeated_tensors(ckpts)
    read = repeats["step8"].removeprefix("tensors ").split(" repeat ")[0]
    first = read.split(",")[0]
    assert first in set(whole["tensor"]) and not constant_by_design(first)


def test_weight_trajectory_names_the_whole_shard_once_every_tensor_was_hashed(
    suite, capsys, monkeypatch
):
    monkeypatch.setenv("IHPROBE_CACHE", str(suite / "cache"))
    assert run(["repeated-tensors", *SUITE, *LAID_OUT, "-q"], capsys)[0] == 0  # hashes all
    out = suite / "weights"
    code, _, err = run(["weight-trajectory", *SUITE, *LAID_OUT, "--out", str(out), "-q"], capsys)
    assert code == 0, err
    repeats = planted(pd.read_csv(out / "weights.csv"))
    assert list(repeats) == ["step8"]
    assert repeats["step8"].startswith(f"shard {SHARD} (")
    assert repeats["step8"].endswith(f"repeats {REPO}@step2")


def test_repeated_tensors_reports_the_shard_and_json_has_a_row_per_checkpoint(suite, capsys):
    code, said, err = run(["repeated-tensors", *SUITE, *LAID_OUT, "-q"], capsys)
    assert code == 0, err
    lines = said.strip().splitlines()
    assert lines[0].startswith(f"{REPO}@step8: shard {SHARD} (")
    assert lines[0].endswith(f"repeats {REPO}@step2")
    assert lines[-1].startswith("1 of 5 checkpoints")
    code, said, _ = run(["repeated-tensors", *SUITE, "--steps", "0,2,8", "--json", "-q"], capsys)
    rows = json.loads(said)
    assert [r["step"] for r in rows] == [0, 2, 8]
    assert [r["repeats"] is not None for r in rows] == [False, False, True]
    assert all(r["duplicate_of"] is None for r in rows)


BAD = [
    (["scan", "--out", "o"], "pass a SOURCE"),
    (["scan", "org/x", "--suite", "pythia", "--out", "o"], "not both"),
    (["scan", "org/x", "--every", "3", "--out", "o"], "--every is an option of --suite"),
    (["scan", "--suite", "pythia", "--revision", "step1", "--out", "o"], "pass --steps"),
    (["scan", "--suite", "gpt5", "--out", "o"], "no suite named 'gpt5'"),
    (["scan", "--suite", "pythia", "--suite-option", "size=3b", "--out", "o"], "size='3b'"),
    (["scan", "--suite", "pythia", "--steps", "0,1500", "--out", "o"], "no step 1500"),
    (["weight-trajectory", "--suite", "pythia", "--suite-option", "stage=2"], "one training"),
    (["repeated-tensors", "--suite", "olmo2", "--suite-option", "stage=0"], "stage=0"),
    (["repeated-tensors", "--suite", "pythia", "--suite-option", "steps=[1]"], "--steps"),
    (["repeated-tensors", "--suite", "olmo"], "no checkpoints of allenai/OLMo-1B-hf"),
    (["repeated-tensors", "--suite", "timaeus-l2w256"], "not loadable"),
    (["weight-trajectory", "--suite", "pythia", "--steps", "1,x"], "not comma-separated"),
    (["weight-trajectory", "--suite", "pythia", "--every", "0"], "--every"),
]


@pytest.mark.parametrize(("argv", "said"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_suite_flags_are_one_line_and_exit_2(argv, said, offline_hub, tmp_path, capsys):
    argv = [a if a != "o" else str(tmp_path / "o") for a in argv]
    code, _, err = run(argv, capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and said in err, err
    assert not (tmp_path / "o").exists()
