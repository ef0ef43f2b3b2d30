"""External runs: a run file produced elsewhere (production search, a vendor API, last quarter's
system), validated and stored as a releval run folder, configuration id ``external/<name>``.

An entry of ``externals`` (a file of conf/external/, chosen into ``grid.external``) names the
file, its format (``trec``, ``jsonl``, ``parquet``: :func:`releval.inputs.trec.read_run`), a
declared description (what system, when, by whom) and its unit: ``documents`` (the file's ids
are the corpus's document ids) or ``chunks`` (its ids are passages; ``chunk_pattern``, a regular
expression with a group ``doc_id``, takes the document out of each one).

The file stays inside the project: ``path`` is relative to the project root, and a path that
leads out of it (absolute, ``../``, or a symlink whose target is outside, resolved) is refused,
naming ``externals.<name>.path``, unless the entry says ``allow_outside: true``. A run file
then reaches the project only because its configuration names it so, never by a link someone
put in the project.

The file is checked against the pipeline's tables: every query id must be a query of the query
table and every document a document of the corpus table; scores finite, (query, id) pairs
unique, ranks (where the file has them) positive whole numbers, unique within a query. Every
problem is an :class:`InputError` naming the file, the line (parquet: the row) and the field.

Like every run the pipeline makes, the stored run holds dev queries only: rows of holdout
queries are dropped (and counted) unless ``releval holdout`` opens the holdout. It is ranked
the way the metric contract ranks any run, by score descending, ties by id ascending (trec_eval
too ignores a file's rank column); a file whose ranks disagree with its scores is reported.

An entry with ``endpoint:`` names a live search endpoint instead of a file
(:mod:`releval.retrieval.live_search`): :func:`snapshot` sends it the split's queries, writes
its answers as a run file in the run folder and checks that file as any other (its ``path`` is
the query table, the stage's dependency besides the params).
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from releval import io, paths
from releval.errors import InputError
from releval.inputs import trec
from releval.measurement import holdout
from releval.retrieval import live_search, runs
from releval.tables import CHUNK_RUN, TREC_RUN_LINE

UNITS = ("documents", "chunks")
DESCRIPTION_FIELDS = ("system", "produced", "by")  # what system, when, by whom
ENTRY_FIELDS = ("path", "format", "description", "unit", "chunk_pattern", "allow_outside", "endpoint")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
KIND = "external"


@dataclass(frozen=True)
class ExternalRun:
    """One entry of ``externals`` in params.yaml."""

    name: str
    path: str
    format: str
    description: dict[str, str]
    unit: str = "documents"
    chunk_pattern: str | None = None
    allow_outside: bool = False  # the file may resolve outside the project root (declared, recorded)
    endpoint: live_search.Endpoint | None = None  # a live search endpoint, snapshotted by the stage

    @property
    def where(self) -> str:
        return f"externals.{self.name}"


def declared(name: str, entry: Any, source: str = "params.yaml") -> ExternalRun:
    """The entry ``externals.<name>`` checked: one InputError naming the field otherwise."""
    where = f"externals.{name}"
    if not NAME.match(name):
        raise InputError("a name of letters, digits, '_', '-' or '.'", file=source, field=where)
    if not isinstance(entry, Mapping):
        raise InputError(f"expected a mapping of {', '.join(ENTRY_FIELDS)}", file=source, field=where)
    unknown = sorted(set(entry) - set(ENTRY_FIELDS))
    if unknown:
        raise InputError(f"unknown key; keys: {', '.join(ENTRY_FIELDS)}", file=source, field=f"{where}.{unknown[0]}")
    live = entry.get("endpoint") is not None
    path = entry.get("path")
    if live and path != paths.QUERIES:
        raise InputError(
            f"an endpoint entry's path is the query table whose queries it is sent, {paths.QUERIES} "
            "(dvc.yaml depends on every external's path)",
            file=source,
            field=f"{where}.path",
        )
    if not isinstance(path, str) or not path:
        raise InputError("the run file's path (relative to the project root)", file=source, field=f"{where}.path")
    format = entry.get("format") or ("trec" if live else trec.infer_format(path))
    if format not in trec.FORMATS:
        raise InputError(f"expected one of {', '.join(trec.FORMATS)}", file=source, field=f"{where}.format")
    description = entry.get("description")
    if not isinstance(description, Mapping):
        raise InputError(
            f"declare {', '.join(DESCRIPTION_FIELDS)} (what system, when, by whom)",
            file=source,
            field=f"{where}.description",
        )
    if live and "produced" in description:
        raise InputError(
            "an endpoint's run is produced when the stage takes its snapshot, which it records",
            file=source,
            field=f"{where}.description.produced",
        )
    for field in DESCRIPTION_FIELDS if not live else ("system", "by"):
        value = description.get(field)
        if not isinstance(value, str) or not value.strip():
            raise InputError("a non-empty text", file=source, field=f"{where}.description.{field}")
    unit = entry.get("unit", "documents")
    if unit not in UNITS:
        raise InputError(f"expected one of {', '.join(UNITS)}", file=source, field=f"{where}.unit")
    pattern = entry.get("chunk_pattern")
    if unit == "chunks":
        if not isinstance(pattern, str) or not pattern:
            raise InputError(
                "unit chunks needs a regular expression with a group doc_id, e.g. '^(?P<doc_id>[^#]+)#'",
                file=source,
                field=f"{where}.chunk_pattern",
            )
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise InputError(f"not a regular expression: {exc}", file=source, field=f"{where}.chunk_pattern") from None
        if "doc_id" not in compiled.groupindex:
            raise InputError("needs a named group (?P<doc_id>...)", file=source, field=f"{where}.chunk_pattern")
    elif pattern is not None:
        raise InputError("only for unit chunks", file=source, field=f"{where}.chunk_pattern")
    allow_outside = entry.get("allow_outside", False)
    if not isinstance(allow_outside, bool):
        raise InputError(
            f"expected true or false, found {allow_outside!r}", file=source, field=f"{where}.allow_outside"
        )
    if live and allow_outside:
        raise InputError("only for a run file", file=source, field=f"{where}.allow_outside")
    description = {f: str(description[f]) for f in DESCRIPTION_FIELDS if f in description}
    spec = live_search.endpoint(entry["endpoint"], where, source) if live else None
    return ExternalRun(name, path, format, description, unit, pattern, allow_outside, spec)


def inside_project(entry: ExternalRun, root: str | Path = ".") -> Path:
    """The run file's path under ``root`` (the project root); an InputError naming
    ``externals.<name>.path`` when it resolves outside the root (absolute, ``../``, a symlink out)
    and the entry does not say ``allow_outside: true``."""
    path = Path(root) / entry.path
    if entry.allow_outside:
        return path
    project, resolved = Path(root).resolve(), path.resolve()
    if not resolved.is_relative_to(project):
        via = "" if Path(entry.path).is_absolute() or ".." in Path(entry.path).parts else f" (a link to {resolved})"
        raise InputError(
            f"outside the project root{via}: a run file is read from the project (path relative to its root), "
            f"unless {entry.where}.allow_outside is true (conf/external/{entry.name}.yaml: allow_outside: true)",
            file=entry.path,
            field=f"{entry.where}.path",
        )
    return path


# --------------------------------------------------------------------------- reading the file


def _text(path: Path) -> str:
    data = path.read_bytes()
    if path.suffix.lower() == ".gz":
        data = gzip.decompress(data)
    return data.decode("utf-8-sig")


def _rows_of_lines(path: Path, format: str) -> tuple[np.ndarray, list[str] | None]:
    """The file line of each row :func:`releval.inputs.trec.read_run` returns (in its order), and the
    lines' text (None for parquet, whose rows are numbered from 1)."""
    if format == "parquet":
        return np.arange(1, pl.scan_parquet(path).select(pl.len()).collect().item() + 1, dtype=np.int64), None
    lines = _text(path).split("\n")
    # read_run skips exactly the lines without a token (TREC) or blank after stripping (JSONL)
    kept = [(n, t) for n, t in enumerate(lines, start=1) if t.strip()]
    return np.array([n for n, _ in kept], dtype=np.int64), [t for _, t in kept]


def _ranks(path: Path, format: str, texts: list[str] | None) -> pl.Series | None:
    """The file's own rank of each row, as text (None where the file has none: JSONL or parquet
    without a ``rank`` field)."""
    if format == "trec":
        position = TREC_RUN_LINE.index("rank")
        return pl.Series("rank", [t.split()[position] for t in texts or []], dtype=pl.String)
    if format == "jsonl":
        values = [json.loads(t).get("rank") for t in texts or []]
        if all(v is None for v in values):
            return None
        return pl.Series("rank", [None if v is None else str(v) for v in values], dtype=pl.String)
    columns = pl.read_parquet_schema(path)
    return pl.read_parquet(path, columns=["rank"])["rank"].cast(pl.String) if "rank" in columns else None


def read_external(entry: ExternalRun, root: str | Path = ".") -> pl.DataFrame:
    """The file as ``query_id, chunk_id, doc_id, score, file_rank, line`` (``file_rank`` null where
    the file has no ranks), every row checked for format, finite score and duplicates."""
    path = inside_project(entry, root)
    source = entry.path
    if not path.is_file():
        raise InputError("no such run file", file=source, field=f"{entry.where}.path")
    try:
        frame = trec.read_run(path, entry.format)
    except InputError as exc:  # name the file as declared, not as resolved
        raise InputError(exc.detail, file=source, line=exc.line, field=exc.field) from None
    lines, texts = _rows_of_lines(path, entry.format)
    if len(lines) != frame.height:  # read_run and this reader disagree on which lines are rows
        raise InputError(f"{frame.height} rows read but {len(lines)} non-blank lines", file=source)
    ranks = _ranks(path, entry.format, texts)
    table = frame.rename({"doc_id": "chunk_id"}).with_columns(
        pl.Series("line", lines),
        (ranks if ranks is not None else pl.lit(None, dtype=pl.String)).alias("file_rank"),
    )
    table = table.with_columns(_document_ids(table, entry, source))
    return table.select("query_id", "chunk_id", "doc_id", "score", "file_rank", "line")


def _document_ids(table: pl.DataFrame, entry: ExternalRun, source: str) -> pl.Series:
    if entry.unit == "documents":
        return table["chunk_id"].alias("doc_id")
    doc_ids = table["chunk_id"].str.extract(entry.chunk_pattern, group_index=_group(entry.chunk_pattern))
    bad = np.flatnonzero((doc_ids.is_null() | (doc_ids == "")).to_numpy())
    if bad.size:
        row = int(bad[0])
        raise InputError(
            f"{table['chunk_id'][row]!r} does not match chunk_pattern {entry.chunk_pattern!r}",
            file=source,
            line=int(table["line"][row]),
            field="doc_id",
        )
    return doc_ids.alias("doc_id")


def _group(pattern: str) -> int:
    return re.compile(pattern).groupindex["doc_id"]


# --------------------------------------------------------------------------- checking against the pipeline's tables


def check_ranks(table: pl.DataFrame, source: str) -> int:
    """Ranks, where the file has them: positive whole numbers, unique within a query. Returns how
    many queries the file ranks otherwise than their scores do."""
    if table["file_rank"].null_count() == table.height:
        return 0
    ranks = table["file_rank"].cast(pl.Int64, strict=False)
    bad = np.flatnonzero((ranks.is_null() | (ranks < 1)).to_numpy())
    if bad.size:
        row = int(bad[0])
        raise InputError(
            f"expected a whole number >= 1, got {table['file_rank'][row]!r}",
            file=source,
            line=int(table["line"][row]),
            field="rank",
        )
    ranked = table.with_columns(ranks.alias("file_rank"))
    repeated = ranked.filter(pl.col("file_rank").is_duplicated().over("query_id"))
    if repeated.height:
        first = repeated.sort("line").row(0, named=True)
        earlier = repeated.filter(
            (pl.col("query_id") == first["query_id"]) & (pl.col("file_rank") == first["file_rank"])
        )["line"]
        raise InputError(
            f"rank {first['file_rank']} of query {first['query_id']!r} repeats (lines {', '.join(map(str, earlier))})",
            file=source,
            line=int(earlier[-1]),
            field="rank",
        )
    by_rank = ranked.sort("query_id", "file_rank").group_by("query_id", maintain_order=True).agg("chunk_id")
    by_score = runs.rank_by_score(ranked).group_by("query_id", maintain_order=True).agg("chunk_id")
    differs = by_rank.join(by_score, on="query_id", suffix="_score").filter(
        pl.col("chunk_id") != pl.col("chunk_id_score")
    )
    return differs.height


def check_ids(table: pl.DataFrame, known: pl.Series, field: str, source: str, what: str) -> None:
    """Every value of ``table[field]`` is among ``known``: otherwise the first one that is not."""
    bad = np.flatnonzero((~table[field].is_in(known.implode())).to_numpy())
    if bad.size:
        row = int(bad[0])
        others = int(table[field].gather(bad).n_unique()) - 1
        also = f" ({others} other unknown id(s))" if others else ""
        raise InputError(
            f"{table[field][row]!r} is not a {what}{also}", file=source, line=int(table["line"][row]), field=field
        )


@dataclass(frozen=True)
class Converted:
    """An external file as a releval run: the run table and what its run.json records."""

    run: pl.DataFrame
    meta: dict[str, Any]


def convert(
    entry: ExternalRun,
    queries: pl.DataFrame,
    doc_ids: pl.Series,
    *,
    split: str = "dev",
    root: str | Path = ".",
) -> Converted:
    """The checked file as a chunk-level run over the queries of ``split`` (dev unless the holdout
    is opened), with its run.json. ``queries``: the queries table; ``doc_ids``: the corpus's ids."""
    source = entry.path
    table = read_external(entry, root)
    check_ids(table, queries["query_id"].cast(pl.String), "query_id", source, "query of the query table")
    check_ids(table, doc_ids.cast(pl.String), "doc_id", source, "document of the corpus")
    disordered = check_ranks(table, source)
    kept_ids = holdout.select_queries(queries, split, source=source)["query_id"].cast(pl.String)
    kept = table.filter(pl.col("query_id").is_in(kept_ids.implode()))
    dropped = table.filter(~pl.col("query_id").is_in(kept_ids.implode()))
    run = runs.rank_by_score(kept.select(CHUNK_RUN.columns[:-1])).select(CHUNK_RUN.columns)
    file_queries = int(table["query_id"].n_unique())
    record = {
        "name": entry.name,
        "path": entry.path,
        "format": entry.format,
        "sha256": io.sha256_file(Path(root) / entry.path),
        "bytes": (Path(root) / entry.path).stat().st_size,
        "description": dict(entry.description),
        "unit": entry.unit,
        "chunk_pattern": entry.chunk_pattern,
        **({"allow_outside": True} if entry.allow_outside else {}),  # absent by default: records stay as they were
        "rows": table.height,
        "queries_in_file": file_queries,
        "split": split,
        "rows_kept": run.height,
        "queries_kept": int(run["query_id"].n_unique()),
        "queries_dropped": int(dropped["query_id"].n_unique()),
        "rows_dropped": dropped.height,
        "split_queries_missing": int(kept_ids.len() - run["query_id"].n_unique()),
        "queries_ranked_otherwise_by_file": disordered,
    }
    meta = {
        "config_id": runs.external_id(entry.name),
        "kind": KIND,
        "chunking": None,
        "inputs": [],
        "models": {},
        "external": record,
        "ops": {},  # nothing about the serving system is known here
        "queries": record["queries_kept"],
    }
    return Converted(run, meta)


SNAPSHOT = "snapshot"  # the run folder's snapshot.<format> of an endpoint entry


def snapshot(
    entry: ExternalRun, queries: pl.DataFrame, doc_ids: pl.Series, out_dir: str | Path, *, split: str = "dev"
) -> Converted:
    """An endpoint entry's answers for the queries of ``split`` (only those are sent), written to
    ``out_dir/snapshot.<format>`` (a temporary file renamed once checked) and converted by
    :func:`convert` as a declared file is; run.json's ``external.endpoint`` records the snapshot."""
    assert entry.endpoint is not None
    sent = holdout.select_queries(queries, split, source=entry.path)
    taken = live_search.take(entry.endpoint, list(zip(sent["query_id"].cast(pl.String), sent["text"])), entry.where)
    target = Path(out_dir) / f"{SNAPSHOT}.{entry.format}"
    produced = (
        f"a snapshot of a live system at {taken.record['taken_at']}: {entry.endpoint.method} {entry.endpoint.url}"
    )
    with io.atomic_path(target) as temporary:
        as_file = ExternalRun(
            entry.name,
            temporary.name,
            entry.format,
            {**entry.description, "produced": produced},
            entry.unit,
            entry.chunk_pattern,
        )
        try:
            live_search.write_snapshot(temporary, taken.rows, entry.format, entry.where)
            converted = convert(as_file, queries, doc_ids, split=split, root=temporary.parent)
        except InputError as exc:  # name the snapshot as it is kept, not its temporary name
            raise InputError(exc.detail, file=target.as_posix(), line=exc.line, field=exc.field) from None
    record = {**converted.meta["external"], "path": target.as_posix(), "endpoint": taken.record}
    return Converted(converted.run, {**converted.meta, "external": record})


def summary(record: Mapping[str, Any]) -> list[str]:
    """What the stage prints about one converted file."""
    lines = [
        f"external {record['name']}: {record['path']} ({record['format']}, sha256 {record['sha256'][:12]}), "
        f"{record['description']['system']}, {record['description']['produced']}, by {record['description']['by']}",
        f"  kept {record['rows_kept']} rows of {record['queries_kept']} {record['split']} queries "
        f"(of {record['rows']} rows, {record['queries_in_file']} queries in the file)",
    ]
    live = record.get("endpoint")
    if live:
        sealed = "; no holdout query was sent" if record["split"] == "dev" else ""
        lines.append(
            f"  a snapshot of a live system: {live['queries_sent']} {record['split']} queries sent to "
            f"{live['method']} {live['url']} at {live['taken_at']} ({live['hits']} hits, "
            f"responses sha256 {live['responses_sha256'][:12]}){sealed}"
        )
    if record["queries_dropped"]:
        lines.append(
            f"  dropped {record['rows_dropped']} rows of {record['queries_dropped']} queries outside the "
            f"{record['split']} split: holdout queries stay sealed (scored only when `releval holdout` opens them)"
        )
    if record["split_queries_missing"]:
        lines.append(
            f"  {record['split_queries_missing']} {record['split']} queries have no row in the file "
            "(scored 0 under the default contract)"
        )
    if record["queries_ranked_otherwise_by_file"]:
        lines.append(
            f"  the file's ranks disagree with its scores on {record['queries_ranked_otherwise_by_file']} queries; "
            "like trec_eval, releval ranks by score (ties by id ascending)"
        )
    return lines
