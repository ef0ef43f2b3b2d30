"""Every figure report.md shows, computed before it is rendered (:func:`report_figures`).

The report stage (:func:`releval.reporting.evaluation_report.build_report`) and the audit, which
renders report.md again from the verified numbers, compute them here and hand them to
:func:`releval.reporting.report_md.report_markdown`, which only writes them down.

Under a sampled judgment set every figure is of the inferred form of the primary
(:func:`releval.measurement.pair.decided_metric`: ndcg@10 -> infndcg@10), slice means included, and the
winner is not re-scored at other relevance thresholds (:data:`releval.measurement.grid.SAMPLED_THRESHOLDS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from releval.judging import completeness
from releval.measurement import scoring
from releval.measurement.chunk_budget import ChunkPair, chunk_size_pairs
from releval.measurement.grid import GridReport, adopt_grid_verdicts, compare_grid, threshold_means
from releval.measurement.pair import (
    DEFAULT_SECONDARY,
    PairReport,
    compare_sides,
    config_side,
    decided_metric,
    query_slices,
    query_texts,
)
from releval.measurement.plot_tables import interval_table
from releval.paths import PER_QUERY


@dataclass(frozen=True)
class WorstQuery:
    """One of the queries with the lowest mean of the primary metric over the configurations."""

    query_id: str
    text: Any  # the query's text as the queries hold it ('' when they hold none)
    relevant: int  # judged documents at the relevance threshold
    mean: float  # over the configurations
    baseline: float | None  # the baseline's score; None when it has none
    best: float  # the best configuration's score


@dataclass(frozen=True)
class ReportFigures:
    """The statistics report.md shows."""

    intervals: list[
        dict[str, Any]
    ]  # the primary's bootstrap interval per configuration, best first (the grid's column)
    grid: GridReport | None  # every configuration against the baseline; None: one configuration was scored
    pairs: dict[str, PairReport]  # each configuration against the baseline, with the grid's verdict on the primary
    slices: dict[str, int]  # slice name -> scored queries carrying it
    worst: list[WorstQuery]
    saturation: dict[str, Any]  # :func:`releval.measurement.scoring.saturation` of the corpus
    chunk_sizes: list[ChunkPair]  # chunkings of one cell at equal token budgets (:mod:`chunk_budget`)
    # Under a sampled set: config id -> slice -> mean of the inferred primary (None: no query of the slice);
    # else None (the observations' slice means are shown).
    slice_means: dict[str, dict[str, float | None]] | None = None


def report_figures(
    per_query: pl.DataFrame,
    contract: Mapping[str, Any],
    configs: Sequence[str],
    scored: pl.DataFrame,
    doc_runs: Mapping[str, pl.DataFrame],
    qrels: pl.DataFrame,
    scored_qrels: pl.DataFrame,
    baseline: str,
    primary: str,
    documents: int,
    *,
    resamples: int,
    seed: int,
    worst: int,
    chunk_tokens: Mapping[str, int] | None = None,
) -> ReportFigures:
    """The figures of report.md: ``per_query`` (the long per-query table, query ids as text) of the
    ``configs``, compared on ``primary`` against ``baseline`` with ``resamples`` bootstrap resamples
    (``seed``), over the ``scored`` queries; ``doc_runs`` (document-level runs over the scored
    queries) and ``scored_qrels`` re-score the winner at each relevance threshold; ``qrels`` count
    each worst query's relevant documents; ``documents``: the corpus's size (saturated cutoffs);
    ``chunk_tokens``: each chunking's size, for the chunk-size comparison at the contract's evidence
    budgets (:func:`releval.measurement.chunk_budget.chunk_size_pairs`). Under a sampled judgment set
    ``primary`` is decided on its inferred form (see the module's docstring)."""
    configs = list(configs)
    sampled = completeness.from_contract(contract).sampled
    primary = decided_metric(contract, primary)
    intervals = interval_table(per_query, primary, configs, resamples, seed)
    grid, pairs = None, {}
    slices = query_slices(scored)
    if len(configs) > 1:
        means = None if sampled else threshold_means(doc_runs, scored_qrels, contract, primary)
        grid = compare_grid(
            per_query, baseline, primary, configs, resamples, seed, threshold_means=means, contract=contract
        )
        secondary = [m for m in DEFAULT_SECONDARY if m in per_query.columns]
        base_side = config_side(per_query, baseline, contract, PER_QUERY)
        compared = {
            cid: compare_sides(
                base_side,
                config_side(per_query, cid, contract, PER_QUERY),
                primary,
                secondary,
                scored,
                n_resamples=resamples,
                seed=seed,
            )
            for cid in configs
            if cid != baseline
        }
        pairs = adopt_grid_verdicts(compared, grid)
    return ReportFigures(
        intervals=intervals,
        grid=grid,
        pairs=pairs,
        slices={name: len(ids) for name, ids in slices.items()},
        worst=_worst_queries(per_query, scored, qrels, contract, baseline, primary, worst),
        saturation=scoring.saturation(contract["metrics"], documents),
        chunk_sizes=chunk_size_pairs(
            per_query,
            configs,
            chunk_tokens or {},
            (contract.get("evidence") or {}).get("budgets") or (),
            primary,
            resamples=resamples,
            seed=seed,
        ),
        slice_means=_slice_means(per_query, configs, slices, primary) if sampled else None,
    )


def _slice_means(
    per_query: pl.DataFrame, configs: Sequence[str], slices: Mapping[str, Sequence[str]], metric: str
) -> dict[str, dict[str, float | None]]:
    """Each configuration's mean ``metric`` over the queries of each slice (None: no value there)."""
    out: dict[str, dict[str, float | None]] = {}
    for config_id in configs:
        rows = per_query.filter(pl.col("config_id") == config_id)
        out[config_id] = {}
        for name, ids in slices.items():
            values = rows.filter(pl.col("query_id").is_in(list(ids)))[metric].drop_nulls()
            out[config_id][name] = float(values.mean()) if values.len() else None
    return out


def _worst_queries(
    per_query: pl.DataFrame,
    scored: pl.DataFrame,
    qrels: pl.DataFrame,
    contract: Mapping[str, Any],
    baseline: str,
    primary: str,
    worst: int,
) -> list[WorstQuery]:
    """The ``worst`` queries by their mean ``primary`` over the configurations (ties by query id)."""
    texts = query_texts(scored)
    relevant = qrels.filter(pl.col("grade") >= int(contract.get("rel_threshold", 1))).group_by("query_id").len()
    relevant = dict(relevant.iter_rows())
    hardest = (
        per_query.group_by("query_id")
        .agg(pl.col(primary).mean().alias("mean"), pl.col(primary).max().alias("best"))
        .sort(["mean", "query_id"])
        .head(worst)
    )
    base_scores = dict(per_query.filter(pl.col("config_id") == baseline).select("query_id", primary).iter_rows())
    return [
        WorstQuery(query_id, texts.get(query_id, ""), relevant.get(query_id, 0), mean, base_scores.get(query_id), best)
        for query_id, mean, best in hardest.iter_rows()
    ]
