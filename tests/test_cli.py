"""The `releval` entry point's edges: --version, help, and a first argument that is no command.

Each case runs the installed console script, as a user would, and the in-process entry point.
"""

from __future__ import annotations

import tomllib

import pytest

import releval
from releval.cli import COMMANDS
from releval.cli import main as cli_main
from support import BIN, ROOT
from support.commands import run


def releval_cli(*argv: str):
    return run([str(BIN / "releval"), *argv], ROOT, check=False)


def test_version_is_the_packages():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert releval.__version__ == declared
    result = releval_cli("--version")
    assert (result.returncode, result.stdout, result.stderr) == (0, f"releval {declared}\n", "")
    assert "--version" in releval_cli("--help").stdout


@pytest.mark.parametrize(
    "word, closest", [("comapre", "compare"), ("scor", "score"), ("gates", "gate"), ("valdiate", "validate")]
)
def test_a_misspelt_command_is_an_error_naming_the_closest(word, closest):
    result = releval_cli(word, "a", "b")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == f"releval: unknown command {word!r}; did you mean {closest!r}?\n"


def test_an_unknown_command_with_nothing_close_lists_the_commands(capsys):
    assert cli_main(["frobnicate"]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.splitlines() == [f"releval: unknown command 'frobnicate'; commands: {', '.join(COMMANDS)}"]


def test_an_unknown_option_before_the_command_is_an_error(capsys):
    assert cli_main(["--verbose", "score"]) == 2
    assert capsys.readouterr().err == (
        "releval: unknown option '--verbose'; before a command only -h/--help and --version are taken\n"
    )


def test_help_and_no_arguments_print_the_commands(capsys):
    for argv in ([], ["--help"], ["-h"]):
        assert cli_main(argv) == 0
        out = capsys.readouterr().out
        assert all(name in out for name in COMMANDS)
