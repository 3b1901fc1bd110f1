"""What the CLI prints for people: errors that name flags, not Python keywords."""

from __future__ import annotations

from types import SimpleNamespace

import ihprobe.dynamics.changepoint
import ihprobe.dynamics.law
from ihprobe.cli import main
from ihprobe.core.errors import IhprobeError


def test_fit_law_error_suggests_the_flag(monkeypatch, capsys):
    point = SimpleNamespace(batch_size=32, context=64, model="run")
    monkeypatch.setattr(ihprobe.dynamics.changepoint, "run_emergence", lambda run, **kw: point)

    def same_batch(points, b=None, c=None):  # the library's own message, as fit_law raises it
        raise IhprobeError(
            "every point has the same batch size, so its exponent cannot be fitted; add runs "
            "with other values or fix it, e.g. fit_law(points, b=0.37)."
        )

    monkeypatch.setattr(ihprobe.dynamics.law, "fit_law", same_batch)
    assert main(["fit-law", "r1", "r2"]) == 2
    err = capsys.readouterr().err
    assert "e.g. --b 0.37" in err and "fit_law(" not in err and err.count("\n") == 1


def test_a_reader_that_leaves_the_pipe_early_gets_no_traceback():
    """``ihprobe data-stats | head -0``: the reader closes before the command prints; the
    command stops quietly with 141 (128 + SIGPIPE), as a shell reports it."""
    import subprocess
    import sys

    argv = [sys.executable, "-m", "ihprobe", "data-stats", "--producer", "iid", "--batches", "1"]
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child.stdout.close()  # before the interpreter has even started: every print meets EPIPE
    err = child.stderr.read().decode()
    assert child.wait(timeout=120) == 141 and "Traceback" not in err, err
