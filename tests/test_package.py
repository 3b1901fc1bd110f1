"""The package surface: every public name resolves, and no submodule import shadows one."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys

import ihprobe


def test_public_names_survive_importing_every_submodule():
    for info in pkgutil.walk_packages(ihprobe.__path__, "ihprobe."):
        if not info.name.endswith("__main__"):  # that one runs the CLI
            importlib.import_module(info.name)
    for name in ihprobe.__all__:
        value = getattr(ihprobe, name)
        assert not inspect.ismodule(value), f"ihprobe.{name} is shadowed by a submodule"


def test_cli_lists_every_command():
    out = subprocess.run([sys.executable, "-m", "ihprobe", "--help"], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    for command in ("demo", "info", "scan", "train", "data-stats", "predict", "emergence",
                    "fit-law", "sweep", "ablate"):  # fmt: skip
        assert command in out
