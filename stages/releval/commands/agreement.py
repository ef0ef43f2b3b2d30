"""`releval agreement`: linearly weighted Cohen's kappa between two annotators, and the
character-overlap F1 of their evidence spans.

    releval agreement A B [--annotators NAME_A,NAME_B] [--corpus FILE] [--json]
    releval agreement SET_OR_FILE --annotators NAME_A,NAME_B [--corpus FILE] [--json]

A and B are judgment sets (directories with manifest.yaml) or judgments.jsonl files. With two
paths, each side's judgments are one annotator's: the one named in ``--annotators`` (first name
for A, second for B), or the only annotator in that file. With one path, ``--annotators``
names the two annotators to compare within it (default: its two annotators, when it has exactly
two). The figures are computed on the (query, document) pairs both judged; the grades are the
declared scale's (manifest ``scale``) when a set is given, else the grades used. Prints the
number of shared pairs, linear weighted kappa, unweighted kappa, raw agreement and the confusion
matrix (definitions in :mod:`releval.judging.agreement`).

When either annotator gave evidence spans on a shared pair, it then prints their agreement: how
many shared pairs have spans from both, from one only, from neither; the character-overlap F1
micro-averaged and as the mean of the pairs'; the pairs sharing no character; and each pair's
characters and F1 (``--json``: the key ``spans``). Anchors are placed in the documents' texts:
``--corpus FILE`` (``--corpus-format``), else the corpus of the set's dataset.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from releval.errors import InputError
from releval.judging.agreement import annotator_agreement, render, render_spans


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="one or two judgment sets or judgments.jsonl files")
    parser.add_argument("--annotators", help="NAME_A,NAME_B: the two annotators to compare")
    parser.add_argument("--corpus", help="corpus the evidence anchors lie in (default: the set's dataset's)")
    parser.add_argument(
        "--corpus-format", choices=("jsonl", "folder", "beir", "smart", "parquet"), help="default: from the path"
    )
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
    found = annotator_agreement(paths, names, corpus=args.corpus, corpus_format=args.corpus_format)
    if args.json:
        document = {"a": found.label_a, "b": found.label_b, **found.result.to_dict()}
        if found.spans is not None:
            document["spans"] = found.spans.to_dict()
        sys.stdout.write(json.dumps(document, indent=2, allow_nan=False) + "\n")
    else:
        sys.stdout.write(render(found.result, found.label_a, found.label_b))
        if found.spans is not None:
            sys.stdout.write(render_spans(found.spans))
    return 0
