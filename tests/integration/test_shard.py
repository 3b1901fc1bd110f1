"""Sharded scans: under torchrun (2 gloo processes on CPU) ``ihprobe scan`` and
``ihprobe.trajectory`` give the same table, and the same cache entries, as one process."""

from __future__ import annotations

import doctest
import json
import os
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

import ihprobe
import ihprobe.series.shard
from ihprobe.cli import main
from ihprobe.core.errors import IhprobeError
from ihprobe.core.world import World
from ihprobe.series.shard import each_share, share
from tests.helpers import fake_run

# -n, not --n: torchrun reads --n as an abbreviation of its own flags anywhere on the line
SCAN = ["--metrics", "prefix_matching,copying,ar_accuracy", "--batch", "8", "-n", "8"]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]


def test_each_rank_takes_every_nth_item_and_one_process_takes_all():
    assert [share(range(7), World(rank, 3)) for rank in range(3)] == [[0, 3, 6], [1, 4], [2, 5]]
    assert each_share(lambda items, world: [(x, world.rank) for x in items], "ab") == [
        ("a", 0),
        ("b", 0),
    ]
    with pytest.raises(IhprobeError, match="bad"):
        each_share(lambda items, world: (_ for _ in ()).throw(IhprobeError("bad")), [1])
    assert doctest.testmod(ihprobe.series.shard).failed == 0


def _run(tmp_path):
    """4 checkpoints; the third has the second's weights, so the duplicate crosses ranks."""
    run = fake_run(tmp_path / "run", [0, 10, 20, 30])
    twin, original = (run / "checkpoints" / f"step-0000{s}0" for s in (2, 1))
    (twin / "model.safetensors").write_bytes((original / "model.safetensors").read_bytes())
    return run


def _torchrun(args, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.getcwd()}
    result = subprocess.run(
        [*TORCHRUN, *args], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "terminate called" not in result.stderr
    return result


@pytest.mark.slow
def test_two_process_scan_writes_the_one_process_table(tmp_path, capsys):
    run = _run(tmp_path)
    assert main(["scan", str(run), *SCAN, "--out", str(tmp_path / "one")]) == 0
    printed = capsys.readouterr().out
    result = _torchrun(["-m", "ihprobe", "scan", str(run), *SCAN, "--out", "two"], tmp_path)
    one = (tmp_path / "one" / "scores.csv").read_text()
    assert (tmp_path / "two" / "scores.csv").read_text() == one  # same rows, same values
    table = pd.read_csv(tmp_path / "one" / "scores.csv")
    assert sorted(table.step.unique()) == [0, 10, 20, 30]
    assert set(table.loc[table.step == 20, "duplicate_of"]) == {
        str(run / "checkpoints/step-000010")
    }
    assert table.loc[table.step != 20, "duplicate_of"].isna().all()
    assert result.stdout.count("top prefix_matching") == printed.count("top prefix_matching") == 1


@pytest.mark.slow
def test_two_process_trajectory_returns_the_one_process_table_and_cache(tmp_path):
    run = _run(tmp_path)
    kwargs = {"metrics": ["prefix_matching", "ar_accuracy"], "n": 8, "batch": 8}
    one = ihprobe.trajectory(run, cache=tmp_path / "cache-one", **kwargs)
    script = tmp_path / "sharded.py"
    script.write_text(
        textwrap.dedent(f"""
        import json, os, ihprobe
        from ihprobe.dynamics import trajectories
        scanned, real = [], trajectories.scan
        def counted(model, *args, **kwargs):
            scanned.append(ihprobe.io.models.provenance(model).step)
            return real(model, *args, **kwargs)
        trajectories.scan = counted
        table = ihprobe.trajectory({str(run)!r}, cache="cache-two", **{kwargs!r})
        table.to_pickle(f"rank{{os.environ['RANK']}}.pkl")
        open(f"rank{{os.environ['RANK']}}.json", "w").write(json.dumps(scanned))
        """)
    )
    _torchrun([str(script)], tmp_path)
    for rank in (0, 1):  # every rank returns the whole table
        pd.testing.assert_frame_equal(pd.read_pickle(tmp_path / f"rank{rank}.pkl"), one)
    scanned = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    assert set(scanned[0]) <= {0, 20} and set(scanned[1]) <= {10, 30}  # every other one each
    assert {0, 10, 30} <= {*scanned[0], *scanned[1]}  # 20 may come from the cache of 10
    entries = {
        name: [(f.name, f.read_bytes()) for f in sorted((tmp_path / name / "scans").iterdir())]
        for name in ("cache-one", "cache-two")
    }
    # 4 checkpoints, two with one set of weights; one entry per metric (issue 47: reused alone)
    assert len(entries["cache-one"]) == 3 * len(kwargs["metrics"])
    assert entries["cache-two"] == entries["cache-one"]
    assert one.loc[one.step == 20, "duplicate_of"].notna().all()
