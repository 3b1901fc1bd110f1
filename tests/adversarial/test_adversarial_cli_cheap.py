"""Cheap checks first (issue 45): a bad argument is one line and exit status 2 before any heavy
import, model load or hub request, and concurrent cache writers leave one valid entry.

One Python process imports only ``ihprobe.cli`` and runs every case in turn: each asserts exit
status 2, one line on stderr, and that torch, transformers and the hub client are still not
imported after it (so no case before it imported them either: the refusals cost no model, no
hub request and well under 2 s of CPU). The cases are every SOURCE-taking command with
local-looking paths that cannot be a checkpoint (``/nonexistent/path``, ``./missing``,
``~/...``, a file, a name over 255 bytes), and every numeric flag of every command with values
its type refuses.

The cache test starts two processes at once that write the same entry many times (a JSON entry
and a directory entry) and checks that one whole, valid entry is left and no temporary file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ihprobe.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
LONG = "x" * 300
SOURCE_COMMANDS = ["info", "scan", "ablate", "patch", "composition", "emergence", "fit-law"]
BAD_SOURCES = {
    "absolute missing": "/nonexistent/path",
    "relative missing": "./missing-checkpoint",
    "parent missing": "../missing/checkpoint",
    "home missing": "~/missing-ihprobe-checkpoint",
    "nested missing": "a/b/c",
    "a file": "{file}",
    "a name over 255 bytes": "{tmp}/" + LONG,
}
# For each argparse type: values it refuses.
REFUSED = {
    "a positive integer": ["0", "-1", "1.5", "nan", "abc", "99999999999999999999999"],
    "an integer >= 0": ["-1", "1.5", "inf", "abc", "99999999999999999999999"],
    "a seed from 0 to 2**63-1": ["-1", "1.5", "nan", "abc", "9223372036854775808"],
    "a positive number": ["0", "-1", "nan", "inf", "1e400", "abc"],
    "a number >= 0": ["-1", "nan", "inf", "abc"],
    "a finite number": ["nan", "inf", "-inf", "1e400", "abc"],
    "a fraction in (0, 1]": ["0", "-0.5", "1.5", "nan", "abc"],
    "a probability in [0, 1]": ["-0.1", "1.1", "nan", "inf", "abc"],
    "a fraction in [0, 1)": ["1", "-0.1", "nan", "abc"],
    "fraction_or_count": ["0", "1.5", "-1", "nan", "abc"],
    "count": ["0", "-5", "nan", "abc", "1e30"],
    "device": ["gpu", "cuda:x", "tpu", ""],
    "key_value": ["novalue", "=1", "x=NaN", "x=Infinity", "x=1e999", "x=" + "9" * 30],
}
BASE = {  # the rest of a command line that parses, so only the flag under test is wrong
    "train": ["--out", "{tmp}/new-run"],
    "corpus": ["build"],
    "sweep": ["--grid", "batch_size=4,8", "--out", "{tmp}/sweep"],
}
POSITIONAL = {"sources": ["org/model"], "runs": ["org/run"], "action": [], "train_args": []}


def flag_cases() -> list[tuple[str, list[str]]]:
    cases = []
    for name, sub in build_parser().commands.items():
        head = [name, *BASE.get(name, [])]
        positional = [
            v for a in sub._actions if not a.option_strings for v in POSITIONAL.get(a.dest, [])
        ]
        for action in sub._actions:
            kind = getattr(action.type, "__name__", None)
            if not action.option_strings or kind not in REFUSED:
                continue
            for value in REFUSED[kind]:
                argv = [*head, *positional, f"{action.option_strings[-1]}={value}"]
                cases.append((f"{name} {action.option_strings[-1]}={value}", argv))
    return cases


SOURCE_CASES = [
    (f"{command} {label}", [command, value])
    for command in SOURCE_COMMANDS
    for label, value in BAD_SOURCES.items()
]
CASES = dict([*SOURCE_CASES, *flag_cases()])

RUNNER = textwrap.dedent(
    """
    import io, json, sys
    from contextlib import redirect_stderr, redirect_stdout
    from ihprobe.cli import main
    cases, out = json.load(open(sys.argv[1])), {}
    for name, argv in cases.items():
        err = io.StringIO()
        with redirect_stderr(err), redirect_stdout(io.StringIO()):
            try:
                rc = main(argv)
            except BaseException as exc:  # a traceback is a failure the test reports
                rc = repr(exc)
        heavy = [m for m in ("torch", "transformers", "huggingface_hub") if m in sys.modules]
        out[name] = {"rc": rc, "err": err.getvalue(), "heavy": heavy}
    print(json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict:
    """Every case run in one process that has imported only ``ihprobe.cli``."""
    tmp = tmp_path_factory.mktemp("cheap")
    (tmp / "weights.safetensors").write_bytes(b"not a checkpoint")
    fill = {"{tmp}": str(tmp), "{file}": str(tmp / "weights.safetensors")}
    cases = {}
    for name, argv in CASES.items():
        filled = []
        for part in argv:
            for key, value in fill.items():
                part = part.replace(key, value)
            filled.append(part)
        cases[name] = filled
    (tmp / "cases.json").write_text(json.dumps(cases))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(tmp / "cases.json")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("case", CASES)
def test_bad_arguments_are_one_line_before_any_heavy_import(outcomes, case):
    found = outcomes[case]
    lines = found["err"].strip().splitlines()
    assert found["rc"] == 2 and len(lines) == 1, found
    assert "error:" in lines[0], found
    assert not found["heavy"], f"{case} imported {found['heavy']} before refusing"


def test_there_are_enough_flag_cases_to_cover_every_command():
    commands = {name.split()[0] for name in CASES}
    assert commands >= {"train", "scan", "ablate", "sweep", "data-stats", "predict", "demo"}


# ----------------------------------------------------------------------------- concurrency

WRITER = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    os.environ["IHPROBE_CACHE"] = sys.argv[1]
    from ihprobe.core import cache
    start = float(sys.argv[2])
    while time.time() < start:  # both processes begin together
        pass
    file = Path(sys.argv[1]) / "scans" / "entry.json"
    value = [[l, h, "prefix_matching", 0.25 * h] for l in range(4) for h in range(8)]
    def build(tmp):
        time.sleep(0.01)
        (tmp / "data.json").write_text(json.dumps(value))
    for _ in range(200):
        cache.write(file, value)
        assert cache.read(file, check=lambda v: v) in (None, value)
    for _ in range(20):
        entry = cache.entry("corpus", {"source": "same"}, build)
        assert json.loads((entry / "data.json").read_text()) == value
    print("ok")
    """
)


def test_two_processes_writing_one_cache_entry_leave_one_valid_entry(tmp_path):
    import time

    from ihprobe.core import cache

    start = str(time.time() + 3)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path), start],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    for proc in writers:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and out.strip() == "ok", err[-2000:]
    value = [
        [layer, head, "prefix_matching", 0.25 * head] for layer in range(4) for head in range(8)
    ]
    file = tmp_path / "scans" / "entry.json"
    assert cache.read(file, check=lambda v: v) == value
    assert json.loads(file.read_text())["format"] == cache.FORMAT
    entries = list((tmp_path / "corpus").iterdir())
    assert len(entries) == 1 and json.loads((entries[0] / "data.json").read_text()) == value
    left = [p.name for p in tmp_path.rglob(".tmp-*")]
    assert not left, left
