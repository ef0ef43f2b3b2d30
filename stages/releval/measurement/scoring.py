"""The one scoring path: a stored run → documents → the scored queries → metrics under a contract.

The score stage, rescore (the archive), audit, compare, the report and pool all go through
these functions; nothing else collapses chunks to documents, restricts a run to a split or
rebuilds a :class:`~releval.measurement.metrics.Contract` from its recorded form.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from releval.measurement import holdout
from releval.retrieval import runs
from releval.measurement.metrics import FIXED_TERMS, Contract, Evaluation, evaluate


def contract_from_record(record: Mapping[str, Any], **overrides: Any) -> Contract:
    """The engine's contract from a recorded one (metrics.json's ``contract``, a card's).

    Recorded context (dataset, judgments, split, metrics, ...) is not an engine term and is
    ignored; fixed terms are checked; ``overrides`` replace terms (e.g. ``rel_threshold``).
    """
    names = {field.name for field in dataclasses.fields(Contract)} | set(FIXED_TERMS)
    return Contract.from_dict({**{k: v for k, v in record.items() if k in names}, **overrides})


def document_run(chunk_run: pl.DataFrame, query_ids: Iterable[str] | None = None) -> pl.DataFrame:
    """A chunk-level run at the judged unit: each document at its best chunk's rank and score,
    restricted to ``query_ids`` when given. Columns: query_id, doc_id, score, rank."""
    doc_run = runs.collapse_to_documents(chunk_run)
    return doc_run if query_ids is None else holdout.restrict(doc_run, query_ids)


@dataclass(frozen=True)
class ScoredQueries:
    """What a scoring run evaluates against: the scored queries, their judgments, their slices."""

    ids: list[str]
    qrels: pl.DataFrame
    slices: dict[str, list[str]] | None


def scored_queries(queries: pl.DataFrame, qrels: pl.DataFrame, query_ids: Iterable[str] | None = None) -> ScoredQueries:
    """The scored queries (all of ``queries``, or those of ``query_ids``), their qrels and slices."""
    if query_ids is not None:
        queries = holdout.restrict(queries, query_ids)
    ids = queries["query_id"].cast(pl.Utf8).to_list()
    slices = None
    if "slices" in queries.columns:
        slices = {
            q: list(s)
            for q, s in queries.select(pl.col("query_id").cast(pl.Utf8), "slices").iter_rows()
            if s is not None and len(s)
        }
    return ScoredQueries(ids=ids, qrels=holdout.restrict(qrels, ids), slices=slices)


def score(
    doc_run: pl.DataFrame,
    scored: ScoredQueries,
    metrics: Sequence[str],
    contract: Contract,
    *,
    run_source: str = "run table",
    with_slices: bool = True,
) -> Evaluation:
    """Evaluate a document-level run over the scored queries (per slice too, when they have slices)."""
    return score_table(
        holdout.restrict(doc_run, scored.ids),
        scored.qrels,
        metrics,
        contract,
        slices=scored.slices if with_slices else None,
        run_source=run_source,
    )


def score_table(
    doc_run: pl.DataFrame,
    qrels: pl.DataFrame,
    metrics: Sequence[str],
    contract: Contract,
    *,
    slices: Mapping[str, Sequence[str]] | None = None,
    run_source: str = "run table",
) -> Evaluation:
    """Evaluate a document-level run against ``qrels`` as they are (no query restriction)."""
    return evaluate(
        qrels, doc_run.select("query_id", "doc_id", "score"), metrics, contract, slices=slices, run_source=run_source
    )
