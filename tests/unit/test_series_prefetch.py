"""Prefetching the next checkpoint while the current one is computed on: the same results as
the plain loop, at most one checkpoint (or a byte budget) ahead, errors raised where the plain
loop raises them, and no hang when the reader dies or the loop stops early."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import huggingface_hub.constants
import pandas as pd
import pytest

import ihprobe.io.swap
import ihprobe.series.checkpoint_rows
import ihprobe.series.sweep
from ihprobe.core.errors import IhprobeError
from ihprobe.dynamics.trajectories import trajectory
from ihprobe.io.runs import Checkpoint, checkpoints
from ihprobe.series import prefetch
from ihprobe.series.prefetch import prefetched
from ihprobe.series.sweep import checkpoint_bytes, map_checkpoints
from tests.helpers import fake_run

SCAN = {"n": 8, "batch": 4}
METRICS = ["prefix_matching", "copying"]


def finishes(work, seconds: float = 30.0):
    """``work()``'s result, or a failure if it has not returned within ``seconds`` (a hang)."""
    box = {}
    thread = threading.Thread(target=lambda: box.update(value=work()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the loop hung"
    return box.get("value")


class Log:
    """Records reads and what the loop held when each read started."""

    def __init__(self):
        self.started: list[int] = []
        self.holding: int | None = None
        self.leads: list[int] = []

    def read(self, item: int) -> int:
        self.started.append(item)
        if self.holding is not None:
            self.leads.append(item - self.holding)
        time.sleep(0.01)
        return item * 10

    def loop(self, **options) -> list[int]:
        out = []
        for item, value in prefetched(range(8), self.read, **options):
            self.holding = item
            time.sleep(0.03)  # compute: the reader runs ahead meanwhile
            self.holding = None
            out.append(value)
        return out


def test_same_values_in_order_at_most_one_ahead():
    plain, ahead = Log(), Log()
    assert finishes(lambda: plain.loop(ahead=0)) == finishes(lambda: ahead.loop(ahead=1))
    assert ahead.started == plain.started == list(range(8))
    assert ahead.leads and set(ahead.leads) == {1}  # k+1 read while k computed, never k+2
    assert plain.leads == []  # without prefetching nothing is read while computing


def test_a_byte_budget_holds_one_item_at_a_time():
    log = Log()
    values = finishes(lambda: log.loop(ahead=1, size=lambda item: 100, budget=150))
    assert values == [10 * i for i in range(8)]
    assert log.leads == []  # two items do not fit: each read waited for the loop to let go


def test_an_error_is_raised_where_the_plain_loop_raises_it():
    def read(item):
        if item == 2:
            raise IhprobeError("checkpoint 2 is broken")
        return item

    for ahead in (0, 1):
        seen = []

        def loop(ahead=ahead, seen=seen):
            with pytest.raises(IhprobeError, match="checkpoint 2 is broken"):
                for item, _ in prefetched(range(5), read, ahead=ahead):
                    seen.append(item)
            return seen

        assert finishes(loop) == [0, 1]


def test_a_reader_that_dies_without_a_word_is_replaced(monkeypatch, caplog):
    def killed_after_one(self):  # the thread ends as if killed: one item handed over, no more
        self._wait_for_room(0)
        self.ready.put((0, "done", self.read(self.items[0])))

    monkeypatch.setattr(prefetch._Reader, "_work", killed_after_one)
    with caplog.at_level(logging.WARNING):
        values = finishes(lambda: [v for _, v in prefetched(range(4), lambda x: x + 1)])
    assert values == [1, 2, 3, 4]
    assert "stopped unexpectedly" in caplog.text


def test_a_loop_that_stops_early_stops_the_reader():
    reads = prefetched(range(100), lambda x: x, ahead=1)
    next(reads)
    reads.close()
    time.sleep(3 * prefetch.POLL_SECONDS)
    assert not [t for t in threading.enumerate() if t.name == "ihprobe-prefetch" and t.is_alive()]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return fake_run(tmp_path_factory.mktemp("prefetch") / "run", [0, 10, 20, 30])


def test_trajectory_is_the_same_with_and_without_prefetching(run):
    tables = [
        trajectory(run, METRICS, cache=False, progress=False, prefetch=ahead, **SCAN)
        for ahead in (0, 1)
    ]
    pd.testing.assert_frame_equal(tables[0], tables[1])
    assert tables[0]["step"].nunique() == 4


def test_ablation_trajectory_is_the_same_with_and_without_prefetching(run):
    from ihprobe.dynamics.ablation_series import ablation_trajectory

    asked = {"metrics": ["ar_accuracy"], "random": 2, "n": 8, "batch": 4, "effects": False}
    tables = [ablation_trajectory(run, cache=False, prefetch=ahead, **asked) for ahead in (0, 1)]
    pd.testing.assert_frame_equal(tables[0], tables[1])
    assert tables[0]["step"].nunique() == 4


def test_map_checkpoints_is_the_same_with_and_without_prefetching(run):
    def weights(ckpt, model):
        return [float(p.detach().double().sum()) for p in model.parameters()]

    found = [map_checkpoints(checkpoints(run), weights, prefetch=ahead) for ahead in (0, 1)]
    assert [v for _, v in found[0]] == [v for _, v in found[1]]
    assert len({tuple(v) for _, v in found[0]}) == 4  # four different checkpoints were swapped in


def test_a_failing_read_in_the_sweep_is_one_error_not_a_hang(run, monkeypatch):
    real = ihprobe.series.checkpoint_rows.read_checked

    def broken(path, *args):
        if path.name.endswith("20"):
            raise IhprobeError(f"{path} is unreadable")
        return real(path, *args)

    monkeypatch.setattr(ihprobe.series.checkpoint_rows, "read_checked", broken)

    def sweep():
        with pytest.raises(IhprobeError, match="unreadable"):
            trajectory(run, METRICS, cache=False, progress=False, **SCAN)
        return True

    assert finishes(sweep, 120)


def test_tensors_read_ahead_are_swapped_in_without_a_second_read(run, monkeypatch):
    calls = []
    real = ihprobe.io.swap.read_state_dict

    def counting(path):
        calls.append(path)
        return real(path)

    def built(*args, **kwargs):
        raise AssertionError("an HF model was built to read the weights")

    monkeypatch.setattr(ihprobe.io.swap, "read_state_dict", counting)
    swept = ihprobe.series.sweep.each_model(checkpoints(run), prefetch=1)
    first = next(swept)  # the first checkpoint is loaded, which builds its HF model
    monkeypatch.setattr(ihprobe.io.swap, "build_hf_model", built)
    assert len([first, *swept]) == 4
    assert calls == []  # every swap took the tensors the prefetching thread had read


def test_checkpoint_bytes_on_disk_and_unknown_before_a_download(run, tmp_path, monkeypatch):
    from tests.hub_layout import lay_out

    ckpt = checkpoints(run)[0]
    weights = sum(f.stat().st_size for f in Path(ckpt.source).glob("*.safetensors"))
    assert checkpoint_bytes(ckpt) == weights > 0
    hub = tmp_path / "hub"
    lay_out(hub, "org/run", {"step0": Path(ckpt.source)})
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    assert checkpoint_bytes(Checkpoint("org/run", "step0")) == weights
    assert checkpoint_bytes(Checkpoint("org/run", "step9")) == 0  # not cached: unknown


def test_a_budget_smaller_than_one_checkpoint_still_scans_every_one(run, monkeypatch):
    monkeypatch.setattr(prefetch, "available_bytes", lambda: 1000)  # budget 500 bytes
    tight = trajectory(run, METRICS, cache=False, progress=False, **SCAN)
    plain = trajectory(run, METRICS, cache=False, progress=False, prefetch=0, **SCAN)
    pd.testing.assert_frame_equal(tight, plain)


def test_cache_false_writes_nothing(run, cache_dir):
    trajectory(run, METRICS, cache=False, progress=False, **SCAN)
    assert not cache_dir.exists() or not any(p.is_file() for p in cache_dir.rglob("*"))


def test_a_fetch_ahead_and_a_removal_from_the_hf_cache_take_turns(run):
    from ihprobe.io.hub_cache import CACHE_LOCK, fetched

    held, release = threading.Event(), threading.Event()

    def remover():  # stands for drop_revision scanning the cache
        with CACHE_LOCK:
            held.set()
            release.wait(5)

    threading.Thread(target=remover, daemon=True).start()
    held.wait(5)
    threading.Timer(0.3, release.set).start()
    start = time.perf_counter()
    fetched(checkpoints(run)[0].source)
    assert time.perf_counter() - start >= 0.25  # waited for the removal to finish
