"""Ablation under a device map (issue 62): ``ihprobe ablate --device-map ...``, the checkpoint
loop behind it and ``ablation_trajectory`` over a series load each checkpoint with most of its
layers on disk and give the numbers of the same checkpoints in memory."""

from __future__ import annotations

import gc

import numpy as np
import pandas as pd
import pytest

import ihprobe
from ihprobe.core.standin import id_tokenizer
from ihprobe.dynamics.trajectories import ablate_checkpoints
from ihprobe.io import offload
from ihprobe.io.runs import Checkpoint
from tests.helpers import save_checkpoint, tiny_hf_model

pytestmark = pytest.mark.slow  # 12-layer models read from disk layer by layer

VOCAB = 128
CAP = "cpu=120KB"  # of a ~0.7 MB model: most layers on disk
ASKED = {"top": 1, "draws": 2, "batch": 3, "metrics": ["induction_loss"]}


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    """Two random 12-layer GPT-NeoX checkpoints."""
    root = tmp_path_factory.mktemp("series")
    return [
        str(
            save_checkpoint(
                tiny_hf_model("gpt-neox", vocab_size=VOCAB, layers=12, d_model=32, seed=seed),
                root / f"seed{seed}",
                id_tokenizer(VOCAB),
            )
        )
        for seed in (0, 1)
    ]


def numbers(table: pd.DataFrame) -> np.ndarray:
    return table.select_dtypes("number").to_numpy(dtype=float)


def same(found: pd.DataFrame, wanted: pd.DataFrame) -> bool:
    """The same rows (every text column) and the same numbers within float tolerance."""
    words = wanted.select_dtypes(exclude="number").columns
    return (
        found.shape == wanted.shape
        and found[words].equals(wanted[words])
        and np.allclose(numbers(found), numbers(wanted), rtol=1e-4, atol=1e-5, equal_nan=True)
    )


def test_the_cli_ablates_a_checkpoint_over_the_cpu_and_disk_as_in_memory(series, tmp_path):
    from ihprobe.cli import main

    common = ["ablate", "--top", "1", "--draws", "2", "--batch", "3", "--metrics"]
    common += ["induction_loss", "-q"]
    folder = tmp_path / "offload"
    placed = ["--device-map", "auto", "--max-memory", CAP, "--offload-folder", str(folder)]
    assert main([*common, *placed, "--out", str(tmp_path / "placed"), series[0]]) == 0
    gc.collect()  # the bridge and its HF model hold each other: the collector frees them
    assert not folder.exists()  # ihprobe created it, and removed it with the model
    assert main([*common, "--out", str(tmp_path / "memory"), series[0]]) == 0
    found, wanted = (pd.read_csv(tmp_path / run / "ablation.csv") for run in ("placed", "memory"))
    assert len(wanted) and same(found, wanted)


def test_the_cli_refuses_placement_flags_without_a_device_map_in_one_line(series, tmp_path, capsys):
    from ihprobe.cli import main

    out = tmp_path / "never"
    assert main(["ablate", "--max-memory", CAP, "--out", str(out), series[0]]) == 2
    err = capsys.readouterr().err
    assert "device_map" in err and err.count("\n") == 1 and not out.exists()


def test_ablate_checkpoints_loads_each_under_the_map(series, tmp_path):
    ckpts = [Checkpoint(source) for source in series]
    where = {"device_map": "auto", "max_memory": offload.parse_max_memory(CAP)}
    placed = ablate_checkpoints(
        ckpts, placement={**where, "offload_folder": tmp_path / "o"}, **ASKED
    )
    wanted = ablate_checkpoints(ckpts, **ASKED)
    assert len(placed) == len(wanted) == 2
    for found, ref, source in zip(placed, wanted, series, strict=True):
        assert found.provenance.model == ref.provenance.model == source  # each its own name
        assert found.top_heads == ref.top_heads and same(found.to_frame(), ref.to_frame())
    assert placed[0].to_frame()["value"].ne(placed[1].to_frame()["value"]).any()  # two models


def test_ablation_trajectory_over_a_series_under_a_device_map(series, tmp_path):
    where = {"cache": False, "progress": False, **ASKED}
    placed = {"device_map": "auto", "max_memory": CAP, "offload_folder": tmp_path / "o"}
    found = ihprobe.ablation_trajectory(series, **placed, **where)
    wanted = ihprobe.ablation_trajectory(series, **where)
    assert len(wanted) and wanted["metric"].str.endswith(".head_change").any()  # with effects
    assert same(found, wanted)


def test_ablation_trajectory_refuses_a_bad_map_before_reading_a_checkpoint(tmp_path):
    from tests.helpers import one_line

    missing = str(tmp_path / "nothing-here")
    said = one_line(lambda: ihprobe.ablation_trajectory(missing, device_map="everywhere"))
    assert "not one of" in said
    said = one_line(lambda: ihprobe.ablation_trajectory(missing, max_memory=CAP, cache=False))
    assert "device_map" in said


def test_a_map_mixing_a_gpu_with_the_disk_is_one_line_and_leaves_no_files(
    series, tmp_path, monkeypatch
):
    """TransformerLens's bridge takes no map that mixes GPUs with the CPU or disk; ihprobe says
    so in its own line (here the rule is made to hold on a CPU-and-disk map) and removes the
    offload files it wrote for the model it could not bridge."""
    from transformer_lens.utilities import multi_gpu

    from tests.helpers import one_line

    monkeypatch.setattr(multi_gpu, "is_mixed_offload_gpu", lambda places: True)
    folder = tmp_path / "offload"
    where = {"device_map": "auto", "max_memory": CAP, "offload_folder": folder}
    said = one_line(lambda: ihprobe.load(series[0], **where))
    assert "max_memory" in said and "CPU and the disk alone" in said
    gc.collect()
    assert not folder.exists()
