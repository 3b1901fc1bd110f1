"""Models placed by accelerate's device maps (issue 62): a random 12-layer GPT-NeoX and a Llama
with grouped KV heads, saved, loaded with most layers kept on disk under a ``max_memory`` cap,
give every analysis the numbers of the same model in memory; no op mixes the disk's stand-in
(meta) tensors with real ones; placement, offload-folder and capacity refusals are one line."""

from __future__ import annotations

import gc
import os

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoModelForCausalLM

import ihprobe
from ihprobe.core.standin import id_tokenizer
from ihprobe.io import offload
from tests.helpers import SameDevice, one_line, save_checkpoint, tiny_hf_model

pytestmark = pytest.mark.slow  # models on disk: about 45 s in all on 2 cores

VOCAB = 128
CAP = {"cpu": "120KB"}  # of a ~0.7 MB model: the embedding and a layer or two on the CPU
ROWS = {"batch": 3}


def tokens(seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    half = torch.randint(2, VOCAB, (3, 8), generator=g)
    return torch.cat([half, half], dim=1)


FUNCTIONS = {
    "scan": lambda m: ihprobe.scan(
        m,
        ["prefix_matching", "copying", "direct_logit_attribution", "induction_loss"],
        **ROWS,
    ),
    "scan_pairs": lambda m: ihprobe.scan(
        m, ["prefix_matching"], attention="pairs", chunk=1, **ROWS
    ),
    "ablate": lambda m: ihprobe.ablate(m, top=1, random=2, **ROWS),
    "head_effects": lambda m: ihprobe.head_effects(m, ["induction_loss"], **ROWS),
    "composition": lambda m: ihprobe.composition(m, "k", draws=4),
    "patch": lambda m: ihprobe.patch(m, clean=tokens(1), corrupted=tokens(2)),
    "path_patch": lambda m: ihprobe.path_patch(m, [(0, 1)], [(11, 0)], **ROWS),
    "attribution_patch": lambda m: ihprobe.attribution_patch(m, **ROWS),
}


def numbers(result) -> np.ndarray:
    table = result if isinstance(result, pd.DataFrame) else result.to_frame()
    return table.select_dtypes("number").to_numpy(dtype=float)


@pytest.fixture(scope="module", params=["gpt-neox", "llama"])
def checkpoint(request, tmp_path_factory):
    hf = tiny_hf_model(request.param, vocab_size=VOCAB, layers=12, d_model=32, context=64)
    return save_checkpoint(hf, tmp_path_factory.mktemp(request.param), id_tokenizer(VOCAB))


@pytest.fixture(scope="module")
def placed(checkpoint, tmp_path_factory):
    folder = tmp_path_factory.mktemp("offload") / "new"
    return ihprobe.load(checkpoint, device_map="auto", max_memory=CAP, offload_folder=folder)


@pytest.fixture(scope="module")
def in_memory(checkpoint):
    return ihprobe.load(checkpoint)


def test_most_layers_sit_on_disk_and_nothing_was_copied_or_moved(placed):
    places = offload.device_map_of(placed)
    on_disk = [name for name, where in places.items() if where == "disk" and ".layers." in name]
    assert len(on_disk) >= 9, places
    assert offload.first_device(placed) == torch.device("cpu")
    assert any(p.is_meta for p in placed.original_model.parameters())  # offloaded, not loaded


@pytest.mark.slow
@pytest.mark.parametrize("name", FUNCTIONS)
def test_each_function_equals_the_model_in_memory(name, placed, in_memory):
    found, wanted = numbers(FUNCTIONS[name](placed)), numbers(FUNCTIONS[name](in_memory))
    assert found.shape == wanted.shape and found.size
    assert np.allclose(found, wanted, rtol=1e-4, atol=1e-5, equal_nan=True)


@pytest.mark.slow
def test_trajectory_over_a_series_under_a_device_map(checkpoint, tmp_path):
    other = save_checkpoint(
        tiny_hf_model("gpt-neox", vocab_size=VOCAB, layers=12, d_model=32, context=64, seed=3),
        tmp_path / "second",
        id_tokenizer(VOCAB),
    )
    series = [str(checkpoint), str(other)]
    where = {"cache": False, "progress": False, "batch": 3}
    placed = {"device_map": "auto", "max_memory": CAP, "offload_folder": tmp_path / "o"}
    found = ihprobe.trajectory(series, ["prefix_matching"], **placed, **where)
    wanted = ihprobe.trajectory(series, ["prefix_matching"], **where)
    assert np.allclose(found["value"], wanted["value"], rtol=1e-4, atol=1e-5)


def test_no_op_mixes_the_disks_stand_ins_and_every_hook_sees_the_first_device(placed):
    """``SameDevice`` (CUDA's rule on any device) over a scan and a pass with a hook on every
    hook point: an offloaded parameter read outside its module's forward would meet a real
    tensor as ``meta`` and raise."""
    seen = {}

    def record(activation, hook):
        seen[hook.name] = activation.device

    with SameDevice(), torch.no_grad():
        ihprobe.scan(placed, ["prefix_matching", "copying", "direct_logit_attribution"], **ROWS)
        placed.run_with_hooks(tokens(0), fwd_hooks=[(lambda name: True, record)])
    first = offload.first_device(placed)
    assert len(seen) >= 12 * 5 and {d.type for d in seen.values()} == {first.type}


def test_a_hf_object_dispatched_by_the_user_is_bridged_in_place(checkpoint, in_memory, tmp_path):
    hf = AutoModelForCausalLM.from_pretrained(
        checkpoint, device_map="auto", max_memory=CAP, offload_folder=tmp_path / "o"
    )
    model = ihprobe.load(hf)
    assert model.original_model is hf and ihprobe.load(hf) is model  # no copy, built once
    found = ihprobe.scan(hf, ["prefix_matching"], tokens=tokens(0)).head["prefix_matching"]
    wanted = ihprobe.scan(in_memory, ["prefix_matching"], tokens=tokens(0))
    assert torch.allclose(found, wanted.head["prefix_matching"], atol=1e-6)


def test_load_takes_a_hf_object_copied_unless_told_not_to(checkpoint):
    hf = AutoModelForCausalLM.from_pretrained(checkpoint)
    copied, itself = ihprobe.load(hf), ihprobe.load(hf, copy=False)
    assert copied.original_model is not hf and itself.original_model is hf
    assert "do not apply" in one_line(lambda: ihprobe.load(hf, device_map="auto"))


def test_swapping_weights_into_a_dispatched_model_is_refused(placed, checkpoint):
    from ihprobe.io.swap import load_weights, swap_weights

    assert "device map" in one_line(lambda: swap_weights(placed, {}))
    assert "device map" in one_line(lambda: load_weights(placed, checkpoint))


def test_offload_files_go_with_the_model_and_only_ihprobes(checkpoint, tmp_path, monkeypatch):
    """A folder ihprobe created goes once the model does; in a folder the caller gave, only
    the files ihprobe wrote go (a stand-in for the offload's own files, planted as it writes)."""
    created = tmp_path / "created"
    model = ihprobe.load(checkpoint, device_map="auto", max_memory=CAP, offload_folder=created)
    assert created.is_dir()
    del model
    gc.collect()
    assert not created.exists()

    given = tmp_path / "given"
    given.mkdir()
    real = offload.OffloadFolder.record

    def record(self):  # accelerate writes no file for a safetensors checkpoint: plant one
        (self.path / "layers.1.weight.dat").write_bytes(b"0" * 8)
        real(self)

    monkeypatch.setattr(offload.OffloadFolder, "record", record)
    model = ihprobe.load(checkpoint, device_map="auto", max_memory=CAP, offload_folder=given)
    (given / "notes.txt").write_text("the user's, written after loading")
    del model
    gc.collect()
    assert sorted(p.name for p in given.iterdir()) == ["notes.txt"]


def test_placements_that_cannot_work_are_one_line(checkpoint, tmp_path, monkeypatch):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "thesis.txt").write_text("work")
    load = lambda **kw: ihprobe.load(checkpoint, device_map="auto", **kw)  # noqa: E731
    assert "thesis.txt" in one_line(lambda: load(max_memory=CAP, offload_folder=theirs))
    assert (theirs / "thesis.txt").read_text() == "work"
    assert "offload_folder" in one_line(lambda: load(max_memory=CAP))  # no disk: cannot hold it
    assert "positive size" in one_line(lambda: load(max_memory={"cpu": "lots"}))
    assert "not one of" in one_line(lambda: ihprobe.load(checkpoint, device_map="everywhere"))
    assert "device_map" in one_line(lambda: ihprobe.load(checkpoint, max_memory=CAP))
    monkeypatch.setattr(offload, "has_accelerate", lambda: False)
    assert "ihprobe[offload]" in one_line(lambda: load(max_memory=CAP))


def test_the_cli_scans_a_checkpoint_over_the_cpu_and_disk(checkpoint, tmp_path, capsys):
    from ihprobe.cli import main

    out, folder = tmp_path / "out", tmp_path / "offload"
    argv = ["scan", "--device-map", "auto", "--max-memory", "cpu=120KB"]
    argv += ["--offload-folder", str(folder), "--metrics", "prefix_matching", "--batch", "3"]
    assert main([*argv, "--out", str(out), "-q", str(checkpoint)]) == 0
    gc.collect()  # the bridge and its HF model hold each other: the collector frees them
    assert (out / "scores.csv").is_file() and not folder.exists()
    capsys.readouterr()
    refused = ["scan", "--max-memory", "cpu=1MB", "--out", str(tmp_path / "o2"), str(checkpoint)]
    assert main(refused) == 2
    err = capsys.readouterr().err
    assert "device_map" in err and err.count("\n") == 1 and not (tmp_path / "o2").exists()


PEAK = """
import gc, sys, threading, time, torch
import ihprobe
torch.set_num_threads(1)
def status():
    with open("/proc/self/status") as f:
        rows = [l.split() for l in f if l.startswith(("RssAnon:", "VmRSS:"))]
    found = {row[0][:-1]: int(row[1]) * 1024 for row in rows}
    return found["RssAnon"], found["VmRSS"]
big, tiny, where = sys.argv[1], sys.argv[2], eval(sys.argv[3])
warm = {**where, "offload_folder": where["offload_folder"] + "-warm"} if where else {}
ihprobe.scan(ihprobe.load(tiny, **warm), ["prefix_matching"], batch=2)  # imports, caches
gc.collect()
(anon, rss), high, done, scanning = status(), [0, 0], threading.Event(), threading.Event()
def sample():
    while not done.is_set():
        now = status()
        high[0] = max(high[0], now[0])
        high[1] = max(high[1], now[1]) if scanning.is_set() else high[1]
        time.sleep(0.002)
watch = threading.Thread(target=sample)
watch.start()
model = ihprobe.load(big, **where)
scanning.set()
ihprobe.scan(model, ["prefix_matching"], batch=2)
done.set()
watch.join()
print(high[0] - anon, high[1] - rss)
"""


@pytest.mark.slow
def test_peak_memory_of_a_disk_offloaded_scan_stays_below_the_models_size(checkpoint, tmp_path):
    """Peak resident memory (sampled every 2 ms) above the level after a first load and scan
    of a tiny model (imports and caches in place), in a fresh process each: while the model in
    memory scans, its RSS is up by more than its weights (the measure can fail); the offloaded
    one's own (anonymous) memory over load and scan stays below them (on GPT-NeoX, 25-30% of
    its block weights stay resident: TransformerLens keeps split copies of the fused QKV
    weights), and its whole RSS below the in-memory run's. The load's checks read every tensor
    through safetensors' memory map; those file pages are the kernel's page cache, reclaimed
    under pressure and unmapped once read, so the load's whole RSS is not held to the bound."""
    import subprocess
    import sys

    hf = tiny_hf_model("gpt-neox", vocab_size=512, layers=12, d_model=256, context=64)
    size = sum(p.numel() * p.element_size() for p in hf.parameters())  # ~39 MB
    ckpt = save_checkpoint(hf, tmp_path / "big", id_tokenizer(512))
    del hf

    def peak(where: dict) -> list[int]:
        env = {**os.environ, "PYTHONPATH": os.getcwd()}
        run = [sys.executable, "-c", PEAK, str(ckpt), str(checkpoint), repr(where)]
        done = subprocess.run(run, capture_output=True, text=True, env=env, check=True)
        return [int(n) for n in done.stdout.strip().splitlines()[-1].split()]

    whole = peak({})
    cap = {"device_map": "auto", "max_memory": {"cpu": "4MB"}}
    offloaded = peak({**cap, "offload_folder": str(tmp_path / "o")})
    assert whole[1] > size, (whole, size)  # the model's weights are resident while it scans
    assert offloaded[0] < size, (offloaded, size)  # the process's own memory never holds them
    # The whole RSS also counts the offload folder's memory-mapped pages a pass has read (page
    # cache, reclaimable): 0.5-1.05 of the size over 9 runs here and in CI, against 1.35-1.49
    # for the model in memory, so it is held below that run's, measured side by side.
    assert offloaded[1] < whole[1], (offloaded, whole)


def test_a_model_wholly_on_disk_takes_its_inputs_on_the_cpu(checkpoint, in_memory, tmp_path):
    """The embedding too on disk: every parameter is a stand-in between passes, so the load's
    causality check and the bridge take their device from the map, not from a parameter."""
    where = {"max_memory": {"cpu": "1KB"}, "offload_folder": tmp_path / "o"}
    model = ihprobe.load(checkpoint, device_map="auto", **where)
    assert set(offload.device_map_of(model).values()) == {"disk"}
    assert str(model.cfg.device) == "cpu"
    found = ihprobe.scan(model, ["prefix_matching"], tokens=tokens(0)).head["prefix_matching"]
    wanted = ihprobe.scan(in_memory, ["prefix_matching"], tokens=tokens(0))
    assert torch.allclose(found, wanted.head["prefix_matching"], atol=1e-6)


@pytest.mark.slow
def test_fv_scores_on_a_disk_offloaded_model_equal_the_model_in_memory(tokenizer, tmp_path):
    hf = tiny_hf_model("gpt-neox", vocab_size=512, layers=12, d_model=32, context=128)
    ckpt = save_checkpoint(hf, tmp_path / "fv", tokenizer)
    placed = ihprobe.load(ckpt, device_map="auto", max_memory=CAP, offload_folder=tmp_path / "o")
    assert "disk" in offload.device_map_of(placed).values()
    found = numbers(ihprobe.fv_scores(placed, prompts=2))
    wanted = numbers(ihprobe.fv_scores(ihprobe.load(ckpt), prompts=2))
    assert found.shape == wanted.shape and found.size
    assert np.allclose(found, wanted, rtol=1e-4, atol=1e-6, equal_nan=True)


def test_the_memory_check_of_a_call_leaves_out_a_device_maps_weights(
    placed, in_memory, monkeypatch
):
    """A call's estimate counts the weights of a model in one place, not those of a map, which
    are streamed in per module: a model larger than memory is not refused for its weights."""
    from ihprobe.core import calls
    from ihprobe.core.memory import shape_of

    seen = []
    monkeypatch.setattr(calls, "check_work", lambda what, found, **kw: seen.append(found.bytes))
    for model in (in_memory, placed):
        calls.arguments(model=model, batch=3)
    weights = 4 * shape_of(in_memory.cfg).parameters
    assert seen[0] - seen[1] == pytest.approx(weights) and seen[1] > 0
