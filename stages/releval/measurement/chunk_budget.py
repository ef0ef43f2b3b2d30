"""Chunk size settled at equal prompt budgets: the report's chunk-size comparison.

Document-level scoring cannot settle chunk size: a large chunk gets full credit for its page
whether or not the chunk it retrieved holds the answer. Here two configurations that differ only
in their chunking (``<cell>/c256`` against ``<cell>/c512``) are compared on the passage-level
metric at each token budget of the contract (``evidence_recall@512tok``, ...: the top chunks that
fit in B tokens, :mod:`releval.measurement.evidence`), so both hand a generator the same number of
tokens and the comparison asks which puts more of the evidence in them. The document-level
primary is compared beside it, for contrast.

Pairs: within each cell (the configuration id without its chunking) every chunking is compared
against the cell's smallest (by the chunking's ``tokens``), paired over the queries that carry
evidence spans (:func:`releval.measurement.pair` leaves a query null on both sides out). All the
budget comparisons of the report form one family: their verdicts are Holm-adjusted together
(:func:`releval.measurement.stats.decide_family`); the document-level rows are reported apart and
adjusted as their own family.

Figures only; :func:`releval.reporting.report_md` writes them down.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from releval.measurement import evidence, stats


@dataclass(frozen=True)
class ChunkPair:
    """One chunking of a cell against the cell's smallest, on one metric."""

    cell: str  # the configuration id without its chunking, e.g. ``minilm`` or ``rrf(splade,minilm)``
    smaller: str  # the configuration id of the smaller chunking (the baseline of the pair)
    larger: str
    metric: str  # ``evidence_recall@512tok``, ..., or the document-level primary
    budget: int | None  # the token budget; None for the document-level row
    comparison: stats.Comparison


def chunking_sizes(params: Mapping | None) -> dict[str, int]:
    """params ``chunkings``: name -> ``tokens`` (empty without params or chunkings)."""
    found = (params or {}).get("chunkings") or {}
    return {name: int(spec["tokens"]) for name, spec in found.items() if isinstance(spec, Mapping) and "tokens" in spec}


def split_config(config_id: str) -> tuple[str, str]:
    """``minilm/c256`` -> (``minilm``, ``c256``); an id without a chunking part -> (id, '')."""
    cell, _, chunking = config_id.rpartition("/")
    return (cell, chunking) if cell else (config_id, "")


def chunk_size_pairs(
    per_query: pl.DataFrame,
    configs: Sequence[str],
    chunk_tokens: Mapping[str, int],
    budgets: Sequence[int],
    primary: str,
    *,
    resamples: int,
    seed: int,
) -> list[ChunkPair]:
    """Every chunking-only pair of ``configs`` on each budget metric and on ``primary``, decided.

    ``per_query``: per_query.parquet (``config_id``, ``query_id``, a column per metric);
    ``chunk_tokens``: each chunking's size in tokens (params ``chunkings``: :func:`chunking_sizes`),
    ordering a cell's chunkings;
    ``budgets``: the contract's ``evidence.budgets``. Empty when no cell has two chunkings or the
    table holds no budget metric."""
    cells: dict[str, list[str]] = {}
    for config_id in configs:
        cell, chunking = split_config(config_id)
        if chunking in chunk_tokens:
            cells.setdefault(cell, []).append(config_id)
    metrics = [(evidence.budget_name(b), b) for b in budgets if evidence.budget_name(b) in per_query.columns]
    if not metrics:
        return []
    budget_rows, document_rows = [], []
    for cell, members in cells.items():
        members = sorted(members, key=lambda cid: (chunk_tokens[split_config(cid)[1]], cid))
        for larger in members[1:]:
            for metric, budget in metrics:
                budget_rows.append(_pair(per_query, cell, members[0], larger, metric, budget, resamples, seed))
            if primary in per_query.columns:
                document_rows.append(_pair(per_query, cell, members[0], larger, primary, None, resamples, seed))
    return _decided([r for r in budget_rows if r]) + _decided([r for r in document_rows if r])


def _pair(
    per_query: pl.DataFrame, cell: str, smaller: str, larger: str, metric: str, budget: int | None, resamples, seed
) -> ChunkPair | None:
    """The pair over the queries both sides score (None when there is none)."""

    def column(config_id: str) -> pl.DataFrame:
        side = per_query.filter(pl.col("config_id") == config_id).select("query_id", metric)
        return side.rename({metric: config_id})

    both = column(smaller).join(column(larger), on="query_id", how="inner").drop_nulls().sort("query_id")
    if both.height == 0:
        return None
    comparison = stats.compare_paired(
        both[smaller].to_numpy(), both[larger].to_numpy(), both["query_id"].to_list(), n_resamples=resamples, seed=seed
    )
    return ChunkPair(cell, smaller, larger, metric, budget, comparison)


def _decided(rows: list[ChunkPair]) -> list[ChunkPair]:
    decided = stats.decide_family([row.comparison for row in rows])
    return [
        ChunkPair(row.cell, row.smaller, row.larger, row.metric, row.budget, comparison)
        for row, comparison in zip(rows, decided)
    ]
