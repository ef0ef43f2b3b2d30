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

import polars as pl

from releval.judging import judgments as jmod
from releval.judging.agreement import agreement, render
from releval.errors import InputError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="one or two judgment sets or judgments.jsonl files")
    parser.add_argument("--annotators", help="NAME_A,NAME_B: the two annotators to compare")
    parser.add_argument("--json", action="store_true", help="print JSON")


def load_side(path: Path) -> tuple[pl.DataFrame, dict[int, str] | None]:
    """(judgments, scale or None) of a set directory or a judgments file, validated."""
    if path.is_dir() or (path.name == jmod.JUDGMENTS_NAME and (path.parent / jmod.MANIFEST_NAME).exists()):
        judgment_set = jmod.load_version(path if path.is_dir() else path.parent)
        return judgment_set.judgments, judgment_set.manifest.scale
    return jmod.read_judgments_file(path), None


def pick(judgments: pl.DataFrame, name: str | None, source: Path) -> tuple[pl.DataFrame, str]:
    present = sorted(set(judgments["annotator"].to_list()))
    if name is None:
        if len(present) != 1:
            raise InputError(
                f"holds {len(present)} annotators ({', '.join(present)}); name the one to compare with --annotators",
                file=str(source),
                field="annotator",
            )
        name = present[0]
    elif name not in present:
        raise InputError(
            f"no judgments by annotator {name!r} (present: {', '.join(present) or 'none'})",
            file=str(source),
            field="annotator",
        )
    return judgments.filter(pl.col("annotator") == name).select("query_id", "doc_id", "grade"), name


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
    if len(paths) == 1:
        judgments, scale = load_side(paths[0])
        if names == [None, None]:
            present = sorted(set(judgments["annotator"].to_list()))
            if len(present) != 2:
                raise InputError(
                    f"holds {len(present)} annotators ({', '.join(present)}); name two with --annotators NAME_A,NAME_B",
                    file=str(paths[0]),
                    field="annotator",
                )
            names = list(present)
        if names[0] == names[1]:
            raise InputError("compare two different annotators", file="<command line>", field="annotators")
        side_a, label_a = pick(judgments, names[0], paths[0])
        side_b, label_b = pick(judgments, names[1], paths[0])
        scale_used = scale
        sources = (paths[0], paths[0])
    else:
        judgments_a, scale_a = load_side(paths[0])
        judgments_b, scale_b = load_side(paths[1])
        if scale_a is not None and scale_b is not None and sorted(scale_a) != sorted(scale_b):
            raise InputError(
                f"the two sets declare different scales: {sorted(scale_a)} and {sorted(scale_b)}",
                file=str(paths[1]),
                field="scale",
            )
        side_a, label_a = pick(judgments_a, names[0], paths[0])
        side_b, label_b = pick(judgments_b, names[1], paths[1])
        scale_used = scale_a if scale_a is not None else scale_b
        sources = (paths[0], paths[1])
    result = agreement(side_a, side_b, sorted(scale_used) if scale_used is not None else None)
    label_a, label_b = f"{label_a} ({sources[0]})", f"{label_b} ({sources[1]})"
    if args.json:
        document = {"a": label_a, "b": label_b, **result.to_dict()}
        sys.stdout.write(json.dumps(document, indent=2, allow_nan=False) + "\n")
    else:
        sys.stdout.write(render(result, label_a, label_b))
    return 0
