"""`releval validate`: check queries, judgments or a whole dataset; print every problem.

    releval validate PATH [--corpus FILE] [--corpus-format jsonl] [--queries FILE] [--judgments SET_DIR]

PATH is one of (recognised in this order):

* a judgment-set directory (holds ``manifest.yaml`` or ``judgments.jsonl``), e.g.
  ``data/judgments/pydocs-v1``: manifest, rubric, hash, every judgment against the scale; with
  the queries and corpus of its dataset (found next to ``judgments/``, or given), dangling ids;
* a dataset directory (holds ``queries.jsonl`` and/or ``judgments/``), e.g. ``data``: the
  queries, the corpus (``--corpus``, else ``corpus.jsonl[.gz]`` or ``pydocs/corpus.jsonl.gz``
  inside it), and every judgment set under ``judgments/`` including that each ``parent`` exists;
* a directory of judgment sets (e.g. ``data/judgments``): each set;
* a filled pool (``.csv``, or a ``.jsonl`` whose records carry ``snippet``): its graded rows,
  read exactly as ``releval pool --import`` reads them, against ``--judgments SET_DIR``'s scale;
* a ``judgments.jsonl`` (with a ``manifest.yaml`` beside it: that set; alone: grades >= 0);
* a queries file (``.jsonl``).

Every problem is printed as ``FILE:LINE: field 'F': message``; one message repeated on many lines
of a file is one line, ``FILE: field 'F': message (N rows: lines 3, 5, …)``. Exit 1 when there are
any, else 0 with a one-line summary. A dataset's corpus is the one ``--corpus`` names, else the
one the ingest stage reads (params.yaml's ``dataset.corpus``) when that dataset is PATH, else
``corpus.jsonl[.gz]``, ``pydocs/corpus.jsonl.gz`` or a ``corpus/`` folder inside PATH; it is read
exactly as the ingest stage reads it, and every unreadable file is reported. Nothing on disk is
written or changed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from releval.inputs.validation import grouped_problems, validate_path
from releval.stage import routed_warnings


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path", metavar="PATH", help="queries file, judgment-set directory, dataset directory, or filled pool"
    )
    parser.add_argument("--corpus", help="corpus file: judged doc_ids must exist in it (default: found in the dataset)")
    parser.add_argument(
        "--corpus-format",
        choices=("jsonl", "folder", "beir", "smart", "parquet"),
        help="format of --corpus (default: folder for a directory, beir for one holding corpus.jsonl, "
        "parquet for .parquet, else jsonl; .gz is decompressed)",
    )
    parser.add_argument(
        "--queries", help="queries.jsonl: judged query_ids must exist in it (default: the dataset's queries.jsonl)"
    )
    parser.add_argument(
        "--judgments",
        metavar="SET_DIR",
        help="for a filled pool: the judgment set whose scale and judgments it is checked against",
    )
    parser.add_argument(
        "--annotator",
        help="for a filled pool: the annotator of rows whose annotator column is empty "
        "(as `releval pool --import --annotator`)",
    )


def run(args: argparse.Namespace) -> int:
    with routed_warnings():
        problems, summary = validate_path(
            Path(args.path),
            corpus=args.corpus,
            corpus_format=args.corpus_format,
            queries=args.queries,
            judgment_set=args.judgments,
            annotator=args.annotator,
        )
    for line in grouped_problems(problems):
        print(line)
    if problems:
        print(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} in {args.path}", file=sys.stderr)
        return 1
    print(f"ok: {summary}")
    return 0
