"""Nothing lost (issue 59): ihprobe deletes only what its own marker records it wrote, and only
after the new work's checks have passed; no name (``.lock*``, ``.tmp-*``) makes a user's file
ihprobe's. Each case reproduces one bug of the issue (red before the fix, green after).

* ``corpus build`` with a source that is not installed leaves the existing corpus whole;
  replacing a corpus removes only its recorded files, and refuses while a user's file is inside.
* A user's ``.locked/secret.txt`` or ``.tmp-draft.txt`` is the user's: the folder is refused by
  ``corpus build`` and ``train``, and an ihprobe run beside it never removes it.
* A half-written ``manifest.json`` is rebuilt, a FIFO named ``.ihprobe`` is not read, ``--out``
  a dangling link, a non-UTF-8 name and a 4,096-byte path are one line (exit 2).
* Trained weights follow the umask.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from ihprobe.cli import main
from ihprobe.core.files import atomic_write, remove_temporary, temporary_folder
from ihprobe.core.outputs import check_output_folder, marked
from ihprobe.data import installed_docs
from ihprobe.data.installed_docs import DocSource
from ihprobe.io.runs import RunDir
from ihprobe.training.config import TrainConfig
from tests.helpers import TINY_TRAIN, one_line


def listing(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def sources(tmp_path, monkeypatch) -> dict[str, Path]:
    """Two small documentation sources, ``a`` and ``b``, in place of the Debian packages."""
    monkeypatch.setenv("IHPROBE_CACHE", str(tmp_path / "cache"))
    roots = {}
    for name in ("a", "b"):
        root = tmp_path / "docs" / name
        root.mkdir(parents=True)
        for i in range(12):
            words = " ".join(f"{name}{(i * 7 + j) % 23} word{j % 5}" for j in range(80))
            (root / f"page{i}.txt").write_text(words + "\n")
        source = DocSource(f"{name}-doc", str(root), "*.txt", "test", f"source {name}")
        monkeypatch.setitem(installed_docs.SOURCES, name, source)
        roots[name] = root
    return roots


def build(out: Path, names: str) -> int:
    return main(["corpus", "build", "--sources", names, "--vocab-size", "300", "--out", str(out)])


def test_a_missing_source_leaves_the_existing_corpus_whole(tmp_path, sources, capsys):
    out = tmp_path / "C"
    assert build(out, "a") == 0
    before = listing(out)
    for page in sources["b"].iterdir():  # source b is not installed any more
        page.unlink()
    assert build(out, "a,b") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "install" in err, err
    assert listing(out) == before
    assert not [p for p in tmp_path.rglob(".tmp-*")]


def test_replacing_a_corpus_removes_only_what_it_recorded(tmp_path, sources, capsys):
    out = tmp_path / "C"
    assert build(out, "a") == 0
    notes = out / "train" / "notes.txt"
    notes.write_text("the user's")
    assert build(out, "a,b") == 2  # a user's file inside: not replaced, nothing removed
    assert "notes.txt" in capsys.readouterr().err and notes.read_text() == "the user's"
    assert json.loads((out / "manifest.json").read_text())["sources"].keys() == {"a"}
    notes.unlink()
    assert build(out, "a,b") == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sources"].keys() == {"a", "b"}
    assert marked(out, "corpus") and any((out / "train" / "b").iterdir())


def test_a_half_written_manifest_is_built_again(tmp_path, sources):
    out = tmp_path / "C"
    assert build(out, "a") == 0
    whole = (out / "manifest.json").read_text()
    (out / "manifest.json").write_text(whole[: len(whole) // 2])
    assert build(out, "a") == 0
    assert json.loads((out / "manifest.json").read_text()) == json.loads(whole)


@pytest.mark.parametrize("name", [".locked/secret.txt", ".tmp-draft.txt", ".lock"])
def test_a_users_file_named_like_ihprobes_own_is_the_users(tmp_path, sources, name, capsys):
    for command in (["corpus", "build", "--sources", "a"], ["train", "--producer", "iid"]):
        folder = tmp_path / "mine"
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("secret")
        assert main([*command, "--out", str(folder)]) == 2
        assert "did not write" in capsys.readouterr().err
        assert (folder / name).read_text() == "secret"
        one_line(lambda f=folder: check_output_folder(f, kind="run"))


def test_a_run_removes_only_its_own_interrupted_writes(tmp_path):
    run = RunDir(tmp_path / "run")
    config = TrainConfig(**{**TINY_TRAIN, "steps": 2, "n_checkpoints": 1}, out=str(run.root))
    from ihprobe import train

    train(config)
    drafts = [run.root / ".tmp-draft.txt", run.checkpoints / ".tmp-step-000009-abc"]
    drafts[0].write_text("the user's")
    drafts[1].mkdir()
    (drafts[1] / "model.safetensors").write_text("the user's")
    ours = temporary_folder(run.checkpoint(9))  # what a killed write of ihprobe's leaves
    atomic_write(ours / "model.safetensors", b"cut short")
    assert remove_temporary(run.checkpoints) == [ours]
    train(replace(config, resume=True))
    assert drafts[0].read_text() == "the user's"
    assert (drafts[1] / "model.safetensors").read_text() == "the user's"
    run.clear()  # what the demo and the grid do to an unfinished run: the user's files stay
    left = sorted(p.relative_to(run.root).as_posix() for p in run.root.rglob("*"))
    partial = "checkpoints/.tmp-step-000009-abc"
    assert left == [".tmp-draft.txt", "checkpoints", partial, f"{partial}/model.safetensors"]


@pytest.mark.parametrize("listed", [True, False], ids=["files listed", "older checkpoint"])
def test_a_users_file_inside_a_checkpoint_stays_when_the_run_is_cleared(tmp_path, listed):
    """``demo --out`` on a run of another config (and the grid on a run killed before its first
    state) clears it: a checkpoint's folder went whole, with the user's notes inside."""
    from ihprobe import train

    run = RunDir(tmp_path / "run")
    train(TrainConfig(**{**TINY_TRAIN, "steps": 2, "n_checkpoints": 1}, out=str(run.root)))
    ckpt = run.latest_checkpoint()
    if not listed:  # an ihprobe.json written before checkpoints listed their files
        meta = json.loads((ckpt / "ihprobe.json").read_text())
        assert sorted(meta.pop("files")) == sorted(p.name for p in ckpt.iterdir() if p.is_file())
        (ckpt / "ihprobe.json").write_text(json.dumps(meta))
    (ckpt / "notes.txt").write_text("the user's")
    run.clear()
    left = sorted(p.relative_to(run.root).as_posix() for p in run.root.rglob("*"))
    notes = f"checkpoints/{ckpt.name}/notes.txt"
    assert left == ["checkpoints", f"checkpoints/{ckpt.name}", notes]
    assert (run.root / notes).read_text() == "the user's"


@pytest.mark.parametrize("command", ["fv", "emergence"])
@pytest.mark.parametrize("target", ["config.json", "notes.html"])
def test_html_never_overwrites_a_file_ihprobe_did_not_write(tmp_path, capsys, command, target):
    """``fv CKPT --html CKPT/config.json`` replaced the checkpoint's config with a page."""
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "model.safetensors").write_bytes(b"")  # the SOURCE check looks for weights only
    (ckpt / target).write_text("the user's")
    assert main([command, str(ckpt), "--html", str(ckpt / target)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a page ihprobe wrote" in err, err
    assert (ckpt / target).read_text() == "the user's"


def test_a_page_ihprobe_wrote_may_be_written_again(tmp_path):
    from ihprobe.core.files import check_writable_file, ihprobe_page
    from ihprobe.figures.report import Section, write_report

    page = write_report(tmp_path / "p.html", "<b>t</b>", [Section("s", ["x"])])
    assert ihprobe_page(page)
    assert check_writable_file(page, "--html", page=True) == page


def test_a_run_folder_ihprobe_made_is_its_own_before_run_json(tmp_path):
    folder = tmp_path / "run"
    with RunDir(folder).lock():
        assert marked(folder, "run")
    (folder / ".lock").write_text("123 host")  # left by a process killed before run.json
    assert check_output_folder(folder, kind="run") == folder


def test_a_fifo_named_like_the_marker_is_not_read(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    os.mkfifo(folder / ".ihprobe")
    found: list = []
    reader = threading.Thread(target=lambda: found.append(marked(folder, "corpus")), daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert found == [False]
    message = one_line(lambda: check_output_folder(folder, kind="corpus"))
    assert ".ihprobe" in message


def test_out_paths_that_cannot_be_written_are_one_line(tmp_path, capsys):
    dangling = tmp_path / "link"
    dangling.symlink_to(tmp_path / "nowhere")
    long = tmp_path / "/".join(["d" * 200] * 21)
    bad = Path(os.fsdecode(os.fsencode(str(tmp_path)) + b"/r\xff"))
    for out in (dangling, long, bad):
        for command in (["corpus", "build"], ["train", "--producer", "iid"]):
            assert main([*command, "--out", str(out)]) == 2
            err = capsys.readouterr().err.strip()
            assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert not (tmp_path / "nowhere").exists()
    target = tmp_path / "real"
    target.mkdir()
    (tmp_path / "to-real").symlink_to(target)
    assert check_output_folder(tmp_path / "to-real", kind="corpus") == target


def test_trained_weights_follow_the_umask(tmp_path):
    from ihprobe import train

    old = os.umask(0o022)
    try:
        run = train(TrainConfig(**{**TINY_TRAIN, "steps": 2}, out=str(tmp_path / "run")))
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in Path(run).rglob("*") if p.is_file()}
    assert modes["model.safetensors"] == 0o644, modes
    assert set(modes.values()) == {0o644}, modes
