"""The release: ``python -m build`` makes a wheel and an sdist; the wheel carries the package
only (no lab, no tests) and, installed with ``--no-deps`` and no network into a fresh venv that
sees the project venv's packages but not its editable ihprobe, runs ``ihprobe --version`` and a
scan of a tiny checkpoint."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

import ihprobe
from tests.helpers import valid_checkpoint

ROOT = Path(__file__).resolve().parents[2]
# both tests on one worker share one build; each build works in its own copy of the tree (two
# builds in one tree raced on its sdist release folder: "No such file" from another's cleanup)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("wheel")]


def source_copy(to: Path) -> Path:
    """The project's files as a fresh clone has them (tracked, or untracked and not ignored),
    copied to ``to``: the build writes its egg-info and release folder there, not in the tree."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        if (ROOT / name).is_file():  # a deleted but still tracked file is skipped
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, to / name)
    return to


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    source = source_copy(tmp_path_factory.mktemp("source"))
    # --no-isolation: the build backend comes from this venv (no network for an isolated one)
    built = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]  # say why
    return out


def test_the_wheel_and_the_sdist_carry_the_package_and_its_license(dist):
    (wheel,) = dist.glob("ihprobe-*.whl")
    (sdist,) = dist.glob("ihprobe-*.tar.gz")
    assert wheel.name.startswith(f"ihprobe-{ihprobe.__version__}-")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert top == {"ihprobe", f"ihprobe-{ihprobe.__version__}.dist-info"}, top
    assert any(n.endswith("licenses/LICENSE") for n in names), "LICENSE missing from the wheel"
    with tarfile.open(sdist) as tar:
        members = tar.getnames()
    assert any(m.endswith("/LICENSE") for m in members)
    assert not any("/lab/" in m or "/tests/" in m for m in members if m.endswith(".py"))


def test_the_wheel_installs_offline_and_scans(dist, tmp_path):
    (wheel,) = dist.glob("ihprobe-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    bin_ = venv / "bin"
    # the project venv's packages, but not its editable ihprobe: a plain path line in a .pth does
    # not run the site-packages' own .pth files (the editable finder is one of them)
    site = Path(
        subprocess.run(
            [str(bin_ / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    site.mkdir(parents=True, exist_ok=True)
    (site / "project.pth").write_text(sysconfig.get_path("purelib") + "\n")
    env = {**os.environ, "PIP_NO_INDEX": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(bin_ / "python"),
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    where = subprocess.run(
        [str(bin_ / "python"), "-c", "import ihprobe; print(ihprobe.__file__)"],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    ).stdout.strip()
    assert where.startswith(str(venv)), f"ihprobe imported from {where}, not the installed wheel"
    version = subprocess.run(
        [str(bin_ / "ihprobe"), "--version"],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    ).stdout
    assert ihprobe.__version__ in version
    checkpoint = valid_checkpoint(tmp_path / "ckpt")
    scan = subprocess.run(
        [str(bin_ / "ihprobe"), "scan", str(checkpoint), "--out", str(tmp_path / "scan"), "-q"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert scan.returncode == 0, scan.stderr
    assert [p for p in (tmp_path / "scan").rglob("*.csv") if p.read_text().count("\n") > 1]
