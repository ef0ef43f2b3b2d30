"""`releval validate`: check queries, judgments or whole datasets; print every problem.

    releval validate [PATH] [--corpus FILE] [--corpus-format jsonl] [--queries FILE] [--judgments SET_DIR]

Which queries and corpus a judgment set's ids are checked against comes from the configuration,
never from where files sit (:mod:`releval.inputs.datasets`): the dataset the set's manifest names
(``dataset: NAME``), else the active dataset when params.yaml names the set as its judgments, else
its parent's; ``--queries``/``--corpus`` replace them. A set checked against a corpus it was not
made for is one line saying so, not a line per unknown id.

PATH is one of (recognised in this order):

* nothing: the active dataset of params.yaml: its queries, its corpus as the ingest stage reads
  it, and its judgment set;
* a judgment-set directory (holds ``manifest.yaml`` or ``judgments.jsonl``), e.g.
  ``data/judgments/v3``: manifest, rubric, hash, every judgment against the scale, and dangling
  ids against the set's dataset;
* any other folder, e.g. ``data``: every dataset the configuration declares (params.yaml,
  conf/dataset/*.yaml) whose corpus, queries or judgments lie in it, and every judgment set in it
  or up to three levels below, each against its own dataset, including that each ``parent`` exists;
* a filled pool (``.csv``, or a ``.jsonl`` whose records carry ``snippet``): its graded rows,
  read exactly as ``releval pool --import`` reads them, against ``--judgments SET_DIR``'s scale
  and that set's dataset;
* a ``judgments.jsonl`` (with a ``manifest.yaml`` beside it: that set; alone: grades >= 0);
* a queries file (``.jsonl``).

Every problem is printed as ``FILE:LINE: field 'F': message``; one message repeated on many lines
of a file is one line, ``FILE: field 'F': message (N rows: lines 3, 5, …)``. Exit 1 when there are
any, else 0 with a one-line summary. A corpus is read exactly as the ingest stage reads it, and
every unreadable file is reported. Nothing on disk is written or changed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from releval.inputs.validation import grouped_problems, validate_path
from releval.stage import routed_warnings


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path",
        metavar="PATH",
        nargs="?",
        help="queries file, judgment-set directory, a folder holding datasets or judgment sets, or a filled pool "
        "(default: the active dataset of params.yaml: its queries, corpus and judgments)",
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
            Path(args.path) if args.path else None,
            corpus=args.corpus,
            corpus_format=args.corpus_format,
            queries=args.queries,
            judgment_set=args.judgments,
            annotator=args.annotator,
        )
    for line in grouped_problems(problems):
        print(line)
    if problems:
        where = args.path or "the active dataset"
        print(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} in {where}", file=sys.stderr)
        return 1
    print(f"ok: {summary}")
    return 0
