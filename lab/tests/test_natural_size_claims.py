"""The size arm's verdicts on planted runs: the declared ratio both ways and pending below 5
seeds, the amendments (3 placed onsets an arm, the share of seeds with a head, the combined
size verdict without the attention-only arm), and the results file held to the code."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ihprobe.dynamics.verdicts import judge
from lab.studies.natural_law import size
from lab.studies.natural_law import size_claims as sc
from lab.tests.test_natural_law_sensitivity import curve

ROOT = Path(__file__).resolve().parents[2]
D64, D256, AO = f"{sc.BASE}-d64", f"{sc.BASE}-d256", f"{sc.BASE}-ao"
BUDGET = 28_855


RESULTS = ROOT / "lab" / "studies" / "natural_law" / "RESULTS_size.md"


def run(cell: str, seed: int, updates: float | None, head: bool = True) -> dict:
    """A finished run: placed at ``updates`` (with a head unless ``head`` is False), or
    censored at the budget where ``updates`` is None."""
    placed = updates is not None
    return {
        "cell": cell,
        "seed": seed,
        "status": "done",
        "updates": updates if placed else BUDGET,
        "censored": not placed,
        "transition": placed,
        "has_head": placed and head,
        "steps": BUDGET,
        "B": 4,
        "C": 256,
        "tokens": (updates if placed else BUDGET) * 1024,
    }


def planted(factors: dict[str, float], seeds: int = 5, sd: float = 0.05) -> pd.DataFrame:
    """Every arm placed at 8,000 updates times its factor, with log-normal seed noise."""
    rng = np.random.default_rng(0)
    rows = [
        run(arm, s, 8_000 * factors.get(arm, 1.0) * 10 ** (sd * rng.standard_normal()))
        for arm in size.ARMS
        for s in range(seeds)
    ]
    pending = [
        {"cell": arm, "seed": s, "status": "pending"} for arm in size.ARMS for s in range(seeds, 5)
    ]
    return pd.DataFrame(rows + pending)


def test_the_size_verdict_agrees_disagrees_and_waits_for_five_seeds():
    assert sc.size_verdict(planted({}))[0] == "agrees"
    assert sc.size_verdict(planted({D64: 3.0}))[0] == "disagrees"
    said, why = sc.size_verdict(planted({D256: 1 / 3}))
    assert said == "disagrees" and why.startswith(f"{D64}: agrees; {D256}: disagrees"), why
    assert sc.size_verdict(planted({}, seeds=3))[0] == "pending: 3 of 5 seeds"


def test_attention_only_is_judged_beside_the_size_verdict_not_in_it():
    frame = planted({AO: 3.0})
    assert sc.size_verdict(frame)[0] == "agrees"
    lines = size.arm_lines(frame, AO)
    assert "**disagrees**" in lines[0] and lines[0].startswith("- attention-only")


def test_a_ratio_needs_three_placed_onsets_an_arm():
    # one or two placed runs just under a bound: sigma collapses and the declared rule alone
    # would say "agrees" of an arm whose other runs never formed a head
    base = [run(sc.BASE, s, u) for s, u in enumerate([8000, 8100, 7900, 8050, 7950])]
    for placed in ([8000], [7990, 8010]):
        arm = [run(D64, s, u) for s, u in enumerate(placed)]
        late = {"updates": 9_000.0, "steps": 9_000}  # censored just above the placed ones
        arm += [run(D64, s, None) | late for s in range(len(placed), 5)]
        runs = sc.runs_of(pd.DataFrame(base + arm))
        ratio = sc.onset_ratio(runs, D64)
        assert judge(ratio, sc.CLAIM)[0] == "agrees"
        said, note = sc.verdict(ratio, runs, D64, final=True)
        assert said == "inconclusive at this scale"
        assert note == f"fewer than 3 placed onsets ({D64}: {len(placed)})"
    three = sc.runs_of(planted({}))
    assert sc.verdict(sc.onset_ratio(three, D64), three, D64, final=True) == ("agrees", "")


def test_the_share_of_seeds_with_a_head_is_compared_both_ways():
    frame = planted({})
    frame.loc[frame.cell == D256, ["censored", "has_head", "updates"]] = [True, False, BUDGET]
    runs = sc.runs_of(frame)
    share, base, p = sc.formation(runs, D256)
    assert (share.value, base.value) == (0.0, 1.0) and p < 0.01  # 0 of 5 against 5 of 5
    assert sc.formation_verdict(runs, D256, final=False) == "differs"
    assert sc.formation_verdict(runs, D64, final=False) == "no difference found"
    early = sc.runs_of(planted({}, seeds=3))
    assert sc.formation_verdict(early, D64, final=False) == "pending: 3 of 5 seeds"
    said = size.summary(frame).split("; ")  # the summary's counts carry these verdicts
    p_256 = size.p_text(stats.fisher_exact([[0, 5], [5, 0]])[1])
    assert said[2].startswith(
        "d_model 256: 5 finished, 0 placed, 0 with a head (onset over d_model 128's: at least "
    )  # every d_model 256 run censored: a bound
    arms = size.holm_adjusted(runs)  # the other arms' p are 1: Holm multiplies 256's by 3
    assert len(arms) == 3 and size.p_text(arms[D256]) == size.p_text(3 * float(p_256))
    assert said[2].endswith(
        f"share with a head against d_model 128's: differs, Fisher p = {p_256}, "
        f"Holm's adjusted over 3 arms {size.p_text(arms[D256])})"
    )
    assert "(onset over d_model 128's: " in said[1] and "], agrees, and" in said[1]  # as planted
    assert said[1].endswith(
        "and share with a head against d_model 128's: no difference found, Fisher p = 1.00, "
        "Holm's adjusted over 3 arms 1.00)"
    )


def test_a_placed_onset_without_a_head_is_censored_in_the_check_and_left_out_of_heads():
    frame = planted({})
    frame.loc[(frame.cell == D64) & (frame.seed < 3), "has_head"] = False
    runs = sc.runs_of(frame)
    assert sc.among_heads(runs, D64).method == "Welch t on log10, 2 and 5 seeds"
    headless = sc.headless_censored(runs)
    moved = sc.onset_ratio(headless, D64)
    assert moved.value > sc.onset_ratio(runs, D64).value + 0.3  # 3 runs now at the budget
    said, note = sc.verdict(moved, headless, D64, final=True)  # 2 placed onsets are left
    assert (said, note) == ("inconclusive at this scale", f"fewer than 3 placed onsets ({D64}: 2)")


def test_a_run_without_live_probes_is_left_out_and_every_seed_ended_is_final():
    frame = planted({})
    frame.loc[(frame.cell == D64) & (frame.seed == 4), "updates"] = np.nan
    runs = sc.runs_of(frame)
    assert (runs.cell == D64).sum() == 4 and runs.updates.notna().all()
    assert sc.ended(frame, D64)
    said, _ = sc.verdict(sc.onset_ratio(runs, D64), runs, D64, sc.ended(frame, D64))
    assert not said.startswith("pending")


def test_censored_runs_are_told_apart_by_whether_a_rise_had_begun():
    k = np.arange(33)
    rising = 0.01 + np.clip((k - 22) / 10, 0, 1) * 0.05
    flat = 0.01 + 0.001 * np.sin(k)
    rows = [
        run(D64, 0, None) | {"curve": curve(rising, 1024), "B": 4, "C": 256},
        run(D64, 1, None) | {"curve": curve(flat, 1024), "B": 4, "C": 256},
        run(D64, 2, 7_000.0) | {"curve": curve(rising, 1024), "B": 4, "C": 256},
    ]
    said = sc.censoring(pd.DataFrame(rows), D64)
    assert said == "2 of 3 (1 with no rise, 1 rising under 0.1)"


@pytest.mark.slow
def test_the_power_of_agreement_matches_a_simulation_and_the_report_says_it():
    rng, n, draws = np.random.default_rng(1), 24, 4000
    margin, hits = np.log10(1.5), 0
    for _ in range(draws):
        ci = stats.ttest_ind(*rng.normal(0, sc.SEED_SD, (2, n))).confidence_interval()
        hits += -margin < ci.low and ci.high < margin
    assert abs(hits / draws - sc.agreement_power(n)) < 0.02  # binomial SD at 0.08: 0.004
    assert sc.agreement_power(sc.SEEDS) < 0.01 and sc.seeds_for_power() > 50
    line = size.ratio_lines(planted({}))[-1]
    assert line.startswith("- Power:") and f"about {sc.seeds_for_power()} seeds" in line


def test_the_results_file_gives_the_size_verdict_and_its_power_as_the_code_does():
    """The rendered results file (the findings page includes it; the README quotes no
    finding) states [A]'s size claim as the CSV of record judges it, and the power sentence."""
    frame = pd.read_csv(ROOT / "lab" / "studies" / "natural_law" / "results_size.csv")
    text = RESULTS.read_text(encoding="utf-8")
    said, _ = sc.size_verdict(frame)
    assert f"- **[A]'s size claim (d_model 64 and 256 together): {said}**" in text
    assert f"about {sc.seeds_for_power()} seeds an arm" in text
    at_five = f"a chance of {sc.agreement_power(sc.SEEDS):.2g} at {sc.SEEDS} seeds an arm"
    assert at_five in text


def test_the_profile_interval_judges_both_ways_and_has_none_for_an_arm_all_censored():
    for factors, said in (({}, "agrees"), ({D64: 3.0}, "disagrees")):
        runs = sc.runs_of(planted(factors))
        profile, wald = sc.profile_ratio(runs, D64), sc.onset_ratio(runs, D64)
        assert abs(profile.value - wald.value) < 1e-4
        assert sc.verdict(profile, runs, D64, final=True)[0] == said
    frame = planted({})
    frame.loc[frame.cell == D256, ["censored", "has_head", "updates"]] = [True, False, BUDGET]
    assert np.isnan(sc.profile_ratio(sc.runs_of(frame), D256).value)


def test_the_gpu_queue_skips_runs_recorded_done_whose_folders_stayed_behind(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import lab.studies.study
    from lab.studies.natural_law import queue

    csv = tmp_path / "results_size.csv"
    pd.DataFrame([run(sc.BASE, 0, 5_000.0), {"cell": D64, "seed": 0, "status": "pending"}]).to_csv(
        csv, index=False
    )
    nowhere = SimpleNamespace(folder=lambda cell, seed: tmp_path / cell / f"seed{seed}")
    studies_ = {
        "natural_size": SimpleNamespace(grid=nowhere, csv=csv),
        "natural_law": SimpleNamespace(grid=nowhere, csv=tmp_path / "absent.csv"),
        "natural_late": SimpleNamespace(grid=nowhere, csv=tmp_path / "absent.csv"),
    }
    monkeypatch.setattr(lab.studies.study, "load", studies_.__getitem__)
    finished = queue.finished_runs()
    assert finished == {("natural_size", sc.BASE, 0)}
    assert queue.pending(finished)[0] == ("natural_size", D64, 0)


def test_the_amended_interval_is_the_pooled_t_where_the_declared_one_covered_093():
    df = 2 * sc.SEEDS - 2
    declared = 1 - 2 * stats.t.sf(stats.t.ppf(0.975, df) * math.sqrt(df / (2 * sc.SEEDS)), df)
    assert f"covers {declared:.2f}, not 0.95" in " ".join(sc.AMENDMENTS)
    runs = sc.runs_of(planted({D64: 1.2}, sd=0.2))
    rows = runs[runs.cell.isin([D64, sc.BASE])]
    logs = [np.log10(rows[rows.cell == c].updates) for c in (D64, sc.BASE)]
    pooled = stats.ttest_ind(*logs).confidence_interval()
    ratio = sc.onset_ratio(runs, D64)
    assert np.isclose(ratio.low, pooled.low) and np.isclose(ratio.high, pooled.high)


def test_an_arm_with_no_placed_onset_gives_a_bound_judged_both_ways():
    base = [run(sc.BASE, s, u) for s, u in enumerate([8000, 8100, 7900, 8050, 7950])]
    for bound, said in ((13_000.0, "disagrees"), (9_000.0, "inconclusive at this scale")):
        late = {"updates": bound, "steps": bound}
        runs = sc.runs_of(pd.DataFrame(base + [run(D64, s, None) | late for s in range(5)]))
        ratio = sc.onset_ratio(runs, D64)
        assert ratio.high == np.inf and ratio.method.startswith(f"every run of {D64} censored")
        assert sc.verdict(ratio, runs, D64, final=True) == (said, "")


def test_censoring_skips_runs_without_probes_and_counts_a_rise_at_the_end():
    no_probes = run(D64, 0, None) | {"updates": np.nan, "curve": np.nan}
    at_the_end = run(D64, 1, None) | {"transition": True, "curve": np.nan}
    assert sc.censoring(pd.DataFrame([no_probes, at_the_end]), D64) == (
        "1 of 1 (0 with no rise, 1 rising under 0.1)"
    )


@pytest.mark.slow
def test_the_size_results_file_rerenders_from_its_csv():
    folder = ROOT / "lab" / "studies" / "natural_law"
    frame = pd.read_csv(folder / "results_size.csv")
    kept = (folder / "RESULTS_size.md").read_text().splitlines()[2:5]  # who ran the runs
    assert size.STUDY.report(frame, kept) == (folder / "RESULTS_size.md").read_text()


def test_the_declared_intervals_coverage_is_simulated_at_each_arms_censoring():
    """Without censoring the scaled interval is the exact t-interval (coverage near 0.95 from
    the fit's own draws); an arm all censored gives a bound, with no interval to calibrate."""
    frame = planted({})
    covered, sigma = sc.coverage(sc.runs_of(frame), D64)
    assert abs(covered - 0.95) < 0.05 and 0.01 < sigma < 0.1  # planted sd 0.05 decades
    frame.loc[frame.cell == D256, ["censored", "has_head", "updates"]] = [True, False, BUDGET]
    assert sc.coverage(sc.runs_of(frame), D256) is None
    lines = " ".join(size.arm_lines(frame, D64))
    assert f"coverage of the declared interval at this censoring: {covered:.2f}" in lines
    assert "coverage" not in " ".join(size.arm_lines(frame, D256))


def test_the_regime_line_says_lr_may_explain_fewer_heads_at_d256_only_when_it_has_fewer(tmp_path):
    frame = planted({})
    assert "learning rate's doing" not in size.regime_line(frame)  # every arm has its heads
    assert "pilots at lr 1e-3" in size.regime_line(frame)  # beside it, the pilots' own rate
    frame.loc[frame.cell == D256, ["censored", "has_head", "updates"]] = [True, False, BUDGET]
    said = size.regime_line(frame)
    assert "d_model 256's smaller share of seeds with a head" in said
    assert said.endswith("the post hoc arm at lr 1e-3 (below) judges which: **the learning rate**.")
    frame.loc[frame.cell == size.lr_arm.ARM, "has_head"] = False  # 0 of 5 at lr 1e-3 too
    assert size.regime_line(frame).endswith("judges which: **size**.")
    none = tmp_path / "pilots.csv"
    pd.read_csv(size.PILOTS).query("d_model != 256").to_csv(none, index=False)
    alone = size.regime_line(frame, none)
    assert alone == "- Regime: every arm at the grid's AdamW lr 3e-3 (constant after a 1% warm-up)."


def test_a_differs_that_holms_adjustment_undoes_says_so_in_its_line():
    frame = planted({})
    frame.loc[frame.cell == D256, ["censored", "has_head", "updates"]] = [True, False, BUDGET]
    share = [line for line in size.arm_lines(frame, D256) if "seeds with a head:" in line][0]
    assert share.endswith("**differs**.")  # 0 of 5 against 5 of 5: Holm's 0.024 holds
    frame.loc[(frame.cell == sc.BASE) & (frame.seed == 0), "has_head"] = False  # 4 of 5
    share = [line for line in size.arm_lines(frame, D256) if "seeds with a head:" in line][0]
    adjusted = size.p_text(size.holm_adjusted(sc.runs_of(frame))[D256])
    assert adjusted == "0.14" and share.endswith(
        f"p = 0.048: **differs** (Holm's adjusted p over 3 arms, {adjusted}, finds no "
        "difference: this 'differs' does not hold family-wise)."
    )
    d64 = [line for line in size.arm_lines(frame, D64) if "seeds with a head:" in line][0]
    assert d64.endswith("**no difference found**.")


def test_the_family_line_gives_holms_adjusted_p_beside_each_share():
    frame = planted({})
    frame.loc[frame.cell == D256, ["censored", "has_head", "updates"]] = [True, False, BUDGET]
    said = size.family_line(frame)
    raw = stats.fisher_exact([[0, 5], [5, 0]])[1]  # d_model 256: 0 of 5 against 5 of 5
    assert f"d_model 256 {size.p_text(3 * raw)}" in said and "d_model 64 1.00" in said, said
    assert said.startswith("- The 3 shares of seeds with a head are each tested")


def test_the_results_file_gives_the_size_arms_verdicts_the_code_gives():
    """Each arm's share-of-heads verdict with its Fisher p, and Holm's adjusted p, as the CSV
    of record judges them, in the rendered results file."""
    frame = pd.read_csv(ROOT / "lab" / "studies" / "natural_law" / "results_size.csv")
    text = RESULTS.read_text(encoding="utf-8")
    runs, holm = sc.runs_of(frame), size.holm_adjusted(sc.runs_of(frame))
    for arm in (D64, D256, AO):
        share = sc.formation_verdict(runs, arm, sc.ended(frame, arm))
        p = size.p_text(sc.formation(runs, arm)[2])
        assert f"Fisher's exact p = {p}: **{share}**" in text, arm
        assert f"{size.LABELS[arm]} {size.p_text(holm[arm])}" in text, arm


@pytest.mark.slow  # three processes that import the lab (about 20 s)
def test_the_gpu_queue_starts_processes_that_exist_and_know_their_cells():
    """The queue's own command, as it would start each study's first queued run, lists that
    study's cells (a renamed module or study would fail here, not on a lent GPU)."""
    import subprocess

    from lab.studies.natural_law import queue

    firsts = {}
    for study, cell, seed in queue.SIZE + queue.LATE + queue.GRID:
        firsts.setdefault(study, (cell, seed))
    assert set(firsts) == {"natural_size", "natural_late", "natural_law"}
    for study, (cell, seed) in firsts.items():
        command = queue.run_command(study, cell, seed)
        listed = subprocess.run(
            [*command[:4], "--list"], capture_output=True, text=True, timeout=120, check=True
        )
        assert f"{cell} " in listed.stdout, (command, listed.stdout[-300:])
