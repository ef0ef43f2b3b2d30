"""The `releval` console entry point: everything that is not a pipeline stage.

Each subcommand lives in ``releval.commands.<name>`` and exposes ``configure(parser)`` and
``run(args) -> int``; modules are imported only when their command runs, so `releval score`
does not pay for loading torch.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys

from releval import __version__
from releval.errors import InputError
from releval.stage import routed_warnings

COMMANDS = {
    "init-dataset": "start a new dataset: configs, queries and rubric templates, an empty first judgment version",
    "params": "compose params.yaml from conf/ (Hydra), the step `dvc repro` does not do",
    "score": "score a run against qrels with an explicit metric contract",
    "validate": "check queries, judgments or a dataset directory; print every problem",
    "pool": "write the unjudged top-k pool of chosen configurations, or the whole grid's judging debt (--missing)",
    "judge": "grade pooled pairs on a local blind page (keys 0-3, resumable, double judging), or a model (--model)",
    "agreement": "weighted Cohen's kappa between two annotators",
    "compare": "paired comparison of two configurations with intervals",
    "explain": "the queries where two configurations differ most, their top 10s side by side with grades and text",
    "gate": "regression gate for CI: exit 1 on a significant regression",
    "power": "queries needed for a paired test; smallest resolvable difference",
    "audit": "trace a reported number to its inputs and verify every link",
    "diff": "every configuration of two commits: the paired difference of its runs, with an interval",
    "archive": "keep every run by content hash; bring back runs of earlier commits (--from-rev, --from-exp)",
    "store": "the embedding store: size per model and role; --gc drops vectors nothing references",
    "holdout": "open the sealed holdout: logged first, then retrieved and scored into reports/holdout",
}


def _module(name: str):
    return importlib.import_module(f"releval.commands.{name.replace('-', '_')}")


def unknown_command(word: str) -> str:
    """One line for a first argument that is no command: the closest command, else all of them."""
    if word.startswith("-"):
        return f"releval: unknown option {word!r}; before a command only -h/--help and --version are taken"
    close = difflib.get_close_matches(word, list(COMMANDS), n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}?" if close else f"commands: {', '.join(COMMANDS)}"
    return f"releval: unknown command {word!r}; {hint}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="releval", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    if not argv or argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0
    if argv[0] == "--version":
        print(f"releval {__version__}")
        return 0
    if argv[0] not in COMMANDS:
        print(unknown_command(argv[0]), file=sys.stderr)
        return 2
    name = argv[0]
    module = _module(name)
    cmd = argparse.ArgumentParser(prog=f"releval {name}", description=COMMANDS[name])
    module.configure(cmd)
    args = cmd.parse_args(argv[1:])
    try:
        with routed_warnings():  # releval's warnings once each; third-party ones hidden unless -W is given
            return int(module.run(args) or 0)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
