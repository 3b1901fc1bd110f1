"""The natural-text pilots (``validate_papers_natural.py``): the outcome against the 4-of-5
target at each budget, and [A]'s b between the B = 4 and B = 16 pilots with the seeds a
natural-text grid would need (``papers_natural_law.py``)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from lab.studies.natural import law as natural_law
from lab.studies.natural import run as natural


def test_the_natural_pilots_outcome_counts_formed_seeds_and_keeps_rows_whose_folders_are_gone(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(natural, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(natural, "OUT_CSV", tmp_path / "natural.csv")
    pilot = next(iter(natural.PILOTS))
    budget = natural.PILOTS[pilot]["tokens"] / 1e6
    saved = [
        {
            **natural.summary(pilot, seed),
            "status": "done",
            "curve": "0.0: 0.010 (0.001)",
            "tokens_M_seen": budget,
            "formed_at_M": 21.3 if seed == 0 else None,
        }
        for seed in (0, 1, 2)
    ]
    pd.DataFrame(saved).to_csv(natural.OUT_CSV, index=False)
    frame = natural.rows()
    mine = frame[frame.pilot == pilot]
    assert list(mine.seed) == [0, 1, 2] and (mine.status == "done").all()
    said = " ".join(natural.outcome(mine))
    assert "**misses the target**" in said and "1 of 3 seeds" in said  # 1 + 2 to run < 4
    formed = [{**row, "formed_at_M": 20.0} for row in saved]
    assert "**pending: 3 of 5 seeds**" in " ".join(natural.outcome(pd.DataFrame(formed)))
    assert "**meets the target**" in " ".join(
        natural.outcome(pd.DataFrame(formed + [{**formed[0], "seed": 3}]))
    )
    # seeds 1 and 2 continued to 3x the law: judged at both budgets, seed 0 counted in both
    more = natural.extended_tokens(pilot) / 1e6
    late = [saved[0]] + [
        {**row, "extended_to_M": more, "tokens_M_seen": more, "formed_at_M": 40.0}
        for row in saved[1:]
    ]
    first, second = natural.outcome(pd.DataFrame(late))
    assert "2.0x the law" in first and "**misses the target**" in first and "1 of 3" in first
    assert "3.0x the law" in second and "**pending: 3 of 5 seeds**" in second and "3 of 3" in second
    running = [{**saved[0], "status": "running", "tokens_M_seen": 12.5}]
    assert natural.outcome(pd.DataFrame(running)) == [
        f"- `{pilot}` within {saved[0]['law_x']:.1f}x the law ({budget:g}M tokens): no seed has "
        "reached it yet (1 running)."
    ]
    assert natural.outcome(pd.DataFrame([{**running[0], "status": "pending"}]))[0].endswith(
        "tokens): not run."
    )


def _natural_pilots(
    b: float, seeds: int, censor_last: bool = False, noise: float = 0.02
) -> pd.DataFrame:
    """Both pilots of the natural b with ``seeds`` each: B = 16 emerges 4^-b as many updates as
    B = 4 (seed s off by ``noise`` (s - 2) decades); ``censor_last``: B = 4's last seed without
    a change point."""
    rows = []
    for pilot, B in zip(natural_law.PAIR, (4, 16), strict=True):
        for seed in range(seeds):
            updates = 20_000 * (B / 4) ** -b * 10 ** (noise * (seed - 2))
            onset = updates * B * 256 / 1e6
            if censor_last and B == 4 and seed == seeds - 1:
                onset = None  # no change point by its last probe, 1.5x its true point
            seen = 1.5 * updates * B * 256 / 1e6
            rows.append(
                {
                    "pilot": pilot,
                    "seed": seed,
                    "B": B,
                    "C": 256,
                    "status": "done",
                    "onset_M": onset,
                    "tokens_M_seen": seen,
                }
            )
    return pd.DataFrame(rows)


def b_line(rows: pd.DataFrame) -> str:
    return next(line for line in natural_law.natural_b_lines(rows) if line.startswith("- b"))


def test_the_natural_b_flips_with_the_data_and_keeps_censored_seeds():
    said = {b: b_line(_natural_pilots(b, 5)) for b in (0.37, 1.0)}
    assert "**agrees**" in said[0.37] and "**disagrees**" in said[1.0]
    assert natural_law.natural_b(_natural_pilots(0.37, 5)).value == pytest.approx(0.37, abs=1e-6)
    censored = natural_law.natural_b(_natural_pilots(0.37, 5, censor_last=True))
    assert "1 censored" in censored.method  # kept as "at least", not dropped
    assert "**pending: 3 of 5 seeds**" in b_line(_natural_pilots(0.37, 3))
    one_cell = _natural_pilots(0.37, 5).query("B == 4")
    assert b_line(one_cell).startswith("- b: pending")


@pytest.mark.parametrize("noise", [0.02, 0.2])
def test_the_natural_spread_says_how_many_seeds_a_grid_would_need(noise):
    runs = natural_law.emergence_runs(_natural_pilots(0.37, 5, noise=noise))
    (line,) = natural_law.spread_lines(runs)
    sd = noise * np.std(np.arange(5) - 2, ddof=1)  # the same in both cells

    def half_width(n):  # b's t-interval half-width with n seeds per cell, B 4x apart
        return stats.t.ppf(0.975, 2 * n - 2) * sd * np.sqrt(2 / n) / np.log10(4)

    need = natural_law.seeds_needed(sd, 4, 0.15)
    assert half_width(need) <= 0.15 < half_width(need - 1)  # the least such n
    assert f"SD {sd:.2f} within a cell (pooled over 8 df" in line
    assert f"B 4x apart: {need} to agree" in line


def test_the_spread_waits_for_two_seeds_in_a_cell():
    censored = natural_law.emergence_runs(_natural_pilots(0.37, 1))
    assert natural_law.spread_lines(censored) == []  # one seed per cell: no within-cell SD


def test_seeds_whose_folders_are_gone_are_read_from_the_csv_not_retrained(
    tmp_path, monkeypatch, capsys
):
    from lab.studies.contrast import run as contrast

    monkeypatch.setattr(natural, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(natural, "OUT_CSV", tmp_path / "natural.csv")
    monkeypatch.setattr(natural, "train_or_reuse", lambda config: pytest.fail("retrained"))
    monkeypatch.setattr(natural, "train", lambda config: pytest.fail("retrained"))
    pilot = next(iter(natural.PILOTS))
    more = natural.extended_tokens(pilot) / 1e6
    row = {**natural.summary(pilot, 0), "status": "done", "max_PS": 0.34, "extended_to_M": more}
    pd.DataFrame([row]).to_csv(natural.OUT_CSV, index=False)
    natural.run_pilot(pilot, 0)
    natural.extend_pilot(pilot, 0)  # extended in an earlier session: its record, no training
    assert capsys.readouterr().out.count('"max_PS": 0.34') == 2
    args = SimpleNamespace(out=str(tmp_path / "contrast"), label=None, recipe="embedded")
    monkeypatch.setattr(
        contrast, "results_files", lambda args: (tmp_path / "c.md", tmp_path / "c.csv")
    )
    monkeypatch.setattr(contrast, "arm_run", lambda *a: pytest.fail("retrained"))
    pd.DataFrame([{"arm": "natural", "seed": 3, "status": "done", "max_ps": 0.4}]).to_csv(
        tmp_path / "c.csv", index=False
    )
    assert contrast.run_arm("natural", 3, args)["max_ps"] == 0.4
    with pytest.raises(pytest.fail.Exception):  # not recorded: it trains
        contrast.run_arm("natural", 4, args)


def test_the_natural_text_preset_is_the_reference_pilots_recipe():
    from dataclasses import replace

    from ihprobe.training.presets import NATURAL_TEXT

    config = natural.config_of("d128-lr3e-3", 0)  # the pilot make reference exports
    text = {**NATURAL_TEXT.producer_options, "text": config.producer_options["text"]}
    assert config == replace(NATURAL_TEXT, out=config.out, producer_options=text, progress=False)
    assert natural.config_of("d128-B16", 0) != replace(
        config, out=natural.config_of("d128-B16", 0).out
    )
