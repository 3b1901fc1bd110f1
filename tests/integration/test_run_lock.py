"""The run lock under contention: many processes started together on one run directory, over
fresh, empty, stale and garbage lock files; exactly one holds it in every trial."""

from __future__ import annotations

import multiprocessing
import subprocess
import time

import pytest

from ihprobe.core.errors import IhprobeError
from ihprobe.io.runs import LOCK, RunDir

PROCESSES = 20
CONTEXT = multiprocessing.get_context("fork")


def dead_pid() -> int:
    """The id of a process that has exited (its lock file is stale)."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    return gone.pid


LEFT = {
    "fresh": None,  # no run directory yet
    "empty": "",
    "stale": f"{dead_pid()} {__import__('socket').gethostname()}\n",
    "garbage": "not a pid at all\x00\n",
}


def contend(root, start, attempted, results) -> None:
    """Take the lock when every process is ready; hold it until all have tried."""
    start.wait()
    try:
        with RunDir(root).lock():
            results.put("held")
            attempted.wait()
    except IhprobeError:
        results.put("refused")
        attempted.wait()


def trial(root) -> list[str]:
    start = CONTEXT.Barrier(PROCESSES, timeout=60)
    attempted = CONTEXT.Barrier(PROCESSES, timeout=60)
    results = CONTEXT.Queue()
    procs = [
        CONTEXT.Process(target=contend, args=(root, start, attempted, results))
        for _ in range(PROCESSES)
    ]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    return outcomes


@pytest.mark.slow
@pytest.mark.parametrize("left", sorted(LEFT))
def test_twenty_processes_started_together_give_exactly_one_holder(tmp_path, left):
    for attempt in range(3):
        root = tmp_path / f"run-{attempt}"
        if LEFT[left] is not None:
            root.mkdir()
            (root / LOCK).write_text(LEFT[left])
        outcomes = trial(root)
        assert sorted(outcomes) == ["held"] + ["refused"] * (PROCESSES - 1), (left, attempt)
        assert not (root / LOCK).exists()  # the holder removed it when it let go


TAKES = 3  # times each process holds the lock in the race


def hammer(root, start, inside, guard, overlaps, takes) -> None:
    """Try the lock over and over until this process has held it :data:`TAKES` times (however
    the processes are scheduled); count any moment with two holders."""
    start.wait()
    held = 0
    for _ in range(100_000):  # a bound, far past what scheduling needs
        if held == TAKES:
            return
        try:
            with RunDir(root).lock():
                with guard:
                    inside.value += 1
                    overlaps.value += inside.value > 1
                    takes.value += 1
                held += 1
                time.sleep(0.0005)
                with guard:
                    inside.value -= 1
        except IhprobeError:
            time.sleep(0.002)  # refused: let the holder run


@pytest.mark.slow
def test_taking_and_releasing_in_a_race_never_gives_two_holders(tmp_path):
    # a holder removes the file as it lets go; a process that opened the old file must notice
    start = CONTEXT.Barrier(PROCESSES, timeout=60)
    guard = CONTEXT.Lock()
    inside, overlaps, takes = (CONTEXT.Value("i", 0) for _ in range(3))
    procs = [
        CONTEXT.Process(target=hammer, args=(tmp_path, start, inside, guard, overlaps, takes))
        for _ in range(PROCESSES)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
        assert proc.exitcode == 0
    assert overlaps.value == 0
    assert takes.value == TAKES * PROCESSES  # the lock changed hands 60 times


def test_a_second_holder_in_the_same_process_is_refused_and_names_the_holder(tmp_path):
    import os

    run = RunDir(tmp_path)
    with run.lock():
        assert (tmp_path / LOCK).read_text().split()[0] == str(os.getpid())
        with pytest.raises(IhprobeError, match=f"in use by process {os.getpid()}"):
            with run.lock():
                pass
    with run.lock():  # released: taken again
        pass


@pytest.mark.parametrize("kind", ["link", "folder"])
def test_a_lock_file_that_is_a_link_or_a_folder_is_refused_and_nothing_is_written(tmp_path, kind):
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    run = tmp_path / "run"
    run.mkdir()
    if kind == "link":  # following it would truncate the file it points to
        (run / LOCK).symlink_to(precious)
    else:
        (run / LOCK).mkdir()
    with pytest.raises(IhprobeError, match=r"could not lock .*\.lock") as err:
        with RunDir(run).lock():
            pass
    assert "\n" not in str(err.value)
    assert precious.read_text() == "keep me\n"
