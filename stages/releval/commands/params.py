"""`releval params [OVERRIDE ...]`: compose params.yaml from conf/ with Hydra, keeping your overrides.

Overrides are recorded in conf/overrides/recorded.yaml, so `make repro` (which runs this) and
`dvc exp run` (DVC's Hydra integration reads the same conf/) both apply them; `--reset` forgets
them. A params.yaml changed after it was composed is never written over without
`--discard-edits`. See :mod:`releval.composition`.
"""

from __future__ import annotations

import argparse

from releval import composition, paths


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "overrides", nargs="*", help="Hydra overrides, e.g. 'grid.models=[minilm]' or dataset=cranfield"
    )
    parser.add_argument("--conf", default=paths.CONF, help=f"config directory (default: {paths.CONF})")
    parser.add_argument("--out", default=paths.PARAMS, help=f"output file (default: {paths.PARAMS})")
    parser.add_argument("--reset", action="store_true", help="forget the recorded overrides (conf/ alone)")
    parser.add_argument(
        "--discard-edits", action="store_true", help="recompose over changes made to params.yaml after composing"
    )
    parser.add_argument(
        "--check", action="store_true", help="only check that params.yaml was composed from conf/ as it is now"
    )


def run(args: argparse.Namespace) -> int:
    if args.check:
        composition.check_composed(args.out, args.conf)
        print(f"{args.out}: composed from {args.conf}/ as it is now")
        return 0
    result = composition.compose(
        args.conf, args.out, args.overrides, reset=args.reset, discard_edits=args.discard_edits
    )
    for note in result.notes:
        print(note)
    recorded = f" with {' '.join(result.overrides)}" if result.overrides else ""
    print(f"wrote {args.out} from {args.conf}/{recorded}")
    return 0
