"""`releval pool`: the unjudged top-k pool of chosen configurations, written for annotators.

    releval pool --runs RUN [RUN ...] --queries FILE --corpus FILE [--judgments SET_DIR]
                 [--depth 10] --out POOL.csv|POOL.jsonl [--force]
    releval pool --import FILLED --into SET_DIR [--annotator NAME] [--parent SET_DIR]
                 [--date YYYY-MM-DD] [--queries FILE] [--corpus FILE]

Making a pool. Each RUN is a releval run folder (``run.json`` + ``run.parquet``, e.g.
``data/work/runs/dense/minilm/c256``), a folder holding such folders (every run below it), or a
run file (TREC, JSONL, parquet; read by :func:`releval.trec.read_run`). A run folder's chunks
are collapsed to documents (:func:`releval.scoring.document_run`: a document ranks where
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
import csv
import io as _io
import re
import sys
from pathlib import Path
from typing import Any, Iterable

import polars as pl

from releval import io, runs, scoring, trec
from releval import judgments as jmod
from releval.errors import InputError, InputErrors
from releval.schemas import Record, raise_all, read_jsonl

POOL_COLUMNS = ("query_id", "query", "doc_id", "title", "snippet", "grade", "annotator", "notes")
SNIPPET_CHARS = 300
_INTEGER = re.compile(r"[+-]?\d+")


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
    missing = [flag for flag, value in (("--runs", args.runs), ("--queries", args.queries),
                                        ("--corpus", args.corpus), ("--out", args.out)) if not value]
    if missing:
        raise InputError(f"making a pool needs {', '.join(missing)} (or --import FILLED --into SET_DIR)",
                         file="<command line>", field=missing[0].lstrip("-"))
    out = Path(args.out)
    if out.suffix.lower() not in (".csv", ".jsonl"):
        raise InputError("the pool file must end in .csv or .jsonl", file=str(out), field="out")
    if out.exists() and not args.force:
        raise InputError("exists; it may hold an annotator's work. Choose another name, or pass --force",
                         file=str(out), field="out")
    if args.depth < 1:
        raise InputError(f"must be >= 1, got {args.depth}", file="<command line>", field="depth")
    run_paths = expand_runs(args.runs)
    queries = read_query_texts(args.queries, args.queries_format)
    from releval.commands.validate import read_docs

    docs = read_docs(args.corpus, args.corpus_format)
    judged = None
    if args.judgments:
        judged = jmod.load_version(args.judgments).judgments.select("query_id", "doc_id")
    tops = [top_documents(read_any_run(path), args.depth) for path in run_paths]
    table, left_out = build_pool(tops, queries, docs, judged)
    write_pool(out, table)
    print(f"pool: {table.height} (query, document) pairs over {table['query_id'].n_unique()} queries from "
          f"{len(run_paths)} run(s) at depth {args.depth}; {left_out} already judged left out -> {out}")
    return 0


# --------------------------------------------------------------------------- making a pool

def expand_runs(paths: Iterable[str]) -> list[Path]:
    """Run folders and run files named by ``paths``; a folder without runs is an error."""
    found: list[Path] = []
    for name in paths:
        path = Path(name)
        if not path.exists():
            raise InputError("no such file or directory", file=str(path), field="runs")
        if path.is_dir():
            below = runs.find_runs(path)
            if not below:
                raise InputError("no run folders (run.json + run.parquet) here or below", file=str(path), field="runs")
            found += below
        elif path.name in ("run.parquet", "run.json") and (path.parent / "run.json").exists() \
                and (path.parent / "run.parquet").exists():
            found.append(path.parent)
        else:
            found.append(path)
    return list(dict.fromkeys(found))


def read_any_run(path: Path) -> pl.DataFrame:
    """``query_id, doc_id, rank`` (1 = best) of a run folder (documents) or a run file."""
    if path.is_dir():
        table, _ = runs.read_run(path)
        collapsed = scoring.document_run(table)
        return (collapsed.sort(["query_id", "rank", "doc_id"])
                .with_columns(pl.int_range(1, pl.len() + 1).over("query_id").cast(pl.Int64).alias("rank"))
                .select("query_id", "doc_id", "rank"))
    table = trec.read_run(path)
    ranked = table.sort(["query_id", "score", "doc_id"], descending=[False, True, False])
    return ranked.with_columns(pl.int_range(1, pl.len() + 1).over("query_id").cast(pl.Int64).alias("rank")) \
        .select("query_id", "doc_id", "rank")


def top_documents(run_table: pl.DataFrame, depth: int) -> pl.DataFrame:
    """Each query's first ``depth`` documents: ``query_id, doc_id``."""
    return run_table.filter(pl.col("rank") <= depth).select("query_id", "doc_id")


def read_query_texts(path: str | Path, fmt: str = "jsonl") -> pl.DataFrame:
    """``query_id, text`` of a query file: releval queries.jsonl / BEIR / SMART, or a queries.parquet."""
    path = Path(path)
    if fmt == "parquet" or path.suffix.lower() == ".parquet":
        try:
            frame = pl.read_parquet(path, columns=["query_id", "text"])
        except Exception as exc:  # polars raises several types
            raise InputError(f"not a readable query table: {exc}", file=str(path), field="path") from None
        return frame.select(pl.col("query_id").cast(pl.Utf8), pl.col("text").cast(pl.Utf8))
    from releval.corpus import read_queries

    return read_queries(path, fmt).select("query_id", "text")


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """The start of a text on one line: whitespace runs become one space, cut at a word within ``limit``."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat.rfind(" ", 0, limit)
    return flat[:cut if cut > limit // 2 else limit].rstrip() + " …"


def build_pool(tops: list[pl.DataFrame], queries: pl.DataFrame, docs: pl.DataFrame,
               judged: pl.DataFrame | None = None) -> tuple[pl.DataFrame, int]:
    """The pool table (POOL_COLUMNS, sorted by query_id, doc_id) and how many judged pairs left out.

    Unknown query or document ids in the runs are errors (all of them listed).
    """
    if tops:
        pairs = pl.concat([t.select("query_id", "doc_id") for t in tops]).unique()
    else:
        pairs = pl.DataFrame(schema={"query_id": pl.Utf8, "doc_id": pl.Utf8})
    errors: list[InputError] = []
    unknown_queries = sorted(set(pairs["query_id"].to_list()) - set(queries["query_id"].to_list()))
    unknown_docs = sorted(set(pairs["doc_id"].to_list()) - set(docs["doc_id"].to_list()))
    for query_id in unknown_queries:
        errors.append(InputError(f"a run retrieves for query {query_id!r}, which is not in the query file",
                                 file="<runs>", field="query_id"))
    for doc_id in unknown_docs:
        errors.append(InputError(f"a run retrieves document {doc_id!r}, which is not in the corpus",
                                 file="<runs>", field="doc_id"))
    raise_all(errors)
    before = pairs.height
    if judged is not None and judged.height:
        pairs = pairs.join(judged.select("query_id", "doc_id").unique(), on=["query_id", "doc_id"], how="anti")
    left_out = before - pairs.height
    table = (pairs.join(queries.select("query_id", pl.col("text").alias("query")), on="query_id", how="left")
             .join(docs.select("doc_id", "title", pl.col("text").map_elements(snippet, return_dtype=pl.Utf8)
                               .alias("snippet")), on="doc_id", how="left")
             .with_columns(pl.col("title").map_elements(lambda t: " ".join(t.split()), return_dtype=pl.Utf8),
                           pl.col("query").map_elements(lambda t: " ".join(t.split()), return_dtype=pl.Utf8),
                           pl.lit(None, dtype=pl.Int64).alias("grade"), pl.lit("").alias("annotator"),
                           pl.lit("").alias("notes"))
             .select(POOL_COLUMNS)
             .sort("query_id", "doc_id"))
    return table, left_out


def write_pool(out: Path, table: pl.DataFrame) -> None:
    if out.suffix.lower() == ".jsonl":
        import json

        text = "".join(json.dumps({c: row[c] for c in POOL_COLUMNS}, ensure_ascii=False) + "\n"
                       for row in table.iter_rows(named=True))
        io.write_text(out, text)
        return
    buffer = _io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(POOL_COLUMNS)
    for row in table.iter_rows(named=True):
        writer.writerow(["" if row[c] is None else row[c] for c in POOL_COLUMNS])
    io.write_text(out, buffer.getvalue())


# --------------------------------------------------------------------------- reading a filled pool

def read_filled_pool(path: str | Path, annotator: str | None) -> tuple[list[Record], int, list[InputError]]:
    """Graded rows of a filled pool as judgment records (with the pool file's line numbers).

    Returns (records, number of ungraded rows skipped, problems). A grade is kept as an integer
    when it is one and as the text otherwise, so that the judgment validation reports it.
    """
    path = Path(path)
    errors: list[InputError] = []
    raw_rows: list[tuple[int, dict[str, Any]]] = []
    if path.suffix.lower() == ".csv":
        raw_rows = _csv_rows(path, errors)
    else:
        raw_rows = [(r.line, r.values) for r in read_jsonl(path, errors, first_field="query_id")]
    records: list[Record] = []
    ungraded = 0
    for line, row in raw_rows:
        grade = row.get("grade")
        if grade is None or (isinstance(grade, str) and not grade.strip()):
            ungraded += 1
            continue
        if isinstance(grade, str) and _INTEGER.fullmatch(grade.strip()):
            grade = int(grade.strip())
        values: dict[str, Any] = {"query_id": row.get("query_id"), "doc_id": row.get("doc_id"), "grade": grade}
        named = row.get("annotator")
        named = named.strip() if isinstance(named, str) else named
        if named and annotator and named != annotator:
            errors.append(InputError(f"the row names annotator {named!r}, but --annotator is {annotator!r}",
                                     file=str(path), line=line, field="annotator"))
        if named or annotator:
            values["annotator"] = named or annotator  # left out when neither: reported as missing
        notes = row.get("notes")
        if isinstance(notes, str) and notes.strip():
            values["notes"] = notes
        for key in ("query_id", "doc_id"):
            if isinstance(values[key], str):
                values[key] = values[key].strip()
        records.append(Record(line, values))
    return records, ungraded, errors


def _csv_rows(path: Path, errors: list[InputError]) -> list[tuple[int, dict[str, Any]]]:
    source = str(path)
    if not path.is_file():
        errors.append(InputError("no such file", file=source, field="path"))
        return []
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        errors.append(InputError(f"not UTF-8 (byte offset {exc.start})", file=source, line=1, field="encoding"))
        return []
    reader = csv.reader(_io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        errors.append(InputError("empty: no header row", file=source, line=1, field="query_id"))
        return []
    header = [h.strip() for h in header]
    for required in ("query_id", "doc_id", "grade"):
        if required not in header:
            errors.append(InputError(f"missing column (header: {', '.join(header)})", file=source, line=1,
                                     field=required))
    if errors:
        return []
    rows = []
    start = reader.line_num + 1
    try:
        for cells in reader:
            line = start
            start = reader.line_num + 1
            if not any(cell.strip() for cell in cells):
                continue
            if len(cells) != len(header):
                errors.append(InputError(f"expected {len(header)} columns, found {len(cells)}", file=source,
                                         line=line, field="row"))
                continue
            rows.append((line, dict(zip(header, cells))))
    except csv.Error as exc:
        errors.append(InputError(f"malformed CSV: {exc}", file=source, line=reader.line_num, field="row"))
    return rows


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
    from releval.commands.validate import dataset_root_of, find_corpus, find_queries, read_docs
    from releval.schemas import load_queries

    into = Path(args.into)
    records, ungraded, read_errors = read_filled_pool(args.import_path, args.annotator)
    root = dataset_root_of(into)
    queries_path = Path(args.queries) if args.queries else find_queries(root)
    corpus_path = Path(args.corpus) if args.corpus else find_corpus(root)
    query_ids = None
    if queries_path is not None:
        if queries_path.suffix.lower() == ".parquet" or args.queries_format != "jsonl":
            query_ids = read_query_texts(queries_path, args.queries_format)["query_id"].to_list()
        else:
            query_ids = load_queries(queries_path)["query_id"].to_list()
    lengths = jmod.doc_lengths(read_docs(corpus_path, args.corpus_format)) if corpus_path is not None else None
    base_dir = into if into.exists() else (Path(args.parent) if args.parent else None)
    base_qrels = jmod.load_version(base_dir).qrels() if base_dir is not None and base_dir.exists() else None
    if args.date is not None and jmod._date_text(args.date) is None:
        raise InputError(f"expected YYYY-MM-DD, got {args.date!r}", file="<command line>", field="date")
    judgment_set, added = jmod.add_judgments(records, str(args.import_path), into, parent=args.parent, date=args.date,
                                             query_ids=query_ids, doc_lengths=lengths, errors=read_errors)
    moved = ""
    if base_qrels is not None:
        report = jmod.idcg_change_report(base_qrels, judgment_set.qrels(), (10,))
        moved = f"; IDCG@10 moved for {report.height} quer{'y' if report.height == 1 else 'ies'}"
    checked = [name for name, value in (("queries", query_ids), ("corpus", lengths)) if value is not None]
    print(f"import: {added} judgments added to {judgment_set.version} ({ungraded} ungraded rows skipped; "
          f"ids checked against {' and '.join(checked) or 'nothing: no queries or corpus found'}){moved}; "
          f"manifest sealed with judgments_sha256 {judgment_set.manifest.judgments_sha256[:12]}…")
    return 0
