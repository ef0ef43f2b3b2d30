"""`releval explain`: why one configuration beats another, query by query (what diffir shows).

    releval explain A B [--query Q] [--n 5] [--depth 10] [--metric ndcg@10] [--json]

A and B are named as `releval compare` names its sides (:mod:`releval.measurement.sides`): a
configuration id of the reports (e.g. ``minilm/c256``), a run file or run folder, or
``REV:config_id`` (whose run is not in the working tree, so it is refused here). The command prints
the queries where their metric (the contract's primary unless ``--metric``) differs most, largest
``|B − A|`` first, or the one ``--query`` names, and for each the two top-``--depth`` lists side by
side: every document's grade (``?``: unjudged, counted as grade 0), title, where the other list
ranks it, and the passage that ranked it, its best chunk's text.

A configuration's run is the run folder below ``--runs-root`` whose run.json names it, and its
passages come from ``--chunks``/<that run.json's chunking>.parquet; a run at document level (an
external run) shows each document's opening. Only scored queries appear: the reports hold no
query of the sealed holdout, and ``--query`` refuses one. The computation is
:mod:`releval.measurement.explain`, the text :mod:`releval.reporting.explain_text`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import polars as pl

from releval import config, paths
from releval.errors import InputError
from releval.inputs import trec
from releval.measurement import explain, holdout, sides
from releval.measurement.pair import Side
from releval.reporting.explain_text import WIDTH, explanation_to_dict, render_explanation


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a_ref", metavar="A", help="configuration id, run file or folder, or REV:config_id")
    parser.add_argument("b_ref", metavar="B", help="configuration id, run file or folder, or REV:config_id")
    parser.add_argument("--query", default=None, metavar="Q", help="show this scored query only")
    parser.add_argument(
        "--n", type=int, default=explain.QUERIES, help="queries to show, largest difference first (default 5)"
    )
    parser.add_argument("--depth", type=int, default=explain.DEPTH, help="documents per list (default 10)")
    parser.add_argument("--metric", default=None, help="metric to rank queries by (default: the contract's primary)")
    parser.add_argument(
        "--passage-chars",
        type=int,
        default=explain.PASSAGE_CHARS,
        help="cut each passage to about this many characters (default 300)",
    )
    parser.add_argument("--width", type=int, default=WIDTH, help="line width of the text (default 120)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument(
        "--reports",
        default=None,
        help="folder with metrics.json and per_query.parquet (default: the active dataset's, from --params)",
    )
    parser.add_argument("--params", default=paths.PARAMS)
    parser.add_argument("--qrels", default=paths.QRELS, help="judgments (grades shown; run files are scored on them)")
    parser.add_argument("--qrels-format", choices=trec.FORMATS, help="default: from the file extension")
    parser.add_argument("--run-format", choices=trec.FORMATS, help="format of a run-file A or B (default: extension)")
    parser.add_argument("--queries", default=paths.QUERIES, help="query texts")
    parser.add_argument("--docs", default=paths.DOCS, help="documents: titles and texts")
    parser.add_argument("--chunks", default=paths.CHUNKS, help="chunk files, <chunking>.parquet (the passages)")
    parser.add_argument("--runs-root", default=paths.RUNS, help="run folders (run.json + run.parquet)")
    parser.add_argument(
        "--judgments-meta", default=paths.JUDGMENTS_META, help="judgment version, recorded with a scored run file"
    )


def _configuration(
    sources: sides.Sources, side: Side, metric: str, chunks: str, scored: set[str] | None
) -> explain.Configuration:
    """One side (resolved as `releval compare` resolves it): its scores on the ``scored`` queries
    (None: every query it has), its run and chunk file."""
    ref = side.ref
    if metric not in side.per_query.columns:
        raise InputError(f"{ref} has no {metric} per query", field="--metric")
    scores = {
        query_id: value
        for query_id, value in side.per_query.select(pl.col("query_id").cast(pl.Utf8), metric).iter_rows()
        if scored is None or query_id in scored
    }
    if side.run is not None:  # a run file, or a run folder: its chunk-level run where it has one
        folder = Path(ref) if Path(ref).is_dir() else Path(ref).parent
        if (folder / "run.json").exists() and (folder / "run.parquet").exists():
            run, chunk_file = explain.run_from_folder(folder, chunks)
            return explain.Configuration(ref, scores, run, chunk_file)
        return explain.Configuration(ref, scores, side.run, None)
    current = sources.current
    if current is None or ref not in current.config_ids():
        raise InputError(
            "its run is needed and only its scores are known at that revision; "
            "name a configuration of the working tree's reports or a run file",
            field=ref,
        )
    run, chunk_file, run_dir = explain.configuration_run(sources.run_dirs(), ref, chunks)
    sides._warn_if_changed(sources.reports, ref, run_dir)  # as `releval compare` warns of a stale run
    return explain.Configuration(ref, scores, run, chunk_file)


def run(args: argparse.Namespace) -> int:
    reports = args.reports if args.reports is not None else config.reports_folder(args.params)
    sources = sides.Sources(
        reports,
        args.qrels,
        args.queries,
        args.runs_root,
        args.judgments_meta,
        args.qrels_format,
        args.run_format,
    )
    side_a, side_b = sources.resolve(args.a_ref), sources.resolve(args.b_ref)
    contract = side_a.contract
    metric = args.metric or contract.get("primary") or "ndcg@10"
    # The queries the contract scored: a run file scored here holds every query it answered, and
    # the sealed holdout stays sealed.
    queries = sources.queries
    scored_ids = None
    if queries is not None:
        scored_ids = set(holdout.scored_queries(queries, contract, source=str(args.queries))["query_id"].to_list())
    a = _configuration(sources, side_a, metric, args.chunks, scored_ids)
    b = _configuration(sources, side_b, metric, args.chunks, scored_ids)
    scored = sorted(set(a.scores) | set(b.scores))
    qrels = sources.qrels.filter(pl.col("query_id").cast(pl.Utf8).is_in(scored))
    docs = pl.read_parquet(args.docs) if Path(args.docs).exists() else None
    (explanation,) = explain.explain_pairs(
        [(a, b)],
        qrels,
        queries,
        docs,
        metric,
        n=args.n,
        depth=args.depth,
        query=args.query,
        ties=contract.get("ties", "docid-asc"),
        rel_threshold=int(contract.get("rel_threshold", 1)),
        passage_chars=args.passage_chars,
    )
    if args.json:
        print(json.dumps(explanation_to_dict(explanation), indent=2, ensure_ascii=False, allow_nan=False))
    else:
        print(render_explanation(explanation, width=args.width))
    return 0
