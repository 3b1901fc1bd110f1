"""Every python and bash block of the README and the docs runs (tests/docs/blocks.py): python
blocks as scripts, bash blocks of ``ihprobe`` commands through the CLI, in a folder where
``runs/demo/main`` is a small run trained here and ``EleutherAI/pythia-160m`` a hand-laid,
offline HF cache. A block that cannot run on one CPU carries a no-run mark with its reason."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests.docs.blocks import blocks, commands
from tests.hub_layout import lay_out, use_offline

RUNNABLE = [b for b in blocks() if b.no_run is None]
DEMO_CHECKPOINT = "runs/demo/main/checkpoints/step-000500"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """A folder holding ``runs/demo/main`` (a 2-layer, 4-head run of 80 updates whose last
    checkpoint is linked as ``step-000500``) and a hub cache with it as three pythia revisions."""
    import ihprobe

    root = tmp_path_factory.mktemp("docs-blocks")
    run = root / "runs" / "demo" / "main"
    config = ihprobe.TrainConfig(
        out=str(run),
        producer="repeats",
        steps=80,
        layers=2,
        heads=4,
        d_model=32,
        batch_size=8,
        context=64,
        n_checkpoints=8,
        seed=0,
    )
    ihprobe.train(config)
    last = ihprobe.checkpoints(str(run))[-1]
    assert (root / DEMO_CHECKPOINT).parent.is_dir()
    if not (root / DEMO_CHECKPOINT).exists():
        (root / DEMO_CHECKPOINT).symlink_to(Path(last.source).resolve())
    revisions = {r: Path(last.source) for r in ("step1000", "step2000", "step3000")}
    lay_out(root / "hub", "EleutherAI/pythia-160m", revisions)
    return root


@pytest.fixture
def inside(workspace, tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("IHPROBE_CACHE", str(tmp_path / "cache"))
    use_offline(workspace / "hub", tmp_path, monkeypatch)
    return workspace


@pytest.mark.slow  # trains an 80-update run once, then runs each block (seconds each)
@pytest.mark.parametrize("block", RUNNABLE, ids=[b.name for b in RUNNABLE])
def test_the_block_runs(block, inside):
    if block.language == "python":
        exec(compile(block.code, block.name, "exec"), {"__name__": "__docs__"})  # noqa: S102
        return
    from ihprobe.cli import main

    for command in commands(block.code):
        argv = shlex.split(command)
        assert argv[0] == "ihprobe", (
            f"{block.name}: '{command}' is not an ihprobe command; mark the block "
            "<!-- no-run: REASON --> if it cannot run here"
        )
        assert main(argv[1:]) == 0, f"{block.name}: {command}"


def test_the_marked_blocks_are_listed_with_their_reasons():
    """The blocks that do not run, each with its reason (printed with -rA or on failure)."""
    marked = [b for b in blocks() if b.no_run is not None]
    for block in marked:
        print(f"{block.name} ({block.language}): {block.no_run}")
        assert len(block.no_run) >= 10, f"{block.name}: give the reason it cannot run"
    # each reason names what one CPU lacks: GPUs, a cluster, the network or a long install
    lacking = ("GPU", "Slurm", "hub", "package index", "make")
    assert all(any(word in b.no_run for word in lacking) for b in marked), [
        (b.name, b.no_run) for b in marked
    ]
    assert len(marked) < len(blocks()) / 2  # most blocks run
