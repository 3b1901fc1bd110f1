"""Every numeric flag of every command is tried at 0, -1, NaN, inf, overflow, empty and a word:
one line on stderr and exit status 2 for each value the flag cannot mean, judged against a table
of which flags may be 0 or negative written from what each flag means (issue 19)."""

from __future__ import annotations

import argparse

import pytest

from ihprobe.cli import build_parser, main

# Flags where 0 or a negative number means something (a seed, a threshold on a log scale, a
# law coefficient, "never", a probability or fraction that may be 0); every other numeric flag
# counts or sizes something and must refuse both. Written from the flags' meaning, not the code.
ZERO_ALLOWED = {
    "--d-mlp",  # 0: attention-only
    "--seed",
    "--threshold",
    "--b",  # fit-law's fixed law exponents
    "--c",
    "--b-exponent",  # predict's law exponents (--b and --c)
    "--c-exponent",
    "--state-every",
    "--reliability",
    "--repetition",
    "--warmup",
    "--weight-decay",
    "--grad-clip",
    "--gpus-per-run",
}  # 0 GPUs: a CPU-only Slurm job
# a seed is 0 to 2**63-1
NEGATIVE_ALLOWED = {"--threshold", "--b", "--c", "--b-exponent", "--c-exponent"}
NEVER_ALLOWED = ("nan", "inf", "-inf", "x", "", "1e999")


def numeric_flags() -> list[tuple[str, str, str]]:
    """(command, flag, how argparse names it) for every option that takes a number."""
    found = []
    subparsers = next(
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    )
    for command, parser in sorted(subparsers.choices.items()):
        for action in parser._actions:
            if action.option_strings and action.type is not None and _is_numeric(action.type):
                flag = max(action.option_strings, key=len)
                found.append((command, flag, "/".join(action.option_strings)))
    return found


def _is_numeric(kind) -> bool:
    try:
        return isinstance(kind("1"), (int, float))
    except Exception:  # noqa: BLE001 - a non-numeric type rejects "1" in its own way
        return False


def flag_refused(command: str, flag: str, named: str, value: str, capsys) -> bool:
    """Parse only: an unknown flag at the end stops the command before it does any work."""
    capsys.readouterr()
    code = main([command, f"{flag}={value}", "--no-such-flag"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in lines[0], lines
    return f"argument {named}:" in lines[0]


@pytest.mark.parametrize("command, flag, named", numeric_flags())
def test_every_numeric_flag_refuses_nonsense_in_one_line(command, flag, named, capsys):
    for value in NEVER_ALLOWED:
        assert flag_refused(command, flag, named, value, capsys), value
    assert flag_refused(command, flag, named, "0", capsys) == (flag not in ZERO_ALLOWED)
    assert flag_refused(command, flag, named, "-1", capsys) == (flag not in NEGATIVE_ALLOWED)
    valid = [v for v in ("1", "0.5") if not flag_refused(command, flag, named, v, capsys)]
    assert valid, "no ordinary value accepted"
