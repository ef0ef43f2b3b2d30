"""`releval pool`: the unjudged top-k pool of chosen configurations, written for annotators.

    releval pool --runs RUN [RUN ...] --queries FILE --corpus FILE [--judgments SET_DIR]
                 [--depth 10] --out POOL.csv|POOL.jsonl [--force]
    releval pool --import FILLED|QRELS --into SET_DIR [--annotator NAME] [--parent SET_DIR]
                 [--rubric FILE] [--scale 0=...,1=...] [--completeness pooled|positives-only]
                 [--date YYYY-MM-DD] [--queries FILE] [--corpus FILE]
    releval pool --sample N|RATE [--seed S] [--runs RUN ... --queries FILE --corpus FILE]
                 [--judgments SET_DIR] [--depth K] --out POOL.csv|POOL.jsonl [--force]
    releval pool --missing [--depth K] [--judgments SET_DIR] [--out POOL.csv|POOL.jsonl [--force]]
                 [--summary-if-below THRESHOLD]

Making a pool. Each RUN is a releval run folder (``run.json`` + ``run.parquet``, e.g.
``data/work/runs/model/minilm/c256``), a folder holding such folders (every run below it), or a
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

Sampling the pool (``--sample``), when the corpus is too big to pool: instead of every unjudged
top-k pair, a stratified random sample of them (strata by best rank, the design the inferred metrics
assume: :mod:`releval.judging.sample`, :mod:`releval.measurement.inferred`), ``N`` pairs or a rate
(``0.2``, ``20%``), drawn from ``--seed`` (default 0; the same seed gives the same sample). The pairs
come from ``--runs`` (with ``--queries`` and ``--corpus``, less ``--judgments``' pairs) or, without
``--runs``, from every configuration of the params grid against the active judgments (as
``--missing``). ``--out`` gets the sampled pairs as the same blind pool file, and ``sample.json``
beside it the design: rate and size, seed, strata, each (query, stratum) cell's frame and sample size
(so each pair's inclusion probability), the source runs, the depth and the judgments left out.
Imported (``--import POOL --into ...``), the version records the design and declares ``sampled``;
scoring then reports inferred metrics (infNDCG@k, infAP) and `releval compare` / `releval gate`
decide on the inferred primary.

Importing a qrels file (TREC qrels, a BEIR qrels .tsv: any file that is not .csv or .jsonl) makes
a first version of its rows (or fills an empty one, as `releval init-dataset` writes it), annotator
``--annotator`` or ``qrels``, recording the file's path, format and sha256 (``imported_from``) and
what it declares (``--completeness``; default positives-only when no row has grade 0): your own
judgments then go on top of it as a revision (``--parent``).

Importing a filled pool. Rows with an empty grade are skipped (counted); the others become
judgments ``query_id, doc_id, grade, annotator[, notes]`` (the ``annotator`` column, else
``--annotator``; a row naming another annotator than ``--annotator`` is an error) and go through
the same validation as ``judgments.jsonl`` against the set's scale, with errors naming the pool
file and its lines. Nothing is written unless every row is valid. ``--into`` an existing set
appends and re-seals its manifest (an empty first version, as `releval init-dataset` writes it,
included); ``--into`` a new directory with ``--parent`` creates a new version (the parent's
judgments, scale and rubric, plus the new rows; ``parent`` = the parent's version, ``date`` =
today or ``--date``); ``--into`` a new directory without ``--parent`` creates a first version
(``parent: null``) of the new rows alone, on ``--scale`` (default 0-3, as the pydocs rubric), with
the rubric ``--rubric FILE``, else the dataset's ``RUBRIC.md`` beside the new directory (neither:
refused). The command then prints how many queries' IDCG@10 moved relative to the base set.

The judging debt (``--missing``). For every configuration the params grid declares (its run
under data/work/runs; a missing run is an error), the top ``--depth`` documents (default: the k
of the contract's ``judged@k`` in params ``metric.metrics``) -- chunks collapsed to documents and
ordered exactly as the score stage orders them, so these are the documents ``judged@k`` counts --
less the pairs the active judgment version (params ``judgments``, or ``--judgments``) holds.
It prints the number of unjudged pairs per configuration (ids as the reports name them) and the
number of distinct pairs; ``--out`` writes those pairs as a pool file, blind as above. Filled,
it goes back through ``--import FILLED --into NEW_SET_DIR --parent ACTIVE_SET_DIR``, after which
the debt is 0. Queries are those of the query table (data/work/queries.parquet, or
``--queries``): every query, holdout ones included -- judges are blind and the holdout is scored
later against the same judgments -- but the pipeline's runs retrieve only dev queries (the
holdout stays sealed until `releval holdout`, which retrieves into a scratch folder it removes),
so holdout queries add pairs only when runs of them are there. Only pair counts are printed,
never a score. ``--summary-if-below T`` prints nothing unless some configuration's ``judged@k``
in reports/metrics.json (its mean over the scored queries) is below T; then one block of
warning lines: those configurations, their debt and the commands that pay it. It exits 0 either
way, for ``make repro`` to call after ``dvc repro``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from releval import paths
from releval.config import load_params, reports_folder, section
from releval.errors import InputError, InputErrors
from releval.judging.pool import (
    Debt,
    grid_debt,
    import_advice,
    import_filled_pool,
    judged_depth,
    low_judged_configs,
    make_pool,
    read_contract,
    write_pool,
)
from releval.judging import sample as sampling
from releval.judging.completeness import DECLARABLE, from_contract
from releval.judging.pool import sample_of_grid, sample_of_runs
from releval.judging.scaffold import parse_scale
from releval.measurement.metrics import contract_from_params
from releval.measurement.scoring import coverage_terms
from releval.retrieval.runs import grid_config_ids


def configure(parser: argparse.ArgumentParser) -> None:
    make = parser.add_argument_group("make a pool")
    make.add_argument("--runs", nargs="+", metavar="RUN", help="run folders, folders of runs, or run files")
    make.add_argument("--queries", help="queries: queries.jsonl, BEIR/releval JSONL or queries.parquet")
    make.add_argument("--queries-format", default="jsonl", choices=("jsonl", "beir", "smart", "parquet"))
    make.add_argument("--corpus", help="corpus: JSONL (.gz too), or docs.parquet")
    make.add_argument("--corpus-format", default="jsonl", choices=("jsonl", "folder", "beir", "smart", "parquet"))
    make.add_argument("--judgments", metavar="SET_DIR", help="judgment set whose judged pairs are left out")
    make.add_argument(
        "--depth",
        type=int,
        help="top-k documents per query and run (default 10; with --missing: the k of the contract's judged@k)",
    )
    make.add_argument("--out", help="pool file to write: .csv or .jsonl")
    make.add_argument("--force", action="store_true", help="overwrite an existing --out")
    make.add_argument(
        "--sample",
        metavar="N|RATE",
        help="write a stratified random sample of the unjudged top-k pairs instead of all of them: N pairs, or a "
        "rate (0.2 or 20%%); its design goes to sample.json beside --out. Without --runs: the params grid's runs "
        "against the active judgments",
    )
    make.add_argument("--seed", type=int, default=0, help="--sample's seed (default 0; recorded in sample.json)")
    imp = parser.add_argument_group("import a filled pool")
    imp.add_argument("--import", dest="import_path", metavar="FILLED", help="a filled pool (.csv or .jsonl)")
    imp.add_argument("--into", metavar="SET_DIR", help="judgment set to add to (created with --parent)")
    imp.add_argument("--annotator", help="annotator of the rows whose annotator column is empty")
    imp.add_argument("--parent", metavar="SET_DIR", help="when --into does not exist: the version it revises")
    imp.add_argument("--date", help="date of a new version (default today), YYYY-MM-DD")
    imp.add_argument(
        "--rubric",
        metavar="FILE",
        help="a first version's rubric (--into new, no --parent; default: RUBRIC.md beside the new set)",
    )
    imp.add_argument(
        "--scale", help="a first version's grades, e.g. '0=not relevant,1=partial,2=relevant' (default 0-3)"
    )
    imp.add_argument(
        "--completeness",
        choices=DECLARABLE,
        help="what the written version declares: pooled (non-relevant judgments recorded for what was pooled) or "
        "positives-only (unlisted documents are non-relevant by declaration; BEIR/MTEB qrels). Default: the "
        "base set's; a qrels file with no grade-0 row: positives-only",
    )
    imp.add_argument(
        "--dataset",
        metavar="NAME",
        help="a new first version's dataset (a `name` of conf/dataset/*.yaml), whose queries and corpus the ids are "
        "checked against (default: the active dataset of params.yaml; an existing set or --parent: the set's own)",
    )
    debt = parser.add_argument_group("the judging debt of the grid")
    debt.add_argument(
        "--missing",
        action="store_true",
        help="the unjudged (query, document) pairs in the top --depth of every configuration the params grid "
        "declares (runs under data/work/runs), against the active judgment version (params judgments, or "
        "--judgments): the count per configuration and of distinct pairs; --out writes them as a blind pool. "
        "Queries: all of the query table (data/work/queries.parquet, or --queries), holdout queries INCLUDED "
        "(judges are blind; the holdout is scored later), though the pipeline's runs hold only dev queries, so "
        "holdout queries add pairs only when runs of them exist. Pair counts only, never a score",
    )
    debt.add_argument(
        "--summary-if-below",
        nargs="?",
        const="",
        metavar="THRESHOLD",
        help="with --missing: print nothing unless some configuration's judged@k in reports/metrics.json is "
        "below THRESHOLD (0-1; given without a value: the contract's metric.coverage.min_judged); then one "
        "block of warning lines (exit 0 either way; make repro runs it)",
    )


def run(args: argparse.Namespace) -> int:
    if args.sample is not None:
        return _run_sample(args)
    if args.missing:
        return _run_missing(args)
    if args.summary_if_below is not None:
        raise InputError("--summary-if-below goes with --missing", file="<command line>", field="summary-if-below")
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
    out = _pool_file(args)
    depth = 10 if args.depth is None else _checked_depth(args.depth)
    pool = make_pool(
        args.runs, args.queries, args.queries_format, args.corpus, args.corpus_format, args.judgments, depth, "pool"
    )
    write_pool(out, pool.table)
    print(
        f"pool: {pool.table.height} (query, document) pairs over {pool.table['query_id'].n_unique()} queries from "
        f"{pool.n_runs} run(s) at depth {depth}; {pool.left_out} already judged left out -> {out}"
    )
    return 0


def _run_sample(args: argparse.Namespace) -> int:
    for flag, value in (("--missing", args.missing), ("--import", args.import_path), ("--into", args.into)):
        if value:
            raise InputError(f"--sample does not take {flag}", file="<command line>", field=flag.lstrip("-"))
    if not args.out:
        raise InputError("--sample needs --out POOL.csv|POOL.jsonl", file="<command line>", field="out")
    if args.seed < 0:
        raise InputError(f"must be >= 0, got {args.seed}", file="<command line>", field="seed")
    size = sampling.parse_size(args.sample)
    out = _pool_file(args)
    if args.runs:
        missing = [flag for flag, value in (("--queries", args.queries), ("--corpus", args.corpus)) if not value]
        if missing:
            raise InputError(
                f"sampling --runs needs {', '.join(missing)}", file="<command line>", field=missing[0].lstrip("-")
            )
        depth = 10 if args.depth is None else _checked_depth(args.depth)
        sampled = sample_of_runs(
            args.runs, args.queries, args.queries_format, args.corpus, args.corpus_format, args.judgments, depth,
            size, args.seed, "pool --sample",
        )  # fmt: skip
    else:
        params = load_params()
        metric_cfg = section(params, "metric")
        depth = _grid_depth(args.depth, params)
        judgments_cfg = (
            {"path": args.judgments, "format": "releval", "version": Path(args.judgments).name}
            if args.judgments
            else section(params, "judgments")
        )
        sampled = sample_of_grid(
            section(params, "grid"),
            paths.RUNS,
            judgments_cfg,
            depth,
            args.queries or paths.QUERIES,
            args.corpus or paths.DOCS,
            size,
            args.seed,
            ties=contract_from_params(metric_cfg).ties,
            queries_format=args.queries_format,
            corpus_format=args.corpus_format,
            subset=section(params, "dataset").get("subset") or {},
            desc="pool --sample",
        )
    design = sampled.sample.design
    record = sampling.design_record(sampled.sample, out)
    design_file = sampling.write_design(out, record, force=args.force)
    write_pool(out, sampled.table)
    strata = ", ".join(f"[{low}-{high}]" if low != high else f"[{low}]" for low, high in design.strata)
    print(
        f"sample: {design.sample_size} of {design.frame_size} unjudged (query, document) pairs "
        f"({design.sample_size / design.frame_size:.1%}) over {len(design.queries)} queries, top {depth} of "
        f"{len(design.configurations)} run(s), strata by best rank {strata}, seed {design.seed} -> {out} "
        f"(blind); design -> {design_file}. Grade every row, then `releval pool --import {out} --into SET_DIR`"
    )
    return 0


def _grid_depth(depth: int | None, params: dict) -> int:
    """--depth, else the k of the contract's judged@k, else 10."""
    if depth is not None:
        return _checked_depth(depth)
    try:
        return judged_depth(section(params, "metric.metrics"), section(params, "metric").get("primary"))
    except InputError:
        return 10


def _pool_file(args: argparse.Namespace) -> Path:
    """--out, checked: a .csv or .jsonl name that does not exist unless --force."""
    out = Path(args.out)
    if out.suffix.lower() not in (".csv", ".jsonl"):
        raise InputError("the pool file must end in .csv or .jsonl", file=str(out), field="out")
    if out.exists() and not args.force:
        raise InputError(
            "exists; it may hold an annotator's work. Choose another name, or pass --force", file=str(out), field="out"
        )
    return out


def _checked_depth(depth: int) -> int:
    if depth < 1:
        raise InputError(f"must be >= 1, got {depth}", file="<command line>", field="depth")
    return depth


# --------------------------------------------------------------------------- the judging debt


def _run_missing(args: argparse.Namespace) -> int:
    for flag, value in (("--runs", args.runs), ("--import", args.import_path), ("--into", args.into)):
        if value:
            raise InputError(
                f"--missing reads the grid's runs and writes a pool; it does not take {flag}",
                file="<command line>",
                field=flag.lstrip("-"),
            )
    out = _pool_file(args) if args.out else None
    params = load_params()
    metric_cfg = section(params, "metric")
    threshold = _threshold(args.summary_if_below, metric_cfg)
    depth = (
        judged_depth(section(params, "metric.metrics"), metric_cfg.get("primary"))
        if args.depth is None
        else _checked_depth(args.depth)
    )
    grid = section(params, "grid")
    judgments_cfg = (  # a set's version is its directory's name (judgments.write_version)
        {"path": args.judgments, "format": "releval", "version": Path(args.judgments).name}
        if args.judgments
        else section(params, "judgments")
    )

    def debt() -> Debt:
        return grid_debt(
            grid,
            paths.RUNS,
            judgments_cfg,
            depth,
            args.queries or paths.QUERIES,
            args.corpus or paths.DOCS,
            ties=contract_from_params(metric_cfg).ties,
            queries_format=args.queries_format,
            corpus_format=args.corpus_format,
            subset=section(params, "dataset").get("subset") or {},
            desc="pool --missing",
        )

    if threshold is not None:
        return _summary(debt, depth, threshold, grid, judgments_cfg["path"], out)
    result = debt()
    width = max((len(cid) for cid in result.counts), default=0)
    print(
        f"judging debt at depth {depth} against judgments {result.version} ({judgments_cfg['path']}): unjudged "
        f"(query, document) pairs in each configuration's top {depth}, over the {result.queries} queries of the "
        f"query table, holdout included ({result.queries_in_runs} of them in the runs)"
    )
    for cid, count in result.counts.items():
        print(f"  {cid:<{width}}  {count}")
    total = result.pool.height
    print(f"total: {total} distinct pair{'s' if total != 1 else ''}, in {result.pool['query_id'].n_unique()} queries")
    if out is not None and total == 0:
        print(f"nothing to judge: {out} not written")
    elif out is not None:
        write_pool(out, result.pool)
        print(
            f"-> {out} (blind: sorted by query and document, no configuration, score or rank); once graded: "
            f"{import_advice(judgments_cfg['path'], str(out))}"
        )
    return 0


def _threshold(given: str | None, metric_cfg: dict) -> float | None:
    """--summary-if-below's threshold: the value given, or the contract's coverage.min_judged."""
    if given is None:
        return None
    if given == "":
        return coverage_terms(metric_cfg, source="params.yaml").min_judged
    try:
        threshold = float(given)
    except ValueError:
        threshold = float("nan")
    if not 0.0 <= threshold <= 1.0:
        raise InputError(f"a judged@k share, 0 to 1; got {given!r}", file="<command line>", field="summary-if-below")
    return threshold


def _summary(debt: Callable[[], Debt], depth: int, threshold: float, grid: dict, active: str, out: Path | None) -> int:
    """The warning block of --summary-if-below, or nothing (the debt is computed only when there is one)."""
    metrics_path = paths.rebase(paths.METRICS, paths.REPORTS, reports_folder())
    if not metrics_path.is_file():
        print(f"WARNING: no {metrics_path}: judged@{depth} not known; run `dvc repro`", file=sys.stderr)
        return 0
    config_ids = grid_config_ids(grid)
    recorded = from_contract(read_contract(metrics_path))
    if recorded.sampled:
        return 0  # judged@k is low by design under a sample: the inferred metrics account for the unjudged pairs
    if recorded.positives_only:
        print(
            f"note: {metrics_path} is scored under positives-only judgments (unlabelled documents are non-relevant "
            f"by declaration), so judged@{depth} says nothing; to see what unlabelled relevant documents change, "
            f"judge a blind sample of the grid's top {depth}: `releval pool --sample 200 --out sample.csv`"
        )
        return 0
    low = low_judged_configs(metrics_path, depth, threshold, config_ids)
    if not low:
        return 0
    result = debt()
    if out is not None:
        write_pool(out, result.pool)
    width = max(len(cid) for cid, _ in low)
    print(
        f"WARNING: judged@{depth} below {threshold:g} for {len(low)} of {len(config_ids)} configurations "
        f"({metrics_path}; unjudged pairs in each one's top {depth}):"
    )
    for cid, value in low:
        print(f"WARNING:   {cid:<{width}}  {value:.2f}  {result.counts.get(cid, 0)} unjudged")
    if result.pool.height == 0:
        print(
            f"WARNING: the grid's top {depth} holds no unjudged pair against judgments {result.version}: "
            f"{metrics_path} is older than them; run `dvc repro`"
        )
        return 0
    print(
        f"WARNING: {result.pool.height} distinct unjudged (query, document) pairs in the grid against "
        f"judgments {result.version}: export them blind with `releval pool --missing --out {out or 'debt.csv'}`, "
        f"grade them, then `{import_advice(active, str(out or 'debt.csv'))}`"
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
        rubric=args.rubric,
        scale=parse_scale(args.scale) if args.scale else None,
        dataset=args.dataset,
        completeness=args.completeness,
    )
    moved = ""
    if result.idcg_moved is not None:
        moved = f"; IDCG@10 moved for {result.idcg_moved} quer{'y' if result.idcg_moved == 1 else 'ies'}"
    manifest = result.judgment_set.manifest
    print(
        f"import: {result.added} judgments added to {result.judgment_set.version} ({result.ungraded} ungraded rows "
        f"skipped; ids checked against {result.checked_against}){moved}; declared {manifest.completeness.text()}; "
        f"manifest sealed with judgments_sha256 {manifest.judgments_sha256[:12]}…"
    )
    return 0
