"""Every HTML page ihprobe writes escapes every string the user controls (issue 59, item 7 and
"What to build" 5). A run folder, a checkpoint path and every name a page shows carry markup that
would run script; each page (emergence, the ablation report, the scan's heatmaps, patching and
composition, the viewer, the ablation trajectory, the sweep, ``ihprobe fv --html`` with a task
named in markup) holds it only as text, and in
headless Chromium (where installed) no script of it runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import ihprobe
from ihprobe.cli import main
from ihprobe.figures.ablation_series import write_trajectory_report
from ihprobe.figures.report import Markup, Section, write_report
from ihprobe.figures.viewer import attention_viewer
from ihprobe.probes.inputs import repeated_tokens
from ihprobe.training.config import TrainConfig
from tests.browser import chromium, render
from tests.helpers import TINY_TRAIN
from tests.planted_fv import PAIRS, save_planted

# A tag that reports itself when it runs (render() collects window.__errors), and one that
# closes an attribute first; both are valid folder names.
HOSTILE = "<img src=x onerror=window.__errors.push('xss')>"
QUOTED = "\"'><svg onload=window.__errors.push('xss2')>"
TAGS = ("<img src=x", "<svg onload")


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A tiny trained run in a folder whose name is markup, with 2 layers and 8 checkpoints."""
    root = tmp_path_factory.mktemp("html") / HOSTILE / QUOTED
    config = {**TINY_TRAIN, "layers": 2, "heads": 4, "steps": 14, "n_checkpoints": 8}
    return Path(ihprobe.train(TrainConfig(**config, out=str(root))))


def pages(run: Path, out: Path) -> dict[str, Path]:
    """Every page, written with the hostile names in it."""
    ckpt = str(sorted((run / "checkpoints").iterdir())[-1])
    found = {"emergence": out / "emergence.html"}
    assert main(["emergence", str(run), "--batch", "8", "--html", str(found["emergence"])]) == 0
    quick = ["--batch", "8"]
    assert main(["ablate", ckpt, "--draws", "3", *quick, "--out", str(out / "ablate")]) == 0
    found["ablation report"] = out / "ablate" / "report.html"
    assert main(["scan", ckpt, "--metrics", "prefix_matching", "--out", str(out / "scan")]) == 0
    found["scan heatmaps"] = out / "scan" / "heatmaps.html"
    assert main(["patch", ckpt, "--batch", "4", "--out", str(out / "patch")]) == 0
    found["patching"] = out / "patch" / "patch.html"
    assert main(["composition", ckpt, "--draws", "3", "--out", str(out / "comp")]) == 0
    found["composition"] = out / "comp" / "composition.html"
    model = ihprobe.load(ckpt)
    tokens = repeated_tokens(model, n=6, batch=1, seed=0)[0]
    found["viewer"] = out / "viewer.html"
    attention_viewer(model, tokens, start=(1, 0), title=HOSTILE).save(found["viewer"])
    table = pd.DataFrame(
        [
            {"model": HOSTILE, "revision": QUOTED, "step": s, "tokens": s * 64, "layer": None}
            | {"head": None, "metric": f"ar_accuracy.{m}", "value": v}
            for s in (0, 6)
            for m, v in (
                ("load_bearing_index", 1.0),
                ("load_bearing_lo", 0.5),
                ("load_bearing_hi", 1.5),
                ("p_value", 0.5),
            )
        ]
        + [
            {"model": HOSTILE, "revision": QUOTED, "step": s, "tokens": s * 64, "layer": 0}
            | {"head": 0, "metric": "prefix_matching", "value": 0.1}
            for s in (0, 6)
        ]
    )
    found["ablation trajectory"] = write_trajectory_report(out / "trajectory.html", table)
    # FV scores: a checkpoint in the hostile folder, a task whose name is markup
    planted = save_planted(run.parent / "fv-planted")
    task = out / "task.json"
    task.write_text(json.dumps({"name": QUOTED + HOSTILE, "pairs": PAIRS}), encoding="utf-8")
    found["fv"] = out / "fv.html"
    fv = ["fv", str(planted), "--task", str(task), "--shots", "3", "--prompts", "4"]
    assert main([*fv, "--html", str(found["fv"]), "-q"]) == 0
    sections = [Section(HOSTILE, [HOSTILE, QUOTED, pd.DataFrame({HOSTILE: [QUOTED]})])]
    found["any report"] = write_report(out / "any.html", HOSTILE, sections, subtitle=QUOTED)
    return found


@pytest.mark.slow
def test_every_page_shows_the_users_markup_as_text(run, tmp_path):
    written = pages(run, tmp_path)
    for name, page in written.items():
        text = page.read_text(encoding="utf-8")
        raw = [tag for tag in TAGS if tag in text]
        assert not raw, f"{name}: {raw} written as markup"
    shown = written["emergence"].read_text(encoding="utf-8")
    assert "&lt;img src=x onerror=" in shown  # the run's name is on the page, as text
    fv = written["fv"].read_text(encoding="utf-8")
    assert fv.count("&lt;img src=x onerror=") >= 3  # title, summary, task table: as text
    try:
        chromium()
    except pytest.skip.Exception:
        return  # the static check above holds; the browser check runs where Chromium is
    for name, page in written.items():
        rendered = render(page)
        assert not [e for e in rendered.errors if "xss" in e], f"{name}: {rendered.errors}"
        assert rendered.count(r"<img[^>]*src=\"x\"") == 0 and rendered.count("<svg onload") == 0


def test_markup_is_only_what_ihprobe_composed(tmp_path):
    page = write_report(
        tmp_path / "r.html", "t", [Section("s", [Markup("<p><b>ours</b></p>"), HOSTILE])]
    ).read_text()
    assert "<p><b>ours</b></p>" in page and "<img src=x" not in page
