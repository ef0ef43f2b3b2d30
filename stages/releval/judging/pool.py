"""The pool file: the unjudged top-k documents of chosen runs, blind, and its filled form read back.

:func:`build_pool` takes each run's top documents and leaves out pairs already judged; rows are
sorted by query and document and carry no score, rank, run name or vote count. A filled pool
(CSV or JSONL) is read back by :func:`read_filled_pool` as judgment records with the pool file's
line numbers, for the same validation as ``judgments.jsonl``; :func:`import_filled_pool` adds
them to a judgment set. The `releval pool` command and `releval validate` both use this module.

The judging debt (:func:`judging_debt`, :func:`grid_debt`): for every configuration the params
grid declares, the (query, document) pairs of its top k documents -- chunks collapsed to
documents and ordered exactly as scoring orders them -- that the active judgment version has not
judged; judging them (the same pool file, the same import) brings every ``judged@k`` to 1.
"""

from __future__ import annotations

import csv
import json
import io as _io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import polars as pl

from releval import io, paths
from releval.progress import progress
from releval.retrieval import runs
from releval.measurement import scoring
from releval.measurement.metrics import contract_from_params, parse_metric
from releval.inputs import trec
from releval.errors import InputError, InputErrors
from releval.config import section
from releval.inputs.corpus import read_docs, read_queries
from releval.inputs.datasets import references_for
from releval.inputs.schemas import Record, raise_all, read_jsonl
from releval.judging import judgments as jmod
from releval.judging import sample as sampling
from releval.judging.completeness import POOLED, POSITIVES_ONLY, Completeness

POOL_COLUMNS = ("query_id", "query", "doc_id", "title", "snippet", "grade", "annotator", "notes")
SNIPPET_CHARS = 300
_INTEGER = re.compile(r"[+-]?\d+")
_GRADE_DIGITS = 19  # int() of a 4,300-digit string raises; no grade has more digits than an Int64


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
        elif (
            path.name in ("run.parquet", "run.json")
            and (path.parent / "run.json").exists()
            and (path.parent / "run.parquet").exists()
        ):
            found.append(path.parent)
        else:
            found.append(path)
    return list(dict.fromkeys(found))


def read_any_run(path: Path) -> pl.DataFrame:
    """``query_id, doc_id, rank`` (1 = best) of a run folder (documents) or a run file."""
    if path.is_dir():
        table, _ = runs.read_run(path)
        collapsed = scoring.document_run(table)
        return (
            collapsed.sort(["query_id", "rank", "doc_id"])
            .with_columns(pl.int_range(1, pl.len() + 1).over("query_id").cast(pl.Int64).alias("rank"))
            .select("query_id", "doc_id", "rank")
        )
    table = trec.read_run(path)
    ranked = table.sort(["query_id", "score", "doc_id"], descending=[False, True, False])
    return ranked.with_columns(pl.int_range(1, pl.len() + 1).over("query_id").cast(pl.Int64).alias("rank")).select(
        "query_id", "doc_id", "rank"
    )


def scored_run(path: Path) -> tuple[str, pl.DataFrame]:
    """(name, ``query_id, doc_id, score``) of a run folder (its config_id; chunks collapsed to documents,
    :func:`releval.measurement.scoring.document_run`) or a run file (its path): what a sample's frame ranks."""
    if path.is_dir():
        table, meta = runs.read_run(path)
        return str(meta.get("config_id") or path.as_posix()), scoring.document_run(table).select(
            "query_id", "doc_id", "score"
        )
    return path.as_posix(), trec.read_run(path).select("query_id", "doc_id", "score")


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
    return read_queries(path, fmt).select("query_id", "text")


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """The start of a text on one line: whitespace runs become one space, cut at a word within ``limit``."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat.rfind(" ", 0, limit)
    return flat[: cut if cut > limit // 2 else limit].rstrip() + " …"


def build_pool(
    tops: list[pl.DataFrame], queries: pl.DataFrame, docs: pl.DataFrame, judged: pl.DataFrame | None = None
) -> tuple[pl.DataFrame, int]:
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
        errors.append(
            InputError(
                f"a run retrieves for query {query_id!r}, which is not in the query file",
                file="<runs>",
                field="query_id",
            )
        )
    for doc_id in unknown_docs:
        errors.append(
            InputError(
                f"a run retrieves document {doc_id!r}, which is not in the corpus", file="<runs>", field="doc_id"
            )
        )
    raise_all(errors)
    before = pairs.height
    if judged is not None and judged.height:
        pairs = pairs.join(judged.select("query_id", "doc_id").unique(), on=["query_id", "doc_id"], how="anti")
    left_out = before - pairs.height
    table = (
        pairs.join(queries.select("query_id", pl.col("text").alias("query")), on="query_id", how="left")
        .join(
            docs.select("doc_id", "title", pl.col("text").map_elements(snippet, return_dtype=pl.Utf8).alias("snippet")),
            on="doc_id",
            how="left",
        )
        .with_columns(
            pl.col("title").map_elements(lambda t: " ".join(t.split()), return_dtype=pl.Utf8),
            pl.col("query").map_elements(lambda t: " ".join(t.split()), return_dtype=pl.Utf8),
            pl.lit(None, dtype=pl.Int64).alias("grade"),
            pl.lit("").alias("annotator"),
            pl.lit("").alias("notes"),
        )
        .select(POOL_COLUMNS)
        .sort("query_id", "doc_id")
    )
    return table, left_out


def write_pool(out: Path, table: pl.DataFrame) -> None:
    if out.suffix.lower() == ".jsonl":
        text = "".join(
            json.dumps({c: row[c] for c in POOL_COLUMNS}, ensure_ascii=False) + "\n"
            for row in table.iter_rows(named=True)
        )
        io.write_text(out, text)
        return
    buffer = _io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(POOL_COLUMNS)
    for row in table.iter_rows(named=True):
        writer.writerow(["" if row[c] is None else row[c] for c in POOL_COLUMNS])
    io.write_text(out, buffer.getvalue())


@dataclass(frozen=True)
class Pool:
    """A pool table, how many judged pairs it left out, and how many runs it was made from."""

    table: pl.DataFrame
    left_out: int
    n_runs: int


def make_pool(
    run_names: Iterable[str],
    queries: str | Path,
    queries_format: str,
    corpus: str | Path,
    corpus_format: str,
    judgment_set: str | Path | None,
    depth: int,
    desc: str | None = None,
) -> Pool:
    """The pool of the runs named (see :func:`expand_runs`) at ``depth``, less the pairs judged in
    ``judgment_set`` (by anyone); ``desc`` names the runs' progress (:mod:`releval.progress`)."""
    run_paths = expand_runs(run_names)
    query_texts = read_query_texts(queries, queries_format)
    docs = read_docs(corpus, corpus_format)
    judged = None
    if judgment_set:
        judged = jmod.load_version(judgment_set).judgments.select("query_id", "doc_id")
    tops = [top_documents(read_any_run(path), depth) for path in progress(run_paths, desc, unit="runs")]
    table, left_out = build_pool(tops, query_texts, docs, judged)
    return Pool(table, left_out, len(run_paths))


@dataclass(frozen=True)
class SampledPool:
    """A sampled pool: the blind table of the sampled pairs and the sample (design, source)."""

    table: pl.DataFrame
    sample: sampling.Sample


def make_sample(
    scored_runs: Mapping[str, pl.DataFrame],
    query_texts: pl.DataFrame,
    docs: pl.DataFrame,
    judged: pl.DataFrame | None,
    depth: int,
    size: float | int,
    seed: int,
    *,
    ties: str = "docid-asc",
    source: Mapping[str, Any] | None = None,
) -> SampledPool:
    """The stratified random sample (:func:`releval.judging.sample.draw`) of the unjudged top-``depth``
    pairs of ``scored_runs`` (name -> query_id, doc_id, score), ``judged`` (query_id, doc_id, grade) left
    out, as a blind pool table (:func:`build_pool`: ids the queries or corpus lack are errors)."""
    drawn = sampling.draw(scored_runs, depth, size, seed, judged=judged, ties=ties, source=source)
    table, _ = build_pool([drawn.pairs], query_texts, docs)
    return SampledPool(table, drawn)


def sample_of_runs(
    run_names: Iterable[str],
    queries: str | Path,
    queries_format: str,
    corpus: str | Path,
    corpus_format: str,
    judgment_set: str | Path | None,
    depth: int,
    size: float | int,
    seed: int,
    desc: str | None = None,
) -> SampledPool:
    """`releval pool --runs ... --sample`: :func:`make_sample` of the runs named (:func:`expand_runs`),
    the pairs judged in ``judgment_set`` left out."""
    run_paths = expand_runs(run_names)
    judged, source = None, {"judgments": None, "judgments_sha256": None}
    if judgment_set:
        judgment_version = jmod.load_version(judgment_set)
        judged = judgment_version.qrels()
        source = {"judgments": str(judgment_set), "judgments_sha256": judgment_version.manifest.judgments_sha256}
    scored = dict(scored_run(path) for path in progress(run_paths, desc, unit="runs"))
    return make_sample(
        scored,
        read_query_texts(queries, queries_format),
        read_docs(corpus, corpus_format),
        judged,
        depth,
        size,
        seed,
        source={"runs": [p.as_posix() for p in run_paths], **source},
    )


def sample_of_grid(
    grid: dict,
    runs_root: str | Path,
    judgments_cfg: Mapping[str, Any],
    depth: int,
    queries: str | Path,
    corpus: str | Path,
    size: float | int,
    seed: int,
    *,
    ties: str = "docid-asc",
    queries_format: str = "jsonl",
    corpus_format: str = "jsonl",
    subset: Mapping[str, Any] | None = None,
    desc: str | None = None,
) -> SampledPool:
    """`releval pool --sample` without --runs: :func:`make_sample` of every configuration the params grid
    declares (its run under ``runs_root``, ranked as the score stage ranks it under ``ties``), against the
    active judgments (``judgments_cfg``, read as :func:`grid_debt` reads them)."""
    folders, _ = runs.grid_runs(grid, runs_root)
    scored = dict(scored_run(folder) for folder in progress(folders, desc, unit="runs"))
    query_texts = read_query_texts(queries, queries_format)
    docs = read_docs(corpus, corpus_format)
    judged = jmod.active_judgments(judgments_cfg, subset or {}, docs, query_texts["query_id"]).qrels
    sha = None
    if judgments_cfg.get("format") == "releval":
        sha = jmod.load_version(judgments_cfg["path"]).manifest.judgments_sha256
    source = {
        "runs": sorted(scored),
        "judgments": str(judgments_cfg.get("path")),
        "judgments_version": str(judgments_cfg.get("version")),
        "judgments_sha256": sha,
    }
    return make_sample(
        dict(sorted(scored.items())), query_texts, docs, judged, depth, size, seed, ties=ties, source=source
    )


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
        if isinstance(grade, str) and _INTEGER.fullmatch(grade.strip()) and len(grade.strip()) <= _GRADE_DIGITS:
            grade = int(grade.strip())  # a longer run of digits stays text: validation calls it off the scale
        values: dict[str, Any] = {"query_id": row.get("query_id"), "doc_id": row.get("doc_id"), "grade": grade}
        named = row.get("annotator")
        named = named.strip() if isinstance(named, str) else named
        if named and annotator and named != annotator:
            errors.append(
                InputError(
                    f"the row names annotator {named!r}, but --annotator is {annotator!r}",
                    file=str(path),
                    line=line,
                    field="annotator",
                )
            )
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


POOL_SUFFIXES = (".csv", ".jsonl")
QRELS_ANNOTATOR = "qrels"  # the annotator of labels read from a qrels file, whose judges it does not name


def is_qrels_file(path: str | Path) -> bool:
    """A qrels file (TREC qrels, a BEIR .tsv) rather than a filled pool (.csv, .jsonl)."""
    return Path(path).suffix.lower() not in POOL_SUFFIXES


def read_qrels_records(path: str | Path, annotator: str | None) -> tuple[list[Record], list[InputError]]:
    """The rows of a qrels file as judgment records (annotator ``annotator``, else :data:`QRELS_ANNOTATOR`),
    each with the file's line number, read by the readers `releval score` and the judgments stage use."""
    path = Path(path)
    try:
        frame = trec.read_qrels(path)
    except InputError as exc:
        return [], list(exc.errors) if isinstance(exc, InputErrors) else [exc]
    header = trec.qrels_format_of(path) == "beir"
    with open(path, "rb") as fh:
        lines = [n for n, line in enumerate(fh, start=1) if line.strip() and not (header and n == 1)]
    who = annotator or QRELS_ANNOTATOR
    records = [
        Record(line, {"query_id": q, "doc_id": d, "grade": g, "annotator": who})
        for line, (q, d, g) in zip(lines, frame.select("query_id", "doc_id", "grade").iter_rows())
    ]
    return records, []


def _csv_rows(
    path: Path, errors: list[InputError], required: tuple[str, ...] = ("query_id", "doc_id", "grade")
) -> list[tuple[int, dict[str, Any]]]:
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
    for column in required:
        if column not in header:
            errors.append(
                InputError(f"missing column (header: {', '.join(header)})", file=source, line=1, field=column)
            )
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
                errors.append(
                    InputError(
                        f"expected {len(header)} columns, found {len(cells)}", file=source, line=line, field="row"
                    )
                )
                continue
            rows.append((line, dict(zip(header, cells))))
    except csv.Error as exc:
        errors.append(InputError(f"malformed CSV: {exc}", file=source, line=reader.line_num, field="row"))
    return rows


def read_pool_pairs(
    path: str | Path, query_ids: Iterable[str] | None = None, doc_ids: Iterable[str] | None = None
) -> list[tuple[str, str]]:
    """The (query_id, doc_id) pairs of a pool file (.csv or .jsonl; other columns, grades included, are
    ignored), in file order, repeats dropped: the pairs a judge (page or model) is given. An empty id,
    or one ``query_ids`` / ``doc_ids`` lack (when given), is an error naming the file's line."""
    path = Path(path)
    errors: list[InputError] = []
    if path.suffix.lower() == ".csv":
        rows = _csv_rows(path, errors, required=("query_id", "doc_id"))
    elif path.suffix.lower() == ".jsonl":
        rows = [(r.line, r.values) for r in read_jsonl(path, errors, first_field="query_id")]
    else:
        raise InputError("a pool file ends in .csv or .jsonl", file=str(path), field="pool")
    known = {
        "query_id": (None if query_ids is None else set(query_ids), "query file"),
        "doc_id": (None if doc_ids is None else set(doc_ids), "corpus"),
    }
    pairs: list[tuple[str, str]] = []
    for line, row in rows:
        values = []
        for key in ("query_id", "doc_id"):
            value, (ids, where) = row.get(key), known[key]
            text = value.strip() if isinstance(value, str) else ""
            if not text:
                problem = f"expected a non-empty id, found {value!r}"
            elif ids is not None and text not in ids:
                problem = f"{text!r} is not in the {where}"
            else:
                problem = None
            if problem:
                errors.append(InputError(problem, file=str(path), line=line, field=key))
            values.append(text)
        pairs.append((values[0], values[1]))
    raise_all(errors)
    if not pairs:
        raise InputError("no pairs to judge", file=str(path), field="pool")
    return list(dict.fromkeys(pairs))


def debt_pairs(
    params: Mapping[str, Any],
    base: Mapping[str, Any],
    depth: int | None,
    queries: str | Path,
    queries_format: str,
    corpus: str | Path,
    corpus_format: str,
    desc: str = "judging debt",
) -> tuple[list[tuple[str, str]], int]:
    """The grid's judging debt against the judgment set ``base`` (params-style: path, format, version),
    as `releval pool --missing` computes it: (pairs, depth; default the contract's judged@k)."""
    metric_cfg = section(params, "metric")
    if depth is None:
        depth = judged_depth(section(params, "metric.metrics"), metric_cfg.get("primary"))
    if depth < 1:
        raise InputError(f"must be >= 1, got {depth}", file="<command line>", field="depth")
    debt = grid_debt(
        section(params, "grid"),
        paths.RUNS,
        base,
        depth,
        queries,
        corpus,
        ties=contract_from_params(metric_cfg).ties,
        queries_format=queries_format,
        corpus_format=corpus_format,
        subset=(params.get("dataset") or {}).get("subset") or {},
        desc=desc,
    )
    return list(zip(debt.pool["query_id"].to_list(), debt.pool["doc_id"].to_list())), depth


# --------------------------------------------------------------------------- importing a filled pool


@dataclass(frozen=True)
class PoolImport:
    """What importing a filled pool did."""

    judgment_set: jmod.JudgmentSet  # the set after the import, its manifest re-sealed
    added: int  # judgments added
    ungraded: int  # rows with an empty grade, skipped
    checked_against: str  # the queries and corpus the ids were checked against, and whose they are
    idcg_moved: int | None  # queries whose IDCG@10 moved relative to the base set; None: no base set


def import_filled_pool(
    filled: str | Path,
    into: str | Path,
    annotator: str | None = None,
    parent: str | Path | None = None,
    date: str | None = None,
    queries: str | Path | None = None,
    queries_format: str = "jsonl",
    corpus: str | Path | None = None,
    corpus_format: str = "jsonl",
    rubric: str | Path | None = None,
    scale: Mapping[int, str] | None = None,
    dataset: str | None = None,
    completeness: str | None = None,
) -> PoolImport:
    """Add a filled pool's graded rows to the set ``into``: appended when it exists (an empty first
    version included), else a new version of ``parent``, else (no ``parent``) a first version with
    ``rubric`` and ``scale`` (:func:`releval.judging.judgments.add_judgments`: the rubric defaults to
    the dataset's RUBRIC.md beside ``into``). Ids are checked against the queries and corpus of the
    set's dataset (:func:`releval.inputs.datasets.references_for`; a new first version: the active
    dataset, or ``dataset``), unless ``queries`` and ``corpus`` name others. Nothing is written
    unless every row is valid (InputErrors lists every problem).

    ``filled`` may be a qrels file instead (TREC qrels or a BEIR .tsv: :func:`is_qrels_file`): its rows
    are the records (annotator ``annotator``, else ``qrels``), and the version records where they came
    from (``imported_from``: path, format, sha256). ``completeness`` (``pooled`` or ``positives-only``)
    is what the written set declares; None keeps the base set's, and a qrels file without a grade-0
    row is declared positives-only (it lists relevant documents only), with one with such rows pooled.

    A filled pool drawn by ``releval pool --sample`` (its design, ``sample.json``, beside it and naming
    it: :func:`releval.judging.sample.design_beside`) must grade exactly the sampled pairs; the written
    version holds the design as ``sample.json`` and declares ``sampled`` (its depth, systems and sample:
    :func:`releval.judging.sample.completeness_of`). The judgments the sample left out must be the base
    set's as they were when it was drawn (else a pair could be both certain and sampled)."""
    into = Path(into)
    imported_from = None
    declared = None if completeness is None else Completeness(completeness)
    extra_files: dict[str, bytes] = {}
    if is_qrels_file(filled):
        records, read_errors = read_qrels_records(filled, annotator)
        ungraded = 0
        imported_from = {
            "file": str(filled),
            "format": trec.qrels_format_of(Path(filled)),
            "sha256": io.sha256_file(filled) if Path(filled).is_file() else "",
        }
        if declared is None:
            zeros = any(r.values["grade"] == 0 for r in records)
            declared = Completeness(POOLED if zeros else POSITIVES_ONLY)
    else:
        records, ungraded, read_errors = read_filled_pool(filled, annotator)
    base = into if (into / jmod.MANIFEST_NAME).exists() else (Path(parent) if parent else None)
    design_file = None if is_qrels_file(filled) else sampling.design_beside(filled)
    if design_file is not None:
        if declared is not None:
            raise InputError(
                f"a sampled pool ({design_file} beside it) declares itself sampled; drop --completeness",
                file="<command line>",
                field="completeness",
            )
        design, source, data = sampling.read_design(design_file)
        if not read_errors:
            sampling.check_graded(design, [(r.values["query_id"], r.values["doc_id"]) for r in records], str(filled))
        drawn_against = source.get("judgments_sha256")
        now = jmod.load_version(base).manifest.judgments_sha256 if base is not None and base.exists() else None
        if drawn_against and now is not None and now != drawn_against:
            raise InputError(
                f"the sample was drawn against judgments {str(drawn_against)[:12]} ({source.get('judgments')}), "
                f"but {base} now holds {now[:12]}: draw the sample again against it",
                file=str(design_file),
                field="source.judgments_sha256",
            )
        declared = sampling.completeness_of(design, data)
        extra_files[sampling.DESIGN_NAME] = data
    if base == into:
        refuse_reported(into)
    references = references_for(
        base,
        queries=queries,
        queries_format=queries_format,
        corpus=corpus,
        corpus_format=corpus_format,
        dataset=dataset,
    )
    query_ids = read_query_texts(references.queries, references.queries_format)["query_id"].to_list()
    lengths = jmod.doc_lengths(read_docs(references.corpus, references.corpus_format))
    base_dir = into if into.exists() else (Path(parent) if parent else None)
    base_qrels = jmod.load_version(base_dir).qrels() if base_dir is not None and base_dir.exists() else None
    if date is not None and jmod._date_text(date) is None:
        raise InputError(f"expected YYYY-MM-DD, got {date!r}", file="<command line>", field="date")
    judgment_set, added = jmod.add_judgments(
        records,
        str(filled),
        into,
        parent=parent,
        date=date,
        query_ids=query_ids,
        doc_lengths=lengths,
        errors=read_errors,
        rubric=rubric,
        scale=scale,
        dataset=references.dataset,
        completeness=declared,
        imported_from=imported_from,
        extra_files=extra_files,
    )
    moved = None
    if base_qrels is not None:
        moved = jmod.idcg_change_report(base_qrels, judgment_set.qrels(), (10,)).height
    checked = f"{references.how}: queries {references.queries} and corpus {references.corpus}"
    return PoolImport(judgment_set, added, ungraded, checked, moved)


def reports_under(judgments_sha256: str, root: str | Path = ".") -> list[Path]:
    """The metrics.json files (every dataset's reports folder) holding scores computed from the judgments
    whose hash is ``judgments_sha256``."""
    found = []
    top = Path(root) / paths.REPORTS
    for path in sorted([top / "metrics.json", *top.glob("*/metrics.json")]):
        try:
            contract = json.loads(path.read_text(encoding="utf-8")).get("contract") or {}
        except (OSError, ValueError, AttributeError):
            continue
        if contract.get("judgments_sha256") == judgments_sha256:
            found.append(path)
    return found


def next_version_name(version: str) -> str:
    """v3 -> v4, helpdesk-v1 -> helpdesk-v2, first -> first-2."""
    match = re.fullmatch(r"(.*?)(\d+)", version)
    return f"{match[1]}{int(match[2]) + 1}" if match else f"{version}-2"


def import_advice(active: str | Path, pool_file: str) -> str:
    """The command that brings a graded pool into the judgments: appended to the active set while no
    score was reported from it, else a revision of it (with the override that makes it active)."""
    active = Path(active)
    try:
        manifest = jmod.load_version(active).manifest
    except InputError:
        return f"releval pool --import {pool_file} --into <new version dir> --parent {active}"
    if not reports_under(manifest.judgments_sha256):
        return f"releval pool --import {pool_file} --into {active}"
    revision = active.parent / next_version_name(active.name)
    return (
        f"releval pool --import {pool_file} --into {revision} --parent {active}, then score with it: "
        f"releval params judgments.version={revision.name} judgments.path={revision.as_posix()} && dvc repro"
    )


def refuse_reported(set_dir: Path) -> None:
    """An error when scores were reported from the set as it is: appending would change the judgments
    behind numbers already reported (a revision keeps both)."""
    manifest = jmod.load_version(set_dir).manifest
    reported = reports_under(manifest.judgments_sha256) if manifest.judgments_sha256 != jmod.sha256_bytes(b"") else []
    if reported:
        revision = set_dir.parent / next_version_name(set_dir.name)
        raise InputError(
            f"scores were reported from {manifest.version} as it is ({', '.join(map(str, reported))}, judgments_sha256 "
            f"{manifest.judgments_sha256[:12]}): appending would change the judgments behind them. Write a revision "
            f"instead: --into {revision} --parent {set_dir}",
            file=str(set_dir),
            field="into",
        )


# --------------------------------------------------------------------------- the judging debt of the grid

PAIRS_SCHEMA = {"query_id": pl.Utf8, "doc_id": pl.Utf8}


def judging_debt(
    tops_by_config: Mapping[str, pl.DataFrame], judged: pl.DataFrame
) -> tuple[dict[str, int], pl.DataFrame]:
    """The unjudged pairs of each configuration's top documents.

    ``tops_by_config``: configuration id -> its top documents (``query_id, doc_id``); ``judged``:
    the judged pairs (``query_id, doc_id``, by anyone; other columns ignored). Returns (per
    configuration, how many of its top pairs are unjudged; the distinct unjudged pairs of all of
    them, ``query_id, doc_id`` sorted by query_id then doc_id).
    """
    known = judged.select(pl.col("query_id").cast(pl.Utf8), pl.col("doc_id").cast(pl.Utf8)).unique()
    counts: dict[str, int] = {}
    frames = []
    for config_id, top in tops_by_config.items():
        unjudged = (
            top.select(pl.col("query_id").cast(pl.Utf8), pl.col("doc_id").cast(pl.Utf8))
            .unique()
            .join(known, on=["query_id", "doc_id"], how="anti")
        )
        counts[config_id] = unjudged.height
        frames.append(unjudged)
    pairs = pl.concat(frames).unique() if frames else pl.DataFrame(schema=PAIRS_SCHEMA)
    return counts, pairs.sort("query_id", "doc_id")


def scored_top_documents(chunk_run: pl.DataFrame, depth: int, ties: str = "docid-asc") -> pl.DataFrame:
    """Each query's first ``depth`` documents as scoring sees them: chunks collapsed to documents
    (:func:`releval.measurement.scoring.document_run`), ordered as the metric engine orders them
    under the contract's ``ties`` (:func:`releval.measurement.scoring.document_ranks`), so that
    these are exactly the documents ``judged@depth`` counts. Columns: query_id, doc_id."""
    ranked = scoring.document_ranks(scoring.document_run(chunk_run), ties)
    return ranked.filter(pl.col("doc_rank") <= depth).select("query_id", "doc_id")


def grid_tops(
    grid: dict, runs_root: str | Path, depth: int, ties: str = "docid-asc", desc: str | None = None
) -> dict[str, pl.DataFrame]:
    """Configuration id (as run.json and the reports name it) -> :func:`scored_top_documents` of its
    run, for every configuration ``grid`` declares (:func:`releval.retrieval.runs.grid_runs`: a
    missing run is an error), sorted by id; ``desc`` names the runs' progress."""
    folders, _ = runs.grid_runs(grid, runs_root)
    tops = {}
    for folder in progress(folders, desc, unit="runs"):
        chunk_run, meta = runs.read_run(folder)
        tops[meta["config_id"]] = scored_top_documents(chunk_run, depth, ties)
    return dict(sorted(tops.items()))


def judged_depth(metric_names: Iterable[str], primary: str | None = None) -> int:
    """The k of the contract's ``judged@k`` (that at the primary metric's k when there are several)."""
    ks = [m.k for m in map(parse_metric, metric_names) if m.kind == "judged" and m.k is not None]
    if not ks:
        raise InputError("no judged@k metric to take the depth from; pass --depth", file="params.yaml", field="metric")
    primary_k = parse_metric(primary).k if primary else None
    return primary_k if primary_k in ks else ks[0]


@dataclass(frozen=True)
class Debt:
    """The judging debt of a grid against one judgment version."""

    counts: dict[str, int]  # configuration id -> unjudged pairs in its top ``depth``
    pool: pl.DataFrame  # the distinct unjudged pairs as a blind pool table (POOL_COLUMNS, sorted)
    depth: int
    version: str  # the judgment version's name
    queries: int  # queries of the query table (dev and holdout)
    queries_in_runs: int  # of them, queries some configuration retrieves for


def grid_debt(
    grid: dict,
    runs_root: str | Path,
    judgments_cfg: Mapping[str, Any],
    depth: int,
    queries: str | Path,
    corpus: str | Path,
    *,
    ties: str = "docid-asc",
    queries_format: str = "jsonl",
    corpus_format: str = "jsonl",
    subset: Mapping[str, Any] | None = None,
    desc: str | None = None,
) -> Debt:
    """:func:`judging_debt` of every configuration of ``grid`` at ``depth`` against ``judgments_cfg``
    (a params ``judgments`` section, read and checked against the corpus and queries as the
    judgments stage reads it: :func:`releval.judging.judgments.active_judgments`; ``subset`` is the
    dataset's), its pairs as a pool table (:func:`build_pool`: ids the query table or corpus lack
    are errors); ``desc`` names the runs' progress (:mod:`releval.progress`)."""
    tops = grid_tops(grid, runs_root, depth, ties, desc)
    query_texts = read_query_texts(queries, queries_format)
    docs = read_docs(corpus, corpus_format)
    judged = jmod.active_judgments(judgments_cfg, subset or {}, docs, query_texts["query_id"]).qrels
    counts, pairs = judging_debt(tops, judged)
    version = str(judgments_cfg["version"])
    table, _ = build_pool([pairs], query_texts, docs)
    retrieved = {q for top in tops.values() for q in top["query_id"].to_list()}
    return Debt(counts, table, depth, version, query_texts.height, len(retrieved))


def read_contract(metrics_path: str | Path) -> dict[str, Any]:
    """metrics.json's contract (an error naming the file when it has none)."""
    path = Path(metrics_path)
    try:
        return dict(json.loads(path.read_text(encoding="utf-8"))["contract"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"not a readable metrics.json: {exc}", file=str(path), field="contract") from None


def low_judged_configs(
    metrics_path: str | Path, depth: int, threshold: float, config_ids: Iterable[str]
) -> list[tuple[str, float]]:
    """(configuration, mean judged@depth) of each of ``config_ids`` scored in ``metrics_path``
    (reports/metrics.json: the mean over the scored queries) whose judged@depth is below
    ``threshold``, lowest first; configurations metrics.json does not hold are left out."""
    path = Path(metrics_path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        contract, configs = document["contract"], document["configs"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"not a readable metrics.json: {exc}", file=str(path), field="configs") from None
    metric = f"judged@{depth}"
    if metric not in (contract.get("metrics") or []):
        raise InputError(
            f"{metric} was not scored (metrics: {', '.join(contract.get('metrics') or [])})",
            file=str(path),
            field="contract.metrics",
        )
    low = [(cid, float(configs[cid][metric])) for cid in config_ids if cid in configs]
    return sorted(((cid, v) for cid, v in low if v < threshold), key=lambda item: (item[1], item[0]))
