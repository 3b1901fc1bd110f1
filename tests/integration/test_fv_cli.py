"""``ihprobe fv`` on a checkpoint made here (the planted FV model): the top heads, then the
summary; bad flags and task files get one line and exit status 2."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from ihprobe.cli import main
from tests.helpers import cli_refused
from tests.planted_fv import FV_HEAD, PAIRS, save_planted


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return save_planted(tmp_path_factory.mktemp("fv-cli") / "planted")


@pytest.fixture(scope="module")
def task_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("fv-task") / "pairs.tsv"
    path.write_text("".join(f"{x}\t{y}\n" for x, y in PAIRS))
    return path


def test_fv_prints_the_top_heads_then_the_summary(checkpoint, task_file, capsys):
    argv = ["fv", str(checkpoint), "--task", str(task_file), "--shots", "5", "--prompts", "8"]
    assert main([*argv, "--show", "2", "-q"]) == 0
    lines = capsys.readouterr().out.splitlines()
    layer, head = FV_HEAD
    assert lines[0].startswith(f"L{layer}H{head}: +0.")
    assert len([line for line in lines if line[:1] == "L"]) == 2  # --show 2 heads
    assert "1 of 1 tasks above chance" in lines[2]
    assert lines[-1].startswith("FV heads") and f"L{layer}H{head}" in lines[-1]


@pytest.mark.slow  # a fresh interpreter imports torch and transformers: 10-40 s
def test_fv_runs_as_a_command(checkpoint, task_file):
    done = subprocess.run(
        [sys.executable, "-m", "ihprobe", "fv", str(checkpoint), "--task", str(task_file)]
        + ["--shots", "3", "--prompts", "4", "--show", "1", "-q"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("L1H1: +")
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--prompts", "1"], "at least 2 prompts"),
        (["--shots", "0"], "positive integer"),
        (["--task", "missing.tsv"], "does not exist"),
        (["--html", "."], "is a directory"),
    ],
)
def test_fv_refuses_bad_flags_in_one_line(checkpoint, extra, match, tmp_path, capsys, monkeypatch):
    cli_refused(["fv", str(checkpoint), *extra], tmp_path, capsys, monkeypatch, match)


def test_fv_html_writes_the_scores_beside_prefix_matching(checkpoint, task_file, tmp_path, capsys):
    page = tmp_path / "fv.html"
    argv = ["fv", str(checkpoint), "--task", str(task_file), "--shots", "5", "--prompts", "8"]
    assert main([*argv, "--show", "1", "--html", str(page), "-q"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"page: {page}"
    text = page.read_text(encoding="utf-8")
    layer, head = FV_HEAD
    row = re.search(r"<td>L(\d)H(\d)</td>\s*<td>[^<]+</td>\s*<td>yes</td>", text)
    assert row and (int(row.group(1)), int(row.group(2))) == FV_HEAD  # first row, an FV head
    assert "prefix matching" in text and "Attention on a task prompt" in text
    data = json.loads(re.search(r'<script type="application/json">(.*?)</script>', text).group(1))
    assert data["start"] == [layer, head]  # the viewer opens on the top FV head
    assert re.fullmatch(rf"head {head} · PS 0\.\d\d · FV \+0\.\d+", data["labels"][layer][head])
