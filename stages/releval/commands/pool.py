"""`releval pool`: the unjudged top-k pool of chosen configurations, written for annotators.

    releval pool --runs RUN [RUN ...] --queries FILE --corpus FILE [--judgments SET_DIR]
                 [--depth 10] --out POOL.csv|POOL.jsonl [--force]
    releval pool --import FILLED --into SET_DIR [--annotator NAME] [--parent SET_DIR]
                 [--date YYYY-MM-DD] [--queries FILE] [--corpus FILE]

Making a pool. Each RUN is a releval run folder (``run.json`` + ``run.parquet``, e.g.
``data/work/runs/dense/minilm/c256``), a folder holding such folders (every run below it), or a
run file (TREC, JSONL, parquet; read by :func:`releval.inputs.trec.read_run`). A run folder's chunks
are collapsed to documents (:func:`releval.measurement.scoring.document_run`: a document ranks where
its best chunk ranks); a run file is ordered by score, ties by doc_id. The pool is the union over
runs of each query's top ``--depth`` documents, less the (query, document) pairs already judged
in ``--judgments`` by anyone. Columns: ``query_id, query, doc_id, title, snippet, grade,
annotator, notes``; grade, annotator and notes are left empty for the annotator.

The pool reveals nothing about the systems: rows are sorted by query_id then doc_id, and no
score, rank, run name or vote count is written. Judgments must come from reading the query and
the document, never from any evaluated system's scores or ranks.

An existing ``--out`` is never overwritten (it may be an annotator's half-filled pool) unless
``--force`` is given; the file is written atomically.

Importing a filled pool. Rows with an empty grade are skipped (counted); the others become
judgments ``query_id, doc_id, grade, annotator[, notes]`` (the ``annotator`` column, else
``--annotator``; a row naming another annotator than ``--annotator`` is an error) and go through
the same validation as ``judgments.jsonl`` against the set's scale, with errors naming the pool
file and its lines. Nothing is written unless every row is valid. ``--into`` an existing set
appends and re-seals its manifest; ``--into`` a new directory with ``--parent`` creates a new
version (the parent's judgments, scale and rubric, plus the new rows; ``parent`` = the parent's
version, ``date`` = today or ``--date``). The command then prints how many queries' IDCG@10
moved relative to the base set.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from releval.errors import InputError, InputErrors
from releval.judging.pool import import_filled_pool, make_pool, write_pool


def configure(parser: argparse.ArgumentParser) -> None:
    make = parser.add_argument_group("make a pool")
    make.add_argument("--runs", nargs="+", metavar="RUN", help="run folders, folders of runs, or run files")
    make.add_argument("--queries", help="queries: queries.jsonl, BEIR/releval JSONL or queries.parquet")
    make.add_argument("--queries-format", default="jsonl", choices=("jsonl", "beir", "smart", "parquet"))
    make.add_argument("--corpus", help="corpus: JSONL (.gz too), or docs.parquet")
    make.add_argument("--corpus-format", default="jsonl", choices=("jsonl", "folder", "beir", "smart", "parquet"))
    make.add_argument("--judgments", metavar="SET_DIR", help="judgment set whose judged pairs are left out")
    make.add_argument("--depth", type=int, default=10, help="top-k documents per query and run (default 10)")
    make.add_argument("--out", help="pool file to write: .csv or .jsonl")
    make.add_argument("--force", action="store_true", help="overwrite an existing --out")
    imp = parser.add_argument_group("import a filled pool")
    imp.add_argument("--import", dest="import_path", metavar="FILLED", help="a filled pool (.csv or .jsonl)")
    imp.add_argument("--into", metavar="SET_DIR", help="judgment set to add to (created with --parent)")
    imp.add_argument("--annotator", help="annotator of the rows whose annotator column is empty")
    imp.add_argument("--parent", metavar="SET_DIR", help="when --into does not exist: the version it revises")
    imp.add_argument("--date", help="date of a new version (default today), YYYY-MM-DD")


def run(args: argparse.Namespace) -> int:
    if args.import_path:
        return _run_import(args)
    missing = [
        flag
        for flag, value in (
            ("--runs", args.runs),
            ("--queries", args.queries),
            ("--corpus", args.corpus),
            ("--out", args.out),
        )
        if not value
    ]
    if missing:
        raise InputError(
            f"making a pool needs {', '.join(missing)} (or --import FILLED --into SET_DIR)",
            file="<command line>",
            field=missing[0].lstrip("-"),
        )
    out = Path(args.out)
    if out.suffix.lower() not in (".csv", ".jsonl"):
        raise InputError("the pool file must end in .csv or .jsonl", file=str(out), field="out")
    if out.exists() and not args.force:
        raise InputError(
            "exists; it may hold an annotator's work. Choose another name, or pass --force", file=str(out), field="out"
        )
    if args.depth < 1:
        raise InputError(f"must be >= 1, got {args.depth}", file="<command line>", field="depth")
    pool = make_pool(
        args.runs, args.queries, args.queries_format, args.corpus, args.corpus_format, args.judgments, args.depth
    )
    write_pool(out, pool.table)
    print(
        f"pool: {pool.table.height} (query, document) pairs over {pool.table['query_id'].n_unique()} queries from "
        f"{pool.n_runs} run(s) at depth {args.depth}; {pool.left_out} already judged left out -> {out}"
    )
    return 0


# --------------------------------------------------------------------------- importing a filled pool


def _run_import(args: argparse.Namespace) -> int:
    """Import; every problem is printed as FILE:LINE: field 'F': message (exit 1), nothing written."""
    try:
        return _import(args)
    except InputError as exc:
        errors = exc.errors if isinstance(exc, InputErrors) else [exc]
        for error in errors:
            print(error)
        print(f"{len(errors)} problem{'s' if len(errors) != 1 else ''}; nothing was written", file=sys.stderr)
        return 1


def _import(args: argparse.Namespace) -> int:
    if not args.into:
        raise InputError("--import needs --into SET_DIR", file="<command line>", field="into")
    result = import_filled_pool(
        args.import_path,
        args.into,
        annotator=args.annotator,
        parent=args.parent,
        date=args.date,
        queries=args.queries,
        queries_format=args.queries_format,
        corpus=args.corpus,
        corpus_format=args.corpus_format,
    )
    moved = ""
    if result.idcg_moved is not None:
        moved = f"; IDCG@10 moved for {result.idcg_moved} quer{'y' if result.idcg_moved == 1 else 'ies'}"
    print(
        f"import: {result.added} judgments added to {result.judgment_set.version} ({result.ungraded} ungraded rows "
        f"skipped; ids checked against {' and '.join(result.checked_against) or 'nothing: no queries or corpus found'})"
        f"{moved}; manifest sealed with judgments_sha256 {result.judgment_set.manifest.judgments_sha256[:12]}…"
    )
    return 0
