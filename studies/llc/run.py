"""The LLC over the checkpoints of the demo run, beside its prefix-matching emergence.

Runs :func:`ihprobe.llc_trajectory` (devinterp's SGLD; needs ``pip install 'ihprobe[llc]'``) on
one demo-configuration run (default: seed 0 of ``studies/forecast/run.py``, the demo's
``DemoConfig`` training settings with live probes; one torch thread, as the demo), finds the
LLC's change point with the PS change-point fit, and writes ``studies/llc/RESULTS_llc.md`` and
``studies/llc/RESULTS_llc.csv`` (one row per checkpoint with the diagnostics) and the figure
``llc.html`` into the run. Cached per checkpoint: a rerun only samples new checkpoints.
``.venv/bin/python -m studies llc [--run DIR] [--chains 2] [--draws 100]``.
"""

from __future__ import annotations

import argparse
import shlex
import time
from pathlib import Path

import torch

from ihprobe.jobs.demo import DemoConfig
from studies.study import ROOT


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--run", default=str(ROOT / "runs" / "validate-forecast-demo" / "B32-seed0")
    )
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--draws", type=int, default=100)
    args = parser.parse_args(argv)

    from ihprobe import (
        SGLDSettings,
        llc_figure,
        llc_stages,
        llc_trajectory,
        run_emergence,
        trajectory,
    )
    from ihprobe.dynamics.llc import stage_sentence
    from ihprobe.io.runs import run_meta

    torch.set_num_threads(DemoConfig().threads)  # as the demo: more threads spin on shared cores
    run = Path(args.run)
    settings = SGLDSettings(chains=args.chains, draws=args.draws)
    begin = time.perf_counter()
    traj = llc_trajectory(run, settings, progress=True)
    seconds = time.perf_counter() - begin
    table = trajectory(run, ["prefix_matching"])
    ps_point = run_emergence(run)
    stage = llc_stages(traj)
    llc_figure(traj, table, stage, ps_point).write_html(run / "llc.html", include_plotlyjs="cdn")
    frame = traj.frame.drop(columns="llc_chains").merge(traj.checks, on="step")
    frame = frame.round({"llc_mean": 1, "llc_std": 1, "init_loss": 3})
    command = "python -m studies llc " + shlex.join(argv or [])
    frame.assign(command=command.strip()).to_csv(
        Path(__file__).with_name("RESULTS_llc.csv"), index=False
    )
    finite = bool(frame.finite.all())
    n_beta = settings.beta(run_meta(run)["config"]["context"])
    lines = [
        "# LLC over the checkpoints of the demo run (CPU)",
        "",
        f"Command: `{command.strip()}` (from the repository root; {seconds:.0f} s for the",
        "uncached checkpoints on a 2-core CPU shared with other jobs, one torch thread).",
        "",
        f"Run: `{run.name}` (demo configuration). SGLD: step {settings.lr:g}, localisation "
        f"{settings.localization:g}, n_beta {n_beta:.0f}, {settings.chains} chains x "
        f"{settings.draws} draws, batch {settings.batch_size}, {settings.rows} rows of the run's "
        "own data distribution (devinterp 2.x `llc`). The checks below are the module's",
        "diagnostics (`LLCTrajectory.checks`); every chain's SGLD loss trace is drawn in the",
        "run's `llc.html` (`ihprobe.figures.forecast.llc_figure`).",
        "",
        "| " + " | ".join(frame.columns) + " |",
        "|" + " --- |" * len(frame.columns),
        *("| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False)),
        "",
        f"- LLC finite at every checkpoint: {'yes' if finite else 'NO'}.",
        f"- Checks passed (positive, levelled, chains agree) at "
        f"{int((frame.positive & frame.levelled & frame.chains_agree).sum())} of {len(frame)} "
        "checkpoints.",
        f"- {stage_sentence(stage, ps_point)}",
        "",
    ]
    Path(__file__).with_name("RESULTS_llc.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
