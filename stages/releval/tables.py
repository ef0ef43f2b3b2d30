"""Every table releval reads or writes, declared once: its columns, their dtypes, what checks it.

Equal column names do not make equal tables: a chunk-level run (:data:`CHUNK_RUN`) is not the
document-level run the metric engine takes (:data:`DOC_RUN`), and per-annotator judgments
(:data:`JUDGMENTS`) are not the qrels made from them (:data:`QRELS`). Readers build their frames
with these schemas and writers select these columns; nothing else spells them out.

This module imports nothing from releval (every module may import it); a table's checker is
named by ``module:function`` and imported only when asked for (:meth:`Table.checker`).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Callable

import polars as pl

LINE_COLUMN = "line"  # the 1-based source line of a row, carried while a file is validated


@dataclass(frozen=True)
class Table:
    """One table: what it holds, its columns and dtypes in order, and the function that checks it."""

    name: str
    fields: tuple[tuple[str, pl.DataType], ...]
    checked_by: str = ""  # "module:function": a validation function or a pandera schema builder

    @property
    def schema(self) -> pl.Schema:
        """The polars schema (a fresh copy: callers may not change the declaration)."""
        return pl.Schema(dict(self.fields))

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.fields)

    @property
    def schema_with_line(self) -> pl.Schema:
        """The schema plus :data:`LINE_COLUMN`, as a table being validated carries it."""
        return pl.Schema({**dict(self.fields), LINE_COLUMN: pl.Int64})

    def empty(self) -> pl.DataFrame:
        return pl.DataFrame(schema=self.schema)

    def checker(self) -> Callable[..., Any]:
        """The function named by :attr:`checked_by`; LookupError when nothing checks this table."""
        if not self.checked_by:
            raise LookupError(f"no checker is declared for the {self.name} table")
        module, _, function = self.checked_by.partition(":")
        return getattr(importlib.import_module(module), function)


def _table(name: str, columns: Mapping[str, pl.DataType], checked_by: str = "") -> Table:
    return Table(name, tuple(columns.items()), checked_by)


# --------------------------------------------------------------------------- inputs

DOCUMENTS = _table(
    "documents",  # data/work/docs.parquet; sha256 of UTF-8 title + "\n" + text
    {"doc_id": pl.String, "title": pl.String, "text": pl.String, "sha256": pl.String},
)
QUERIES = _table(
    "queries",  # releval's own queries.jsonl, loaded
    {
        "query_id": pl.String,
        "text": pl.String,
        "split": pl.String,
        "slices": pl.List(pl.String),
        "must_never_break": pl.Boolean,
    },
    checked_by="releval.inputs.schemas:queries_schema",
)
IMPORTED_QUERIES = _table("imported queries", {"query_id": pl.String, "text": pl.String})  # jsonl / BEIR
SMART_QUERIES = _table(
    "SMART queries",  # cran.qry: query_id is the position, source_id the printed .I id
    {"query_id": pl.String, "text": pl.String, "source_id": pl.String},
)
EVIDENCE_SPAN = pl.Struct({"quote": pl.String, "occurrence": pl.Int64, "start": pl.Int64, "end": pl.Int64})
"""One evidence span of a judgment: a quoted anchor (``quote``, optional ``occurrence``) or
character offsets (``start``, ``end``) into the document's text without its title. A typed list of
structs rather than a JSON string: polars reads, filters and writes it to parquet as it is, and
pandera checks its dtype, while a JSON string would need parsing on every read and could hold
anything until it was."""
JUDGMENTS = _table(
    "judgments",  # one annotator's grade per row: a judgment set's judgments.jsonl
    {
        "query_id": pl.String,
        "doc_id": pl.String,
        "grade": pl.Int64,
        "annotator": pl.String,
        "span_start": pl.Int64,
        "span_end": pl.Int64,
        "notes": pl.String,
        # evidence spans (releval.inputs.schemas): null, or a list of {quote, occurrence} anchors and
        # {start, end} offsets, one struct with all four fields, the unused ones null
        "evidence": pl.List(EVIDENCE_SPAN),
    },
    checked_by="releval.inputs.schemas:judgments_schema",
)
QRELS = _table(
    "qrels",  # one grade per (query, document): data/work/qrels.parquet, TREC qrels
    {"query_id": pl.String, "doc_id": pl.String, "grade": pl.Int64},
    checked_by="releval.measurement.metrics:check_qrels",
)

# The fields of a TREC text line, which releval.inputs.trec reads into QRELS and DOC_RUN.
TREC_QRELS_LINE = ("query_id", "iteration", "doc_id", "grade")
TREC_RUN_LINE = ("query_id", "Q0", "doc_id", "rank", "score", "tag")

# --------------------------------------------------------------------------- retrieval

CHUNKS = _table(
    # data/work/chunks/<chunking>.parquet; start/end: character offsets of the body into the
    # document's text; text: what retrievers read (title + " " + body under retriever.titles: prepend)
    "chunks",
    {
        "chunk_id": pl.String,
        "doc_id": pl.String,
        "start": pl.Int64,
        "end": pl.Int64,
        "n_tokens": pl.Int64,
        "text": pl.String,
    },
)
CHUNK_RUN = _table(
    "chunk-level run",  # run.parquet of a run folder; rank 1 = best
    {"query_id": pl.String, "chunk_id": pl.String, "doc_id": pl.String, "score": pl.Float64, "rank": pl.Int64},
)
RANKED_DOC_RUN = _table(
    "ranked document-level run",  # a chunk run collapsed to documents, each at its best chunk's rank
    {"query_id": pl.String, "doc_id": pl.String, "score": pl.Float64, "rank": pl.Int64},
)
DOC_RUN = _table(
    "document-level run",  # what the metric engine takes and TREC run files hold
    {"query_id": pl.String, "doc_id": pl.String, "score": pl.Float64},
    checked_by="releval.measurement.metrics:check_run",
)

# --------------------------------------------------------------------------- measurement

PER_QUERY = _table(
    "per-query scores",  # reports/per_query.parquet: these columns, then per_query_schema's metric columns
    {"config_id": pl.String, "query_id": pl.String},
)


def per_query_schema(metric_names: Iterable[str]) -> pl.Schema:
    """:data:`PER_QUERY`'s full schema: its columns, then one Float64 column per metric, in order."""
    return pl.Schema({**dict(PER_QUERY.fields), **{name: pl.Float64 for name in metric_names}})


TABLES = (
    DOCUMENTS,
    QUERIES,
    IMPORTED_QUERIES,
    SMART_QUERIES,
    JUDGMENTS,
    QRELS,
    CHUNKS,
    CHUNK_RUN,
    RANKED_DOC_RUN,
    DOC_RUN,
    PER_QUERY,
)
