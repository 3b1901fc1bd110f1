"""The LLC study's claims and its results file: the LLC finite at every checkpoint, its
diagnostics, and whether its change point lies in the PS emergence bracket."""

from __future__ import annotations

import pandas as pd

from ihprobe import EmergencePoint, SGLDSettings

TITLE = "# LLC over the checkpoints of the demo run (CPU)"


def header(command: str, seconds: float, run: str, settings: SGLDSettings, n_beta: float):
    """The lines above the table: what only the run holds (``--report`` keeps the recorded)."""
    return [
        TITLE,
        "",
        f"Command: `{command}` (from the repository root; {seconds:.0f} s for the",
        "uncached checkpoints on a 2-core CPU shared with other jobs, one torch thread).",
        "",
        f"Run: `{run}` (demo configuration). SGLD: step {settings.lr:g}, localisation "
        f"{settings.localization:g}, n_beta {n_beta:.0f}, {settings.chains} chains x "
        f"{settings.draws} draws, batch {settings.batch_size}, {settings.rows} rows of the run's "
        "own data distribution (devinterp 2.x `llc`). The checks below are the module's",
        "diagnostics (`LLCTrajectory.checks`); every chain's SGLD loss trace is drawn in the",
        "run's `llc.html` (`ihprobe.figures.forecast.llc_figure`).",
        "",
    ]


def render(frame: pd.DataFrame, head: list[str], stage: str) -> str:
    """The results file: ``head`` (:func:`header`), the CSV of record's table and checks, and
    the ``stage`` sentence (:func:`stage_sentence`)."""
    finite = bool(frame.finite.all())
    passed = int((frame.positive & frame.levelled & frame.chains_agree).sum())
    lines = [
        *head,
        "| " + " | ".join(frame.columns) + " |",
        "|" + " --- |" * len(frame.columns),
        *("| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False)),
        "",
        f"- LLC finite at every checkpoint: {'yes' if finite else 'NO'}.",
        f"- Checks passed (positive, levelled, chains agree) at {passed} of {len(frame)} "
        "checkpoints.",
        f"- {stage}",
        "",
    ]
    return "\n".join(lines)


def recorded_stage(text: str) -> str:
    """The stage sentence a results file records (it needs the run's PS point)."""
    return [line for line in text.split("\n") if line.startswith("- ")][-1][2:]


def stage_sentence(llc_point: EmergencePoint, ps_point: EmergencePoint) -> str:
    """One sentence: does the LLC's change point lie in the PS emergence bracket, how far off.

    Example:
        >>> ps = EmergencePoint("prefix_matching", "max", True, updates=1000.0,
        ...                     updates_low=900.0, updates_high=1100.0)
        >>> llc = EmergencePoint("llc", "max", True, updates=1300.0)
        >>> stage_sentence(llc, ps)[:64]
        'The LLC change point (1,300 updates) lies outside the PS emergen'
    """
    if not ps_point.transition:
        return f"Prefix matching shows no emergence ({ps_point.reason}); nothing to compare with."
    if not llc_point.transition:
        return (
            f"The LLC shows no change point ({llc_point.reason}), so it marks no stage at the PS "
            f"emergence ({ps_point.updates:,.0f} updates)."
        )
    gap = llc_point.updates - ps_point.updates
    inside = ps_point.updates_low <= llc_point.updates <= ps_point.updates_high
    where = "within" if inside else "outside"
    side = "later than" if gap > 0 else "earlier than"
    return (
        f"The LLC change point ({llc_point.updates:,.0f} updates) lies {where} the PS emergence "
        f"bracket ({ps_point.updates_low:,.0f}-{ps_point.updates_high:,.0f} updates), "
        f"{abs(gap):,.0f} updates {side} the PS point ({ps_point.updates:,.0f})."
    )
