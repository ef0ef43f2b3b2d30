"""`releval agreement`: linearly weighted Cohen's kappa between two annotators.

    releval agreement A B [--annotators NAME_A,NAME_B] [--json]
    releval agreement SET_OR_FILE --annotators NAME_A,NAME_B [--json]

A and B are judgment sets (directories with manifest.yaml) or judgments.jsonl files. With two
paths, each side's judgments are one annotator's: the one named in ``--annotators`` (first name
for A, second for B), or the only annotator in that file. With one path, ``--annotators``
names the two annotators to compare within it (default: its two annotators, when it has exactly
two). The figures are computed on the (query, document) pairs both judged; the grades are the
declared scale's (manifest ``scale``) when a set is given, else the grades used. Prints the
number of shared pairs, linear weighted kappa, unweighted kappa, raw agreement and the confusion
matrix (definitions in :mod:`releval.judging.agreement`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from releval.errors import InputError
from releval.judging.agreement import annotator_agreement, render


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="one or two judgment sets or judgments.jsonl files")
    parser.add_argument("--annotators", help="NAME_A,NAME_B: the two annotators to compare")
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    paths = [Path(p) for p in args.paths]
    if len(paths) > 2:
        raise InputError("give one or two paths", file="<command line>", field="paths")
    names: list[str | None] = [None, None]
    if args.annotators is not None:
        parts = [p.strip() for p in args.annotators.split(",")]
        if len(parts) != 2 or not all(parts):
            raise InputError(
                f"expected two names NAME_A,NAME_B, got {args.annotators!r}", file="<command line>", field="annotators"
            )
        names = list(parts)
    found = annotator_agreement(paths, names)
    if args.json:
        document = {"a": found.label_a, "b": found.label_b, **found.result.to_dict()}
        sys.stdout.write(json.dumps(document, indent=2, allow_nan=False) + "\n")
    else:
        sys.stdout.write(render(found.result, found.label_a, found.label_b))
    return 0
