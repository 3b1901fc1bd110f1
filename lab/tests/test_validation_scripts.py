"""The papers' validation scripts (lab/studies/, validate_forecast.py) choose
their verdicts by the shared rules: each claim flipped by the data, the seed count and a
censored cell, and the tables rebuilt from a results CSV alone. The law study's i.i.d. control
is tested in ``test_validation_control.py``."""

from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ihprobe.jobs import grid as common
from ihprobe.training.config import check_config
from lab.studies.forecast import claims as forecast
from lab.studies.law import cells as law_cells
from lab.studies.law import claims as report
from lab.studies.law import report as law_report
from lab.studies.law import run as law
from lab.studies.toy_law import claims as toy_law
from lab.tests.law_helpers import fit_text, law_frame

ROOT = Path(__file__).resolve().parents[2]
WITH_EXAMPLES = sorted(
    ".".join(p.relative_to(ROOT).with_suffix("").parts)
    for p in (ROOT / "lab" / "studies").rglob("*.py")
    if ">>>" in p.read_text()
)


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_the_scripts_examples_hold(name):
    failed, attempted = doctest.testmod(importlib.import_module(name))
    assert attempted > 0 and failed == 0


def test_every_law_cell_gets_a_budget_that_grows_as_b_and_c_shrink():
    budgets = {
        name: law_cells.budget(cell["B"], cell["C"]) for name, cell in law_cells.cells().items()
    }
    assert budgets["sn-B8-C32"] > budgets["sn-B16-C32"] > budgets["sn-B32-C32"]
    assert budgets["sn-B8-C32"] > budgets["sn-B8-C64"]


def test_the_issue_24_cells_train_what_they_say(monkeypatch):
    monkeypatch.setattr(law, "natural_repetition", lambda C: {32: 0.4, 64: 0.6}.get(C, 0.8))
    args = SimpleNamespace(
        out="/tmp/unused", steps=None, layers=2, d_model=64, checkpoints=40, state_every=100
    )
    configs = {
        name: law.config_of(name, cell, 0, args) for name, cell in law_cells.EXPERIMENTS.items()
    }
    for config in configs.values():
        check_config(config)  # raises for a config that cannot train
    for name in ("wu-B8-C32", "wu-B32-C128"):  # the warm-up is the same number of tokens
        c = configs[name]
        assert c.warmup * c.steps * c.batch_size * c.context == pytest.approx(
            law_cells.WARMUP_TOKENS
        )
    assert configs["wu-B8-C128"].steps == law_cells.EXTEND * law_cells.budget(
        8, 128
    )  # as sn's reruns
    assert configs["lr3e-4-B8-C64"].lr == 3e-4
    assert (
        configs["lr3e-4-B8-C64"].steps
        == 3 * law_cells.budget(8, 64)
        == configs["lr1e-3-B8-C64"].steps
    )
    assert configs["nr-B8-C32"].producer_options["repetition"] == 0.4
    assert configs["nr-B8-C256"].producer_options["repetition"] == 0.8
    assert [configs[f"bs-B{B}-C64"].batch_size for B in (64, 128)] == [64, 128]
    control = configs["iid-B16-C64"]
    base = law.config_of("sn-B16-C64", law_cells.cells()["sn-B16-C64"], 0, args)
    assert control.producer == "iid" and control.producer_options["vocab_size"] == 300
    assert (control.steps, control.lr, control.d_model) == (base.steps, base.lr, base.d_model)
    rerun = law.config_of("wu-B8-C32", law_cells.EXPERIMENTS["wu-B8-C32"], 0, args, factor=2)
    assert rerun.warmup * rerun.steps == pytest.approx(configs["wu-B8-C32"].warmup * 28600)


def test_law_fit_verdicts_follow_the_exponents_the_data_hold():
    agreeing, disagreeing = fit_text(law_frame(0.37, 0.62)), fit_text(law_frame(0.9, 0.1))
    assert "b **agrees**" in agreeing and "c **agrees**" in agreeing
    assert "b **disagrees**" in disagreeing and "c **disagrees**" in disagreeing
    assert "OLS on 9 cell means, t df 6, 5 seeds per cell" in agreeing
    assert "c fixed" not in agreeing and "b fixed at 0" in fit_text(
        law_frame(0.37, 0.62), "fixed-structure", fixed={"b": 0.0}
    )


def test_two_cell_exponents_flip_with_the_data_and_wait_for_their_cells():
    def said(frame, start):
        return next(line for line in law_report.experiment_lines(frame) if line.startswith(start))

    c_line, b_line = "- c from C = 32 to 64, repetition 0.9", "- b at C = 32, 1% warm-up"
    assert said(law_frame(0.37, 0.62), c_line).endswith("0.62 +- 0.15: **agrees**.")
    assert said(law_frame(0.37, 0.1), c_line).endswith("0.62 +- 0.15: **disagrees**.")
    assert said(law_frame(0.9, 0.62), b_line).endswith("0.37 +- 0.15: **disagrees**.")
    assert "c = 0.62 [" in said(law_frame(0.37, 0.62), c_line)  # c, not b, from C 2x apart
    pending = said(law_frame(0.37, 0.62), "- c from C = 32 to 64, natural repetition")
    assert "pending (`" in pending and "--cell nr-B8-C32 --cell nr-B8-C64" in pending


def test_the_change_of_b_with_the_learning_rate_flips_with_the_data():
    frame = law_frame(0.9, 0.1)
    lr = frame.cell.isin(["lr1e-3-B8-C64", "lr1e-3-B32-C64"])
    frame.loc[lr, "status"] = "done"  # the same b as the grid's lr
    (same,) = [line for line in law_report.experiment_lines(frame) if "b at lr 1e-3 minus" in line]
    assert same.endswith("**agrees**.") and "5, 5, 5 and 5 seeds" in same
    frame.loc[frame.cell == "lr1e-3-B32-C64", "updates"] /= 4**0.4  # b larger by 0.4
    (moved,) = [line for line in law_report.experiment_lines(frame) if "b at lr 1e-3 minus" in line]
    low, high = map(float, re.search(r"\[([-0-9.]+), ([-0-9.]+)\]", moved).groups())
    assert moved.endswith("**disagrees**.") and low < 0.4 < high
    assert "pending (`" in report.lr_change_line(frame, "3e-4")
    assert "added after the runs" in same and "declared before the runs" in report.lr_change_line(
        frame, "3e-4"
    )  # lr 1e-3's comparison came after its runs, lr 3e-4's before


def test_the_change_of_b_with_the_warm_up_flips_with_the_data_and_waits_for_its_cells():
    frame = law_frame(0.9, 0.1)
    assert "pending (`" in report.warmup_change_line(frame, 32)
    warm = frame.cell.isin(["wu-B8-C32", "wu-B32-C32"])
    frame.loc[warm, "status"] = "done"  # the same b as the 1% warm-up's
    same = report.warmup_change_line(frame, 32)
    assert same.endswith("**agrees**.") and "= same b)" in same
    frame.loc[frame.cell == "wu-B32-C32", "updates"] /= 4**0.4  # b larger by 0.4
    moved = report.warmup_change_line(frame, 32)
    value = float(re.search(r": ([-0-9.]+) \[", moved).group(1))
    assert moved.endswith("**disagrees**.") and abs(value - 0.4) < 0.05  # 3% seed noise
    assert "pending (`" in report.warmup_change_line(frame, 128)  # its cells not done


def test_natural_repetition_is_compared_with_repetition_0_9_at_the_same_cell():
    frame = law_frame(0.37, 0.62)
    nr, sn = frame.cell == "nr-B8-C32", frame.cell == "sn-B8-C32"
    frame.loc[nr, "status"] = "done"
    frame.loc[nr, "updates"] = frame.loc[sn, "updates"].to_numpy()  # as early: no change
    (same,) = report.repetition_lines(frame)
    assert same.endswith("**agrees**.") and "`nr-B8-C32` / `sn-B8-C32` = 1.00" in same
    frame.loc[nr, "updates"] = 3 * frame.loc[sn, "updates"].max()
    frame.loc[nr, "censored"] = True  # none placed by 3x the latest seed's point
    (late,) = report.repetition_lines(frame)
    bound = float(re.search(r"= at least ([0-9.]+) \(every run of nr-B8-C32 censored", late)[1])
    logs = np.log10(frame.loc[sn, "updates"].to_numpy())  # the least bound over the t upper end
    upper = logs.mean() + stats.t.ppf(0.975, 4) * logs.std(ddof=1) / np.sqrt(5)
    assert late.endswith("**disagrees**.") and bound == pytest.approx(
        3 * 10 ** (logs.max() - upper), abs=0.006
    )


def test_a_censored_run_is_modelled_and_moves_the_verdict_to_the_tobit_fit():
    frame = law_frame(0.37, 0.62)
    plain = fit_text(frame)
    assert "0 censored" in plain and "the cell-means interval" in plain
    slow = frame.index[frame.cell.isin(["sn-B8-C128", "sn-B16-C128", "sn-B32-C128"])]
    frame.loc[slow, "transition"] = False  # no transition within a budget far past the law
    frame.loc[slow, "steps"] = frame.loc[frame.C == 32, "updates"].to_numpy()[: len(slow)] * 10
    said = fit_text(frame)
    assert "15 censored" in said and "on cell means: not fitted" in said
    assert "the Tobit interval" in said and "c **disagrees**" in said


def test_size_verdicts_read_the_ratio_and_wait_for_five_seeds():
    same = law_frame(0.37, 0.62)
    assert all("**agrees**" in line for line in report.compared_lines(same, law_cells.SIZE_AT)[:2])
    slower = same.copy()
    slower.loc[slower.cell == "size-d128", "updates"] *= 3
    assert "**disagrees**" in report.compared_lines(slower, law_cells.SIZE_AT)[0]
    three = law_frame(0.37, 0.62, seeds=(0, 1, 2))
    assert "**pending: 3 of 5 seeds**" in report.compared_lines(three, law_cells.SIZE_AT)[0]


def test_a_size_cell_that_never_transitions_is_a_bound_not_a_ratio():
    frame = law_frame(0.37, 0.62)
    wide = frame.cell == "size-d128"
    base = frame[frame.cell == "sn-B8-C64"].updates
    frame.loc[wide, "transition"] = False
    frame.loc[wide, "steps"] = base.max() * 5
    line = report.compared_lines(frame, law_cells.SIZE_AT)[0]
    assert "**disagrees**" in line and "at least" in line and "every run of size-d128" in line
    frame.loc[wide, "steps"] = base.max() * 1.1  # a budget too short to say much
    assert "**inconclusive at this scale**" in report.compared_lines(frame, law_cells.SIZE_AT)[0]


def test_a_cell_with_a_censored_seed_is_replaced_by_its_reruns_only_once_all_are_done(tmp_path):
    args = SimpleNamespace(out=str(tmp_path))
    cell, budget, first = "sn-B8-C128", 16400, (0, 1, 2)
    for seed in first:  # seed 1 censored at the cell's budget; seeds 3 and 4 not run yet
        run = law.run_dir(args.out, cell, seed)
        run.mkdir(parents=True)
        common.write_result(
            run,
            {
                "transition": True,
                "censored": seed == 1,
                "steps": budget,
                "updates": 12867.0 if seed == 1 else 6000.0 + seed,
                "budget_factor": 1,
            },
        )
    assert law.censored_cells(args) == [cell]

    def row(seed):
        return law.collect(args).set_index(["cell", "seed"]).loc[(cell, seed)]

    for seed in first:
        rerun = law.run_dir(args.out, cell, seed, law_cells.EXTEND)
        assert rerun.name == f"seed{seed}-x{law_cells.EXTEND}"
        rerun.mkdir()
        common.write_result(
            rerun,
            {
                "transition": True,
                "censored": False,
                "steps": budget * law_cells.EXTEND,
                "updates": 7000.0 + seed,
                "budget_factor": law_cells.EXTEND,
            },
        )
        if seed != first[-1]:  # a partly rerun cell keeps its first runs, censored one too
            assert bool(row(1).censored) and row(0).updates == 6000
            assert report.rerun_lines(law.collect(args), law_cells.EXTEND) == []
    assert [row(seed).updates for seed in first] == [7000.0 + seed for seed in first]
    assert not bool(row(1).censored) and row(1).steps == budget * law_cells.EXTEND
    assert row(3).status == "pending" and law.extended(args.out, cell)
    said = " ".join(report.rerun_lines(law.collect(args), law_cells.EXTEND))
    assert f"`{cell}`: seed 0 6,000 -> 7,000; seed 1 >= 12,867 -> 7,001; seed 2 6,002" in said
    assert "warm-up" in said and "checkpoint" in said  # what else a rerun changes
    assert law.censored_cells(args) == []  # nothing left to extend


@pytest.mark.parametrize(("b", "verdict"), [(0.37, "agrees"), (0.9, "disagrees")])
def test_the_toy_law_refit_is_judged_by_the_shared_rules(b, verdict):
    table = pd.DataFrame(
        [
            {
                "checkpoints": 40,
                "B": B,
                "C": C,
                "d_model": 64,
                "updates": 1e5 / (B**b * C**0.62) * (1.01 if B == 32 else 1),
            }
            for B, C in ((16, 64), (32, 64), (64, 64), (32, 128))
        ]
    )
    said = " ".join(toy_law.fit_lines(table))
    assert f"b **{verdict}**" in said and "t df 1, 1 seed per cell" in said


def forecast_rows(width: float, covered: list[bool], prior_covered: list[bool]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "prior": "refit",
                "fraction": 0.3,
                "at_step": 150,
                "width": width,
                "covered": c,
                "prior_width": 5.9,
                "prior_covered": p,
            }
            for c, p in zip(covered, prior_covered, strict=True)
        ]
    )


def test_the_forecast_is_judged_against_its_prior_alone():
    all_five, four = [True] * 5, [True] * 4 + [False]
    assert forecast.informs(forecast_rows(3.0, all_five, all_five)).startswith("adds information")
    assert forecast.informs(forecast_rows(5.9, all_five, all_five)).startswith("adds nothing")
    assert forecast.informs(forecast_rows(3.0, four, all_five)).startswith("narrower but")
    row = forecast.summary(forecast_rows(3.0, four, all_five)).iloc[0]
    assert row["forecast covers"].startswith("4/5 0.80 [0.28, 0.99] (Clopper-Pearson, 5 seeds)")
