"""The main job: the default demo shows a real induction-head phase transition, and its report
renders in a browser with every figure and no JavaScript errors."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from dataclasses import replace

import pandas as pd
import pytest

from ihprobe.causal.results import ANSWERS, VERDICT_RULE
from ihprobe.io.provenance import CSV_COLUMNS
from ihprobe.jobs.demo import DemoConfig, run_demo
from ihprobe.jobs.demo_summary import summary_text
from tests.browser import network_requests, render, screenshot

pytestmark = pytest.mark.slow
# The tests of the `demo` fixture share one worker, which runs the demo once; those that run a
# demo of their own stay out of the group, so that the other worker can take them.
DEMO_RUN = pytest.mark.xdist_group("demo-run")


@pytest.fixture(scope="session")  # xdist may interleave other modules: built once per worker
def demo(tmp_path_factory):
    """The default demo, as `make demo` runs it (about a minute on two cores)."""
    out = tmp_path_factory.mktemp("demo")
    return run_demo(DemoConfig(out=str(out), progress=False))


@DEMO_RUN
def test_default_demo_shows_the_phase_transition(demo):
    s = demo.summary.set_index("run").loc["main"]
    assert s.ps_start < 0.05  # chance is about ln2/32 = 0.022
    assert s.ps_final > 0.5
    assert s.ar_start < 0.05 and s.ar_final > 0.5  # AR accuracy rises with it (chance 1/64)
    assert s.induction_loss_final < s.induction_loss_chance  # below the uniform guess ln 64
    assert s.emergence_updates is not None and 100 < s.emergence_updates < 450
    assert s.emergence_low <= s.emergence_updates <= s.emergence_high
    table = pd.read_csv(demo.tables["main/trajectory"])
    assert table.step.nunique() == 21  # step 0 and 20 linear checkpoints, all scanned


@DEMO_RUN
def test_the_demo_csvs_have_the_documented_shapes(demo):
    """Every table but summary.csv has the one long shape, the statistic in its own column;
    summary.csv is one wide row per run (README)."""
    for name in ("main/trajectory", "main/ablation"):
        table = pd.read_csv(demo.tables[name])
        assert list(table.columns) == list(CSV_COLUMNS), name
    ablation = pd.read_csv(demo.tables["main/ablation"])
    assert not ablation["metric"].str.contains(r"\.").any()
    assert {"clean", "p_value", "load_bearing_index"} <= set(ablation["statistic"].dropna())
    summary = pd.read_csv(demo.tables["summary"])
    assert list(summary["run"]) == ["main"] and "verdict" in summary.columns


@DEMO_RUN
def test_the_demo_ablation_can_reach_a_verdict(demo):
    """The top set is tested against enough distinct random sets that p can reach 0.05 (with
    2 x 4 heads only 3 sets existed and the verdict could only be inconclusive), and the
    summary's sentence and table count them from one field."""
    s = demo.summary.set_index("run").loc["main"]
    assert s.ar_accuracy_distinct_sets >= 19  # 1 / (19 + 1) = 0.05
    assert (
        s.ar_accuracy_p_distinct <= 0.05
        or s.verdict != "inconclusive"
        or (
            "neither rule" in s.verdict_reason  # the rule's own answer from enough draws
        )
    )
    assert "distinct random sets exist" not in s.verdict_reason
    text = summary_text(demo)
    assert f"over {s.ar_accuracy_distinct_sets} distinct sets" in text


@DEMO_RUN
def test_demo_report_renders_fits_the_page_and_labels_its_lines(demo):
    rendered = render(demo.report, width=1024)
    assert rendered.errors == []
    figures = rendered.dom.count('class="figure"')
    assert figures >= 9  # trajectory, strip, 3 heatmaps, attention, PS|effects, drops, sets
    assert rendered.count(r'class="main-svg"') >= figures  # every figure drew
    assert "emergence" in rendered.dom.lower() and "law" in rendered.dom
    assert rendered.count(r'class="ihp-tok[ "]') == 32  # the attention viewer's tokens
    assert "Loss by token position" in rendered.dom
    assert network_requests(demo.report) == []  # the page fetches nothing
    assert rendered.overflow <= 0  # nothing wider than a 1024 px window
    labels = " ".join(rendered.annotations)
    assert "emergence ~" in labels and "published law" in labels  # named, not called a fit
    assert "law (fitted)" not in labels
    assert rendered.dom.count("How to read this") >= 2 and "Verdict." in rendered.dom
    assert "uniform-guess loss" in rendered.dom
    # the demo's model reads token ids only: no FV scores, and the page says why in one line
    assert rendered.count(r"<p>FV scores: skipped: this model reads token ids only") == 1
    verdict = demo.summary.set_index("run").loc["main", "verdict"]
    assert verdict in ANSWERS  # the library's one verdict, in the summary and on the page
    assert re.search(r"<b>Verdict\.</b> Ablating L\dH\d[^<]*: " + verdict + ":", rendered.dom)
    assert html.escape(VERDICT_RULE, quote=False) in rendered.dom  # its rule, in How to read
    assert "first copy" in labels and "second copy" in labels  # loss by position's halves
    screenshot(demo.report, "demo-report.png")


def test_compare_adds_natural_and_bi_induct_runs(tmp_path):
    # what compare adds does not depend on the model's size: the fewest updates and checkpoints
    # that emergence's 3-segment fit takes, and 4 heads a layer (head_effects and the ablation
    # baselines go head by head)
    config = replace(
        DemoConfig(out=str(tmp_path), progress=False, compare=True),
        steps=12,
        n_checkpoints=6,
        heads=4,
        random=2,
    )
    result = run_demo(config)
    assert list(result.summary.run) == ["main", "natural", "bi-induct"]
    assert all(path.is_file() for path in result.tables.values())
    rendered = render(result.report)
    assert rendered.errors == [] and "Natural vs Bi-Induct" in rendered.dom
    # 12 updates form no head in the natural arms: the report and the summary say so
    assert "natural and bi-induct formed no induction head at this budget" in rendered.dom
    assert "nothing to compare" in summary_text(result)


def test_cli_demo_prints_where_files_are(tmp_path):
    out = tmp_path / "d"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ihprobe",
            "demo",
            "--out",
            str(out),
            "--steps",
            "20",
            "--draws",
            "2",
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert f"report: {out / 'report.html'}" in result.stdout
    assert "max prefix matching" in result.stdout and "(chance" in result.stdout
    assert "demo: [main] 1/4 training" in result.stderr  # stage lines, and on a stderr that is
    assert "%|" not in result.stderr  # not a terminal (a log file) no progress bars
    last = result.stdout.strip().splitlines()[-1]  # the heads found and the one verdict
    assert re.fullmatch(
        r"main: induction heads found: .+; verdict on its top heads "
        r"\(AR accuracy\): (" + "|".join(ANSWERS) + r")\.",
        last,
    ), last
    assert (out / "report.html").is_file() and (out / "main-trajectory.csv").is_file()


@DEMO_RUN
def test_the_demo_ablate_and_the_report_give_one_verdict(demo, tmp_path, capsys):
    """`ihprobe ablate RUN` with its defaults follows the demo's rule (issue 59, item 13): the
    same top set, verdict and analysis as the demo's summary, and the report says the same."""
    from ihprobe.cli import main

    s = demo.summary.set_index("run").loc["main"]
    assert main(["ablate", str(demo.runs["main"]), "--out", str(tmp_path / "ablate")]) == 0
    out = capsys.readouterr().out
    ablation = pd.read_csv(demo.tables["main/ablation"])
    top = ablation[(ablation.metric == "top_set") & (ablation.value == 1)]
    heads = ", ".join(f"L{int(r.layer)}H{int(r.head)}" for r in top.itertuples())
    assert len(top) == 3 and f"top set {heads}\n" in out
    said = f"{s.verdict}: {s.verdict_reason}."
    assert f"analysis: {s.analysis};" in out and said in out
    assert f"the others say {s.other_analyses}" in " ".join(summary_text(demo).split())
    page = html.unescape(demo.report.read_text())
    assert said in page and f"Analysis: {s.analysis} " in page
